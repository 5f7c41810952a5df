/**
 * Packaging (issue 27, item 2): `helm package` of the chart into a temporary
 * directory, the packaged chart linted strictly and rendered (the CRDs of
 * files/crds/ travel with it), its provenance-ready metadata (home, sources,
 * maintainers, Artifact Hub annotations naming the image and the CRDs), and
 * `kubeVersion` agreeing with the chart README.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CHART, ensureTool } from "../../infra/tools/validate.ts";
import { ensureChartTools, expectValid, objects } from "./chart.helpers.ts";

let work = "";
/** helm with its state in the temporary directory. @returns exit status and output */
function helm(...args: string[]): { status: number; out: string } {
  const r = spawnSync(ensureTool("helm"), args, {
    encoding: "utf8",
    maxBuffer: 64 << 20,
    env: { ...process.env, HELM_CACHE_HOME: join(work, "cache"), HELM_CONFIG_HOME: join(work, "config"), HELM_DATA_HOME: join(work, "data") },
  });
  return { status: r.status ?? -1, out: r.stdout + r.stderr };
}

let tgz = "";
beforeAll(() => {
  ensureChartTools();
  work = mkdtempSync(join(tmpdir(), "emb-chart-package-"));
  const r = helm("package", CHART, "--destination", join(work, "dist"));
  expect(r.status, r.out).toBe(0);
  tgz = join(work, "dist", readdirSync(join(work, "dist"))[0]!);
}, 30 * 60_000);

describe("helm package", () => {
  it("writes external-metrics-bridge-<version>.tgz, which lints strictly and renders valid objects, CRDs included", () => {
    const chart = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as { version: string };
    expect(tgz.endsWith(`external-metrics-bridge-${chart.version}.tgz`)).toBe(true);
    const lint = helm("lint", "--strict", tgz);
    expect(lint.status, lint.out).toBe(0);
    const rendered = helm("template", "external-metrics-bridge", tgz, "--namespace", "external-metrics-bridge");
    expect(rendered.status, rendered.out).toBe(0);
    const list = objects(rendered.out);
    expect(list.filter((o) => o.kind === "CustomResourceDefinition")).toHaveLength(2);
    expectValid(list);
  });

  it("carries provenance-ready metadata: home, sources, maintainers, license, the image and the CRDs", () => {
    const shown = helm("show", "chart", tgz);
    expect(shown.status, shown.out).toBe(0);
    const meta = parse(shown.out) as {
      home: string;
      sources: string[];
      maintainers: { name: string }[];
      kubeVersion: string;
      appVersion: string;
      annotations: Record<string, string>;
    };
    expect(meta.home).toMatch(/^https:\/\//);
    expect(meta.sources.length).toBeGreaterThan(0);
    expect(meta.maintainers.length).toBeGreaterThan(0);
    expect(meta.annotations["artifacthub.io/license"]).toBe("Apache-2.0");
    const values = parse(readFileSync(join(CHART, "values.yaml"), "utf8")) as { image: { repository: string; tag: string } };
    expect(parse(meta.annotations["artifacthub.io/images"]!)).toEqual([{ name: "proxy", image: `${values.image.repository}:${values.image.tag}` }]);
    expect(values.image.tag).toBe(meta.appVersion);
    const crdNames = (parse(meta.annotations["artifacthub.io/crds"]!) as { name: string }[]).map((c) => c.name).sort();
    const shipped = readdirSync(join(CHART, "files/crds")).map((f) => objects(readFileSync(join(CHART, "files/crds", f), "utf8"))[0]!.metadata.name).sort();
    expect(crdNames).toEqual(shipped);
  });

  it("kubeVersion is the README's Kubernetes floor (1.30, the oldest the end-to-end suite runs)", () => {
    const meta = parse(readFileSync(join(CHART, "Chart.yaml"), "utf8")) as { kubeVersion: string };
    expect(meta.kubeVersion).toBe(">=1.30.0-0");
    const readme = readFileSync(join(CHART, "README.md"), "utf8");
    expect(readme).toContain(`Kubernetes 1.30 or later (\`kubeVersion: "${meta.kubeVersion}"\``);
    expect(readme).not.toMatch(/Kubernetes 1\.(2\d)\b/);
    // helm itself refuses an older cluster
    const old = helm("template", "x", tgz, "--kube-version", "1.29.9");
    expect(old.status).not.toBe(0);
    expect(old.out).toContain("chart requires kubeVersion: >=1.30.0-0");
  });
});
