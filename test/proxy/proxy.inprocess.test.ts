/**
 * The in-process bridge (`type: inProcess` backends, shared/proxy/forward/in-process.ts):
 * the real proxy over TLS, authenticating the front-proxy client certificate
 * and X-Remote-* headers, authorized by the fake Kubernetes API, calling the
 * bridge built from a bridge config file in its own process — reading a
 * fauxqs SQS emulator through the real AWS SDK — with the authenticated
 * caller, so the bridge's ExternalMetricPolicies decide per caller. No
 * signing key is configured anywhere.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../shared/config/yaml.ts";
import { createBackend } from "../../shared/proxy/forward/backends.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import type { InProcessBackend } from "../../shared/proxy/forward/in-process.ts";
import { EXTERNAL_METRICS_API } from "../../shared/values/request.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { startHangingServer, type HangingServer } from "../helpers/hanging-server.ts";
import { createPki, eventually, KEYS, startHarness, V1, type Harness, type Pki } from "./proxy.harness.ts";
import { promlint, sample } from "../helpers/promlint.ts";

/** package.json's version (what build_info reports). */
const VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

const NS = `${V1}/namespaces/team-a`;
/** A values read of `metric` in team-a as the proxy's forwarder hands it to a backend: the path and the parts it parsed. */
const valuesRead = (metric: string, labelSelector = "") => ({
  pathAndQuery: `${NS}/${metric}${labelSelector === "" ? "" : `?labelSelector=${encodeURIComponent(labelSelector)}`}`,
  values: { api: EXTERNAL_METRICS_API, namespace: "team-a", metric, labelSelector },
});
const HEAD = "apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\n";

/** A bridge config: one SQS metric; only `jane` may read queue a_jobs in team-a, everything else is denied. */
function bridgeConfigText(endpoint: string): string {
  return `${sqsConfigHead(endpoint, { policy: "{ defaultAction: Deny }", defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }" })}metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: jane-reads-her-queue, namespace: team-a }
spec:
  subjects: { users: [jane] }
  rules:
    - metric: "queue_.*"
      selector: { matchExpressions: [{ key: queue, operator: In, values: [a_jobs] }] }
`;
}

let sqs: Emulator;
let stuck: HangingServer;
let pki: Pki;
let h: Harness;
let dir: string;
const keysBefore = process.env["BRIDGE_SIGNING_KEYS"];

const as = (user: string) => ({ cert: pki.frontProxy, headers: { "X-Remote-User": user, "X-Remote-Group": "team-a-devs" } });

beforeAll(async () => {
  delete process.env["BRIDGE_SIGNING_KEYS"];
  [sqs, pki, stuck] = await Promise.all([startEmulator(), createPki(), startHangingServer()]);
  await sqs.add("a_jobs", 3);
  await sqs.add("b_jobs", 7);
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-inprocess-"));
  const bridgeFile = join(dir, "bridge.yaml");
  writeFileSync(bridgeFile, bridgeConfigText(sqs.endpoint));
  // A second bridge whose SQS endpoint never answers (its own SDK timeout 4 s, its deadline 3 s): the proxy's 0.5 s deadline comes first.
  const stuckFile = join(dir, "stuck.yaml");
  writeFileSync(
    stuckFile,
    `${sqsConfigHead(stuck.url, { timeoutSeconds: 4, defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }" })}metrics:\n  - { name: stuck_depth, provider: sqs, query: { queueLabel: queue } }\n`,
  );
  h = await startHarness({
    pki,
    proxyConfig:
      `${HEAD}backends:\n  local: { type: inProcess, bridgeConfig: "${bridgeFile}", timeoutSeconds: 4 }\n  stuck: { type: inProcess, bridgeConfig: "${stuckFile}", timeoutSeconds: 0.5 }\n` +
      `routes:\n  - { metric: "queue_.*", backend: local }\n  - { metric: "stuck_.*", backend: stuck }\ncache: { ttlSeconds: 0 }\n`,
    // no BRIDGE_SIGNING_KEYS: an inProcess backend needs none
    extra: { signingKeys: undefined },
  });
  h.fake.authorize = () => ({ allowed: true }); // RBAC allows; the bridge's policy decides
}, 120_000);

afterAll(async () => {
  await h?.close();
  await sqs?.stop();
  await stuck?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  if (keysBefore !== undefined) process.env["BRIDGE_SIGNING_KEYS"] = keysBefore;
});

