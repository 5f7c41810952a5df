/**
 * The custom.metrics.k8s.io answers (shared/values/custom-answer.ts) and
 * discovery (shared/k8s/custom-types.ts) against the real Go client the
 * HPA controller uses: k8s.io/metrics v0.37.1 `custom_metrics.NewForConfig`
 * with its available-APIs getter over client-go discovery, run by
 * test/custom-metrics-oracle/ (built and cached by infra/tools/go.ts).
 *
 * This suite serves, on 127.0.0.1, `/apis` (an APIGroupList holding
 * `customApiGroup`), the APIResourceLists and the answers the builders make;
 * the Go program calls GetForObject and GetForObjects for namespaced and
 * cluster-scoped objects, `*` pods and the namespace `metrics`
 * pseudo-resource, and prints what it decoded (the internal
 * `custom_metrics.MetricValue` form). Checked:
 *
 * - the client picks v1beta2 from our APIGroup, and v1beta1 from a group
 *   that offers only v1beta1; every decoded value, MilliValue, timestamp,
 *   window, metric name, selector and describedObject equals what was built;
 * - the exact paths and queries the client sent (`*` as `%2A`, the
 *   `metricLabelSelector` parameter, selectors in key order), which the
 *   server reads with customMetricsRead (shared/k8s/request-path.ts);
 * - an object read answered with two items is refused by the client;
 * - labelSelectorObject is `metav1.ParseToLabelSelector`, JSON for JSON, error
 *   for error.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CUSTOM_GROUP, customApiGroup, customApiResourceList, isCustomVersion, type CustomMetricResource, type CustomVersion, type ObjectReference } from "../../shared/k8s/custom-types.ts";
import { formatQuantity, milliValue, parseDecimal } from "../../shared/k8s/quantity.ts";
import { customMetricsRead, parseRequestTarget } from "../../shared/k8s/request-path.ts";
import { parseSelector, SelectorError, type LabelSelector } from "../../shared/k8s/selector.ts";
import { formatTimestamp } from "../../shared/k8s/types.ts";
import { customAnswer, labelSelectorObject, type CustomMetricItem } from "../../shared/values/custom-answer.ts";
import { PARSE_CASES } from "../oracle/selector-cases.ts";
import { customMetricsOracleBinary, ORACLE_BUILD_TIMEOUT_MS, runCustomMetricsOracle, type Call, type Decoded, type OracleOutput } from "./custom-metrics-oracle.ts";


/** The (resource, metric) pairs the discovery served here lists. */
const PAIRS: CustomMetricResource[] = [
  { resource: "pods", metric: "http_requests.per-second", namespaced: true },
  { resource: "deployments.apps", metric: "queue.depth", namespaced: true },
  { resource: "namespaces", metric: "queue_depth", namespaced: false },
  { resource: "nodes", metric: "cpu_temp", namespaced: false },
  { resource: "pods", metric: "http_requests.per-second", namespaced: true },
];

/** A case: the call, the path and query the client must send, and the items answered. */
interface Case {
  what: string;
  call: Call;
  /** the request target the Go client sends, after `/apis/custom.metrics.k8s.io/<version>` */
  target: string;
  items: CustomMetricItem[];
  /** the client's error, when it must refuse the answer */
  error?: RegExp;
}

const ms = (iso: string) => Date.parse(iso);
const pod = (name: string): ObjectReference => ({ kind: "Pod", namespace: "team-a", name, apiVersion: "v1" });

