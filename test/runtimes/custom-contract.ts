/**
 * The HTTP contract of the custom.metrics.k8s.io routes (contract C2 of
 * issue 26, shared/app.ts), written once and run against every runtime
 * (Node server, Worker in workerd, Lambda handler) by
 * `custom.{node,worker,lambda}.*.test.ts`. Each runtime supplies a `start`
 * that serves a config text with an environment (signing keys or the
 * insecure setting) and returns a `request` speaking plain
 * `Request`/`Response` plus the origin the runtime sees (the signature's
 * audience) and its log text.
 *
 * The values come from a fake Prometheus HTTP API on 127.0.0.1
 * (test/fakes/prometheus-api.ts, evaluating the provider's real PromQL)
 * through the real `prometheus` provider inside the runtime under test: a
 * Pods read answers the pods that have data, an Object read maps the
 * object's `status.queueURL` to its series, a namespace read the namespace.
 * Checked in three modes: unsigned (the local identity, the body trusted as
 * given), signed (`EMB-HMAC-SHA256-3` required for a custom read, `-2`
 * External GETs unchanged) and a config without custom rules (the group is
 * neither listed nor served).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { MAX_SIGNED_BODY_BYTES, parseSigningKeys, signRequest, type SigningKey } from "../../shared/signing.ts";
import { customReadBody } from "../../shared/values/custom-request.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import { expectStatus } from "../helpers/contract.ts";
import { fixtureKey } from "../helpers/keys.ts";

/** A runtime under test. */
export interface CustomTarget {
  /** the origin the runtime sees requests at (`http://127.0.0.1:port`, the Lambda event's domain): a signature's audience */
  origin: string;
  /** send `path` (with query) to the runtime */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** what the runtime logged so far (its JSON lines) */
  logs(): string;
  close(): Promise<void>;
}

/** Starts the runtime under test with a config text and environment (string bindings). */
export type StartCustomTarget = (configText: string, env: Record<string, string>) => Promise<CustomTarget>;

/** Signing keys of the signed mode. */
export const CUSTOM_KEYS = `custom-1:${fixtureKey("custom routes 1").toString("base64url")}`;
const KEY: SigningKey = parseSigningKeys(CUSTOM_KEYS)[0]!;

export const QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/team-a-jobs";
const G = "/apis/custom.metrics.k8s.io";
export const PODS = `${G}/v1beta2/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb`;
export const QUEUE = `${G}/v1beta2/namespaces/team-a/queues.sqs.services.k8s.aws/jobs/queue_ready`;
export const BACKLOG = `${G}/v1beta1/namespaces/team-a/metrics/backlog`;
const EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/pod_requests?labelSelector=pod%3Dweb-1";

/** The queue object the proxy would have read (its `status.queueURL` names the series). */
export const QUEUE_OBJECT = { object: { kind: "Queue", apiVersion: "sqs.services.k8s.aws/v1alpha1", name: "jobs", namespace: "team-a", status: { queueURL: QUEUE_URL } } };

/** The config: one External rule and three custom rules (pods, an object resource, namespaces), all on the fake Prometheus. */
export function customConfig(url: string, custom = true): string {
  return `
${OPEN_CONFIG_HEAD}providers:
  prom: { type: prometheus, url: ${url}, timeoutSeconds: 2 }
metrics:
  - name: pod_requests
    provider: prom
    query: { series: emb_http_requests, selectorLabels: { pod: pod } }
${
  custom
    ? `  - name: http_requests
    provider: prom
    describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }
    query: { series: emb_http_requests, selectorLabels: { pod: pod, namespace: namespace, verb: { label: verb, values: { GET: GET, PUT: PUT } } } }
  - name: queue_ready
    provider: prom
    describes:
      resource: queues.sqs.services.k8s.aws
      objectLabel: queue
      identifier: { from: status, path: status.queueURL }
      allow: ['https://sqs\\.us-east-1\\.amazonaws\\.com/123456789012/team-a-.*']
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
  - name: backlog
    provider: prom
    describes: { resource: namespaces, objectLabel: namespace }
    query: { series: emb_namespace_backlog, selectorLabels: { namespace: namespace } }
`
    : ""
}`;
}