describe("inProcess backend", () => {
  it("serves a values read through the real proxy from the bridge in its process, with no signing key", async () => {
    const res = await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Da_jobs`, as("jane"));
    expect(res.status, res.text).toBe(200);
    expect(res.json()).toMatchObject({ kind: "ExternalMetricValueList", items: [{ metricName: "queue_messages_ready", metricLabels: { queue: "a_jobs" }, value: "3" }] });
    expect(res.headers["cache-control"]).toBe("no-store");
    // The proxy logged the read as served by the in-process backend.
    expect(h.logs.some((r) => r.msg === "request" && r["backend"] === "local" && r["code"] === 200 && r["user"] === "jane")).toBe(true);
  });

  it("applies the bridge's policy to the caller the proxy authenticated: another user is denied (403 from the policy)", async () => {
    const res = await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Da_jobs`, as("bob"));
    expect(res.status, res.text).toBe(403);
    expect(res.json()).toMatchObject({ kind: "Status", reason: "Forbidden" });
    expect(res.json().message).toContain("bob");
    const denials = await h.proxy.metrics.denials.get();
    expect(denials.values.find((v) => v.labels["source"] === "policy")?.value).toBeGreaterThanOrEqual(1);
  });

  it("denies the allowed user a series the policy does not grant", async () => {
    const res = await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Db_jobs`, as("jane"));
    expect(res.status, res.text).toBe(403);
    expect(res.json().message).toContain("jane");
  });

  it("applies timeoutSeconds as the deadline: 503 without Retry-After, the bridge's cloud call cancelled, the failure kept as back-off", async () => {
    const res = await h.get(`${NS}/stuck_depth?labelSelector=queue%3Dq`, as("jane"));
    expect(res.status, res.text).toBe(503);
    expect(res.headers["retry-after"]).toBeUndefined();
    expect(res.json()).toMatchObject({ kind: "Status", code: 503 });
    expect(res.json().message).toContain("backend stuck did not answer within 500 ms");
    expect(stuck.requestLines.length).toBe(1);
    // The proxy's deadline aborted the bridge's request: the SDK call to the stuck endpoint is cut long before the bridge's own 3 s deadline.
    await eventually(() => stuck.open === 0, 1_000, "the stuck SQS connection closed");
    // A second read within the 1 s back-off is answered from it: no new call.
    const again = await h.get(`${NS}/stuck_depth?labelSelector=queue%3Dq`, as("jane"));
    expect(again.status).toBe(503);
    expect(again.headers["retry-after"]).toBeUndefined();
    expect(stuck.requestLines.length).toBe(1);
  });

  it("exports the in-process bridges' emb_bridge_* metrics on the proxy's own /metrics, once for both inProcess backends", async () => {
    const before = await h.get("/metrics", as("jane"));
    expect(before.status, before.text).toBe(200);
    const served = (text: string) => sample(text, "emb_bridge_requests_total", { kind: "values", code: "200" }) ?? 0;
    const read = await h.get(`${NS}/queue_messages_ready?labelSelector=queue%3Da_jobs`, as("jane"));
    expect(read.status, read.text).toBe(200);
    const res = await h.get("/metrics", as("jane"));
    expect(res.status, res.text).toBe(200);
    const text = res.text;
    // the read just made is counted by the bridge, beside the proxy's own families
    expect(served(text)).toBe(served(before.text) + 1);
    expect(sample(text, "emb_bridge_build_info", { version: VERSION, node: process.version })).toBe(1);
    expect(sample(text, "emb_bridge_metric_value", { metric: "queue_messages_ready" })).toBe(3);
    expect(sample(text, "emb_bridge_cache_requests_total", { provider: "sqs", result: "miss" })).toBeGreaterThanOrEqual(1);
    expect(sample(text, "emb_bridge_policy_decisions_total", { layer: "bridge", decision: "deny" })).toBeGreaterThanOrEqual(1);
    expect(sample(text, "emb_proxy_requests_total", { code: "200", kind: "values", metric: "queue_messages_ready" })).toBeGreaterThanOrEqual(1);
    // one family each (two inProcess backends, no duplicate registration), no second set of process metrics
    expect(text.split("\n").filter((l) => l === "# TYPE emb_bridge_requests_total counter")).toHaveLength(1);
    expect(text).not.toContain("emb_bridge_process_");
    expect(promlint(text)).toEqual([]);
  });

  it("lists the bridge's metrics in the proxy's merged discovery", async () => {
    await h.proxy.checkReadiness();
    const res = await h.get(V1, as("jane"));
    expect(res.status, res.text).toBe(200);
    expect(res.json().resources.map((r: { name: string }) => r.name)).toContain("queue_messages_ready");
    expect(h.proxy.forwarder.backendHealth.get("local")).toBe(true);
  });
});

describe("inProcess backend beside signed bridge backends", () => {
  it("takes the caller from the proxy even when BRIDGE_SIGNING_KEYS is in the environment (no signature is asked for)", async () => {
    const backend = await createBackend(
      { name: "local", type: "inProcess", bridgeConfig: join(dir, "bridge.yaml"), timeoutSeconds: 4, insecureSkipTLSVerify: false },
      { signingKeys: () => undefined, env: { ...process.env, BRIDGE_SIGNING_KEYS: KEYS } },
    );
    const read = (user: string) =>
      backend.get({ ...valuesRead("queue_messages_ready", "queue=a_jobs"), caller: { user, groups: ["system:authenticated"], extra: {} }, requestId: "r-1" });
    const allowed = await read("jane");
    expect(allowed.status, allowed.body.toString()).toBe(200);
    expect(JSON.parse(allowed.body.toString()).items[0].value).toBe("3");
    // the bridge's freshness reaches the proxy's cache (forward.ts freshnessMs)
    expect(allowed.headers).toMatchObject({ "cache-control": expect.stringMatching(/^private, max-age=\d+$/), "content-type": "application/json" });
    expect((await read("bob")).status).toBe(403);
  });
});

describe("inProcess backend cancellation", () => {
  it("a caller that stops waiting cancels the bridge's cloud call at once (kind aborted, not timeout)", async () => {
    const backend = await createBackend(
      { name: "stuck", type: "inProcess", bridgeConfig: join(dir, "stuck.yaml"), timeoutSeconds: 4, insecureSkipTLSVerify: false },
      { signingKeys: () => undefined },
    );
    try {
      const calls = stuck.requestLines.length;
      const controller = new AbortController();
      const read = backend.get({
        ...valuesRead("stuck_depth", "queue=cancelled"),
        caller: { user: "jane", groups: ["system:authenticated"], extra: {} },
        requestId: "r-cancel",
        signal: controller.signal,
      });
      await eventually(() => stuck.requestLines.length === calls + 1, 2_000, "the bridge's SQS call started");
      controller.abort();
      await expect(read).rejects.toMatchObject({ name: "BackendError", kind: "aborted" });
      await eventually(() => stuck.open === 0, 1_000, "the stuck SQS connection closed");
    } finally {
      backend.close();
    }
  });
});

/**
 * An inProcess backend over a bridge whose one provider is CloudWatch at an
 * unreachable endpoint (every read a 503), with what its cache remembers for
 * refresh-ahead, and a read as jane.
 */
async function cloudWatchBackend(env: Record<string, string> = {}) {
  const file = join(dir, "cloudwatch.yaml");
  writeFileSync(
    file,
    `apiVersion: external-metrics-bridge.io/v1alpha1\nkind: BridgeConfig\npolicy: { defaultAction: Allow }\nproviders: { cw: { type: aws-cloudwatch, region: us-east-1, endpoint: "http://127.0.0.1:9" } }\n` +
      `metrics:\n  - { name: cpu, provider: cw, query: { namespace: AWS/EC2, metricName: CPUUtilization, stat: Average, period: 300 } }\n`,
  );
  const backend = (await createBackend(
    { name: "cw", type: "inProcess", bridgeConfig: file, timeoutSeconds: 4, insecureSkipTLSVerify: false },
    { signingKeys: () => undefined, env: { AWS_ACCESS_KEY_ID: "AKIDTEST", AWS_SECRET_ACCESS_KEY: "secret", ...env } },
  )) as InProcessBackend;
  expect(backend.providers).toHaveLength(1);
  const remembered = () => (backend.providers[0] as unknown as { cache: { remembered: { keys: number } } }).cache.remembered.keys;
  const read = (requestId: string) => backend.get({ ...valuesRead("cpu"), caller: { user: "jane", groups: ["system:authenticated"], extra: {} }, requestId });
  return { backend, remembered, read };
}

describe("inProcess backend runtime", () => {
  it("tells the bridge it runs in a long-lived process: CloudWatch refresh-ahead is on even with AWS_LAMBDA_FUNCTION_NAME in the environment", async () => {
    const { backend, remembered, read } = await cloudWatchBackend({ AWS_LAMBDA_FUNCTION_NAME: "looks-like-lambda" });
    try {
      // a read (CloudWatch unreachable: a 503, never a value) is remembered for refresh-ahead only when it is on
      const res = await read("r-cw");
      expect(res.status, res.body.toString()).toBeGreaterThanOrEqual(500);
      expect(remembered()).toBe(1);
    } finally {
      backend.close();
    }
  });
});

describe("inProcess backend call path", () => {
  it("a values read goes to the bridge's typed values read with the proxy's parts, discovery to its APIResourceList, any other path a 404", async () => {
    const backend = (await createBackend(
      { name: "local", type: "inProcess", bridgeConfig: join(dir, "bridge.yaml"), timeoutSeconds: 4, insecureSkipTLSVerify: false },
      { signingKeys: () => undefined },
    )) as InProcessBackend;
    const jane = { user: "jane", groups: ["system:authenticated"], extra: {} };
    try {
      const values = await backend.get({ ...valuesRead("queue_messages_ready", "queue=a_jobs"), caller: jane, requestId: "r-direct" });
      expect(values.status, values.body.toString()).toBe(200);
      expect((JSON.parse(values.body.toString()) as { items: { value: string }[] }).items[0]!.value).toBe("3");
      const discovery = await backend.get({ pathAndQuery: V1, caller: jane, requestId: "r-discovery" });
      expect(discovery.status).toBe(200);
      expect((JSON.parse(discovery.body.toString()) as { kind: string; resources: { name: string }[] }).kind).toBe("APIResourceList");
      const other = await backend.get({ pathAndQuery: `${V1}/namespaces`, caller: jane, requestId: "r-other" });
      expect(other.status).toBe(404);
    } finally {
      backend.close();
    }
  });
});

describe("inProcess backend shutdown", () => {
  it("closes the bridge's providers when the proxy closes its backends (refresh-ahead stops, as the Node server's close)", async () => {
    const { backend, remembered, read } = await cloudWatchBackend();
    expect((await read("r-before")).status).toBeGreaterThanOrEqual(500);
    expect(remembered()).toBe(1);
    backend.close();
    expect(remembered()).toBe(0); // nothing left to refresh
    expect((await read("r-after")).status).toBeGreaterThanOrEqual(500);
    expect(remembered()).toBe(0); // and a read after the close is not taken up again
  });
});

describe("inProcess backend config", () => {
  const load = (backend: string) => loadProxyConfig(`${HEAD}backends:\n  local: ${backend}\nroutes:\n  - { metric: ".*", backend: local }\n`, "proxy.yaml");
  const issues = (backend: string) => {
    try {
      load(backend);
    } catch (err) {
      if (err instanceof ConfigError) return err.message;
      throw err;
    }
    return "";
  };

  it("takes type inProcess with bridgeConfig and no url; timeoutSeconds still applies", () => {
    const config = load("{ type: inProcess, bridgeConfig: /etc/external-metrics-bridge/bridge.yaml, timeoutSeconds: 3.5 }");
    expect(config.backends[0]).toMatchObject({ name: "local", type: "inProcess", bridgeConfig: "/etc/external-metrics-bridge/bridge.yaml", timeoutSeconds: 3.5 });
    expect(config.backends[0]!.url).toBeUndefined();
    expect(load("{ type: inProcess, bridgeConfig: b.yaml }").backends[0]!.timeoutSeconds).toBe(4);
  });

  it("refuses an inProcess backend without bridgeConfig, with a url or another network-only field, or an unknown field", () => {
    expect(issues("{ type: inProcess }")).toMatch(/backends\.local.*needs bridgeConfig/);
    expect(issues('{ type: inProcess, bridgeConfig: b.yaml, url: "http://x" }')).toMatch(/backends\.local\.url.*does not apply/);
    expect(issues("{ type: inProcess, bridgeConfig: b.yaml, insecureSkipTLSVerify: false }")).toMatch(/insecureSkipTLSVerify.*does not apply/);
    expect(issues("{ type: inProcess, bridgeConfig: b.yaml, caFile: ca.crt }")).toMatch(/caFile.*does not apply/);
    expect(issues("{ type: inProcess, bridgeConfig: b.yaml, signingKey: abc }")).toMatch(/signingKey/);
    expect(issues("{ type: inProcess, bridgeConfig: b.yaml, timeoutSeconds: 5 }")).toMatch(/timeoutSeconds/);
  });

  it("accepts the documented example (infra/examples/proxy-inprocess.yaml)", () => {
    const config = loadProxyConfig(readFileSync("infra/examples/proxy-inprocess.yaml", "utf8"), "infra/examples/proxy-inprocess.yaml");
    expect(config.backends.find((b) => b.name === "sqs")).toMatchObject({ type: "inProcess", bridgeConfig: "/etc/external-metrics-bridge/config/bridge.yaml" });
  });

  it("refuses bridgeConfig on a network backend and a network backend without url", () => {
    expect(issues('{ url: "http://x", bridgeConfig: b.yaml }')).toMatch(/bridgeConfig is only for type inProcess/);
    expect(issues("{ type: bridge }")).toMatch(/backends\.local.*needs url/);
    expect(issues("{ type: passthrough }")).toMatch(/needs url/);
  });
});
