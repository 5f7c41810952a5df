/**
 * The proxy's container artifact (`npm run build:proxy`, infra/proxy/build.ts):
 * one bundled ES module that holds none of the bridge's cloud SDKs or
 * providers, and runs by itself in a fresh Node process with no
 * node_modules beside it.
 */
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildProxy, FORBIDDEN, type ProxyBuild } from "../infra/proxy/build.ts";

describe("proxy bundle", () => {
  let out: ProxyBuild;
  beforeAll(async () => {
    out = await buildProxy(mkdtempSync(join(tmpdir(), "emb-proxy-build-")));
  }, 120_000);

  it("contains the proxy and its libraries, and no cloud SDK, provider or bridge config loader", () => {
    expect(out.inputs).toContain("functions/proxy/main.ts");
    expect(out.inputs.some((i) => i.includes("node_modules/@kubernetes/client-node/"))).toBe(true);
    expect(out.inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)))).toEqual([]);
    expect(out.inputs.some((i) => i.startsWith("shared/providers/"))).toBe(false);
    console.log(`proxy bundle: ${(out.bytes / 1024).toFixed(0)} KiB, gzip ${(out.gzipBytes / 1024).toFixed(0)} KiB`);
  });

  it("runs alone in a fresh Node process (no node_modules beside it)", () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-proxy-run-"));
    copyFileSync(out.file, join(dir, "main.mjs"));
    const help = execFileSync(process.execPath, [join(dir, "main.mjs"), "--help"], { cwd: dir, encoding: "utf8" });
    expect(help).toContain("--secure-port");
    expect(help).toContain("--readiness-interval-seconds");
  });

  it("refuses a bundle that would pull in a cloud SDK", () => {
    expect(FORBIDDEN.some((re) => re.test("node_modules/@aws-sdk/client-sqs/dist-es/index.js"))).toBe(true);
    expect(FORBIDDEN.some((re) => re.test("shared/providers/aws-sqs/index.ts"))).toBe(true);
  });
});
