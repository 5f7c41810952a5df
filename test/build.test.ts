/**
 * Offline build checks a user runs before deploying: the Worker bundle as
 * wrangler builds it (`wrangler deploy --dry-run --outdir`), and the Lambda
 * artifact as `node infra/lambda/build.ts` bundles it — then the artifact
 * itself, run by Node 24 the way the `nodejs24.x` runtime loads it. Sizes
 * are printed.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { ESBUILD_TARGET, LAMBDA_RUNTIME } from "../infra/lambda/build.ts";
import { contractConfig } from "./helpers/contract.ts";
import { startEmulator, type Emulator } from "./helpers/emulator.ts";
import { toEvent } from "./helpers/lambda.ts";
import { buildWorker, ROOT, type WorkerBuild } from "./helpers/worker.ts";

const exec = promisify(execFile);
const NODE = process.execPath;
const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
/** Cloudflare's limit on a Worker's compressed size (paid plan), bytes. */
const WORKER_LIMIT_GZIP = 3 * 1024 * 1024;
/** Packages that must never reach the Worker (they cannot run in workerd: DESIGN.md). */
const NOT_ON_WORKERS = ["@google-cloud/monitoring", "google-gax", "protobufjs", "@grpc/grpc-js"];

interface Metafile {
  inputs: Record<string, unknown>;
  outputs: Record<string, { entryPoint?: string; imports: { path: string; external?: boolean }[]; inputs: Record<string, unknown> }>;
}

describe("Cloudflare Worker build (wrangler deploy --dry-run)", () => {
  let build: WorkerBuild;

  beforeAll(async () => {
    build = await buildWorker({ args: ["--metafile"] });
  }, 120_000);

  it("succeeds offline and stays far under the 3 MB compressed limit", () => {
    expect(build.output).toMatch(/--dry-run: exiting now/);
    // What wrangler uploads: the entry module plus its text modules (not maps or metadata).
    const modules = readdirSync(build.outdir).filter((f) => !/\.map$|^README\.md$|^bundle-meta\.json$/.test(f));
    expect(modules).toContain("worker.js");
    const raw = modules.reduce((n, f) => n + readFileSync(join(build.outdir, f)).length, 0);
    const gzip = modules.reduce((n, f) => n + gzipSync(readFileSync(join(build.outdir, f)), { level: 9 }).length, 0);
    const reported = /Total Upload: .*/.exec(build.output)?.[0] ?? "(no summary)";
    console.log(`Worker bundle: ${modules.join(", ")}: ${kib(raw)}, gzip ${kib(gzip)} (wrangler: ${reported}); limit ${kib(WORKER_LIMIT_GZIP)}`);
    expect(gzip).toBeLessThan(WORKER_LIMIT_GZIP / 3);
  });

  it("contains none of the Node-only Google client stack", () => {
    const meta = JSON.parse(readFileSync(join(build.outdir, "bundle-meta.json"), "utf8")) as Metafile;
    const inputs = Object.keys(meta.inputs);
    expect(inputs.some((p) => p.endsWith("functions/worker.ts"))).toBe(true);
    for (const pkg of NOT_ON_WORKERS) expect(inputs.filter((p) => p.includes(`node_modules/${pkg}/`))).toEqual([]);
    expect(readFileSync(build.script, "utf8")).not.toContain("@google-cloud/monitoring");
  });

  it("imports no Node built-in unless nodejs_compat is on", () => {
    const meta = JSON.parse(readFileSync(join(build.outdir, "bundle-meta.json"), "utf8")) as Metafile;
    const entry = Object.values(meta.outputs).find((o) => o.entryPoint !== undefined)!;
    const external = entry.imports.filter((i) => i.external).map((i) => i.path);
    const builtins = external.filter((p) => p.startsWith("node:") || /^(fs|path|crypto|stream|buffer|http|https|net|os|util|zlib)$/.test(p));
    if (!build.compatibilityFlags.some((f) => f.startsWith("nodejs_compat"))) expect(builtins).toEqual([]);
    // the only other modules are the toml's Text rules (the bundled config)
    expect(external.filter((p) => !builtins.includes(p)).every((p) => p.endsWith(".yaml"))).toBe(true);
  });
});

