/**
 * The Kubernetes versions the chart claims are the ones the e2e suites run:
 * Chart.yaml's `kubeVersion` floor is the minor of the oldest pinned
 * control plane (test/k8s/v1.30/go.mod, the `e2e-floor` vitest project),
 * the newest pin (test/k8s/go.mod) is inside the range too, and
 * docs/compatibility.md names both releases.
 */
import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import config from "../../vitest.config.ts";
import { K8S_MODULES, k8sModule } from "../k8s/cluster.ts";

const ROOT = new URL("../..", import.meta.url).pathname;
const chart = parse(readFileSync(`${ROOT}infra/helm/external-metrics-bridge/Chart.yaml`, "utf8")) as { kubeVersion: string };
const minor = (v: string) => Number(/^v?1\.(\d+)/.exec(v)![1]);

describe("Kubernetes versions: chart claim, e2e pins, docs", () => {
  it("the chart's kubeVersion floor is the oldest pinned control plane's minor, and every pin is inside the range", () => {
    const floor = /^>=\s*1\.(\d+)\.0-0$/.exec(chart.kubeVersion);
    expect(floor, `kubeVersion ${chart.kubeVersion}`).not.toBeNull();
    const minors = K8S_MODULES.map((m) => minor(m.version));
    expect(Math.min(...minors)).toBe(Number(floor![1]));
    expect(minors.every((m) => m >= Number(floor![1]))).toBe(true);
  });

  it("EMB_K8S_VERSION picks a pinned module by release or minor, newest by default, and names the choices when none matches", () => {
    expect(k8sModule(undefined)).toBe(K8S_MODULES[0]);
    const oldest = K8S_MODULES.at(-1)!;
    expect(k8sModule(`v1.${minor(oldest.version)}`)).toBe(oldest);
    expect(k8sModule(`1.${minor(oldest.version)}`)).toBe(oldest);
    expect(k8sModule(oldest.version)).toBe(oldest);
    expect(() => k8sModule("v1.20")).toThrow(/no test\/k8s module pins it; there are v1\.\d+\.\d+, v1\.\d+\.\d+/);
  });

  it("CI runs the core scaling, scale-to-zero and custom-metrics e2e on the floor too (vitest project e2e-floor) and the compatibility page names both releases and the suites", () => {
    const projects = (config as { test: { projects: { test: { name: string; include?: string[]; env?: Record<string, string> } }[] } }).test.projects;
    const floorProject = projects.find((p) => p.test.name === "e2e-floor")!;
    expect(floorProject.test.include).toEqual(["test/e2e/k8s.e2e.test.ts", "test/e2e/k8s.scale-to-zero.e2e.test.ts", "test/e2e/k8s.custom-metrics.e2e.test.ts"]);
    expect(k8sModule(floorProject.test.env!["EMB_K8S_VERSION"])).toBe(K8S_MODULES.at(-1));
    const page = readFileSync(`${ROOT}docs/compatibility.md`, "utf8");
    for (const m of K8S_MODULES) expect(page).toContain(m.version);
    for (const suite of floorProject.test.include!) expect(page).toContain(suite.replace(/^test\/e2e\//, ""));
  });
});