/** The series the fake Prometheus holds, stamped a few seconds before `now`. */
export function customSeries(now: number): FakePrometheus["series"] {
  const at = now - 5_000;
  return [
    { labels: { __name__: "emb_http_requests", namespace: "team-a", pod: "web-1", verb: "GET" }, value: "5", timeMs: at },
    { labels: { __name__: "emb_http_requests", namespace: "team-a", pod: "web-2", verb: "PUT" }, value: "7.5", timeMs: at },
    { labels: { __name__: "emb_http_requests", namespace: "team-b", pod: "web-3" }, value: "100", timeMs: at },
    { labels: { __name__: "emb_queue_ready", queue: QUEUE_URL }, value: "42", timeMs: at },
    { labels: { __name__: "emb_queue_ready", queue: "https://sqs.us-east-1.amazonaws.com/999999999999/other" }, value: "9", timeMs: at },
    { labels: { __name__: "emb_namespace_backlog", namespace: "team-a" }, value: "12", timeMs: at },
  ];
}

/** A JSON POST of `body` (text or bytes) to `path`, with `headers`. */
export function post(body: string | Uint8Array, headers: Record<string, string> = {}): RequestInit {
  return { method: "POST", body: body as BodyInit, headers: { "content-type": "application/json", ...headers } };
}

/** The headers signing a request to `target` (scheme -3 when `body` is given, -2 without). */
export async function signed(target: CustomTarget, method: string, path: string, body?: string | Uint8Array): Promise<Record<string, string>> {
  const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
  return signRequest({ method, url: `${target.origin}${path}`, caller: HPA_CONTROLLER, requestId: "custom-contract", ...(bytes !== undefined ? { body: bytes } : {}) }, KEY, Date.now());
}

/** Read a 200 MetricValueList of `version` and return its items. */
export async function expectValues(res: Response, version: "v1beta2" | "v1beta1"): Promise<any[]> {
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(res.headers.get("cache-control")).toBe("no-store");
  const body = JSON.parse(text);
  expect(body).toMatchObject({ kind: "MetricValueList", apiVersion: `custom.metrics.k8s.io/${version}`, metadata: {} });
  return body.items;
}

