/**
 * The `prometheus` provider's `gmp` flavour (Google Cloud Managed Service
 * for Prometheus) through the real bridge app against a REAL Prometheus
 * v3.16.0 started with `--web.route-prefix=/v1/projects/test-project/location/global/prometheus`
 * (the GMP query API's path), behind a front that accepts only bearer
 * tokens the OAuth / STS fakes issued (`test/fakes/gmp-front.ts`): a value
 * read with a service-account key (JWT bearer grant, scope
 * `monitoring.read`) and with Workload Identity Federation (AWS identity →
 * STS → service-account impersonation); a token that nears its expiry is
 * renewed, one the API refuses is exchanged again once; a token endpoint
 * that refuses is the same Status as gcp-monitoring's; a 403 from Google is
 * a 500 naming the provider — never a value. With Application Default
 * Credentials (`source: default`, google-auth-library) the token comes from
 * a fake GCE metadata server (`test/fakes/gce-metadata.ts`, named by
 * `GCE_METADATA_HOST` for that block only), as on GKE with Workload Identity.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startGceMetadata, type GceMetadata } from "../fakes/gce-metadata.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { gcpBacklogConfig } from "../helpers/gcp.ts";
import { awsFederationEnv, gmpConfig, startGmpStack, type GmpStack } from "../helpers/gmp.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS } from "../helpers/prometheus.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read";

/** The bridge's clock: real time plus a shift the renewal test sets. */
const clock = { shiftMs: 0, now: () => Date.now() + clock.shiftMs };

let stack: GmpStack;
let oauth: GmpStack["oauth"];
let account: GmpStack["account"];
let sts: GmpStack["sts"];
let front: GmpStack["front"];

beforeAll(async () => {
  stack = await startGmpStack(clock.now);
  ({ oauth, account, sts, front } = stack);
}, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => stack?.close());

afterEach(() => {
  clock.shiftMs = 0;
  oauth.failWith = undefined;
  front.denied = false;
});

function bridgeFor(text: string, env: Record<string, string>): Bridge {
  return buildBridge(text, "test.yaml", { env, now: clock.now }, { log: () => {} });
}

const keyConfig = () => gmpConfig(front.endpoint, { credentials: "{ source: environment, variable: GMP_KEY }", maxAgeSeconds: 3600 });

async function read(bridge: Bridge, metric: string, selector: string) {
  const res = await bridge.app.fetch(new Request(`http://bridge${NS}/${metric}?labelSelector=${encodeURIComponent(selector)}`));
  return { status: res.status, body: (await res.json()) as any };
}

