/**
 * Offline build checks a user runs before deploying: the Worker bundle as
 * wrangler builds it (`wrangler deploy --dry-run --outdir`), and the Lambda
 * artifact as `node infra/lambda/build.ts` bundles it — then exactly the
 * files serverless.yml packages, unpacked outside the repository and run by
 * Node 24 the way the `nodejs24.x` runtime loads them: signed Function URL
 * events, SQS through the AWS SDK against fauxqs, Cloud Monitoring through
 * the official `@google-cloud/monitoring` client over TLS against the gRPC
 * fake of MetricService. Sizes and start-up figures are printed.
 */
import { execFile } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { DIRNAME_USERS, ESBUILD_TARGET, LAMBDA_RUNTIME, PACKAGED_FILES } from "../../infra/lambda/build.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { parseSigningKeys, signRequest } from "../../shared/signing.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { lambdaOrigin, toEvent } from "../helpers/lambda.ts";
import { buildWorker, ROOT, type WorkerBuild } from "../helpers/worker.ts";
import { fixtureKey } from "../helpers/keys.ts";

const exec = promisify(execFile);
const NODE = process.execPath;
const kib = (n: number) => `${(n / 1024).toFixed(1)} KiB`;
/** Cloudflare's limit on a Worker's compressed size (paid plan), bytes. */
const WORKER_LIMIT_GZIP = 3 * 1024 * 1024;
/** Packages that must never reach the Worker (they cannot run in workerd: DESIGN.md). */
const NOT_ON_WORKERS = ["@google-cloud/monitoring", "google-gax", "protobufjs", "@grpc/grpc-js"];
const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const NS = `${V1}/namespaces/default`;
const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";
/** A signing key as the proxy and the function share it (32 fixed bytes; tests only). */
const SIGNING_KEYS = `k1:${fixtureKey(7).toString("base64")}`;

/** serverless.yml as the tests read it (Serverless variables stay unresolved text). */
const SLS = parseYaml(readFileSync(join(ROOT, "serverless.yml"), "utf8")) as {
  provider: {
    runtime: string;
    architecture: string;
    memorySize: number;
    timeout: number;
    environment: Record<string, string>;
    iam: { role: { statements: { Effect: string; Action: string[]; Resource: unknown }[] } };
  };
  package: { patterns: string[] };
  functions: Record<string, { handler: string; url?: unknown }>;
};

/** The config shipped in the artifact: an SQS rule and a Cloud Monitoring rule. */
function artifactConfig(sqsEndpoint: string, monitoringEndpoint: string): string {
  return `${sqsConfigHead(sqsEndpoint, { defaults: "{ maxAgeSeconds: 300, cacheTTLSeconds: 0 }" })}  gcp:
    type: gcp-monitoring
    project: test-project
    endpoint: ${monitoringEndpoint}
    credentials: { source: environment }
metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
  - name: pubsub_backlog
    provider: gcp
    query: { metricType: ${BACKLOG}, resourceType: pubsub_subscription, selectorLabels: { subscription: resource.labels.subscription_id } }
`;
}

