/**
 * The proxy's container artifact (`npm run build:proxy`, infra/proxy/build.ts):
 * bundled ES modules; what the plain proxy loads (`main.mjs` and the chunks
 * it imports statically) holds none of the bridge's cloud SDKs, providers or
 * the in-process bridge, which sit in chunks only an `inProcess` backend
 * loads; the directory runs by itself in a fresh Node process with no
 * node_modules beside it. (test/proxy.bundle-inprocess.test.ts runs the
 * bundle with and without those chunks.)
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
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
    expect(out.inputs).toContain("shared/proxy/server.ts");
    expect(out.inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)))).toEqual([]);
    expect(out.inputs.some((i) => i.startsWith("shared/providers/"))).toBe(false);
    console.log(`proxy bundle: ${(out.bytes / 1024).toFixed(0)} KiB, gzip ${(out.gzipBytes / 1024).toFixed(0)} KiB`);
  });

  it("runs alone in a fresh Node process (no node_modules beside it), without the in-process bridge's chunks", () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-proxy-run-"));
    cpSync(out.outdir, dir, { recursive: true });
    for (const file of out.lazy.files) rmSync(join(dir, file));
    const help = execFileSync(process.execPath, [join(dir, "main.mjs"), "--help"], { cwd: dir, encoding: "utf8" });
    expect(help).toContain("--secure-port");
    expect(help).toContain("--readiness-interval-seconds");
  });

  it("keeps the in-process bridge (its providers, cloud SDKs, the bridge app) out of what the plain proxy loads", () => {
    for (const module of ["shared/proxy/in-process.ts", "shared/bridge.ts", "shared/app.ts", "shared/config/config.ts"]) {
      expect(out.inputs, module).not.toContain(module);
      expect(out.lazy.inputs, module).toContain(module);
    }
    expect(out.lazy.inputs.some((i) => i.startsWith("shared/providers/aws-sqs/"))).toBe(true);
    expect(out.lazy.inputs.some((i) => i.includes("node_modules/@aws-sdk/client-sqs/"))).toBe(true);
    expect(out.staticFiles).toContain("main.mjs");
    console.log(
      `proxy loads ${out.staticFiles.length} files, ${(out.bytes / 1024).toFixed(0)} KiB (gzip ${(out.gzipBytes / 1024).toFixed(0)} KiB); ` +
        `in-process bridge chunks: ${out.lazy.files.length} files, ${(out.lazy.bytes / 1024).toFixed(0)} KiB (gzip ${(out.lazy.gzipBytes / 1024).toFixed(0)} KiB)`,
    );
  });

  it("refuses a bundle that would pull in a cloud SDK", () => {
    expect(FORBIDDEN.some((re) => re.test("node_modules/@aws-sdk/client-sqs/dist-es/index.js"))).toBe(true);
    expect(FORBIDDEN.some((re) => re.test("shared/providers/aws-sqs/index.ts"))).toBe(true);
  });
});
