/**
 * A hostile tenant against the request identity (issue 23, item 1): reads
 * straight at the proxy with a ServiceAccount token, as any pod in the
 * cluster can make them, spelling team-b's namespace and metric so that the
 * layers would disagree about what is read.
 *
 * The real proxy over TLS (`startProxy`), the fake Kubernetes API answering
 * TokenReview and SubjectAccessReview (fake RBAC: team-b's reader may get
 * and list `queue_messages_ready` in team-b, nothing else) and serving
 * ExternalMetricPolicy objects, the cluster policy layer on
 * (`whenNoneApply: Defer`), and the real Node bridge behind it (signed
 * forwarding, its SQS provider on fauxqs) with a recorder in front of it
 * that keeps every request target the proxy forwards. team-b's policy
 * allows only `queue=ci_jobs`.
 *
 * Every spelling trick is refused (400; 404 for a trailing segment, as
 * apiserver answers a path no route serves) — never a 200, never a value —
 * and the proxy's request log names the target as received next to the
 * decoded path. The plain read of `queue=payments` stays 403, `queue=ci_jobs`
 * stays 200, and what the bridge receives is the canonical path rebuilt
 * from the parts. The same through a proxy whose bridge runs in its own
 * process (`type: inProcess`: the bridge's values route called directly).
 * The bridge refuses the same spellings itself.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeServer, type NodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import type { LogRecord } from "../../shared/app.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { parseSigningKeys, signRequest } from "../../shared/signing.ts";
import { rbac, startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { closeServer } from "../helpers/http.ts";
import { createPki, eventually, KEYS, proxyConfigText, startHarness, V1, type Harness, type Reply } from "./proxy.harness.ts";

const SA = "system:serviceaccount:team-b:reader";
const TOKEN = "team-b-reader-token";
const PAYMENTS = "?labelSelector=queue%3Dpayments";
const CI_JOBS = "?labelSelector=queue%3Dci_jobs";

/**
 * The tricks: [what, request target, expected code]. Each was answered 200
 * with a value, or was resolved and served, or (marked) refused without the
 * log naming what was sent, by the proxy before the one parser.
 */
const TRICKS: [string, string, 400 | 404][] = [
  ["an encoded hyphen in the namespace (%2D)", `${V1}/namespaces/team%2Db/queue_messages_ready${PAYMENTS}`, 400],
  ["an encoded hyphen, lowercase hex (%2d)", `${V1}/namespaces/team%2db/queue_messages_ready${PAYMENTS}`, 400],
  ["an encoded letter in the namespace (%74)", `${V1}/namespaces/%74eam-b/queue_messages_ready${PAYMENTS}`, 400],
  ["two encoded letters (%74%65)", `${V1}/namespaces/%74%65am-b/queue_messages_ready${PAYMENTS}`, 400],
  ["an encoded slash joining namespace and metric (%2F)", `${V1}/namespaces/team-b%2Fqueue_messages_ready/secret_depth`, 400],
  ["an encoded slash, lowercase hex (%2f)", `${V1}/namespaces/team-b%2fqueue_messages_ready/secret_depth`, 400],
  ["an encoded dot-dot (%2E%2E)", `${V1}/namespaces/team-b/secret_depth/%2E%2E/queue_messages_ready${CI_JOBS}`, 400],
  ["an encoded dot-dot, lowercase hex (%2e%2e)", `${V1}/namespaces/team-b/secret_depth/%2e%2e/queue_messages_ready${CI_JOBS}`, 400],
  ["a dot-dot segment", `${V1}/namespaces/team-a/../team-b/queue_messages_ready${CI_JOBS}`, 400],
  ["a dot segment", `${V1}/namespaces/team-b/./queue_messages_ready${CI_JOBS}`, 400],
  ["an encoded dot segment (%2E)", `${V1}/namespaces/team-b/%2E/queue_messages_ready${CI_JOBS}`, 400],
  ["a double slash", `${V1}/namespaces//team-b/queue_messages_ready${CI_JOBS}`, 400],
  ["an encoded letter in the metric (%5F)", `${V1}/namespaces/team-b/queue%5Fmessages_ready${PAYMENTS}`, 400],
  ["a trailing segment", `${V1}/namespaces/team-b/queue_messages_ready/extra${CI_JOBS}`, 404],
];

let sqs: Emulator;
let bridge: NodeServer;
let recorder: { url: string; targets: string[]; close(): Promise<void> };
const bridgeLogs: LogRecord[] = [];
let fake: FakeKubeApiServer;
let h: Harness;
/** the same proxy setup with the bridge in its own process */
let inProcess: Harness;
let dir: string;

