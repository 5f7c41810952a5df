/**
 * The proxy in front of the bridge on every runtime, with request signing on:
 * the plain Node server (`functions/node.ts`), the Cloudflare Worker built by
 * wrangler and run in workerd (`test/helpers/worker.ts`), and the Lambda
 * handler (`functions/lambda.ts`) behind a small local HTTP adapter that turns
 * each request into a Function URL event (`test/helpers/lambda.ts`) — a
 * Function URL is plain HTTPS to the caller, which is all the proxy sees.
 *
 * Each function reads a fauxqs SQS emulator through the real AWS SDK and
 * evaluates an ExternalMetricPolicy against the caller identity it took
 * from the proxy's signature: the HPA's ServiceAccount may read queue `jobs`,
 * anyone else is denied by the function.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startNodeServer, type NodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { parseSigningKeys, signRequest } from "../../shared/signing.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";
import { startWorker, type RunningWorker } from "../helpers/worker.ts";
import { createPki, KEYS, startHarness, V1, type Harness, type Pki } from "./proxy.harness.ts";
import { closeServer } from "../helpers/http.ts";
import { fixtureKey } from "../helpers/keys.ts";

const NS = `${V1}/namespaces/default`;
const HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
const [K1, K2] = KEYS.split(",") as [string, string];

function bridgeConfig(endpoint: string): string {
  const rule = (name: string) => `  - { name: ${name}, provider: sqs, query: { queueLabel: queue } }`;
  return `${sqsConfigHead(endpoint, { timeoutSeconds: 2, defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }", policy: null })}
metrics:
${["node_queue", "worker_queue", "lambda_queue"].map(rule).join("\n")}
policy:
  defaultAction: Deny
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: hpa-reads-jobs, namespace: default }
spec:
  subjects: { serviceAccounts: [kube-system/horizontal-pod-autoscaler] }
  rules:
    - metric: ".*"
      selector: { matchLabels: { queue: jobs } }
  defaultAction: Deny
`;
}

/**
 * The Lambda handler behind an HTTP listener: each request becomes a Function
 * URL event. The handler sees the fixture's Function URL domain, not this
 * listener's origin, so `makeHandler` gets the origin the proxy addresses
 * (for `BRIDGE_AUDIENCE`, as for a function behind a front of its own).
 */
async function startLambdaAdapter(makeHandler: (origin: string) => HttpHandler) {
  let handler: HttpHandler | undefined;
  const server = http.createServer(async (req, res) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "connection") headers.set(k, v);
    const response = await invoke(handler!, "Function URL", req.url ?? "/", { method: req.method ?? "GET", headers });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  handler = makeHandler(url);
  return { url, close: () => closeServer(server) };
}

let sqs: Emulator;
let pki: Pki;
let node: NodeServer;
let worker: RunningWorker;
let lambda: Awaited<ReturnType<typeof startLambdaAdapter>>;
let h: Harness;

