/**
 * Wire types of `external.metrics.k8s.io/v1beta1` and the discovery objects
 * the bridge serves, with builders that produce exactly the JSON the
 * Kubernetes clients expect.
 *
 * Sources: k8s.io/metrics `pkg/apis/external_metrics/v1beta1/types.go`
 * (ExternalMetricValue, ExternalMetricValueList) and apimachinery
 * `pkg/apis/meta/v1/types.go` (APIResourceList, APIGroupList).
 */

/** The API group and version the bridge implements. */
export const GROUP = "external.metrics.k8s.io";
export const VERSION = "v1beta1";
export const GROUP_VERSION = `${GROUP}/${VERSION}`;

/**
 * One `ExternalMetricValue`: a single series.
 * - `metricLabels` is always an object (no omitempty) and identifies the
 *   series completely.
 * - `timestamp` is RFC 3339 UTC, whole seconds, `Z` — the backend's own time
 *   of the value, never the time of the HTTP request.
 * - `window` (seconds) is set when the value is an aggregate over
 *   [timestamp − window, timestamp].
 * - `value` is a canonical Quantity string (see quantity.ts).
 */
export interface ExternalMetricValue {
  metricName: string;
  metricLabels: Record<string, string>;
  timestamp: string;
  window?: number;
  value: string;
}

/** `ExternalMetricValueList`, the body of a successful metric read. */
export interface ExternalMetricValueList {
  kind: "ExternalMetricValueList";
  apiVersion: typeof GROUP_VERSION;
  metadata: Record<string, never>;
  items: ExternalMetricValue[];
}

/** One `metav1.APIResource` entry of an APIResourceList. */
export interface APIResource {
  name: string;
  singularName: string;
  namespaced: boolean;
  kind: string;
  verbs: string[];
}

/**
 * `metav1.APIResourceList` for one group version: by default
 * `/apis/external.metrics.k8s.io/v1beta1` (`GV` names another, e.g. the
 * custom.metrics.k8s.io versions of custom-types.ts).
 */
export interface APIResourceList<GV extends string = typeof GROUP_VERSION> {
  kind: "APIResourceList";
  apiVersion: "v1";
  groupVersion: GV;
  resources: APIResource[];
}

/** `metav1.GroupVersionForDiscovery`: `groupVersion` is `<group>/<version>`. */
export interface GroupVersionForDiscovery {
  groupVersion: string;
  version: string;
}

/**
 * `metav1.APIGroup`: served alone at `/apis/<group>` with `kind` and
 * `apiVersion`, and without them as an entry of an {@link APIGroupList}
 * (Go's `TypeMeta` is omitempty there). `versions` is in preference order.
 */
export interface APIGroup {
  kind?: "APIGroup";
  apiVersion?: "v1";
  name: string;
  versions: GroupVersionForDiscovery[];
  preferredVersion: GroupVersionForDiscovery;
}

/** `metav1.APIGroupList` for `/apis` (one group: ours). */
export interface APIGroupList {
  kind: "APIGroupList";
  apiVersion: "v1";
  groups: APIGroup[];
}

/**
 * Format a time as Kubernetes `metav1.Time` does on the wire: RFC 3339 in
 * UTC with whole seconds and `Z` (apimachinery `pkg/apis/meta/v1/time.go`,
 * `MarshalJSON` uses `time.RFC3339` after `UTC()`, which drops fractions).
 * Fractions are truncated, as Go's formatting does.
 *
 * @param ms milliseconds since the Unix epoch
 * @throws RangeError when `ms` is not a finite date
 */
export function formatTimestamp(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}

/** Build an `ExternalMetricValueList` around `items` (order kept). */
export function externalMetricValueList(items: ExternalMetricValue[]): ExternalMetricValueList {
  return { kind: "ExternalMetricValueList", apiVersion: GROUP_VERSION, metadata: {}, items };
}

/**
 * Build the discovery `APIResourceList`. Each external metric name becomes a
 * namespaced resource with verb `get`, as custom-metrics-apiserver's
 * `pkg/apiserver/installer` lists them. The list is never empty: an empty
 * list breaks client-go discovery (KEDA #1797), so with no names the
 * placeholder resource `externalmetrics` is listed.
 *
 * @param names resource names as they appear in request paths (already
 *   encoded: `/` written as `|`)
 */
export function apiResourceList(names: readonly string[]): APIResourceList {
  const unique = [...new Set(names)].sort();
  const list = unique.length > 0 ? unique : ["externalmetrics"];
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: GROUP_VERSION,
    resources: list.map((name) => ({
      name,
      singularName: "",
      namespaced: true,
      kind: "ExternalMetricValueList",
      verbs: ["get"],
    })),
  };
}

/** The `APIGroupList` naming only `external.metrics.k8s.io/v1beta1`. */
export function apiGroupList(): APIGroupList {
  const gv = { groupVersion: GROUP_VERSION, version: VERSION };
  return { kind: "APIGroupList", apiVersion: "v1", groups: [{ name: GROUP, versions: [gv], preferredVersion: gv }] };
}