describe("AWS Lambda artifact (esbuild, node infra/lambda/build.ts)", () => {
  let dir: string;
  let outdir: string;
  let sqs: Emulator;
  let buildOutput: string;

  beforeAll(async () => {
    mkdirSync(join(ROOT, ".cache"), { recursive: true });
    dir = mkdtempSync(join(ROOT, ".cache/lambda-build-"));
    outdir = join(dir, "dist");
    sqs = await startEmulator();
    await sqs.add("worker_tasks", 7);
    writeFileSync(join(dir, "bridge.yaml"), contractConfig(sqs.endpoint));
    const r = await exec(NODE, [join(ROOT, "infra/lambda/build.ts"), "--outdir", outdir, "--config", join(dir, "bridge.yaml")], { cwd: ROOT });
    buildOutput = r.stdout + r.stderr;
  }, 120_000);
  afterAll(async () => {
    await sqs?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it(`bundles one ES module for ${LAMBDA_RUNTIME} (esbuild target ${ESBUILD_TARGET}) with the config beside it`, () => {
    console.log(buildOutput.trim());
    expect(buildOutput).toMatch(/index\.mjs [\d.]+ KiB \/ gzip [\d.]+ KiB/);
    const entry = join(outdir, "index.mjs");
    expect(existsSync(entry)).toBe(true);
    expect(readFileSync(join(outdir, "bridge.yaml"), "utf8")).toContain("kind: BridgeConfig");
    const meta = JSON.parse(readFileSync(join(outdir, "meta.json"), "utf8")) as Metafile;
    expect(Object.keys(meta.inputs).some((p) => p.endsWith("functions/lambda.ts"))).toBe(true);
    // nothing left to resolve at run time except Node built-ins
    const external = Object.values(meta.outputs).flatMap((o) => o.imports.filter((i) => i.external).map((i) => i.path));
    expect(external.filter((p) => !p.startsWith("node:") && !/^[a-z_]+$/.test(p))).toEqual([]);
    const gzip = gzipSync(readFileSync(entry), { level: 9 }).length;
    expect(gzip).toBeLessThan(50 * 1024 * 1024); // Lambda's zipped upload limit
  });

  it("runs under Node 24 from its own directory: config file, SDK, Function URL events", async () => {
    const events = [
      await toEvent("Function URL", "/apis/external.metrics.k8s.io/v1beta1"),
      ...(await Promise.all(
        Array.from({ length: 200 }, () =>
          toEvent("Function URL", "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks"),
        ),
      )),
    ];
    const script = `
      const { handler } = await import(process.env.ARTIFACT);
      const { readFileSync } = await import("node:fs");
      const events = JSON.parse(readFileSync(process.env.EVENTS_FILE, "utf8"));
      const results = [];
      for (const event of events) results.push(await handler(event, {}));
      console.log(JSON.stringify({ results: [results[0], results.at(-1)], rss: process.memoryUsage().rss }));
    `;
    const eventsFile = join(dir, "events.json");
    writeFileSync(eventsFile, JSON.stringify(events));
    const r = await exec(NODE, ["--input-type=module", "-e", script], {
      cwd: outdir,
      env: {
        PATH: process.env["PATH"] ?? "",
        ARTIFACT: join(outdir, "index.mjs"),
        EVENTS_FILE: eventsFile,
        LAMBDA_TASK_ROOT: outdir,
        BRIDGE_CONFIG_FILE: "bridge.yaml",
        AWS_REGION: "us-east-1",
      },
      maxBuffer: 16 << 20,
    });
    const { results, rss } = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
      results: { statusCode: number; body: string; isBase64Encoded: boolean }[];
      rss: number;
    };
    console.log(`Lambda artifact on ${process.version}: resident set ${(rss / 1048576).toFixed(0)} MiB after ${events.length} events`);
    expect(results[0]!.statusCode).toBe(200);
    expect(JSON.parse(results[0]!.body).kind).toBe("APIResourceList");
    expect(results[1]!.statusCode, results[1]!.body).toBe(200);
    expect(results[1]!.isBase64Encoded).toBe(false);
    expect(JSON.parse(results[1]!.body).items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
  });
});

describe("serverless.yml matches the artifact and grants least privilege", () => {
  const sls = parseYaml(readFileSync(join(ROOT, "serverless.yml"), "utf8")) as {
    provider: { runtime: string; architecture: string; memorySize: number; timeout: number; iam: { role: { statements: { Effect: string; Action: string[]; Resource: unknown }[] } } };
    package: { patterns: string[] };
    functions: Record<string, { handler: string; url?: unknown }>;
  };

  it("runs the built handler on the runtime the build targets, on arm64, behind a Function URL", () => {
    expect(sls.provider.runtime).toBe(LAMBDA_RUNTIME);
    expect(ESBUILD_TARGET).toBe(`node${/^nodejs(\d+)\.x$/.exec(LAMBDA_RUNTIME)![1]}`);
    expect(sls.provider.architecture).toBe("arm64");
    const fn = sls.functions["bridge"]!;
    expect(fn.handler).toBe("dist/lambda/index.handler"); // build.ts default outdir + index.mjs, export `handler`
    expect(sls.package.patterns).toEqual(expect.arrayContaining(["!**", "dist/lambda/index.mjs"]));
    expect(fn.url).toBeDefined();
    expect(sls.provider.timeout).toBeGreaterThan(4.5);
  });

  it("allows only sqs:GetQueueUrl/GetQueueAttributes on listed queues and ssm:GetParameter on the config", () => {
    const statements = sls.provider.iam.role.statements;
    const actions = statements.flatMap((s) => s.Action).sort();
    expect(actions).toEqual(["sqs:GetQueueAttributes", "sqs:GetQueueUrl", "ssm:GetParameter"]);
    for (const s of statements) {
      expect(s.Effect).toBe("Allow");
      expect(JSON.stringify(s.Resource)).not.toMatch(/"\*"|:\*"/);
    }
  });
});
