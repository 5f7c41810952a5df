/**
 * The custom.metrics.k8s.io wire builders (shared/values/custom-answer.ts,
 * shared/k8s/custom-types.ts): the exact JSON text (the Go types' field
 * order, omitempty and null), discovery, the LabelSelector form and what
 * they refuse. The real Go client decodes the same answers in
 * test/wire/custom-metrics.oracle.test.ts.
 */
import { describe, expect, it } from "vitest";
import { CUSTOM_PLACEHOLDER_RESOURCE, customApiGroup, customApiResourceList, customGroupVersion, isCustomVersion } from "../../shared/k8s/custom-types.ts";
import { parseDecimal } from "../../shared/k8s/quantity.ts";
import { EVERYTHING, fromLabelSelector, NOTHING, parseSelector, SelectorError, selectorToString } from "../../shared/k8s/selector.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { customAnswer, labelSelectorObject, metricValueList, type CustomMetricItem } from "../../shared/values/custom-answer.ts";

const T = Date.parse("2026-11-28T04:00:01.750Z");
const podItem = (name: string, value: string, windowSeconds?: number): CustomMetricItem => ({
  describedObject: { kind: "Pod", namespace: "team-a", name, apiVersion: "v1" },
  value: parseDecimal(value),
  timestamp: T,
  ...(windowSeconds === undefined ? {} : { windowSeconds }),
});

describe("customAnswer", () => {
  const selector = labelSelectorObject(parseSelector("verb in (GET),code"));

  it("v1beta2: Go's field order, metric {name, selector}, windowSeconds only when set, serialized once", () => {
    const answer = customAnswer("v1beta2", "http_requests", selector, [podItem("web-0", "1.5", 60), podItem("web-1", "0")]);
    expect(answer.text).toBe(
      '{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":[' +
        '{"describedObject":{"kind":"Pod","namespace":"team-a","name":"web-0","apiVersion":"v1"},"metric":{"name":"http_requests","selector":{"matchExpressions":[{"key":"code","operator":"Exists"},{"key":"verb","operator":"In","values":["GET"]}]}},"timestamp":"2026-11-28T04:00:01Z","windowSeconds":60,"value":"1500m"},' +
        '{"describedObject":{"kind":"Pod","namespace":"team-a","name":"web-1","apiVersion":"v1"},"metric":{"name":"http_requests","selector":{"matchExpressions":[{"key":"code","operator":"Exists"},{"key":"verb","operator":"In","values":["GET"]}]}},"timestamp":"2026-11-28T04:00:01Z","value":"0"}]}',
    );
    expect(JSON.parse(answer.text)).toEqual(answer.list);
    expect(answer.version).toBe("v1beta2");
  });

  it("v1beta1: metricName, window (not windowSeconds), selector last; null without a metric selector", () => {
    const answer = customAnswer("v1beta1", "rps", null, [podItem("web-0", "2", 30)]);
    expect(answer.text).toBe(
      '{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta1","metadata":{},"items":[' +
        '{"describedObject":{"kind":"Pod","namespace":"team-a","name":"web-0","apiVersion":"v1"},"metricName":"rps","timestamp":"2026-11-28T04:00:01Z","window":30,"value":"2","selector":null}]}',
    );
  });

  it("a zero window is written (Go's *int64 omits only nil); no namespace for cluster-scoped objects and namespaces", () => {
    const list = metricValueList("v1beta2", "m", null, [
      { describedObject: { kind: "Namespace", namespace: "", name: "team-a", apiVersion: "v1" }, value: parseDecimal("7"), timestamp: T, windowSeconds: 0 },
      { describedObject: { kind: "Node", name: "n1", apiVersion: "v1" }, value: parseDecimal("1e-9"), timestamp: T },
    ]);
    expect(list.items).toEqual([
      { describedObject: { kind: "Namespace", name: "team-a", apiVersion: "v1" }, metric: { name: "m", selector: null }, timestamp: "2026-11-28T04:00:01Z", windowSeconds: 0, value: "7" },
      { describedObject: { kind: "Node", name: "n1", apiVersion: "v1" }, metric: { name: "m", selector: null }, timestamp: "2026-11-28T04:00:01Z", value: "1n" },
    ]);
    expect(customAnswer("v1beta2", "m", null, []).text).toBe('{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":[]}');
  });

  it("a value the HPA cannot read back exactly is a 500 naming the object, never a rounded value", () => {
    for (const value of ["9223372036854776", "1234567890123456789", "-9223372036854776"]) {
      let error: unknown;
      try {
        customAnswer("v1beta2", "m", null, [podItem("web-0", value)]);
      } catch (err) {
        error = err;
      }
      expect(error, value).toBeInstanceOf(StatusError);
      expect((error as StatusError).code).toBe(500);
      expect((error as StatusError).message).toMatch(/Pod web-0 cannot be read back exactly by the HPA/);
    }
    expect(customAnswer("v1beta2", "m", null, [podItem("web-0", "9223372036854775")]).list.items[0]!.value).toBe("9223372036854775");
  });

  it("a window that is not a non-negative integer, or a timestamp that is not a date, is a caller's bug (RangeError)", () => {
    for (const w of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) expect(() => customAnswer("v1beta1", "m", null, [podItem("p", "1", w)]), String(w)).toThrow(RangeError);
    expect(() => customAnswer("v1beta2", "m", null, [{ ...podItem("p", "1"), timestamp: Number.NaN }])).toThrow(RangeError);
  });
});