/** Hostile but valid values: large and small Quantities, negatives, zero windows, sub-second timestamps, names with dots. */
function cases(): Case[] {
  return [
    {
      what: "Pods metric: GetForObjects on pods `*` with labelSelector and metricSelector (in, notin, exists, !)",
      call: { namespace: "team-a", group: "", kind: "Pod", selector: "app=web,tier in (api,front)", metric: "http_requests.per-second", metricSelector: "verb in (PUT,GET),code notin (500),!canary,region" },
      target:
        "/namespaces/team-a/pods/%2A/http_requests.per-second?labelSelector=app%3Dweb%2Ctier+in+%28api%2Cfront%29&metricLabelSelector=%21canary%2Ccode+notin+%28500%29%2Cregion%2Cverb+in+%28GET%2CPUT%29",
      items: [
        { describedObject: pod("web-0.shard.a"), value: parseDecimal("9223372036854775"), timestamp: ms("2026-11-28T04:00:01.999Z"), windowSeconds: 60 },
        { describedObject: pod("web-1"), value: parseDecimal("0.000000001"), timestamp: ms("2026-11-28T04:00:02Z") },
        { describedObject: pod("web-2"), value: parseDecimal("-2.5"), timestamp: ms("1970-01-01T00:00:00Z"), windowSeconds: 0 },
        { describedObject: pod("web-3"), value: parseDecimal("123456789012345678e-3"), timestamp: ms("2026-11-28T04:00:03.5Z"), windowSeconds: 86400 },
      ],
    },
    {
      what: "Pods metric with no selectors: no query at all",
      call: { namespace: "team-a", group: "", kind: "Pod", selector: "", metric: "rps", metricSelector: "" },
      target: "/namespaces/team-a/pods/%2A/rps",
      items: [{ describedObject: pod("web-0"), value: parseDecimal("1.5e3"), timestamp: ms("2026-11-28T04:00:00Z") }],
    },
    {
      what: "Object metric: a deployments.apps object named with dots, no metric selector (selector null)",
      call: { namespace: "team-a", group: "apps", kind: "Deployment", name: "web.v2", metric: "queue.depth", metricSelector: "" },
      target: "/namespaces/team-a/deployments.apps/web.v2/queue.depth",
      items: [{ describedObject: { kind: "Deployment", namespace: "team-a", name: "web.v2", apiVersion: "apps/v1" }, value: parseDecimal("42"), timestamp: ms("2026-11-28T03:59:59Z"), windowSeconds: 300 }],
    },
    {
      what: "Object metric: a CRD's group resource, a metric name in capitals (not lowercased), metricLabelSelector with =",
      call: { namespace: "team-a", group: "elbv2.k8s.aws", kind: "TargetGroupBinding", name: "tg-1", metric: "RequestCountPerTarget", metricSelector: "lb=my-lb" },
      target: "/namespaces/team-a/targetgroupbindings.elbv2.k8s.aws/tg-1/RequestCountPerTarget?metricLabelSelector=lb%3Dmy-lb",
      items: [{ describedObject: { kind: "TargetGroupBinding", namespace: "team-a", name: "tg-1", apiVersion: "elbv2.k8s.aws/v1beta1" }, value: parseDecimal("0.25"), timestamp: ms("2026-11-28T04:00:00Z"), windowSeconds: 60 }],
    },
    {
      what: "namespace metric: the `metrics` pseudo-resource (root-scoped GetForObject of a Namespace)",
      call: { namespace: "", group: "", kind: "Namespace", name: "team-a", metric: "queue_depth", metricSelector: "queue in (orders)" },
      target: "/namespaces/team-a/metrics/queue_depth?metricLabelSelector=queue+in+%28orders%29",
      items: [{ describedObject: { kind: "Namespace", name: "team-a", apiVersion: "v1" }, value: parseDecimal("7"), timestamp: ms("2026-11-28T04:00:00Z") }],
    },
    {
      what: "cluster-scoped object: a node named with dots",
      call: { namespace: "", group: "", kind: "Node", name: "ip-10-0-0-1.ec2.internal", metric: "cpu_temp", metricSelector: "" },
      target: "/nodes/ip-10-0-0-1.ec2.internal/cpu_temp",
      items: [{ describedObject: { kind: "Node", name: "ip-10-0-0-1.ec2.internal", apiVersion: "v1" }, value: parseDecimal("71.125"), timestamp: ms("2026-11-28T04:00:00Z") }],
    },
    {
      what: "cluster-scoped objects: GetForObjects `*` of a CRD",
      call: { namespace: "", group: "networking.gke.io", kind: "ClusterThing", selector: "env=prod", metric: "lb_rate", metricSelector: "" },
      target: "/clusterthings.networking.gke.io/%2A/lb_rate?labelSelector=env%3Dprod",
      items: [
        { describedObject: { kind: "ClusterThing", name: "a", apiVersion: "networking.gke.io/v1" }, value: parseDecimal("1e15"), timestamp: ms("2026-11-28T04:00:00Z") },
        { describedObject: { kind: "ClusterThing", name: "b", apiVersion: "networking.gke.io/v1" }, value: parseDecimal("0"), timestamp: ms("2026-11-28T04:00:00Z") },
      ],
    },
    {
      what: "an object read answered with two items is refused by the client (the HPA fails the metric)",
      call: { namespace: "team-a", group: "", kind: "Service", name: "web", metric: "rps", metricSelector: "" },
      target: "/namespaces/team-a/services/web/rps",
      items: [
        { describedObject: { kind: "Service", namespace: "team-a", name: "web", apiVersion: "v1" }, value: parseDecimal("1"), timestamp: ms("2026-11-28T04:00:00Z") },
        { describedObject: { kind: "Service", namespace: "team-a", name: "web", apiVersion: "v1" }, value: parseDecimal("2"), timestamp: ms("2026-11-28T04:00:00Z") },
      ],
      error: /returned 2 results when we asked for exactly one/,
    },
  ];
}

