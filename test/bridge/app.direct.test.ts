/**
 * The bridge's typed values read (shared/values/read.ts, `Bridge.readValues`,
 * what the proxy's in-process backend calls with the parts it parsed): as
 * HTTP (shared/values/answer.ts `valuesHttpAnswer`) the same answer —
 * status, headers, body — and the same audit record as `GET` through the
 * Hono app from the same caller, for a served value, a policy denial, an
 * unknown metric and a bad selector; the caller it is given decides (the
 * `authenticate` hook is never called); its signal cancels a read that is
 * still loading. Through the real SQS provider on a fauxqs emulator.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LogRecord } from "../../shared/app.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import type { Caller } from "../../shared/identity.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { valuesHttpAnswer } from "../../shared/values/answer.ts";
import { EXTERNAL_METRICS_API } from "../../shared/values/request.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const path = (metric: string, selector: string) => `${V1}/namespaces/default/${metric}?labelSelector=${encodeURIComponent(selector)}`;
const parts = (metric: string, labelSelector: string) => ({ api: EXTERNAL_METRICS_API, namespace: "default", metric, labelSelector });
const HPA: Caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts", "system:authenticated"], extra: {} };
const OTHER: Caller = { user: "mallory", groups: ["system:authenticated"], extra: {} };

let sqs: Emulator;
let bridge: Bridge;
const records: LogRecord[] = [];
let authenticateCalls = 0;
/** The caller the Hono path's authenticate hook returns (the proxy would have verified it). */
let httpCaller: Caller = HPA;

beforeAll(async () => {
  sqs = await startEmulator();
  for (const [name, count] of [["a", 3], ["b", 5], ["c", 1], ["d", 7]] as const) {
    await sqs.createQueue(name);
    await sqs.add(name, count);
  }
  const text = `${sqsConfigHead(sqs.endpoint, { timeoutSeconds: 2, defaults: "{ maxAgeSeconds: 120, cacheTTLSeconds: 60 }", policy: "{ defaultAction: Deny }" })}metrics:
  - { name: depth, provider: sqs, query: { queueLabel: queue } }
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: hpa-reads-a-and-b, namespace: default }
spec:
  subjects: { users: ["${HPA.user}"] }
  rules:
    - metric: depth
      selector: { matchExpressions: [{ key: queue, operator: In, values: [a, b, d] }] }
  defaultAction: Deny
`;
  bridge = buildBridge(text, "direct.yaml", { env: {}, now: Date.now }, {
    log: (record) => void records.push(record),
    authenticate: () => {
      authenticateCalls++;
      return httpCaller;
    },
  });
}, 60_000);

afterAll(async () => {
  for (const provider of bridge?.providers.values() ?? []) provider.close?.();
  await sqs?.stop();
});

/** Status, headers and body of an answer. */
async function answer(res: Response): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, key) => (headers[key] = value));
  return { status: res.status, headers, body: await res.text() };
}

/** The same read through the Hono app and through readValues, with one request id each way. */
async function both(metric: string, selector: string, caller: Caller) {
  httpCaller = caller;
  const before = authenticateCalls;
  const http = await answer(await bridge.app.fetch(new Request(`http://bridge${path(metric, selector)}`, { headers: { "x-request-id": "req-http" } })));
  const httpRecord = records.at(-1)!;
  expect(authenticateCalls).toBe(before + 1);
  const outcome = await bridge.readValues({ ...parts(metric, selector), caller, requestId: "req-direct", signal: new AbortController().signal });
  const { status, headers, body } = valuesHttpAnswer(outcome, Date.now());
  const direct = { status, body, headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v])) };
  const directRecord = records.at(-1)!;
  expect(authenticateCalls, "the direct entry never calls the authenticate hook").toBe(before + 1);
  return { http, direct, httpRecord, directRecord };
}

/** An audit record without what differs by nature between two reads (request id, duration; the first read loads, the second hits the cache). */
const comparable = (r: LogRecord) => {
  const { requestId: _id, durationMs: _ms, cache: _cache, ageSeconds: _age, ...rest } = r as Record<string, unknown>;
  return rest;
};

describe("readValues answers as GET through the app does", () => {
  const cases: [string, string, string, Caller, number][] = [
    ["a served value (cache load, then a hit)", "depth", "queue in (a, b)", HPA, 200],
    ["a policy denial", "depth", "queue=c", HPA, 403],
    ["another caller, denied by default", "depth", "queue=a", OTHER, 403],
    ["an unknown metric", "nope", "queue=a", HPA, 404],
    ["a selector that does not parse", "depth", "queue in (a", HPA, 400],
  ];
  for (const [name, metric, selector, caller, code] of cases) {
    it(name, async () => {
      const { http, direct, httpRecord, directRecord } = await both(metric, selector, caller);
      expect(direct.status).toBe(code);
      expect(http.status).toBe(code);
      expect(direct.body).toBe(http.body);
      expect(http.headers["x-request-id"]).toBe("req-http");
      expect(direct.headers).toEqual({ ...http.headers, "x-request-id": undefined });
      expect(directRecord["requestId"]).toBe("req-direct");
      expect(comparable(directRecord)).toEqual(comparable(httpRecord));
      if (code === 200) {
        const items = (JSON.parse(direct.body) as { items: { value: string }[] }).items.map((i) => i.value).sort();
        expect(items).toEqual(["3", "5"]);
        expect(directRecord["user"]).toBe(HPA.user);
        expect(directRecord["cache"]).toBe("hit");
      }
    });
  }

  it("its signal cancels a read still loading: no value, a Status", async () => {
    const controller = new AbortController();
    controller.abort(new Error("nobody waits"));
    const outcome = await bridge.readValues({ ...parts("depth", "queue=d"), caller: HPA, requestId: "gone", signal: controller.signal });
    expect(outcome).toBeInstanceOf(StatusError);
    expect((outcome as StatusError).code).toBe(503);
    expect((outcome as StatusError).message).toMatch(/went away/);
  });
});
