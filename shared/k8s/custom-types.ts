/**
 * Wire types of `custom.metrics.k8s.io` (v1beta2 and v1beta1) and its
 * discovery objects: the `APIResourceList` of each version and the
 * `APIGroup`, built as pure functions of the (resource, metric) pairs the
 * rules serve. The answers themselves are built in
 * shared/values/custom-answer.ts.
 *
 * Sources: k8s.io/metrics v0.37.1 `pkg/apis/custom_metrics/v1beta2/types.go`
 * and `v1beta1/types.go` (MetricValueList, MetricValue, MetricIdentifier and
 * their json tags), `pkg/client/custom_metrics/discovery.go` (how the
 * client picks a version from the APIGroup), custom-metrics-apiserver
 * `pkg/provider/resource_lister.go` (one `<group resource>/<metric>`
 * resource per metric), k8s.io/api `core/v1` `ObjectReference` and
 * apimachinery `pkg/apis/meta/v1/types.go` (APIResourceList, APIGroup).
 * `test/wire/custom-metrics.oracle.test.ts` runs the real Go client against
 * these builders.
 */
import type { LabelSelector } from "./selector.ts";
import type { APIGroup, APIResource, APIResourceList, GroupVersionForDiscovery } from "./types.ts";

/** The API group of the Custom Metrics API. */
export const CUSTOM_GROUP = "custom.metrics.k8s.io";

/** The versions served, preferred first: the HPA's client uses the APIGroup's `preferredVersion`. */
export const CUSTOM_VERSIONS = ["v1beta2", "v1beta1"] as const;

/** A served version of `custom.metrics.k8s.io`. */
export type CustomVersion = (typeof CUSTOM_VERSIONS)[number];

/** `custom.metrics.k8s.io/<version>`. */
export type CustomGroupVersion = `${typeof CUSTOM_GROUP}/${CustomVersion}`;

/** `custom.metrics.k8s.io/<version>` of `version`. */
export function customGroupVersion(version: CustomVersion): CustomGroupVersion {
  return `${CUSTOM_GROUP}/${version}`;
}

/** Whether `version` names a served version of `custom.metrics.k8s.io`. */
export function isCustomVersion(version: string): version is CustomVersion {
  return (CUSTOM_VERSIONS as readonly string[]).includes(version);
}

/**
 * The reference to the object a value describes (`core/v1.ObjectReference`,
 * the fields a custom metrics answer uses; every field of the Go type is
 * omitempty). `namespace` is absent for a cluster-scoped object and for a
 * Namespace itself; `apiVersion` is `<group>/<version>`, or `v1` for the
 * core group. The HPA keys Pods values by `name`.
 */
export interface ObjectReference {
  kind: string;
  namespace?: string;
  name: string;
  apiVersion: string;
}

/**
 * v1beta2 `MetricValue`, fields in the Go type's order:
 * - `metric.selector`: no omitempty in Go, so `null` when there is none;
 * - `timestamp`: `metav1.Time`, RFC 3339 UTC, whole seconds;
 * - `windowSeconds` (omitempty): seconds the value was computed over,
 *   [timestamp − windowSeconds, timestamp];
 * - `value`: a canonical Quantity (shared/k8s/quantity.ts).
 */
export interface MetricValueV1beta2 {
  describedObject: ObjectReference;
  metric: { name: string; selector: LabelSelector | null };
  timestamp: string;
  windowSeconds?: number;
  value: string;
}

/**
 * v1beta1 `MetricValue`, fields in the Go type's order: as v1beta2 with the
 * metric's name as `metricName`, the window (seconds) as **`window`**
 * (omitempty) and `selector` (no omitempty: `null` when none) last.
 */
export interface MetricValueV1beta1 {
  describedObject: ObjectReference;
  metricName: string;
  timestamp: string;
  window?: number;
  value: string;
  selector: LabelSelector | null;
}

