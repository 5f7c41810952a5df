/**
 * The real custom.metrics.k8s.io Go client (k8s.io/metrics v0.37.1, the
 * HPA controller's, with client-go discovery: test/custom-metrics-oracle/)
 * reading from SERVED bridges — the Node server, the Worker in workerd and
 * the Lambda handler, each signed with `BRIDGE_SIGNING_KEYS` — in both
 * versions: v1beta2 as the bridge's APIGroup prefers it, and v1beta1 when
 * the group is offered with v1beta1 only (what the client does with an
 * older adapter).
 *
 * The Go client sends `GET`; the bridge serves custom reads as a signed
 * `POST` carrying the objects (contract C2). Between them runs a small
 * front on 127.0.0.1 that does the in-cluster proxy's part and nothing
 * else: it answers `/api`, passes discovery GETs on signed (`-2`), and turns
 * a GET of a custom values path (read with the one path parser,
 * `parseCustomTarget`) into the POST of the canonical path
 * (`customMetricsPath`) with the same query and the JSON body
 * (`customReadBody`) — the pods of a fixed pod list matching
 * `labelSelector` (`matchesLabels`), the object of a fixed object list —
 * signed with `-3`; the bridge's answer (status, body) goes back as is.
 * What the Go client decodes is what the bridge wrote: the values come from
 * a fake Prometheus API through the real `prometheus` provider in the
 * runtime.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { customMetricsPath, canonicalQuery } from "../../shared/k8s/request-path.ts";
import { matchesLabels, parseSelector } from "../../shared/k8s/selector.ts";
import type { ReadObjects } from "../../shared/values/custom-read.ts";
import { customReadBody, parseCustomTarget } from "../../shared/values/custom-request.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { closeServer } from "../helpers/http.ts";
import { lambdaContext, lambdaOrigin, toEvent, toResponse, type HttpHandler } from "../helpers/lambda.ts";
import { startWorker } from "../helpers/worker.ts";
import { CUSTOM_KEYS, customConfig, customSeries, QUEUE_OBJECT, signed, type CustomTarget } from "../runtimes/custom-contract.ts";
import { customMetricsOracleBinary, ORACLE_BUILD_TIMEOUT_MS, runCustomMetricsOracle, type Call } from "./custom-metrics-oracle.ts";

/** The pods of namespace team-a the front resolves a `labelSelector` over (web-9 has no series: no item). */
const PODS: { name: string; labels: Record<string, string> }[] = [
  { name: "web-1", labels: { app: "web" } },
  { name: "web-2", labels: { app: "web" } },
  { name: "web-9", labels: { app: "web" } },
  { name: "db-1", labels: { app: "db" } },
];

/** The objects the front reads for an Object read, by `<resource>/<namespace>/<name>`. */
const OBJECTS = new Map<string, ReadObjects>([["queues.sqs.services.k8s.aws/team-a/jobs", QUEUE_OBJECT]]);

interface Front {
  host: string;
  /** every GET target the Go client sent */
  seen: string[];
  /** every POST the front sent the bridge: path and body */
  posted: { path: string; body: string }[];
  /** the bridge's answer to each POST: status and, for a 200, its apiVersion */
  answered: { status: number; apiVersion?: string }[];
  server: Server;
}

