/**
 * Filter injection: no value can change the structure of a Cloud
 * Monitoring filter. The escaper and the builder are checked against the
 * independent parser in `test/fakes/monitoring-filter.ts` (arbitrary
 * strings, hostile ones by name), then end to end: hostile static values in
 * a rule select exactly their own series at the fake, and hostile selector
 * values never reach the backend.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fcRuns } from "../helpers/fc.ts";
import { buildBridge } from "../helpers/bridge.ts";
import { FilterError, filterEquals, quoteFilterString, timeSeriesFilter } from "../../shared/providers/gcp/filter.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { parseFilter, type FilterNode } from "../fakes/monitoring-filter.ts";

const HOSTILE = [
  `"`,
  `\\`,
  `\\"`,
  `abc\\`,
  `" OR metric.type = "x`,
  `a") OR (resource.labels.subscription_id = "b`,
  `x" AND NOT resource.type = "y`,
  `AND`,
  `OR`,
  `NOT`,
  `(`,
  `)`,
  `one_of("a", "b")`,
  `=`,
  `!=`,
  `'single'`,
  `ünïcödé ✓`,
  ``,
];

/**
 * Strings a filter may hold: anything without control characters, biased
 * toward the characters and words that matter to the grammar.
 */
const printable = fc
  .string({
    unit: fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom('"', "\\", "(", ")", " ", "=", "!", ",", "AND", "OR", "NOT", "one_of", "metric.type") },
      { weight: 2, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
    ),
    maxLength: 30,
  })
  .filter((s) => !/[\u0000-\u001f\u007f]/.test(s));

const cmp = (field: string, value: string): FilterNode => ({ kind: "cmp", field, op: "=", values: [value] });

describe("quoteFilterString", () => {
  it("round-trips every hostile value as one string literal", () => {
    for (const value of HOSTILE) {
      expect(parseFilter(`metric.labels.k = ${quoteFilterString(value)}`), value).toEqual(cmp("metric.labels.k", value));
    }
  });

  it("round-trips arbitrary strings (property)", () => {
    fc.assert(
      fc.property(printable, (value) => {
        expect(parseFilter(`resource.labels.k = ${quoteFilterString(value)}`)).toEqual(cmp("resource.labels.k", value));
      }),
      fcRuns(2000),
    );
  });

  it("escapes exactly backslash and double quote", () => {
    expect(quoteFilterString(`a"b\\c`)).toBe(`"a\\"b\\\\c"`);
    expect(quoteFilterString(`plain-value_1.2`)).toBe(`"plain-value_1.2"`);
  });

  it("refuses control characters and overlong values instead of guessing an escape", () => {
    for (const bad of ["a\nb", "a\u0000", "\t", "x\u007f", "x".repeat(1025)]) expect(() => quoteFilterString(bad)).toThrow(FilterError);
  });

  it("refuses field names that are not metric/resource selectors", () => {
    for (const field of ["metric.labels.a b", 'metric.labels.a"', "metric.labels.", "project", "metric.labels.a OR x", "resource.labels.k) OR (x"]) {
      expect(() => filterEquals(field, "v"), field).toThrow(FilterError);
    }
  });
});

describe("timeSeriesFilter", () => {
  it("keeps its structure whatever the values (property)", () => {
    fc.assert(
      fc.property(
        printable,
        fc.array(fc.tuple(printable, printable), { minLength: 0, maxLength: 5 }),
        (fixedValue, alternatives) => {
          const filter = timeSeriesFilter({
            metricType: "custom.googleapis.com/m",
            resourceType: "global",
            fixed: [["metric.labels.fixed", fixedValue]],
            alternatives: alternatives.map(([a, b]) => [
              ["metric.labels.a", a],
              ["resource.labels.b", b],
            ]),
          });
          const items: FilterNode[] = [cmp("metric.type", "custom.googleapis.com/m"), cmp("resource.type", "global"), cmp("metric.labels.fixed", fixedValue)];
          const alts = alternatives.map(([a, b]): FilterNode => ({ kind: "and", items: [cmp("metric.labels.a", a), cmp("resource.labels.b", b)] }));
          if (alts.length === 1) items.push(alts[0]!);
          if (alts.length > 1) items.push({ kind: "or", items: alts });
          expect(parseFilter(filter)).toEqual({ kind: "and", items });
        },
      ),
      fcRuns(500),
    );
  });

  it("writes the documented form", () => {
    expect(
      timeSeriesFilter({
        metricType: "pubsub.googleapis.com/subscription/num_undelivered_messages",
        resourceType: "pubsub_subscription",
        fixed: [],
        alternatives: [[["resource.labels.subscription_id", "a"]], [["resource.labels.subscription_id", "b"]]],
      }),
    ).toBe(
      'metric.type = "pubsub.googleapis.com/subscription/num_undelivered_messages" AND resource.type = "pubsub_subscription" AND ' +
        '((resource.labels.subscription_id = "a") OR (resource.labels.subscription_id = "b"))',
    );
  });
});

