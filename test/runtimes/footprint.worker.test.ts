/**
 * A Worker built for the providers its config uses (`infra/worker/build.ts`):
 * the other providers' code is not in the script, it still serves its own
 * provider's reads in workerd, and a config naming a provider left out is
 * answered with a 500 Status saying so. The default build (`npm run
 * build:worker`) holds every provider. Sizes are printed, and compared only
 * with each other (a figure is never asserted here: the budgets are the
 * benchmark's rows, `test/bench/footprint.ts`). A Worker built for a
 * Prometheus-only config with the config bundled as JSON holds the PromQL
 * grammar and no other provider's code, and serves a read from a Prometheus
 * HTTP API in workerd.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { flavourTable, PROVIDER_IMPLEMENTATIONS, providerTable } from "../../infra/tools/provider-tables.ts";
import { BUNDLED_CONFIG_SPECIFIER, FLAVOURS_SPECIFIER, jsonConfigModule, providersOfConfig, TABLE_SPECIFIER } from "../../infra/worker/build.ts";
import { NOT_JSON } from "../../infra/worker/json-yaml.ts";
import { EventStreamSerde, eventStreamSerdeProvider, NO_EVENT_STREAMS } from "../../infra/worker/no-event-streams.ts";
import { PROVIDERS as WORKER_PROVIDERS } from "../../infra/worker/providers.ts";
import { PROVIDER_TYPES } from "../../shared/providers/provider-list.ts";
import { PROVIDERS } from "../../shared/providers/provider-loaders.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { buildWorker, ROOT, startWorker, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
/** Bundled inputs that belong to the CloudWatch and Cloud Monitoring providers only. */
const OTHER_PROVIDERS = /shared\/providers\/(aws-cloudwatch|gcp-monitoring)\/index\.ts$|shared\/providers\/gcp-monitoring\/rest\.ts$|shared\/providers\/gcp\/token\.ts$|node_modules\/@aws-sdk\/client-cloudwatch\//;

function inputsOf(build: WorkerBuild): string[] {
  const meta = JSON.parse(readFileSync(join(build.outdir, "bundle-meta.json"), "utf8")) as { inputs: Record<string, unknown> };
  return Object.keys(meta.inputs);
}

function gzipKiB(build: WorkerBuild): number {
  return Number(/Total Upload: [\d.]+ KiB \/ gzip: ([\d.]+) KiB/.exec(build.output)![1]);
}

function sqsConfig(endpoint: string): string {
  return `${sqsConfigHead(endpoint)}metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
`;
}

/** Bundled inputs of every provider but prometheus, of the flavours a generic config does not use (amp's SigV4 signer, gmp's Google tokens), and the YAML parser (left out by `--json`). */
const NOT_PROMETHEUS = /shared\/providers\/(aws-sqs|aws-cloudwatch|gcp-monitoring)\/index\.ts$|shared\/providers\/gcp\/(token|bearer)\.ts$|shared\/providers\/prometheus\/(amp|gmp)\.ts$|node_modules\/@aws-sdk\/|node_modules\/@smithy\/signature-v4\/|node_modules\/yaml\//;