/** The metric selector an answer carries: labelSelectorObject the parsed metricLabelSelector, null without one. */
function selectorFor(metricSelector: string): LabelSelector | null {
  return metricSelector === "" ? null : labelSelectorObject(parseSelector(metricSelector));
}

let binary = "";

beforeAll(() => {
  binary = customMetricsOracleBinary();
}, ORACLE_BUILD_TIMEOUT_MS);

/** Run the Go program against `host` (asynchronously: this process serves its requests meanwhile). */
function runOracle(host: string, calls: Call[], selectors: string[], resourceLists: string[] = []): Promise<OracleOutput> {
  return runCustomMetricsOracle(binary, { host, calls, selectors, resourceLists });
}

/**
 * A 127.0.0.1 server for one run: `/api`, `/apis` (the group with `versions`
 * offered), the APIResourceLists, and the answers of `list` for `version`,
 * found by the parts customMetricsRead reads from the path. Records every
 * request target as received.
 */
async function serve(version: CustomVersion, offered: CustomVersion[], list: Case[]): Promise<{ server: Server; host: string; seen: string[] }> {
  const seen: string[] = [];
  const answers = new Map<string, string>();
  for (const c of list) {
    const read = customMetricsRead(parseRequestTarget(`/apis/${CUSTOM_GROUP}/${version}${c.target}`).path);
    if (read === undefined) throw new Error(`not a custom metrics read: ${c.target}`);
    answers.set(JSON.stringify(read), customAnswer(version, c.call.metric, selectorFor(c.call.metricSelector), c.items).text);
  }
  // our APIGroup as built, or (an older adapter) a group offering only some versions, the first preferred
  const group = customApiGroup(true);
  const versions = group.versions.filter((v) => offered.includes(v.version as CustomVersion));
  const apis = { kind: "APIGroupList", apiVersion: "v1", groups: [versions.length === group.versions.length ? group : { ...group, versions, preferredVersion: versions[0]! }] };
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    seen.push(url);
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    try {
      const target = parseRequestTarget(url);
      const path = target.path.path;
      if (path === "/api") return send(200, { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] });
      if (path === "/apis") return send(200, apis);
      const gv = /^\/apis\/custom\.metrics\.k8s\.io\/(v1beta[12])$/.exec(path);
      if (gv !== null && isCustomVersion(gv[1]!)) return send(200, customApiResourceList(gv[1], PAIRS));
      const read = customMetricsRead(target.path);
      const body = read === undefined ? undefined : answers.get(JSON.stringify(read));
      if (body === undefined) return send(404, { kind: "Status", apiVersion: "v1", status: "Failure", reason: "NotFound", code: 404 });
      return send(200, body);
    } catch (e) {
      return send(400, { kind: "Status", apiVersion: "v1", status: "Failure", message: String(e), code: 400 });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, host: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
});