describe("hostile values end to end", () => {
  let fakes: GoogleFakes;
  const NOW = 1_800_000_000_000;
  const METRIC = "custom.googleapis.com/jobs/backlog";
  beforeAll(async () => {
    fakes = await startGoogleFakes(() => NOW);
    fakes.store.series = [
      // the series the hostile rule means, and decoys an injected filter would select
      { metricType: METRIC, metricLabels: { tenant: `acme" OR metric.labels.tenant = "evil` }, resourceType: "global", resourceLabels: { zone: `z\\1` }, points: [{ end: NOW - 10_000, value: { int64Value: "11" } }] },
      { metricType: METRIC, metricLabels: { tenant: "acme" }, resourceType: "global", resourceLabels: { zone: `z\\1` }, points: [{ end: NOW - 10_000, value: { int64Value: "500" } }] },
      { metricType: METRIC, metricLabels: { tenant: "evil" }, resourceType: "global", resourceLabels: { zone: `z\\1` }, points: [{ end: NOW - 10_000, value: { int64Value: "900" } }] },
      { metricType: METRIC, metricLabels: { tenant: "t", queue: `q") OR (metric.labels.queue = "other` }, resourceType: "global", points: [{ end: NOW - 10_000, value: { int64Value: "3" } }] },
      { metricType: METRIC, metricLabels: { tenant: "t", queue: "other" }, resourceType: "global", points: [{ end: NOW - 10_000, value: { int64Value: "700" } }] },
    ];
  });
  afterAll(async () => fakes?.close());

  const config = (endpoint: string) => `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
providers:
  gcp: { type: gcp-monitoring, project: test-project, endpoint: ${endpoint}, credentials: { source: environment } }
metrics:
  - name: hostile_static
    provider: gcp
    query:
      metricType: ${METRIC}
      metricLabels: { tenant: 'acme" OR metric.labels.tenant = "evil' }
      resourceLabels: { zone: 'z\\1' }
  - name: hostile_mapped
    provider: gcp
    query:
      metricType: ${METRIC}
      metricLabels: { tenant: t }
      selectorLabels:
        queue: { field: metric.labels.queue, values: { main: 'q") OR (metric.labels.queue = "other' } }
`;

  it("static and mapped values select exactly their own series", async () => {
    const bridge = buildBridge(config(fakes.rest.endpoint), "x.yaml", { env: { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text }, now: () => NOW }, { log: () => {} });
    const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
    const a = await bridge.app.request(`${NS}/hostile_static`);
    expect(((await a.json()) as any).items.map((i: any) => i.value)).toEqual(["11"]);
    const b = await bridge.app.request(`${NS}/hostile_mapped?labelSelector=queue%3Dmain`);
    expect(((await b.json()) as any).items.map((i: any) => i.value)).toEqual(["3"]);
    const filters = fakes.store.requests.map((r) => parseFilter(r.filter));
    expect(filters[0]).toEqual({
      kind: "and",
      items: [cmp("metric.type", METRIC), cmp("metric.labels.tenant", `acme" OR metric.labels.tenant = "evil`), cmp("resource.labels.zone", `z\\1`)],
    });
    expect(filters[1]).toEqual({
      kind: "and",
      items: [cmp("metric.type", METRIC), cmp("metric.labels.tenant", "t"), cmp("metric.labels.queue", `q") OR (metric.labels.queue = "other`)],
    });
  });

  it("hostile selector values are refused before any backend call", async () => {
    const bridge = buildBridge(config(fakes.rest.endpoint), "x.yaml", { env: { GOOGLE_SERVICE_ACCOUNT_JSON: fakes.account.text }, now: () => NOW }, { log: () => {} });
    const before = fakes.store.requests.length;
    for (const selector of [`queue=main" OR "x`, `queue=a\\`, `queue in (main,") OR (x")`]) {
      const res = await bridge.app.request(`/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hostile_mapped?labelSelector=${encodeURIComponent(selector)}`);
      expect(res.status, selector).toBe(400);
    }
    expect(fakes.store.requests.length).toBe(before);
  });

  it("the config refuses control characters in static values", () => {
    expect(() =>
      buildBridge(config(fakes.rest.endpoint).replace(`zone: 'z\\1'`, `zone: "a\\nb"`), "x.yaml", { env: {}, now: () => NOW }),
    ).toThrow(/resourceLabels\.zone: cannot be used in a filter: it contains a control character/);
  });
});