/** A Prometheus-only config (the rule of docs/providers/prometheus.md) reading `url`. */
function prometheusConfig(url: string): string {
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
defaults:
  maxAgeSeconds: 120
providers:
  prom:
    type: prometheus
    url: ${url}
metrics:
  - name: rabbitmq_messages_ready
    provider: prom
    query:
      series: rabbitmq_queue_messages_ready
      labels: { job: rabbitmq }
      selectorLabels: { queue: queue }
policy:
  defaultAction: Allow
`;
}

describe("Worker built for the providers its config uses", () => {
  let sqs: Emulator;
  let all: WorkerBuild;
  let sqsOnly: WorkerBuild;
  /** aws-sqs only, its config bundled as JSON, the `yaml` package replaced (`--json`) */
  let sqsJson: WorkerBuild;
  /** prometheus only, its config bundled as JSON (`--json`): the "Worker built for a Prometheus-only config" */
  let promJson: WorkerBuild;
  let prom: FakePrometheus;

  beforeAll(async () => {
    const dir = join(ROOT, ".cache/worker-build");
    mkdirSync(dir, { recursive: true });
    const table = join(dir, "providers-test-aws-sqs.ts");
    writeFileSync(table, providerTable(["aws-sqs"], dir));
    sqs = await startEmulator();
    await sqs.add("worker_tasks", 7);
    const configModule = join(dir, "config-test-aws-sqs.json.ts");
    writeFileSync(configModule, jsonConfigModule(sqsConfig(sqs.endpoint), "bundled-test.yaml"));
    const json = ["--alias", `${BUNDLED_CONFIG_SPECIFIER}:${configModule}`, "--alias", `yaml:${join(ROOT, "infra/worker/json-yaml.ts")}`];
    prom = await startFakePrometheus(Date.now);
    const promTable = join(dir, "providers-test-prometheus.ts");
    writeFileSync(promTable, providerTable(["prometheus"], dir));
    const promConfigModule = join(dir, "config-test-prometheus.json.ts");
    writeFileSync(promConfigModule, jsonConfigModule(prometheusConfig(prom.url), "bundled-prometheus.yaml"));
    // a generic-only config: the Worker build's flavour table holds no other flavour (infra/worker/build.ts flavoursOf)
    const promFlavours = join(dir, "prometheus-flavours-test.ts");
    writeFileSync(promFlavours, flavourTable([], dir));
    const promArgs = [
      "--alias", `${TABLE_SPECIFIER}:${promTable}`,
      "--alias", `${FLAVOURS_SPECIFIER}:${promFlavours}`,
      "--alias", `${BUNDLED_CONFIG_SPECIFIER}:${promConfigModule}`,
      "--alias", `yaml:${join(ROOT, "infra/worker/json-yaml.ts")}`,
    ];
    [all, sqsOnly, sqsJson, promJson] = await Promise.all([
      buildWorker(),
      buildWorker({ args: ["--alias", `${TABLE_SPECIFIER}:${table}`, "--metafile"] }),
      buildWorker({ args: ["--alias", `${TABLE_SPECIFIER}:${table}`, ...json, "--metafile"] }),
      buildWorker({ args: [...promArgs, "--metafile"] }),
    ]);
  }, 240_000);
  afterAll(async () => {
    await sqs?.stop();
    await prom?.close();
  });

  it("every provider type has an entry in each table and an implementation for the build script", () => {
    expect(Object.keys(PROVIDERS)).toEqual([...PROVIDER_TYPES]);
    expect(Object.keys(WORKER_PROVIDERS)).toEqual([...PROVIDER_TYPES]);
    expect(Object.keys(PROVIDER_IMPLEMENTATIONS)).toEqual([...PROVIDER_TYPES]);
    expect(() => providerTable(["aws-sqs", "carrier-pigeon"], ROOT)).toThrow(/unknown provider type "carrier-pigeon"/);
  });

  it("takes the provider set from a config, validating it", () => {
    const text = readFileSync(join(ROOT, "infra/examples/aws-sqs.yaml"), "utf8");
    expect(providersOfConfig(text, "aws-sqs.yaml")).toEqual(["aws-sqs"]);
    expect(() => providersOfConfig(text.replace("type: aws-sqs", "type: carrier-pigeon"), "bad.yaml")).toThrow(/bad\.yaml:\d+:\d+: providers\.\S+\.type: unknown provider type "carrier-pigeon"/);
  });

  it("the SQS-only script holds no other provider's code; the default one holds every provider", () => {
    const sqsInputs = inputsOf(sqsOnly);
    expect(sqsInputs.filter((i) => OTHER_PROVIDERS.test(i))).toEqual([]);
    expect(sqsInputs.some((i) => i.endsWith("shared/providers/aws-sqs/index.ts"))).toBe(true);
    expect(sqsInputs.some((i) => i.includes("node_modules/@aws-sdk/client-sqs/"))).toBe(true);
    const allInputs = inputsOf(all);
    for (const type of PROVIDER_TYPES) expect(allInputs.some((i) => i.endsWith(`shared/providers/${type}/index.ts`)), type).toBe(true);
    expect(allInputs.some((i) => OTHER_PROVIDERS.test(i))).toBe(true);
    console.log(`Worker gzip (wrangler): every provider ${gzipKiB(all)} KiB, aws-sqs only ${gzipKiB(sqsOnly)} KiB`);
    expect(gzipKiB(sqsOnly)).toBeLessThan(gzipKiB(all));
  });

  it("no Worker script holds zod's classic API or the AWS SDK's event-stream codec (wrangler [alias] to infra/worker/no-event-streams.ts, which fails loudly)", () => {
    const eventStreams = (inputs: string[]) => inputs.filter((i) => i.includes("@smithy/core/dist-es/submodules/event-streams/"));
    for (const build of [all, sqsOnly, sqsJson]) {
      expect(eventStreams(inputsOf(build))).toEqual([]);
      expect(inputsOf(build).some((i) => i.endsWith("infra/worker/no-event-streams.ts"))).toBe(true);
    }
    // the schemas are zod/mini's: zod's classic API (methods on every schema, not tree-shaken) is in no script
    for (const build of [all, sqsOnly, sqsJson]) expect(inputsOf(build).filter((i) => i.includes("node_modules/zod/v4/classic/"))).toEqual([]);
    // the SDK still loads it by this specifier (else the alias would no longer apply)
    expect(readFileSync(join(ROOT, "node_modules/@smithy/core/dist-es/submodules/protocols/HttpProtocol.js"), "utf8")).toContain('import("@smithy/core/event-streams")');
    expect(() => new EventStreamSerde()).toThrow(NO_EVENT_STREAMS);
    expect(() => eventStreamSerdeProvider()).toThrow(NO_EVENT_STREAMS);
  });

  it("every Worker script routes with Hono's tiny preset (wrangler [alias] ./hono.ts → infra/worker/hono-tiny.ts), none of the bigger routers", () => {
    const routers = (inputs: string[]) => inputs.filter((i) => /node_modules\/hono\/dist\/router\/(reg-exp-router|trie-router|smart-router)\//.test(i));
    for (const build of [all, sqsOnly, sqsJson]) {
      const inputs = inputsOf(build);
      expect(routers(inputs)).toEqual([]);
      expect(inputs.some((i) => i.endsWith("node_modules/hono/dist/router/pattern-router/router.js"))).toBe(true);
      expect(inputs.some((i) => i.endsWith("infra/worker/hono-tiny.ts"))).toBe(true);
    }
    // app.ts still imports the class by this specifier (else the alias would no longer apply)
    expect(readFileSync(join(ROOT, "shared/app.ts"), "utf8")).toContain('import { Hono } from "./hono.ts";');
  });

  it("the SQS-only Worker serves SQS reads in workerd", async () => {
    const worker = await startWorker(sqsConfig(sqs.endpoint), {}, { build: sqsOnly });
    try {
      const res = await worker.request(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
    } finally {
      await worker.close();
    }
  });

  it("--json: the config bundled as JSON, no YAML parser in the script; it serves the bundled config and a JSON binding, and refuses a YAML one with a Status", async () => {
    const inputs = inputsOf(sqsJson);
    expect(inputs.filter((i) => i.includes("node_modules/yaml/"))).toEqual([]);
    expect(inputsOf(sqsOnly).some((i) => i.includes("node_modules/yaml/"))).toBe(true);
    expect(inputs.filter((i) => OTHER_PROVIDERS.test(i))).toEqual([]);
    console.log(`Worker gzip (wrangler): aws-sqs only with the config as JSON ${gzipKiB(sqsJson)} KiB`);
    expect(gzipKiB(sqsJson)).toBeLessThan(gzipKiB(sqsOnly));
    const read = `${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`;
    // the bundled config (an empty binding falls back to it)
    const bundled = await startWorker("", {}, { build: sqsJson });
    try {
      const res = await bundled.request(read);
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.items[0]).toMatchObject({ metricLabels: { queue: "worker_tasks" }, value: "7" });
    } finally {
      await bundled.close();
    }
    // a YAML binding: a 500 Status naming the cause; the same config as JSON is served
    const yamlBinding = await startWorker(sqsConfig(sqs.endpoint), {}, { build: sqsJson });
    try {
      const res = await yamlBinding.request(read);
      const body = (await res.json()) as any;
      expect(res.status).toBe(500);
      expect(body).toMatchObject({ kind: "Status", code: 500 });
      expect(body.message).toContain(NOT_JSON);
    } finally {
      await yamlBinding.close();
    }
    const jsonText = /export default (".*");/.exec(jsonConfigModule(sqsConfig(sqs.endpoint), "x.yaml"))![1]!;
    const jsonBinding = await startWorker(JSON.parse(jsonText) as string, {}, { build: sqsJson });
    try {
      const res = await jsonBinding.request(read);
      expect(res.status, await res.clone().text()).toBe(200);
      // a JSON config with a mistake is named by its field path
      const bad = await startWorker((JSON.parse(jsonText) as string).replace('"queueLabel":"queue"', '"queueLabel":7'), {}, { build: sqsJson });
      try {
        const r = await bad.request(read);
        expect(r.status).toBe(500);
        // zod's English message (shared/config/zod.ts loads it for zod/mini), not a bare "Invalid input"
        expect(((await r.json()) as any).message).toMatch(
          /<binding:BRIDGE_CONFIG>:1:1: metrics\[0\]\.query\.queueLabel: Invalid input: expected string, received number/,
        );
      } finally {
        await bad.close();
      }
    } finally {
      await jsonBinding.close();
    }
  });

  it("the Prometheus-only Worker (--json) holds the PromQL grammar and no other provider's code, and serves a Prometheus read in workerd", async () => {
    const inputs = inputsOf(promJson);
    expect(inputs.filter((i) => NOT_PROMETHEUS.test(i))).toEqual([]);
    expect(inputs.some((i) => i.endsWith("shared/providers/prometheus/index.ts"))).toBe(true);
    expect(inputs.some((i) => i.includes("node_modules/@prometheus-io/lezer-promql/"))).toBe(true);
    // the budget is the benchmark row's (test/bench/footprint.ts, ≤ 150 KiB gzip); printed here
    console.log(`Worker gzip (wrangler): prometheus only with the config as JSON ${gzipKiB(promJson)} KiB`);
    expect(gzipKiB(promJson)).toBeLessThan(gzipKiB(all));
    const now = Date.now();
    prom.series = [
      { labels: { __name__: "rabbitmq_queue_messages_ready", job: "rabbitmq", queue: "orders" }, value: "120", timeMs: now - 12_000 },
      { labels: { __name__: "rabbitmq_queue_messages_ready", job: "rabbitmq", queue: "emails" }, value: "7", timeMs: now - 5_000 },
    ];
    const worker = await startWorker("", {}, { build: promJson });
    try {
      const res = await worker.request(`${NS}/rabbitmq_messages_ready?labelSelector=queue%3Dorders`);
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.items).toMatchObject([{ metricLabels: { queue: "orders" }, value: "120" }]);
      expect(prom.requests.map((r) => r.query)).toContain('sum by (queue) (rabbitmq_queue_messages_ready{job="rabbitmq",queue="orders"})');
    } finally {
      await worker.close();
    }
  });

  it("a config naming a provider left out of the build is a 500 Status naming it and the build's providers", async () => {
    const text = `${sqsConfig(sqs.endpoint)}  - name: backlog
    provider: gcp
    query: { metricType: pubsub.googleapis.com/subscription/num_undelivered_messages }
`.replace("providers:\n", "providers:\n  gcp: { type: gcp-monitoring, project: p, credentials: { source: environment } }\n");
    const worker = await startWorker(text, {}, { build: sqsOnly });
    try {
      const res = await worker.request(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
      const body = (await res.json()) as any;
      expect(res.status).toBe(500);
      expect(body).toMatchObject({ kind: "Status", code: 500 });
      expect(body.message).toMatch(/providers\.gcp\.type: provider type "gcp-monitoring" is not in this build \(it holds: aws-sqs\)/);
    } finally {
      await worker.close();
    }
  });
});