/** An HTTP server that records each request target and passes the request on to `to` unchanged (same target, headers, Host). */
async function startRecorder(to: string): Promise<typeof recorder> {
  const target = new URL(to);
  const targets: string[] = [];
  const server = http.createServer((req, res) => {
    targets.push(req.url ?? "");
    const out = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent: false }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, targets, close: () => closeServer(server) };
}

/** GET a request target exactly as written (no URL parsing: dot segments and escapes reach the server as sent). */
function rawGet(base: string, target: string, options: { ca?: string; headers?: Record<string, string> } = {}): Promise<Reply> {
  const u = new URL(base);
  const transport = u.protocol === "https:" ? https : http;
  return new Promise((resolve, reject) => {
    const req = transport.request(
      { hostname: u.hostname, port: u.port, path: target, method: "GET", agent: false, headers: options.headers ?? {}, ...(options.ca ? { ca: options.ca } : {}) },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** A read at the proxy with team-b's ServiceAccount token. */
const asTeamB = (target: string) => rawGet(h.proxy.url, target, { ca: h.serving.caPem!, headers: { Authorization: `Bearer ${TOKEN}` } });

beforeAll(async () => {
  sqs = await startEmulator();
  await sqs.add("ci_jobs", 3);
  await sqs.add("payments", 9);
  const config = `${sqsConfigHead(sqs.endpoint, { timeoutSeconds: 2 })}metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
  - { name: secret_depth, provider: sqs, query: { queueLabel: queue } }
`;
  bridge = await startNodeServer({ config: loadConfig(config, "bridge.yaml").config, port: 0, host: "127.0.0.1", env: { BRIDGE_SIGNING_KEYS: KEYS }, log: (r) => void bridgeLogs.push(r) });
  recorder = await startRecorder(bridge.url);

  fake = await startFakeKubeApiServer();
  fake.tokens.set(TOKEN, { username: SA, groups: ["system:serviceaccounts", "system:serviceaccounts:team-b", "system:authenticated"] });
  fake.authorize = rbac([{ users: [SA], namespace: "team-b", verbs: ["get", "list"], apiGroups: ["external.metrics.k8s.io"], resources: ["queue_messages_ready"] }]);
  fake.applyPolicy({
    kind: "ExternalMetricPolicy",
    metadata: { name: "ci-only", namespace: "team-b" },
    spec: { rules: [{ metric: "queue_.*", selector: { matchLabels: { queue: "ci_jobs" } } }], defaultAction: "Deny" },
  });
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  h = await startHarness({
    pki: await createPki(),
    fake,
    proxyConfig: proxyConfigText({ bridge: recorder.url }, [[".*", "bridge"]], "clusterPolicies: { enabled: true, whenNoneApply: Defer }"),
    extra: { clusterPolicies: { kc, debounceMs: 20, statusResyncMs: 100, backoffMs: 50 } },
  });
  dir = mkdtempSync(join(tmpdir(), "emb-hostile-encoding-"));
  writeFileSync(join(dir, "bridge.yaml"), config);
  inProcess = await startHarness({
    pki: await createPki(),
    fake,
    proxyConfig: `apiVersion: external-metrics-bridge.io/v1alpha1\nkind: ProxyConfig\nbackends:\n  local: { type: inProcess, bridgeConfig: "${join(dir, "bridge.yaml")}", timeoutSeconds: 4 }\nroutes:\n  - { metric: ".*", backend: local }\nclusterPolicies: { enabled: true, whenNoneApply: Defer }\n`,
    extra: { clusterPolicies: { kc, debounceMs: 20, statusResyncMs: 100, backoffMs: 50 } },
  });
  for (const proxy of [h, inProcess]) {
    await eventually(() => proxy.proxy.clusterPolicies?.current().policies.some((p) => p.id === "team-b/ci-only") === true, 5000, "team-b's policy in force");
  }
}, 60_000);

afterAll(async () => {
  await inProcess?.close();
  await h?.close();
  await fake?.close();
  await recorder?.close();
  await bridge?.close();
  await sqs?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a hostile tenant's spellings, straight at the proxy with a ServiceAccount token", () => {
  it("the plain read of a series team-b's policy does not allow is 403, and is not forwarded", async () => {
    const before = recorder.targets.length;
    const r = await asTeamB(`${V1}/namespaces/team-b/queue_messages_ready${PAYMENTS}`);
    expect(r.status).toBe(403);
    expect(r.json().message).toContain("ExternalMetricPolicy team-b/ci-only");
    expect(recorder.targets.length).toBe(before);
  });

  it("the allowed read is 200 with the value, and the bridge receives the canonical path rebuilt from the parts", async () => {
    const r = await asTeamB(`${V1}/namespaces/team-b/queue_messages_ready${CI_JOBS}`);
    expect(r.status, r.text).toBe(200);
    expect(r.json().items).toEqual([expect.objectContaining({ metricName: "queue_messages_ready", metricLabels: { queue: "ci_jobs" }, value: "3" })]);
    expect(recorder.targets.at(-1)).toBe(`${V1}/namespaces/team-b/queue_messages_ready?labelSelector=queue%3Dci_jobs`);
    const record = h.logs.filter((l) => l.msg === "request").at(-1)!;
    expect(record).toMatchObject({ code: 200, namespace: "team-b", metric: "queue_messages_ready", path: `${V1}/namespaces/team-b/queue_messages_ready` });
  });

  it("a spelling that means the same is forwarded in the canonical spelling, not as sent", async () => {
    // `=` left raw in the query: the bridge receives client-go's `%3D`
    const r = await asTeamB(`${V1}/namespaces/team-b/queue_messages_ready?labelSelector=queue=ci_jobs`);
    expect(r.status, r.text).toBe(200);
    expect(recorder.targets.at(-1)).toBe(`${V1}/namespaces/team-b/queue_messages_ready?labelSelector=queue%3Dci_jobs`);
  });

  for (const [what, target, code] of TRICKS) {
    it(`${what}: ${code}, never a value, nothing forwarded, and the log shows the target as sent`, async () => {
      const forwarded = recorder.targets.length;
      const r = await asTeamB(target);
      expect(r.status, r.text).toBe(code);
      expect(r.json()).toMatchObject({ kind: "Status", status: "Failure", code });
      expect(r.text).not.toContain("ExternalMetricValueList");
      expect(recorder.targets.length, "not forwarded").toBe(forwarded);
      const record = h.logs.filter((l) => l.msg === "request").at(-1)!;
      expect(record).toMatchObject({ code, target });
    });
  }

  it("refuses a non-canonical spelling before authentication: no TokenReview, no SubjectAccessReview", async () => {
    const tokenReviews = fake.reviews.tokenReviews.length;
    const reviews = fake.reviews.subjectAccessReviews.length;
    expect((await asTeamB(`${V1}/namespaces/team%2Db/queue_messages_ready${PAYMENTS}`)).status).toBe(400);
    expect(fake.reviews.tokenReviews.length).toBe(tokenReviews);
    expect(fake.reviews.subjectAccessReviews.length).toBe(reviews);
  });
});

describe("the same through a proxy whose bridge runs in its process (inProcess backend)", () => {
  const read = (target: string) => rawGet(inProcess.proxy.url, target, { ca: inProcess.serving.caPem!, headers: { Authorization: `Bearer ${TOKEN}` } });

  it("the plain read team-b's policy does not allow is 403; the allowed one is 200 with the value", async () => {
    expect((await read(`${V1}/namespaces/team-b/queue_messages_ready${PAYMENTS}`)).status).toBe(403);
    const r = await read(`${V1}/namespaces/team-b/queue_messages_ready${CI_JOBS}`);
    expect(r.status, r.text).toBe(200);
    expect(r.json().items[0]).toMatchObject({ metricLabels: { queue: "ci_jobs" }, value: "3" });
  });

  for (const [what, target, code] of TRICKS) {
    it(`${what}: ${code}, never a value`, async () => {
      const r = await read(target);
      expect(r.status, r.text).toBe(code);
      expect(r.json()).toMatchObject({ kind: "Status", status: "Failure", code });
    });
  }
});

describe("the bridge refuses the same spellings itself", () => {
  const keys = parseSigningKeys(KEYS);
  /** A signed read straight at the Node bridge (what a proxy would send), the target as written. */
  const atBridge = async (target: string) => {
    const headers = await signRequest({ method: "GET", url: bridge.url + target, caller: { user: SA, groups: ["system:authenticated"], extra: {} }, requestId: "r-direct" }, keys[0]!, Date.now());
    return rawGet(bridge.url, target, { headers });
  };

  it("serves the canonical read", async () => {
    const r = await atBridge(`${V1}/namespaces/team-b/queue_messages_ready${CI_JOBS}`);
    expect(r.status, r.text).toBe(200);
    expect(r.json().items[0].value).toBe("3");
  });

  for (const [what, target, code] of TRICKS) {
    it(`${what}: ${code}, never a value`, async () => {
      const r = await atBridge(target);
      expect(r.status, r.text).toBe(code);
      expect(r.json()).toMatchObject({ kind: "Status", status: "Failure", code });
      // the bridge's log line names the target as sent, not only the runtime's decoded path
      const record = bridgeLogs.filter((l) => l["msg"] === "request").at(-1)!;
      expect(record["target"]).toBe(target);
    });
  }
});