/** Register the custom routes contract for one runtime. */
export function customMetricsContract(runtime: string, start: StartCustomTarget): void {
  describe(`custom.metrics.k8s.io routes on ${runtime}`, () => {
    let prom: FakePrometheus;
    let open: CustomTarget;
    let keyed: CustomTarget;
    let bare: CustomTarget;

    beforeAll(async () => {
      prom = await startFakePrometheus(() => Date.now());
      prom.series.push(...customSeries(Date.now()));
      [open, keyed, bare] = await Promise.all([
        start(customConfig(prom.url), { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }),
        start(customConfig(prom.url), { BRIDGE_SIGNING_KEYS: CUSTOM_KEYS }),
        start(customConfig(prom.url, false), { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }),
      ]);
    }, 120_000);

    afterAll(async () => {
      await Promise.all([open?.close(), keyed?.close(), bare?.close()]);
      await prom?.close();
    });

    describe("discovery", () => {
      it("lists both groups in /apis and serves the custom APIGroup, v1beta2 preferred", async () => {
        const apis = await (await open.request("/apis")).json();
        expect(apis.groups.map((g: any) => g.name)).toEqual(["external.metrics.k8s.io", "custom.metrics.k8s.io"]);
        const group = await (await open.request(G)).json();
        expect(group).toEqual({
          kind: "APIGroup",
          apiVersion: "v1",
          name: "custom.metrics.k8s.io",
          versions: [
            { groupVersion: "custom.metrics.k8s.io/v1beta2", version: "v1beta2" },
            { groupVersion: "custom.metrics.k8s.io/v1beta1", version: "v1beta1" },
          ],
          preferredVersion: { groupVersion: "custom.metrics.k8s.io/v1beta2", version: "v1beta2" },
        });
      });

      it("serves one {resource}/{metric} per custom rule in both versions", async () => {
        for (const version of ["v1beta2", "v1beta1"]) {
          const res = await open.request(`${G}/${version}`);
          expect(res.status).toBe(200);
          const list = await res.json();
          expect(list.groupVersion).toBe(`custom.metrics.k8s.io/${version}`);
          expect(list.resources.map((r: any) => [r.name, r.namespaced, r.kind, r.verbs])).toEqual([
            ["namespaces/backlog", false, "MetricValueList", ["get"]],
            ["pods/http_requests", true, "MetricValueList", ["get"]],
            ["queues.sqs.services.k8s.aws/queue_ready", true, "MetricValueList", ["get"]],
          ]);
        }
      });

      it("without custom rules: not listed in /apis, and every path of the group is 404 (GET and POST)", async () => {
        const apis = await (await bare.request("/apis")).json();
        expect(apis.groups.map((g: any) => g.name)).toEqual(["external.metrics.k8s.io"]);
        await expectStatus(await bare.request(G), 404, "NotFound");
        await expectStatus(await bare.request(`${G}/v1beta2`), 404, "NotFound");
        await expectStatus(await bare.request(`${G}/v1beta1`), 404, "NotFound");
        await expectStatus(await bare.request(PODS, post(customReadBody({ pods: ["web-1"] }))), 404, "NotFound");
        await expectStatus(await bare.request(PODS), 404, "NotFound");
      });
    });

    describe("reads, unsigned (local identity)", () => {
      it("a Pods read answers the pods that have data, in v1beta2 and v1beta1, no-store", async () => {
        const body = customReadBody({ pods: ["web-1", "web-2", "web-9"] });
        const items = await expectValues(await open.request(PODS, post(body)), "v1beta2");
        expect(items.map((i) => [i.describedObject, i.metric, i.value])).toEqual([
          [{ kind: "Pod", namespace: "team-a", name: "web-1", apiVersion: "/v1" }, { name: "http_requests", selector: null }, "5"],
          [{ kind: "Pod", namespace: "team-a", name: "web-2", apiVersion: "/v1" }, { name: "http_requests", selector: null }, "7500m"],
        ]);
        const v1 = await expectValues(await open.request(PODS.replace("v1beta2", "v1beta1"), post(body)), "v1beta1");
        expect(v1.map((i) => [i.describedObject.name, i.metricName, i.value])).toEqual([
          ["web-1", "http_requests", "5"],
          ["web-2", "http_requests", "7500m"],
        ]);
      });

      it("an Object read maps the object's status field to its series; a namespace read answers the namespace", async () => {
        const items = await expectValues(await open.request(QUEUE, post(customReadBody(QUEUE_OBJECT))), "v1beta2");
        expect(items.map((i) => [i.describedObject, i.value])).toEqual([[{ kind: "Queue", namespace: "team-a", name: "jobs", apiVersion: "sqs.services.k8s.aws/v1alpha1" }, "42"]]);
        const ns = await expectValues(await open.request(BACKLOG, post("{}")), "v1beta1");
        expect(ns.map((i) => [i.describedObject, i.metricName, i.value])).toEqual([[{ kind: "Namespace", name: "team-a", apiVersion: "/v1" }, "backlog", "12"]]);
      });

      it("writes one audit record per custom read (resource, name, metric, decision, code, items)", async () => {
        const before = open.logs().length;
        await expectValues(await open.request(PODS, post(customReadBody({ pods: ["web-1", "web-2"] }))), "v1beta2");
        const records = open
          .logs()
          .slice(before)
          .split("\n")
          .filter((l) => l.includes('"resource":"pods"'))
          .map((l) => JSON.parse(l.slice(l.indexOf("{"))));
        expect(records).toHaveLength(1);
        expect(records[0]).toMatchObject({ msg: "request", method: "POST", namespace: "team-a", resource: "pods", name: "*", metric: "http_requests", decision: "allow", code: 200, items: 2, provider: "prom", labelSelector: "app=web" });
        expect(typeof records[0].durationMs).toBe("number");
        expect(typeof records[0].requestId).toBe("string");
      });

      it("a body over the limit is 413, read no further", async () => {
        const big = customReadBody({ pods: Array.from({ length: 30_000 }, (_, i) => `pod-${String(i).padStart(6, "0")}`) });
        expect(big.length).toBeGreaterThan(MAX_SIGNED_BODY_BYTES);
        await expectStatus(await open.request(PODS, post(big)), 413, "RequestEntityTooLarge", new RegExp(`at most ${MAX_SIGNED_BODY_BYTES} bytes`));
      });

      it("a bad body is 400: not JSON, not UTF-8, the other shape's member, an unknown member, no pods, wrong types, another content type", async () => {
        const cases: [string, RequestInit, RegExp][] = [
          [PODS, post("{pods:"), /not JSON/],
          [PODS, post(new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x7d])), /not UTF-8/],
          [PODS, post(customReadBody(QUEUE_OBJECT)), /may not hold "object"/],
          [PODS, post('{"pods": ["web-1"], "extra": 1}'), /may not hold "extra"/],
          [PODS, post("{}"), /must hold "pods"/],
          [PODS, post('{"pods": "web-1"}'), /list of pod names/],
          [QUEUE, post('{"object": {"kind": "Queue", "name": "jobs"}}'), /object.apiVersion/],
          [QUEUE, post('{"object": {"kind": "Queue", "apiVersion": "v1", "name": "jobs", "labels": {"a": 1}}}'), /object.labels/],
          [BACKLOG, post('{"pods": []}'), /may not hold "pods"/],
          [PODS, post(customReadBody({ pods: ["web-1"] }), { "content-type": "text/plain" }), /Content-Type: application\/json/],
          [`${PODS}&metricLabelSelector=a%3Db&metricLabelSelector=c%3Dd`, post(customReadBody({ pods: ["web-1"] })), /metricLabelSelector may be given only once/],
        ];
        for (const [path, init, message] of cases) await expectStatus(await open.request(path, init), 400, "BadRequest", message);
      });

      it("a GET of a custom values path is 405 saying reads come through the proxy as a POST; an unknown path of the group is 404", async () => {
        await expectStatus(await open.request(PODS), 405, "MethodNotAllowed", /in-cluster proxy.*POST/);
        await expectStatus(await open.request(QUEUE), 405, "MethodNotAllowed", /in-cluster proxy.*POST/);
        await expectStatus(await open.request(`${G}/v1beta3`), 404, "NotFound");
        await expectStatus(await open.request(`${G}/v1beta2/namespaces/team-a/pods`, post("{}")), 404, "NotFound");
        await expectStatus(await open.request(PODS, { method: "PUT", body: "{}" }), 405, "MethodNotAllowed", /POST/);
      });
    });

    describe("reads, signed", () => {
      it("a custom read signed with -3 over its body is served", async () => {
        const body = customReadBody({ pods: ["web-1"] });
        const items = await expectValues(await keyed.request(PODS, post(body, await signed(keyed, "POST", PODS, body))), "v1beta2");
        expect(items.map((i) => [i.describedObject.name, i.value])).toEqual([["web-1", "5"]]);
        const object = customReadBody(QUEUE_OBJECT);
        const queue = await expectValues(await keyed.request(QUEUE, post(object, await signed(keyed, "POST", QUEUE, object))), "v1beta2");
        expect(queue.map((i) => i.value)).toEqual(["42"]);
      });

      it("a custom read unsigned, signed without its body (-2), or with another body is 401", async () => {
        const body = customReadBody({ pods: ["web-1"] });
        await expectStatus(await keyed.request(PODS, post(body)), 401, "Unauthorized", /not signed/);
        await expectStatus(await keyed.request(PODS, post(body, await signed(keyed, "POST", PODS))), 401, "Unauthorized", /EMB-HMAC-SHA256-3/);
        const other = customReadBody({ pods: ["web-1", "web-2"] });
        await expectStatus(await keyed.request(PODS, post(other, await signed(keyed, "POST", PODS, body))), 401, "Unauthorized", /or body changed/);
      });

      it("a too-large body is 413 before any signature check", async () => {
        const big = new Uint8Array(MAX_SIGNED_BODY_BYTES + 1).fill(0x20);
        await expectStatus(await keyed.request(PODS, post(big)), 413, "RequestEntityTooLarge");
      });

      it("External GETs and discovery signed with -2 keep working", async () => {
        const res = await keyed.request(EXTERNAL, { headers: await signed(keyed, "GET", EXTERNAL) });
        const text = await res.text();
        expect(res.status, text).toBe(200);
        expect(JSON.parse(text).items.map((i: any) => i.value)).toEqual(["5"]);
        const list = await keyed.request(`${G}/v1beta2`, { headers: await signed(keyed, "GET", `${G}/v1beta2`) });
        expect(list.status).toBe(200);
        await expectStatus(await keyed.request(`${G}/v1beta2`), 401, "Unauthorized");
      });
    });
  });
}