describe("prometheus provider, flavour gmp, against a real Prometheus behind a token-checking front", () => {
  it("reads a value with a service-account key: POST {endpoint}/v1/projects/P/location/global/prometheus/api/v1/query with a monitoring.read token", async () => {
    const bridge = bridgeFor(keyConfig(), { GMP_KEY: account.text });
    const before = front.requests.length;
    const a = await read(bridge, "queue_ready", "queue in (a, b)");
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.items.map((i: any) => [i.metricLabels.queue, i.value])).toEqual([["a", "3"], ["b", "4"]]);
    const sent = front.requests.slice(before);
    expect(sent.map((r) => [r.method, r.path, r.status, r.caller])).toEqual([
      ["POST", "/v1/projects/test-project/location/global/prometheus/api/v1/query", 200, account.json.client_email],
      ["POST", "/v1/projects/test-project/location/global/prometheus/api/v1/query", 200, account.json.client_email],
    ]);
    expect(oauth.requests.at(-1)!.claims).toMatchObject({ iss: account.json.client_email, aud: oauth.tokenUri, scope: MONITORING_READ });
  });

  it("reads a value with Workload Identity Federation: AWS identity → STS → impersonated service account, no key", async () => {
    const bridge = bridgeFor(gmpConfig(front.endpoint, { credentials: "{ source: externalAccount }" }), awsFederationEnv(sts));
    const before = { sts: sts.sts.length, impersonations: sts.impersonations.length, front: front.requests.length };
    const a = await read(bridge, "queue_ready", "queue=a");
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.items[0]).toMatchObject({ metricLabels: { queue: "a" }, value: "3" });
    expect(sts.sts.length - before.sts).toBe(1);
    expect(sts.sts.at(-1)!.error).toBeUndefined();
    const impersonation = sts.impersonations.at(-1)!;
    expect(sts.impersonations.length - before.impersonations).toBe(1);
    expect(impersonation.body.scope).toEqual([MONITORING_READ]);
    expect(front.requests.slice(before.front).map((r) => r.caller)).toEqual([sts.serviceAccount, sts.serviceAccount]);
  });

  it("renews a token in its last minute, and exchanges again once when the API refuses a cached one", async () => {
    const bridge = bridgeFor(keyConfig(), { GMP_KEY: account.text });
    const before = oauth.requests.length;
    for (let i = 0; i < 3; i++) expect((await read(bridge, "queue_ready", "queue=a")).status).toBe(200);
    expect(oauth.requests.length - before).toBe(1);
    const first = front.requests.at(-1)!.token;
    clock.shiftMs = 3_599_000 - 50_000; // the token (expires_in 3599) has 50 s left: renewed before use
    const renewed = await read(bridge, "queue_ready", "queue=a");
    expect(renewed.status, JSON.stringify(renewed.body)).toBe(200);
    expect(oauth.requests.length - before).toBe(2);
    const second = front.requests.at(-1)!.token;
    expect(second).not.toBe(first);
    expect(front.requests.at(-1)!.status).toBe(200);
    oauth.revokeAll(); // the front now answers 401 to the cached token: one new exchange, then the value
    const again = await read(bridge, "queue_ready", "queue=a");
    expect(again.status, JSON.stringify(again.body)).toBe(200);
    expect(oauth.requests.length - before).toBe(3);
    expect(front.requests.at(-1)!.token).not.toBe(second);
  });

  it("a token endpoint that refuses or fails is the same Status as gcp-monitoring's, never a value", async () => {
    // gcp-monitoring over REST, same key and token endpoint; the refusal happens before any API call
    const monitoring = bridgeFor(gcpBacklogConfig("http://127.0.0.1:9", { credentials: "{ source: environment, variable: GMP_KEY }", cacheTTLSeconds: 0 }), { GMP_KEY: account.text });
    for (const failure of [400, 503]) {
      oauth.failWith = failure;
      const gmp = await read(bridgeFor(keyConfig(), { GMP_KEY: account.text }), "queue_ready", "queue=a");
      const gcp = await read(monitoring, "pubsub_backlog", "subscription=orders");
      expect(gmp.body.items).toBeUndefined();
      expect(gmp.status).toBe(failure === 400 ? 500 : 503);
      expect({ status: gmp.status, reason: gmp.body.reason, message: gmp.body.message.replace("provider gmp:", "provider gcp:") }).toEqual({
        status: gcp.status,
        reason: gcp.body.reason,
        message: gcp.body.message,
      });
      expect(gmp.body.message).toMatch(/^provider gmp: getting an access token for bridge@test-project\.iam\.gserviceaccount\.com from http:\/\/127\.0\.0\.1:\d+\/token failed/);
    }
  });

  it("Google refusing the principal (403 PERMISSION_DENIED) is a 500 naming the provider, never a value", async () => {
    front.denied = true;
    const denied = await read(bridgeFor(keyConfig(), { GMP_KEY: account.text }), "queue_ready", "queue=a");
    expect(denied.status).toBe(500);
    expect(denied.body.items).toBeUndefined();
    expect(denied.body.message).toMatch(/^provider gmp: query for metric queue_ready .* failed: Google refused the bridge's credentials \(PERMISSION_DENIED\)/);
  });
});