/** What the client must have decoded from `item` of an answer for `c`. */
function expected(c: Case, item: CustomMetricItem): Decoded {
  const ref = item.describedObject;
  return {
    describedObject: { kind: ref.kind, namespace: ref.namespace ?? "", name: ref.name, uid: "", apiVersion: ref.apiVersion, resourceVersion: "", fieldPath: "" },
    metric: { name: c.call.metric, selector: selectorFor(c.call.metricSelector) },
    timestamp: formatTimestamp(item.timestamp),
    unix: Math.floor(item.timestamp / 1000),
    windowSeconds: item.windowSeconds ?? null,
    value: formatQuantity(item.value),
    milliValue: String(milliValue(item.value)),
  };
}

describe.each([
  { version: "v1beta2" as const, offered: ["v1beta2", "v1beta1"] as CustomVersion[], why: "our APIGroup: v1beta2 preferred" },
  { version: "v1beta1" as const, offered: ["v1beta1"] as CustomVersion[], why: "a group offering only v1beta1" },
])("the Go custom metrics client reads $version answers ($why)", ({ version, offered }) => {
  const list = cases();
  let output: OracleOutput;
  let seen: string[];

  beforeAll(async () => {
    const s = await serve(version, offered, list);
    servers.push(s.server);
    seen = s.seen;
    output = await runOracle(
      s.host,
      list.map((c) => c.call),
      [],
    );
  }, 120_000);

  it("sends exactly these request targets, after discovering the version", () => {
    const prefix = `/apis/${CUSTOM_GROUP}/${version}`;
    const reads = seen.filter((u) => u.startsWith(`${prefix}/`));
    expect(seen.filter((u) => !u.startsWith(`${prefix}/`)).sort()).toEqual(["/api?timeout=32s", "/apis?timeout=32s"]);
    expect(reads).toEqual(list.map((c) => `${prefix}${c.target}`));
  });

  for (const [i, c] of list.entries()) {
    it(c.what, () => {
      const got = output.calls[i]!;
      if (c.error !== undefined) {
        expect(got.error).toMatch(c.error);
        return;
      }
      expect(got.error).toBeUndefined();
      expect(got.items).toEqual(c.items.map((item) => expected(c, item)));
    });
  }
});

describe("discovery", () => {
  it("client-go's discovery decodes both APIResourceLists: one `<resource>/<metric>` per distinct pair, sorted", async () => {
    const s = await serve("v1beta2", ["v1beta2", "v1beta1"], []);
    servers.push(s.server);
    const out = await runOracle(s.host, [], [], ["custom.metrics.k8s.io/v1beta2", "custom.metrics.k8s.io/v1beta1"]);
    const resources = (version: string) => ({
      kind: "APIResourceList",
      apiVersion: "v1",
      groupVersion: `custom.metrics.k8s.io/${version}`,
      resources: [
        { name: "deployments.apps/queue.depth", singularName: "", namespaced: true, kind: "MetricValueList", verbs: ["get"] },
        { name: "namespaces/queue_depth", singularName: "", namespaced: false, kind: "MetricValueList", verbs: ["get"] },
        { name: "nodes/cpu_temp", singularName: "", namespaced: false, kind: "MetricValueList", verbs: ["get"] },
        { name: "pods/http_requests.per-second", singularName: "", namespaced: true, kind: "MetricValueList", verbs: ["get"] },
      ],
    });
    expect(out.resourceLists).toEqual([{ list: resources("v1beta2") }, { list: resources("v1beta1") }]);
    expect(s.seen.filter((u) => u.startsWith("/apis/custom")).sort()).toEqual(["/apis/custom.metrics.k8s.io/v1beta1?timeout=32s", "/apis/custom.metrics.k8s.io/v1beta2?timeout=32s"]);
  }, 120_000);
});