function proxyConfig(): string {
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  node: { url: "${node.url}" }
  worker: { url: "${worker.url}", timeoutSeconds: 4 }
  lambda: { url: "${lambda.url}" }
routes:
  - { metric: "node_.*", backend: node }
  - { metric: "worker_.*", backend: worker }
  - { metric: "lambda_.*", backend: lambda }
cache: { ttlSeconds: 0 }
discovery: { ttlSeconds: 0 }
`;
}

const as = (user: string) => ({ cert: pki.frontProxy, headers: { "X-Remote-User": user, "X-Remote-Group": "system:serviceaccounts" } });
const runtimes = ["node", "worker", "lambda"] as const;
const direct = (runtime: (typeof runtimes)[number]) => ({ node: node.url, worker: worker.url, lambda: lambda.url })[runtime];

beforeAll(async () => {
  [sqs, pki] = await Promise.all([startEmulator(), createPki()]);
  await sqs.createQueue("jobs");
  await sqs.add("jobs", 7);
  await sqs.createQueue("payroll");
  await sqs.add("payroll", 1);
  const text = bridgeConfig(sqs.endpoint);
  const env = { BRIDGE_SIGNING_KEYS: KEYS };
  [node, worker, lambda] = await Promise.all([
    startNodeServer({ config: loadConfig(text, "bridge.yaml").config, port: 0, env, log: () => {} }),
    startWorker(text, env),
    startLambdaAdapter((origin) => createLambdaHandler({ BRIDGE_CONFIG: text, ...env, BRIDGE_AUDIENCE: origin }, { log: () => {} }) as unknown as HttpHandler),
  ]);
  h = await startHarness({ pki, proxyConfig: proxyConfig() });
  h.fake.authorize = () => ({ allowed: true }); // RBAC allows; the functions' policy decides
}, 240_000);

afterAll(async () => {
  await h?.close();
  await Promise.all([node?.close(), worker?.close(), lambda?.close(), sqs?.stop()]);
});

describe.each(runtimes)("the proxy in front of the %s runtime", (runtime) => {
  const path = `${NS}/${runtime}_queue?labelSelector=queue%3Djobs`;

  it("serves the value read by the function, which authorized the signed caller with its policy", async () => {
    const res = await h.get(path, as(HPA_USER));
    expect(res.status, res.text).toBe(200);
    expect(res.json().items).toMatchObject([{ metricName: `${runtime}_queue`, metricLabels: { queue: "jobs" }, value: "7" }]);
  });

  it("passes the function's policy denial through for another caller (the identity came from the signature)", async () => {
    const res = await h.get(path, as("jane"));
    expect(res.status).toBe(403);
    expect(res.json()).toMatchObject({ kind: "Status", reason: "Forbidden" });
    expect(res.json().message).toMatch(/user "jane"/);
    const other = await h.get(`${NS}/${runtime}_queue?labelSelector=queue%3Dpayroll`, as(HPA_USER));
    expect(other.status).toBe(403);
  });

  it("answers 401 to a request that bypasses the proxy (unsigned), or whose signed selector was changed", async () => {
    const unsigned = await fetch(`${direct(runtime)}${path}`, { headers: { "X-Bridge-User": encodeURIComponent(HPA_USER) } });
    expect(unsigned.status).toBe(401);
    expect(await unsigned.json()).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });

    const url = `${direct(runtime)}${path}`;
    const headers = await signRequest({ method: "GET", url, caller: { user: HPA_USER, groups: [], extra: {} } }, parseSigningKeys(KEYS)[0]!, Date.now());
    expect((await fetch(url, { headers })).status).toBe(200);
    const tampered = await fetch(url.replace("queue%3Djobs", "queue%3Dpayroll"), { headers });
    expect(tampered.status).toBe(401);
    expect((await tampered.json()).message).toMatch(/does not match/);
  });
});

describe("key rotation across runtimes", () => {
  it("works while the functions accept both keys and the proxy signs with the new one", async () => {
    const rotated = await startHarness({ pki, fake: h.fake, keys: `${K2},${K1}`, proxyConfig: proxyConfig() });
    try {
      for (const runtime of runtimes) {
        const res = await rotated.get(`${NS}/${runtime}_queue?labelSelector=queue%3Djobs`, as(HPA_USER));
        expect(res.status, `${runtime}: ${res.text}`).toBe(200);
      }
    } finally {
      await rotated.close();
    }
  });

  it("fails with 500 from the proxy when it signs with a key the functions do not have", async () => {
    const stale = await startHarness({ pki, fake: h.fake, keys: `k0:${fixtureKey(1).toString("base64")}`, proxyConfig: proxyConfig() });
    try {
      for (const runtime of runtimes) {
        const res = await stale.get(`${NS}/${runtime}_queue?labelSelector=queue%3Djobs`, as(HPA_USER));
        expect(res.status).toBe(500);
        expect(res.json().message).toMatch(/refused the proxy's request signature/);
      }
    } finally {
      await stale.close();
    }
  });
});

describe("merged discovery across runtimes", () => {
  it("lists each runtime's routed metric", async () => {
    const res = await h.get(V1, as(HPA_USER));
    expect(res.status, res.text).toBe(200);
    expect(res.json().resources.map((r: { name: string }) => r.name)).toEqual(["lambda_queue", "node_queue", "worker_queue"]);
  });
});