/** Start the front of `target` (see the module doc); `v1beta1Only`: offer the custom group with v1beta1 only. */
async function startFront(target: CustomTarget, v1beta1Only: boolean): Promise<Front> {
  const front: Front = { host: "", seen: [], posted: [], answered: [], server: undefined as never };
  const relay = async (res: import("node:http").ServerResponse, answer: Response, rewrite?: (body: any) => any) => {
    let text = await answer.text();
    if (rewrite !== undefined && answer.status === 200) text = JSON.stringify(rewrite(JSON.parse(text)));
    res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
    res.end(text);
  };
  front.server = createServer((req, res) => {
    const url = req.url ?? "/";
    front.seen.push(url);
    void (async () => {
      const path = url.split("?")[0]!;
      if (path === "/api") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] }));
        return;
      }
      if (path === "/apis" || /^\/apis\/custom\.metrics\.k8s\.io(\/v1beta[12])?$/.test(path)) {
        const answer = await target.request(url, { headers: await signed(target, "GET", url) });
        const onlyV1beta1 = (group: any) =>
          group.name === "custom.metrics.k8s.io" ? { ...group, versions: group.versions.filter((v: any) => v.version === "v1beta1"), preferredVersion: group.versions.find((v: any) => v.version === "v1beta1") } : group;
        return relay(res, answer, v1beta1Only && path === "/apis" ? (list) => ({ ...list, groups: list.groups.map(onlyV1beta1) }) : undefined);
      }
      // a custom read: the objects resolved, then the signed POST of the canonical path with the query as sent
      const custom = parseCustomTarget(url, "GET");
      const { read } = custom;
      let objects: ReadObjects | undefined;
      if (read.shape === "selected") {
        const selector = parseSelector(custom.labelSelector);
        objects = { pods: PODS.filter((p) => read.namespace === "team-a" && matchesLabels(selector, p.labels)).map((p) => p.name) };
      } else if (read.shape === "object") {
        objects = OBJECTS.get(`${read.resource}/${read.namespace}/${read.name}`);
      }
      const query = new URLSearchParams(url.includes("?") ? url.slice(url.indexOf("?") + 1) : "");
      query.delete("timeout");
      const forwarded = `${customMetricsPath(read)}${canonicalQuery(query)}`;
      const body = customReadBody(objects);
      front.posted.push({ path: forwarded, body });
      const answer = await target.request(forwarded, { method: "POST", body, headers: { "content-type": "application/json", ...(await signed(target, "POST", forwarded, body)) } });
      const text = await answer.clone().text();
      front.answered.push({ status: answer.status, ...(answer.status === 200 ? { apiVersion: JSON.parse(text).apiVersion } : {}) });
      return relay(res, answer);
    })().catch((err: unknown) => {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => front.server.listen(0, "127.0.0.1", resolve));
  front.host = `http://127.0.0.1:${(front.server.address() as AddressInfo).port}`;
  return front;
}

/** The calls: the HPA's Pods read, an Object read, a namespace read, one with a metricLabelSelector, and one the bridge refuses. */
const CALLS: Call[] = [
  { namespace: "team-a", group: "", kind: "Pod", selector: "app=web", metric: "http_requests", metricSelector: "" },
  { namespace: "team-a", group: "sqs.services.k8s.aws", kind: "Queue", name: "jobs", metric: "queue_ready", metricSelector: "" },
  { namespace: "", group: "", kind: "Namespace", name: "team-a", metric: "backlog", metricSelector: "" },
  { namespace: "team-a", group: "", kind: "Pod", selector: "app=web", metric: "http_requests", metricSelector: "verb in (GET)" },
  { namespace: "team-a", group: "", kind: "Pod", selector: "app=web", metric: "no_such_metric", metricSelector: "" },
];

let binary = "";
let prom: FakePrometheus;
/** when the fake's series were stamped (customSeries: 5 s before it) */
let stampedAt = 0;
const targets: { name: string; target: CustomTarget }[] = [];
const fronts: Front[] = [];

beforeAll(async () => {
  binary = customMetricsOracleBinary();
  prom = await startFakePrometheus(() => Date.now());
  stampedAt = Date.now();
  prom.series.push(...customSeries(stampedAt));
  const text = customConfig(prom.url);
  const env = { BRIDGE_SIGNING_KEYS: CUSTOM_KEYS };
  const node = await startNodeServer({ config: loadConfig(text, "custom.yaml").config, port: 0, env, log: () => {} });
  targets.push({ name: "Node", target: { origin: node.url, request: (p, init) => fetch(`${node.url}${p}`, init), logs: () => "", close: () => node.close() } });
  const worker = await startWorker(text, env);
  targets.push({ name: "Worker", target: { origin: worker.url, request: worker.request, logs: worker.logs, close: worker.close } });
  const handler = createLambdaHandler({ BRIDGE_CONFIG: text, ...env }, { log: () => {} }) as unknown as HttpHandler;
  targets.push({
    name: "Lambda",
    target: {
      origin: lambdaOrigin("Function URL"),
      request: async (p, init) => {
        const event = await toEvent("Function URL", p, init);
        return toResponse(await handler(event, lambdaContext(event.requestContext.requestId)));
      },
      logs: () => "",
      close: async () => {},
    },
  });
}, ORACLE_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await Promise.all(fronts.map((f) => closeServer(f.server)));
  await Promise.all(targets.map((t) => t.target.close()));
  await prom?.close();
});