/** A serverless.yml package pattern (relative, `*` within one path segment) as a RegExp. */
function globRegExp(pattern: string): RegExp {
  return new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, "[^/]*")}$`);
}

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
  /** the deployed zip's contents as Lambda unpacks them into LAMBDA_TASK_ROOT */
  let taskRoot: string;
  let sqs: Emulator;
  let google: GoogleFakes;
  let buildOutput: string;
  const now = Date.now();

  beforeAll(async () => {
    mkdirSync(join(ROOT, ".cache"), { recursive: true });
    dir = mkdtempSync(join(ROOT, ".cache/lambda-build-"));
    outdir = join(dir, "dist");
    [sqs, google] = await Promise.all([startEmulator(), startGoogleFakes()]);
    await sqs.add("worker_tasks", 7);
    google.store.series = ["orders", "emails"].map((id, i) => ({
      metricType: BACKLOG,
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: id },
      points: [{ end: now - 20_000, value: { int64Value: i === 0 ? "9007199254740993" : "12" } }],
    }));
    writeFileSync(join(dir, "bridge.yaml"), artifactConfig(sqs.endpoint, google.grpc.endpoint));
    const r = await exec(NODE, [join(ROOT, "infra/lambda/build.ts"), "--outdir", outdir, "--config", join(dir, "bridge.yaml")], { cwd: ROOT });
    buildOutput = r.stdout + r.stderr;
    // What serverless.yml packages, laid out as in the zip, outside this repository so
    // that no node_modules directory above it could supply what the bundle lacks.
    taskRoot = mkdtempSync(join(tmpdir(), "bridge-lambda-task-"));
    const patterns = SLS.package.patterns.filter((p) => !p.startsWith("!")).map((p) => globRegExp(relative("dist/lambda", p)));
    for (const name of readdirSync(outdir, { recursive: true, encoding: "utf8" })) {
      if (!patterns.some((re) => re.test(name))) continue;
      const target = join(taskRoot, "dist/lambda", name);
      mkdirSync(dirname(target), { recursive: true });
      copyFileSync(join(outdir, name), target);
    }
  }, 120_000);
  afterAll(async () => {
    await Promise.all([sqs?.stop(), google?.close()]);
    rmSync(dir, { recursive: true, force: true });
    if (taskRoot) rmSync(taskRoot, { recursive: true, force: true });
  });

  it(`bundles ES modules for ${LAMBDA_RUNTIME} (esbuild target ${ESBUILD_TARGET}), official Google client inside, in chunks`, () => {
    console.log(buildOutput.trim());
    expect(buildOutput).toMatch(/index\.mjs [\d.]+ KiB \/ gzip [\d.]+ KiB/);
    expect(buildOutput).toMatch(/packaged \(index\.mjs, index\.mjs\.LEGAL\.txt, bridge\.yaml, chunks\/\*\.mjs, chunks\/\*\.LEGAL\.txt; \d+ files\): [\d.]+ KiB \/ gzip [\d.]+ KiB/);
    const entry = join(outdir, "index.mjs");
    expect(existsSync(entry)).toBe(true);
    expect(readFileSync(join(outdir, "bridge.yaml"), "utf8")).toContain("kind: BridgeConfig");
    const meta = JSON.parse(readFileSync(join(outdir, "meta.json"), "utf8")) as Metafile;
    const inputs = Object.keys(meta.inputs);
    expect(inputs.some((p) => p.endsWith("functions/lambda.ts"))).toBe(true);
    // the official client and its stack are bundled, not left to be found at run time
    for (const pkg of NOT_ON_WORKERS) expect(inputs.some((p) => p.includes(`node_modules/${pkg}/`)), pkg).toBe(true);
    // nothing left to resolve at run time except Node built-ins
    const external = Object.values(meta.outputs).flatMap((o) => o.imports.filter((i) => i.external).map((i) => i.path));
    expect(external.filter((p) => !isBuiltin(p))).toEqual([]);
    // every bundled module that computes a path from __dirname is a reviewed one
    for (const input of Object.keys(DIRNAME_USERS)) expect(inputs, input).toContain(input);
    const gzip = gzipSync(readFileSync(entry), { level: 9 }).length;
    expect(gzip).toBeLessThan(50 * 1024 * 1024); // Lambda's zipped upload limit
  });

  it("the deployed files alone run under Node 24: config file, signatures, SQS through the SDK, Cloud Monitoring through the official gRPC client", async () => {
    // nothing above the unpacked artifact can resolve a package for it
    for (let d = taskRoot; dirname(d) !== d; d = dirname(d)) expect(existsSync(join(dirname(d), "node_modules")), dirname(d)).toBe(false);
    const [file, exportName] = [SLS.functions["bridge"]!.handler.replace(/\.[^.]+$/, ".mjs"), SLS.functions["bridge"]!.handler.split(".").at(-1)!];
    const key = parseSigningKeys(SIGNING_KEYS)[0]!;
    const signed = async (path: string, sentPath = path) =>
      toEvent("Function URL", sentPath, { headers: await signRequest({ method: "GET", url: `${lambdaOrigin("Function URL")}${path}`, caller: HPA_CONTROLLER }, key, Date.now()) });
    const sqsRead = `${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`;
    const events = [
      await toEvent("Function URL", V1), // unsigned
      await signed(V1),
      ...(await Promise.all(Array.from({ length: 200 }, () => signed(sqsRead)))),
      await signed(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`),
      await signed(`${NS}/pubsub_backlog?labelSelector=${encodeURIComponent("subscription in (orders,emails)")}`),
      // signed for one selector, sent with another
      await signed(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`, `${NS}/pubsub_backlog?labelSelector=subscription%3Demails`),
    ];
    const script = `
      const t0 = performance.now();
      const mod = await import(process.env.ARTIFACT);
      const imported = performance.now();
      const { readFileSync } = await import("node:fs");
      const events = JSON.parse(readFileSync(process.env.EVENTS_FILE, "utf8"));
      const results = [];
      let first;
      for (const event of events) {
        results.push(await mod[process.env.EXPORT](event, {}));
        first ??= performance.now();
      }
      console.log(JSON.stringify({ results, rss: process.memoryUsage().rss, importMs: imported - t0, firstMs: first - imported }));
    `;
    const eventsFile = join(dir, "events.json");
    const caFile = join(dir, "monitoring-ca.pem");
    writeFileSync(eventsFile, JSON.stringify(events));
    writeFileSync(caFile, google.grpc.caCert);
    const nodeOptions = SLS.provider.environment["NODE_OPTIONS"];
    const r = await exec(NODE, ["--input-type=module", "-e", script], {
      cwd: taskRoot, // Lambda's working directory is LAMBDA_TASK_ROOT
      env: {
        PATH: process.env["PATH"] ?? "",
        ARTIFACT: join(taskRoot, file),
        EXPORT: exportName,
        EVENTS_FILE: eventsFile,
        LAMBDA_TASK_ROOT: taskRoot,
        BRIDGE_CONFIG_FILE: "dist/lambda/bridge.yaml",
        BRIDGE_SIGNING_KEYS: SIGNING_KEYS,
        AWS_REGION: "us-east-1",
        GOOGLE_SERVICE_ACCOUNT_JSON: google.account.text,
        // the gRPC fake's self-signed certificate, trusted the way a Lambda trusts a private CA
        NODE_EXTRA_CA_CERTS: caFile,
        ...(nodeOptions ? { NODE_OPTIONS: nodeOptions } : {}),
      },
      maxBuffer: 16 << 20,
    });
    const { results, rss, importMs, firstMs } = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
      results: { statusCode: number; body: string; isBase64Encoded: boolean }[];
      rss: number;
      importMs: number;
      firstMs: number;
    };
    console.log(
      `Lambda artifact on ${process.version}: import ${importMs.toFixed(0)} ms, first event ${firstMs.toFixed(0)} ms, ` +
        `resident set ${(rss / 1048576).toFixed(0)} MiB after ${events.length} events (${nodeOptions ? `NODE_OPTIONS=${nodeOptions}` : "no NODE_OPTIONS"})`,
    );
    const body = (i: number) => JSON.parse(results.at(i)!.body);
    expect(results[0]!.statusCode, results[0]!.body).toBe(401);
    expect(results[1]!.statusCode, results[1]!.body).toBe(200);
    expect(body(1).resources.map((x: { name: string }) => x.name).sort()).toEqual(["pubsub_backlog", "queue_messages_ready"]);
    const lastSqs = results.at(-4)!;
    expect(lastSqs.statusCode, lastSqs.body).toBe(200);
    expect(lastSqs.isBase64Encoded).toBe(false);
    expect(body(-4).items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
    expect(results.at(-3)!.statusCode, results.at(-3)!.body).toBe(200);
    expect(body(-3).items[0]).toMatchObject({
      metricLabels: { subscription: "orders" },
      value: "9007199254740993", // int64 beyond 2^53, exact through protobufjs' Long
      timestamp: new Date(now - 20_000).toISOString().replace(/\.\d{3}Z$/, "Z"),
    });
    expect(body(-2).items.map((i: any) => [i.metricLabels.subscription, i.value])).toEqual([
      ["emails", "12"],
      ["orders", "9007199254740993"],
    ]);
    expect(results.at(-1)!.statusCode, results.at(-1)!.body).toBe(401);
    // read through the official client: gRPC calls carrying the key's self-signed JWT, no OAuth exchange (REST's way)
    expect(google.store.requests.map((q) => q.transport)).toEqual(["grpc", "grpc"]);
    expect(google.grpc.callers.at(-1)).toMatchObject({ iss: google.account.json.client_email, sub: google.account.json.client_email });
    expect(google.oauth.requests).toEqual([]);
  });

  it("an SQS-only config loads only the SQS provider's chunks: no Google client stack, no CloudWatch client, no Cloud Monitoring provider", async () => {
    const meta = JSON.parse(readFileSync(join(outdir, "meta.json"), "utf8")) as Metafile;
    /** the bundled inputs of each output file, by its path relative to the output directory */
    const inputsOf = new Map(Object.entries(meta.outputs).map(([out, o]) => [relative(outdir, join(ROOT, out)), Object.keys(o.inputs)]));
    const holds = (file: string, pattern: RegExp) => (inputsOf.get(file) ?? []).some((i) => pattern.test(i));
    const HEAVY = /node_modules\/(@google-cloud\/monitoring|google-gax|@grpc\/grpc-js|protobufjs|@aws-sdk\/client-cloudwatch)\/|shared\/providers\/(gcp-monitoring|aws-cloudwatch)\/index\.ts$/;
    // the artifact holds them (a gcp-monitoring or aws-cloudwatch config loads them) …
    expect([...inputsOf.keys()].filter((f) => holds(f, HEAVY)).length).toBeGreaterThan(0);
    expect(holds("index.mjs", HEAVY)).toBe(false);
    // … and a cold start with an SQS-only config, answering a read, loads none of them
    const key = parseSigningKeys(SIGNING_KEYS)[0]!;
    const path = `${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`;
    const event = await toEvent("Function URL", path, {
      headers: await signRequest({ method: "GET", url: `${lambdaOrigin("Function URL")}${path}`, caller: HPA_CONTROLLER }, key, Date.now()),
    });
    const config = `${sqsConfigHead(sqs.endpoint, { defaults: "{ maxAgeSeconds: 300, cacheTTLSeconds: 0 }" })}metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
`;
    const script = `
      import { registerHooks } from "node:module";
      const loaded = [];
      registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
      const mod = await import(process.env.ARTIFACT);
      const result = await mod.handler(JSON.parse(process.env.EVENT), {});
      console.log(JSON.stringify({ result, loaded }));
    `;
    const r = await exec(NODE, ["--input-type=module", "-e", script], {
      cwd: taskRoot,
      env: {
        PATH: process.env["PATH"] ?? "",
        ARTIFACT: join(taskRoot, "dist/lambda/index.mjs"),
        EVENT: JSON.stringify(event),
        LAMBDA_TASK_ROOT: taskRoot,
        BRIDGE_CONFIG: config,
        BRIDGE_SIGNING_KEYS: SIGNING_KEYS,
        AWS_REGION: "us-east-1",
      },
    });
    const { result, loaded } = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { result: { statusCode: number; body: string }; loaded: string[] };
    expect(result.statusCode, result.body).toBe(200);
    expect(JSON.parse(result.body).items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
    const files = loaded.filter((u) => u.startsWith("file:")).map((u) => relative(join(taskRoot, "dist/lambda"), fileURLToPath(u)));
    expect(files).toContain("index.mjs");
    expect(files.some((f) => holds(f, /node_modules\/@aws-sdk\/client-sqs\//))).toBe(true);
    expect(files.filter((f) => holds(f, HEAVY))).toEqual([]);
    console.log(`SQS-only cold start loaded ${files.length} of ${[...inputsOf.keys()].filter((f) => f.endsWith(".mjs")).length} modules: ${files.join(", ")}`);
  });

  it("serverless.yml allows exactly the AWS calls the bundled code makes, each on its resources only", () => {
    const statements = SLS.provider.iam.role.statements;
    for (const s of statements) expect(s.Effect).toBe("Allow");
    // the AWS SDK commands our own bundled source sends, as IAM actions (service prefix = client package)
    const meta = JSON.parse(readFileSync(join(outdir, "meta.json"), "utf8")) as Metafile;
    const ours = Object.keys(meta.inputs).filter((p) => !p.includes("node_modules/") && /\.ts$/.test(p));
    const sent = new Set<string>();
    for (const input of ours) {
      const text = readFileSync(join(ROOT, input), "utf8");
      const commands = [...text.matchAll(/new (\w+)Command\(/g)].map((m) => m[1]!);
      if (commands.length === 0) continue;
      const service = /from "@aws-sdk\/client-([a-z0-9-]+)"|import\("@aws-sdk\/client-([a-z0-9-]+)"\)/.exec(text);
      expect(service, `${input} sends ${commands.join(", ")} but imports no @aws-sdk/client-*`).not.toBeNull();
      for (const command of commands) sent.add(`${service![1] ?? service![2]}:${command}`);
    }
    const actions = statements.flatMap((s) => s.Action).sort();
    expect(actions).toEqual([...sent].sort());
    expect(actions).toEqual(["cloudwatch:GetMetricData", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "ssm:GetParameter"]);
    // the shared read tier's calls, on its one table only
    expect(statements.find((s) => s.Action.includes("dynamodb:GetItem"))!.Resource).toBe("arn:aws:dynamodb:${aws:region}:${aws:accountId}:table/${self:custom.bridge.sharedCacheTable}");
    // the one wildcard: GetMetricData, which has no resource-level permissions
    const wildcard = statements.filter((s) => JSON.stringify(s.Resource).match(/"\*"|:\*"/));
    expect(wildcard).toEqual([{ Effect: "Allow", Action: ["cloudwatch:GetMetricData"], Resource: "*" }]);
    const ssm = statements.find((s) => s.Action.includes("ssm:GetParameter"))!;
    expect(ssm.Action).toEqual(["ssm:GetParameter"]);
    expect(ssm.Resource).toEqual([
      "arn:aws:ssm:${aws:region}:${aws:accountId}:parameter${self:custom.bridge.configParameter}",
      "arn:aws:ssm:${aws:region}:${aws:accountId}:parameter${self:custom.bridge.signingKeysParameter}",
    ]);
    expect(statements.find((s) => s.Action.includes("sqs:GetQueueUrl"))!.Resource).toBe("${self:custom.bridge.queueArns}");
  });
});

describe("serverless.yml matches the artifact and grants least privilege", () => {
  it("runs the built handler on the runtime the build targets, on arm64, behind a Function URL", () => {
    expect(SLS.provider.runtime).toBe(LAMBDA_RUNTIME);
    expect(ESBUILD_TARGET).toBe(`node${/^nodejs(\d+)\.x$/.exec(LAMBDA_RUNTIME)![1]}`);
    expect(SLS.provider.architecture).toBe("arm64");
    const fn = SLS.functions["bridge"]!;
    expect(fn.handler).toBe("dist/lambda/index.handler"); // build.ts default outdir + index.mjs, export `handler`
    expect(SLS.provider.timeout).toBeGreaterThan(4.5);
  });

  it("packages exactly the files the artifact test runs", () => {
    expect(SLS.package.patterns).toEqual(["!**", ...PACKAGED_FILES.map((f) => `dist/lambda/${f}`)]);
  });

  it("opens the Function URL without AWS_IAM only when the bridge requires signatures", () => {
    const env = SLS.provider.environment;
    const url = SLS.functions["bridge"]!.url as { authorizer?: string } | undefined;
    expect(url).toBeDefined();
    const signing = env["BRIDGE_SIGNING_KEYS"] !== undefined || env["BRIDGE_SIGNING_KEYS_SSM_PARAMETER"] !== undefined;
    if (url!.authorizer !== "aws_iam") expect(signing).toBe(true);
    expect(env["BRIDGE_SIGNING_KEYS_SSM_PARAMETER"]).toBe("${self:custom.bridge.signingKeysParameter}");
    expect(env["BRIDGE_CONFIG_SSM_PARAMETER"]).toBe("${self:custom.bridge.configParameter}");
    expect(env["BRIDGE_INSECURE_ALLOW_UNSIGNED"]).toBeUndefined(); // documented in a comment, never shipped on
  });
});