describe("prometheus provider, flavour gmp, with Application Default Credentials (credentials.source default)", () => {
  // google-auth-library reads the process environment: the metadata server is named for this block only
  // (no key file, an empty gcloud config dir, so the metadata server is the credential found), restored after.
  const saved: Record<string, string | undefined> = {};
  let metadata: GceMetadata;
  let gcloudDir: string;
  const adcConfig = () => gmpConfig(front.endpoint, { credentials: "{ source: default }" });

  beforeAll(async () => {
    metadata = await startGceMetadata(oauth.issued);
    gcloudDir = mkdtempSync(join(tmpdir(), "emb-gcloud-"));
    const env = { GCE_METADATA_HOST: metadata.host, CLOUDSDK_CONFIG: gcloudDir, GOOGLE_APPLICATION_CREDENTIALS: undefined, METADATA_SERVER_DETECTION: undefined };
    for (const [k, v] of Object.entries(env)) {
      saved[k] = process.env[k];
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    rmSync(gcloudDir, { recursive: true, force: true });
    await metadata?.close();
  });

  afterEach(() => {
    metadata.failWith = undefined;
  });

  it("reads a value with a token from the metadata server (GKE Workload Identity), scope monitoring.read", async () => {
    const bridge = bridgeFor(adcConfig(), {});
    const before = { front: front.requests.length, metadata: metadata.requests.length };
    const a = await read(bridge, "queue_ready", "queue in (a, b)");
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.items.map((i: any) => [i.metricLabels.queue, i.value])).toEqual([["a", "3"], ["b", "4"]]);
    expect(front.requests.slice(before.front).map((r) => [r.path, r.status, r.caller])).toEqual([
      ["/v1/projects/test-project/location/global/prometheus/api/v1/query", 200, metadata.serviceAccount],
      ["/v1/projects/test-project/location/global/prometheus/api/v1/query", 200, metadata.serviceAccount],
    ]);
    const tokenRequests = metadata.requests.slice(before.metadata).filter((r) => r.path.startsWith("/computeMetadata/v1/instance/service-accounts/default/token"));
    expect(tokenRequests).toHaveLength(1); // one token for both queries: the library caches it
    expect(new URL(tokenRequests[0]!.path, "http://x").searchParams.get("scopes")).toBe(MONITORING_READ);
    expect(metadata.requests.every((r) => r.flavor === "Google")).toBe(true);
    // the token is cached across reads
    expect((await read(bridge, "queue_ready", "queue=a")).status).toBe(200);
    expect(metadata.requests.slice(before.metadata).filter((r) => r.path.includes("/token")).length).toBe(1);
  });

  it("the metadata server refusing the token is a 500 naming the provider, nothing sent to the API, never a value", async () => {
    metadata.failWith = 403;
    const before = front.requests.length;
    const refused = await read(bridgeFor(adcConfig(), {}), "queue_ready", "queue=a");
    expect(refused.status, JSON.stringify(refused.body)).toBe(500);
    expect(refused.body.items).toBeUndefined();
    expect(refused.body.message).toMatch(/^provider gmp: .*getting an access token with Application Default Credentials failed: the credentials were refused \(HTTP 403\)/);
    expect(front.requests.length).toBe(before);
  });

  it("the metadata server failing (503) is retried by the library until the read's deadline: a 503 timeout, nothing sent to the API, never a value", async () => {
    metadata.failWith = 503;
    const before = front.requests.length;
    const tokenRequests = () => metadata.requests.filter((r) => r.path.startsWith("/computeMetadata/v1/instance/service-accounts/default/token")).length;
    const tokensBefore = tokenRequests();
    const bridge = bridgeFor(adcConfig(), {});
    const res = await bridge.app.fetch(new Request(`http://bridge${NS}/queue_ready?labelSelector=queue%3Da`));
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(503);
    expect(res.headers.get("retry-after")).not.toBeNull();
    expect(body.items).toBeUndefined();
    expect(body.message).toBe('provider gmp: query for metric queue_ready (emb_queue_ready{queue="a"}) timed out');
    expect(tokenRequests() - tokensBefore).toBeGreaterThan(1);
    expect(front.requests.length).toBe(before);
  });
});