describe("hostile values decode to what the HPA reads", () => {
  it("MilliValue, Quantity text, timestamps truncated to seconds, zero and absent windows", async () => {
    const [pods] = cases();
    const s = await serve("v1beta2", ["v1beta2", "v1beta1"], [pods!]);
    servers.push(s.server);
    const out = await runOracle(s.host, [pods!.call], []);
    // literal values, so a wrong Quantity or MilliValue on both sides still fails
    expect(out.calls[0]!.items!.map((i) => [i.describedObject.name, i.value, i.milliValue, i.timestamp, i.windowSeconds])).toEqual([
      ["web-0.shard.a", "9223372036854775", "9223372036854775000", "2026-11-28T04:00:01Z", 60],
      ["web-1", "1n", "1", "2026-11-28T04:00:02Z", null],
      ["web-2", "-2500m", "-2500", "1970-01-01T00:00:00Z", 0],
      ["web-3", "123456789012345678m", "123456789012345678", "2026-11-28T04:00:03Z", 86400],
    ]);
  }, 120_000);
});

describe("labelSelectorObject is metav1.ParseToLabelSelector", () => {
  it("JSON for JSON, error for error, over the selector parser's cases and hostile ones", async () => {
    const texts = [
      ...new Set([
        ...PARSE_CASES.map((c) => c.input),
        "",
        "a=b",
        "a==b",
        "a!=b",
        "a>1",
        "a<1",
        "a",
        "!a",
        "a in (z,y,x,y)",
        "a notin (b),a in (c)",
        "a=1,a=2",
        "b=2,a=1,c in (x),!d,e",
        "constructor=x,toString in (a)",
        "example.com/key=v,example.com/other notin (a,b)",
        "123=a,2=b,10=c",
      ]),
    ];
    const ours: ({ labelSelector: LabelSelector | null } | { error: string } | "unparsed")[] = texts.map((t) => {
      let parsed;
      try {
        parsed = parseSelector(t);
      } catch {
        return "unparsed";
      }
      try {
        return { labelSelector: labelSelectorObject(parsed) };
      } catch (e) {
        if (e instanceof SelectorError) return { error: e.message };
        throw e;
      }
    });
    const out = await runOracle("http://127.0.0.1:1", [], texts);
    const mismatches: string[] = [];
    let compared = 0;
    texts.forEach((t, i) => {
      const mine = ours[i]!;
      const go = out.selectors[i]!;
      if (mine === "unparsed") {
        if (go.error === undefined) mismatches.push(`${JSON.stringify(t)}: our parser refuses it, Go converts it`);
        return;
      }
      compared++;
      if ("error" in mine) {
        if (go.error !== mine.error) mismatches.push(`${JSON.stringify(t)}: ours refuses (${mine.error}), Go ${go.error ?? JSON.stringify(go.labelSelector)}`);
      } else if (JSON.stringify(sortLabels(mine.labelSelector)) !== JSON.stringify(sortLabels(go.labelSelector ?? null)) || go.error !== undefined) {
        mismatches.push(`${JSON.stringify(t)}: ours ${JSON.stringify(mine.labelSelector)}, Go ${go.error ?? JSON.stringify(go.labelSelector)}`);
      }
    });
    expect(mismatches).toEqual([]);
    expect(compared).toBeGreaterThan(40);
  }, 120_000);
});

/** The selector with matchLabels in sorted key order (JSON object order is not meaning; Go sorts map keys, JS puts index-like keys first). */
function sortLabels(ls: LabelSelector | null): unknown {
  if (ls === null || ls.matchLabels === undefined) return ls;
  return { ...ls, matchLabels: Object.entries(ls.matchLabels).sort(([a], [b]) => (a < b ? -1 : 1)) };
}