describe("labelSelectorObject (metav1.ParseToLabelSelector)", () => {
  const cases: [string, unknown][] = [
    ["", {}],
    ["a=b", { matchLabels: { a: "b" } }],
    ["a==b,c=d", { matchLabels: { a: "b", c: "d" } }],
    ["a=1,a=2", { matchLabels: { a: "2" } }],
    ["a in (z,x,y)", { matchExpressions: [{ key: "a", operator: "In", values: ["x", "y", "z"] }] }],
    ["a notin (b)", { matchExpressions: [{ key: "a", operator: "NotIn", values: ["b"] }] }],
    ["a", { matchExpressions: [{ key: "a", operator: "Exists" }] }],
    ["!a", { matchExpressions: [{ key: "a", operator: "DoesNotExist" }] }],
    ["constructor=x,toString", { matchLabels: { constructor: "x" }, matchExpressions: [{ key: "toString", operator: "Exists" }] }],
  ];
  for (const [text, want] of cases) it(JSON.stringify(text), () => expect(labelSelectorObject(parseSelector(text))).toEqual(want));

  it("refuses what Go refuses, with Go's messages", () => {
    expect(() => labelSelectorObject(parseSelector("a!=b"))).toThrow(new SelectorError('"!=" is not a valid label selector operator'));
    expect(() => labelSelectorObject(parseSelector("a>1"))).toThrow(new SelectorError(`"gt" isn't supported in label selectors`));
    expect(() => labelSelectorObject(parseSelector("a<1"))).toThrow(new SelectorError(`"lt" isn't supported in label selectors`));
  });

  it("labels.Nothing() (a nil LabelSelector) is null, labels.Everything() is {}; the form converts back to the same selector", () => {
    expect(labelSelectorObject(NOTHING)).toBeNull();
    expect(labelSelectorObject(EVERYTHING)).toEqual({});
    for (const text of ["a=b,c in (d,e),!f,g", "x notin (1,2),y=z"]) {
      expect(selectorToString(fromLabelSelector(labelSelectorObject(parseSelector(text))))).toBe(selectorToString(parseSelector(text)));
    }
    // fromLabelSelector keeps duplicate In values; the form lists each once, as Go's sets.String
    expect(labelSelectorObject(fromLabelSelector({ matchExpressions: [{ key: "a", operator: "In", values: ["b", "b"] }] }))).toEqual({ matchExpressions: [{ key: "a", operator: "In", values: ["b"] }] });
  });
});

describe("discovery", () => {
  it("one `<resource>/<metric>` MetricValueList resource per distinct pair, sorted, per version", () => {
    const pairs = [
      { resource: "pods", metric: "rps", namespaced: true },
      { resource: "deployments.apps", metric: "queue.depth", namespaced: true },
      { resource: "nodes", metric: "temp", namespaced: false },
      { resource: "pods", metric: "rps", namespaced: true },
    ];
    for (const version of ["v1beta2", "v1beta1"] as const) {
      expect(customApiResourceList(version, pairs)).toEqual({
        kind: "APIResourceList",
        apiVersion: "v1",
        groupVersion: `custom.metrics.k8s.io/${version}`,
        resources: [
          { name: "deployments.apps/queue.depth", singularName: "", namespaced: true, kind: "MetricValueList", verbs: ["get"] },
          { name: "nodes/temp", singularName: "", namespaced: false, kind: "MetricValueList", verbs: ["get"] },
          { name: "pods/rps", singularName: "", namespaced: true, kind: "MetricValueList", verbs: ["get"] },
        ],
      });
    }
  });

  it("never an empty list (client-go's discovery cache fails on one): the placeholder", () => {
    expect(customApiResourceList("v1beta2", []).resources).toEqual([{ name: CUSTOM_PLACEHOLDER_RESOURCE, singularName: "", namespaced: true, kind: "MetricValueList", verbs: ["get"] }]);
  });

  it("refuses names a path could not carry, and a pair both namespaced and not", () => {
    expect(() => customApiResourceList("v1beta2", [{ resource: "pods", metric: "a/b", namespaced: true }])).toThrow(/metric "a\/b"/);
    expect(() => customApiResourceList("v1beta2", [{ resource: "pods", metric: "a?b", namespaced: true }])).toThrow(/metric "a\?b"/);
    expect(() => customApiResourceList("v1beta2", [{ resource: "pods", metric: "a%b", namespaced: true }])).toThrow(/metric "a%b"/);
    expect(() => customApiResourceList("v1beta2", [{ resource: "", metric: "m", namespaced: true }])).toThrow(/resource ""/);
    expect(() =>
      customApiResourceList("v1beta2", [
        { resource: "pods", metric: "m", namespaced: true },
        { resource: "pods", metric: "m", namespaced: false },
      ]),
    ).toThrow(/pods\/m is listed both as namespaced and as cluster-scoped/);
  });

  it("the APIGroup: v1beta2 then v1beta1, v1beta2 preferred; without kind/apiVersion as an APIGroupList entry", () => {
    const versions = [
      { groupVersion: "custom.metrics.k8s.io/v1beta2", version: "v1beta2" },
      { groupVersion: "custom.metrics.k8s.io/v1beta1", version: "v1beta1" },
    ];
    expect(JSON.stringify(customApiGroup())).toBe(JSON.stringify({ kind: "APIGroup", apiVersion: "v1", name: "custom.metrics.k8s.io", versions, preferredVersion: versions[0] }));
    expect(customApiGroup(true)).toEqual({ name: "custom.metrics.k8s.io", versions, preferredVersion: versions[0] });
    expect(customGroupVersion("v1beta1")).toBe("custom.metrics.k8s.io/v1beta1");
    expect(["v1beta2", "v1beta1", "v1", "v1beta3", ""].map(isCustomVersion)).toEqual([true, true, false, false, false]);
  });
});