/** `MetricValueList` of `version`: `metadata` is always `{}` (Go's ListMeta is a struct, never omitted). */
export interface MetricValueList<V extends CustomVersion = CustomVersion> {
  kind: "MetricValueList";
  apiVersion: `${typeof CUSTOM_GROUP}/${V}`;
  metadata: Record<string, never>;
  items: (V extends "v1beta2" ? MetricValueV1beta2 : MetricValueV1beta1)[];
}

/**
 * One (resource, metric) pair the rules serve, for discovery.
 *
 * - `resource`: the described objects' group resource as the client writes
 *   it in the path, plural and lowercase, `.<group>` appended outside the
 *   core group (`pods`, `deployments.apps`, `targetgroupbindings.elbv2.k8s.aws`);
 *   `namespaces` for metrics describing namespaces;
 * - `metric`: the metric name as requested (no `/`, `%` or `?`);
 * - `namespaced`: whether the resource is namespaced.
 */
export interface CustomMetricResource {
  resource: string;
  metric: string;
  namespaced: boolean;
}

/**
 * The discovery resource listed when no pair is served: an empty
 * `resources` list makes client-go's discovery cache fail the whole group
 * version ("Got empty response for …", KEDA #1797), as for External.
 */
export const CUSTOM_PLACEHOLDER_RESOURCE = "custommetrics";

/**
 * The discovery `APIResourceList` of `custom.metrics.k8s.io/<version>`: one
 * `{name: "<resource>/<metric>", singularName: "", namespaced, kind:
 * "MetricValueList", verbs: ["get"]}` per distinct pair, as
 * custom-metrics-apiserver's `NewCustomMetricResourceLister` lists them,
 * sorted by name. With no pair, the namespaced placeholder
 * {@link CUSTOM_PLACEHOLDER_RESOURCE}.
 *
 * @throws Error when a resource or metric is empty or holds `/`, a metric
 *   holds `%` or `?` (the path could not name it), or one pair is given
 *   twice with different `namespaced`
 */
export function customApiResourceList(version: CustomVersion, pairs: readonly CustomMetricResource[]): APIResourceList<CustomGroupVersion> {
  const byName = new Map<string, boolean>();
  for (const { resource, metric, namespaced } of pairs) {
    if (resource === "" || resource.includes("/")) throw new Error(`custom metrics discovery: resource ${JSON.stringify(resource)} must be a non-empty group resource without "/"`);
    if (metric === "" || /[/%?]/.test(metric)) throw new Error(`custom metrics discovery: metric ${JSON.stringify(metric)} must be non-empty, without "/", "%" or "?"`);
    const name = `${resource}/${metric}`;
    const before = byName.get(name);
    if (before !== undefined && before !== namespaced) throw new Error(`custom metrics discovery: ${name} is listed both as namespaced and as cluster-scoped`);
    byName.set(name, namespaced);
  }
  const entries: [string, boolean][] = byName.size > 0 ? [...byName].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)) : [[CUSTOM_PLACEHOLDER_RESOURCE, true]];
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: customGroupVersion(version),
    resources: entries.map(([name, namespaced]): APIResource => ({ name, singularName: "", namespaced, kind: "MetricValueList", verbs: ["get"] })),
  };
}

/**
 * The `APIGroup` of `custom.metrics.k8s.io` served at
 * `/apis/custom.metrics.k8s.io` (with `kind`/`apiVersion`) and as an entry
 * of `/apis` (`entry: true`: without them): versions v1beta2 then v1beta1,
 * v1beta2 preferred. The HPA's client (`NewAvailableAPIsGetter`) takes
 * `preferredVersion` when it knows it.
 */
export function customApiGroup(entry = false): APIGroup {
  const versions: GroupVersionForDiscovery[] = CUSTOM_VERSIONS.map((version) => ({ groupVersion: customGroupVersion(version), version }));
  const group: APIGroup = { name: CUSTOM_GROUP, versions, preferredVersion: versions[0]! };
  return entry ? group : { kind: "APIGroup", apiVersion: "v1", ...group };
}
