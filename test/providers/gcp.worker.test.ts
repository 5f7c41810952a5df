/**
 * Cloud Monitoring inside the real Worker: built by wrangler as a deploy
 * builds it, run in workerd, reading the REST fake with a token the Worker
 * obtained from the OAuth fake by signing a JWT with WebCrypto (jose) from a
 * service-account key held in a Worker secret. Also: the Worker bundle does
 * not contain the official client, concurrent reads in one isolate share one
 * ListTimeSeries call, and credential faults are Status answers.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { BACKLOG, gcpBacklogConfig } from "../helpers/gcp.ts";
import { buildWorker, startWorker, type RunningWorker, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

function config(endpoint: string) {
  return gcpBacklogConfig(endpoint, { credentials: "{ source: environment, variable: GCP_KEY }", cacheTTLSeconds: 30, providerLines: ["batchWindowSeconds: 0.05"] });
}

describe("gcp-monitoring inside the Worker (workerd)", () => {
  let fakes: GoogleFakes;
  let build: WorkerBuild;
  let worker: RunningWorker;
  let now: number;
  beforeAll(async () => {
    [fakes, build] = await Promise.all([startGoogleFakes(), buildWorker()]);
    now = Date.now();
    fakes.store.series = Array.from({ length: 8 }, (_, i) => ({
      metricType: BACKLOG,
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: `sub-${i}` },
      points: [{ end: now - 30_000, value: { int64Value: String(100 + i) } }],
    }));
    worker = await startWorker(config(fakes.rest.endpoint), { GCP_KEY: fakes.account.text }, { build });
  });
  afterAll(async () => {
    await worker?.close();
    await fakes?.close();
  });

  it("the Worker bundle does not contain the official client", () => {
    const bundle = readFileSync(build.script, "utf8");
    for (const marker of ["MetricServiceClient", "google-gax", "google.monitoring.v3.MetricService", "protobufjs"]) {
      expect(bundle.includes(marker), marker).toBe(false);
    }
    expect(bundle).toContain("urn:ietf:params:oauth:grant-type:jwt-bearer");
  });

  it("serves the newest point over REST with a token from the JWT bearer grant", async () => {
    const res = await worker.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dsub-0`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.items).toEqual([
      { metricName: "pubsub_backlog", metricLabels: { subscription: "sub-0" }, timestamp: new Date(now - 30_000).toISOString().replace(/\.\d{3}Z$/, "Z"), value: "100" },
    ]);
    const exchange = fakes.oauth.requests.at(-1)!;
    expect(exchange.error).toBeUndefined();
    expect(exchange.claims).toMatchObject({ iss: fakes.account.json.client_email, aud: fakes.oauth.tokenUri, scope: "https://www.googleapis.com/auth/monitoring.read" });
    expect(fakes.store.requests.at(-1)).toMatchObject({ transport: "rest", caller: fakes.account.json.client_email });
  });

  it("batches concurrent reads in the isolate into one ListTimeSeries call, one token for all", async () => {
    const before = fakes.store.requests.length;
    const exchanges = fakes.oauth.requests.length;
    const answers = await Promise.all(
      Array.from({ length: 7 }, (_, i) => worker.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dsub-${i + 1}`).then((r) => r.json() as any)),
    );
    expect(answers.map((a) => a.items[0].value)).toEqual(["101", "102", "103", "104", "105", "106", "107"]);
    expect(fakes.store.requests.length - before).toBe(1);
    expect(fakes.oauth.requests.length - exchanges).toBe(0); // the token from the first test is still cached in the isolate
    // and the cache answers repeats without a call
    await worker.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dsub-3`);
    expect(fakes.store.requests.length - before).toBe(1);
  });

  it("a missing or broken key secret is a 500 naming the provider, never a value", async () => {
    const missing = await startWorker(config(fakes.rest.endpoint), {}, { build });
    try {
      const res = await missing.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dsub-0`);
      expect(res.status).toBe(500);
      expect(((await res.json()) as any).message).toMatch(/provider gcp: credentials.source is "environment" but GCP_KEY is not set/);
    } finally {
      await missing.close();
    }
    const broken = await startWorker(config(fakes.rest.endpoint), { GCP_KEY: JSON.stringify({ ...fakes.account.json, private_key: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }) }, { build });
    try {
      const res = await broken.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dsub-0`);
      expect(res.status).toBe(500);
      expect(((await res.json()) as any).message).toMatch(/provider gcp: .*private key cannot sign/);
    } finally {
      await broken.close();
    }
  });
});