const runtimes = ["Node", "Worker", "Lambda"] as const;

for (const runtime of runtimes) {
  for (const version of ["v1beta2", "v1beta1"] as const) {
    describe(`the Go client reads the ${runtime} bridge in ${version}`, () => {
      it("decodes every answer: pods with data only, the object's value, the namespace's, the metric selector; a 404 as an error", async () => {
        const { target } = targets.find((t) => t.name === runtime)!;
        const front = await startFront(target, version === "v1beta1");
        fronts.push(front);
        const out = await runCustomMetricsOracle(binary, { host: front.host, calls: CALLS, resourceLists: [`custom.metrics.k8s.io/${version}`] });

        // it chose the version offered, and the bridge got the canonical POSTs with the objects
        const prefix = `/apis/custom.metrics.k8s.io/${version}`;
        expect(front.posted.map((p) => [p.path, p.body])).toEqual([
          [`${prefix}/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb`, '{"pods":["web-1","web-2","web-9"]}'],
          [`${prefix}/namespaces/team-a/queues.sqs.services.k8s.aws/jobs/queue_ready`, customReadBody(QUEUE_OBJECT)],
          [`${prefix}/namespaces/team-a/metrics/backlog`, "{}"],
          [`${prefix}/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb&metricLabelSelector=verb+in+%28GET%29`, '{"pods":["web-1","web-2","web-9"]}'],
          [`${prefix}/namespaces/team-a/pods/%2A/no_such_metric?labelSelector=app%3Dweb`, '{"pods":["web-1","web-2","web-9"]}'],
        ]);

        // the Go client decoded the bridge's own answers of that version (v1beta1: metricName, window, selector last)
        expect(front.answered).toEqual([
          ...Array.from({ length: 4 }, () => ({ status: 200, apiVersion: `custom.metrics.k8s.io/${version}` })),
          { status: 404 },
        ]);

        const list = out.resourceLists[0]!.list as { groupVersion: string; resources: { name: string }[] };
        expect(list.groupVersion).toBe(`custom.metrics.k8s.io/${version}`);
        expect(list.resources.map((r) => r.name)).toEqual(["namespaces/backlog", "pods/http_requests", "queues.sqs.services.k8s.aws/queue_ready"]);

        const [pods, queue, namespace, filtered, missing] = out.calls;
        const at = Math.floor((stampedAt - 5_000) / 1000);
        expect(pods!.error).toBeUndefined();
        expect(pods!.items!.map((i) => [i.describedObject.kind, i.describedObject.namespace, i.describedObject.name, i.metric.name, i.metric.selector, i.value, i.milliValue, i.windowSeconds])).toEqual([
          ["Pod", "team-a", "web-1", "http_requests", null, "5", "5000", null],
          ["Pod", "team-a", "web-2", "http_requests", null, "7500m", "7500", null],
        ]);
        for (const item of pods!.items!) expect(item.unix).toBe(at);
        expect(queue!.items!.map((i) => [i.describedObject.kind, i.describedObject.name, i.describedObject.apiVersion, i.value, i.milliValue])).toEqual([["Queue", "jobs", "sqs.services.k8s.aws/v1alpha1", "42", "42000"]]);
        expect(namespace!.items!.map((i) => [i.describedObject.kind, i.describedObject.name, i.metric.name, i.value])).toEqual([["Namespace", "team-a", "backlog", "12"]]);
        // the metricLabelSelector reaches the series (web-2's are PUT) and comes back as the metric's selector
        expect(filtered!.error).toBeUndefined();
        expect(filtered!.items!.map((i) => [i.describedObject.name, i.metric.selector, i.value])).toEqual([
          ["web-1", { matchExpressions: [{ key: "verb", operator: "In", values: ["GET"] }] }, "5"],
        ]);
        expect(missing!.items).toBeUndefined();
        expect(missing!.error).toMatch(/no_such_metric.*not defined by this bridge/);
      }, 120_000);
    });
  }
}
