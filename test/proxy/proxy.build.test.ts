/**
 * The proxy's container artifact (`npm run build:proxy`, infra/proxy/build.ts):
 * bundled ES modules; what the plain proxy loads (`main.mjs` and the chunks
 * it imports statically) holds none of the bridge's cloud SDKs, providers or
 * the in-process bridge, which sit in chunks only an `inProcess` backend
 * loads; the directory runs by itself in a fresh Node process with no
 * node_modules beside it. (test/proxy/proxy.bundle-inprocess.test.ts runs the
 * bundle with and without those chunks.)
 */
import { execFileSync } from "node:child_process";
import { Worker } from "node:worker_threads";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { buildProxy, FORBIDDEN, imageEnv, imageNodeFlags, type ProxyBuild } from "../../infra/proxy/build.ts";

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

  it("writes every file in ASCII (one non-Latin-1 character in a comment makes V8 hold a whole script two bytes a character)", () => {
    for (const file of [...out.staticFiles, ...out.lazy.files]) {
      const bytes = readFileSync(join(out.outdir, file));
      expect(bytes.findIndex((b) => b > 0x7f), file).toBe(-1);
    }
  });

  it("runs with the image's Node flags and environment, read from infra/Dockerfile: the V8 young generation stays within the semi-space cap", () => {
    const flags = imageNodeFlags();
    const env = imageEnv();
    expect(env["NODE_ENV"]).toBe("production");
    expect(env["MALLOC_ARENA_MAX"]).toMatch(/^[1-9]\d*$/);
    const semiMiB = Number(/^--max-semi-space-size=(\d+)$/.exec(flags.find((f) => f.startsWith("--max-semi-space-size=")) ?? "")?.[1]);
    expect(semiMiB).toBeGreaterThan(0);
    expect(flags.some((f) => /^--max-old-space-size=\d+$/.test(f))).toBe(true);
    const help = execFileSync(process.execPath, [...flags, join(out.outdir, "main.mjs"), "--help"], { cwd: out.outdir, encoding: "utf8", env: { ...process.env, ...env } });
    expect(help).toContain("--secure-port");
    // Allocate 64 MiB of short-lived objects: without the cap V8 grows the young generation far past 2 × the semi-space.
    const probe = `let keep = 0; for (let i = 0; i < 1_000_000; i++) keep += [i, String(i), { i }].length;
      const s = require("node:v8").getHeapSpaceStatistics().find((x) => x.space_name === "new_space");
      console.log(JSON.stringify({ size: s.space_size, arenas: process.env.MALLOC_ARENA_MAX, keep }));`;
    const seen = JSON.parse(execFileSync(process.execPath, [...flags, "-e", probe], { encoding: "utf8", env: { ...process.env, ...env } })) as { size: number; arenas: string };
    expect(seen.size).toBeLessThanOrEqual(2 * semiMiB * 1024 * 1024);
    expect(seen.arenas).toBe(env["MALLOC_ARENA_MAX"]);
  });

  it("keeps the in-process bridge (its providers, cloud SDKs, the bridge app) out of what the plain proxy loads", () => {
    for (const module of ["shared/proxy/forward/in-process.ts", "shared/bridge.ts", "shared/app.ts", "shared/config/config.ts"]) {
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

  it("ships the policy worker (policy-worker.mjs): it runs from a copy without node_modules and vets a policy object", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-proxy-policy-worker-"));
    cpSync(out.outdir, dir, { recursive: true });
    for (const file of out.lazy.files) rmSync(join(dir, file));
    expect(out.policyWorker.inputs).toContain("shared/proxy/policy/policy-worker-entry.ts");
    expect(out.policyWorker.inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)))).toEqual([]);
    const worker = new Worker(join(dir, "policy-worker.mjs"));
    try {
      const obj = { apiVersion: "external-metrics-bridge.io/v1alpha1", kind: "ExternalMetricPolicy", metadata: { name: "p", namespace: "a" }, spec: { rules: [{ metric: "(?:\\pL|\\pN){1000}", deny: true }] } };
      const reply = await new Promise<any>((resolve, reject) => {
        worker.on("message", (m: { id?: number }) => m.id === 1 && resolve(m));
        worker.on("error", reject);
        worker.postMessage({ id: 1, op: "vet", obj, nowMs: 0 });
      });
      expect(reply).toMatchObject({ id: 1, ok: true, result: { valid: false } });
      expect(reply.result.issues[0].message).toMatch(/too costly/);
    } finally {
      await worker.terminate();
    }
  });

  it("refuses a bundle that would pull in a cloud SDK", () => {
    expect(FORBIDDEN.some((re) => re.test("node_modules/@aws-sdk/client-sqs/dist-es/index.js"))).toBe(true);
    expect(FORBIDDEN.some((re) => re.test("shared/providers/aws-sqs/index.ts"))).toBe(true);
  });
});
