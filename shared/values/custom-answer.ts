/**
 * The answers of `custom.metrics.k8s.io` reads: a `MetricValueList` in
 * v1beta2 or v1beta1 built from typed items (the described object, a
 * `Decimal` value, its time and window) and serialized once, and the
 * `metav1.LabelSelector` object form of a parsed metric selector that the
 * items carry.
 *
 * Sources: k8s.io/metrics v0.37.1 `pkg/apis/custom_metrics/v1beta2/types.go`
 * and `v1beta1/types.go` (field names, json tags, omitempty: see
 * shared/k8s/custom-types.ts), apimachinery v0.37.1
 * `pkg/apis/meta/v1/helpers.go` `ParseToLabelSelector` and `types.go`
 * `LabelSelector`. `test/wire/custom-metrics.oracle.test.ts` decodes these
 * answers with the real Go client (the HPA controller's) in both versions
 * and compares the selector form with `ParseToLabelSelector`.
 *
 * Which items an answer may hold (only pods that have data, exactly one for
 * an object) and the staleness checks are the read's decisions, not this
 * file's.
 */
import { CUSTOM_GROUP, customGroupVersion, type CustomVersion, type MetricValueList, type MetricValueV1beta1, type MetricValueV1beta2, type ObjectReference } from "../k8s/custom-types.ts";
import { fitsMilliValue, formatDecimal, formatQuantity, type Decimal } from "../k8s/quantity.ts";
import { SelectorError, type LabelSelector, type Selector } from "../k8s/selector.ts";
import { internalError } from "../k8s/status.ts";
import { formatTimestamp } from "../k8s/types.ts";

/** Largest `windowSeconds` accepted: Go's `*int64`, kept to integers a JS number holds exactly. */
const MAX_WINDOW_SECONDS = Number.MAX_SAFE_INTEGER;

/**
 * One value of a custom metric, before it is put on the wire.
 *
 * - `describedObject`: the object the value describes (a pod of a Pods
 *   read, the object of an Object read, the Namespace of a namespace read);
 * - `value`: exact decimal, written as a canonical Quantity;
 * - `timestamp`: ms since the epoch, the backend's own time of the value
 *   (written with whole seconds, truncated);
 * - `windowSeconds`: seconds the value was aggregated over, a non-negative
 *   integer; absent for an instantaneous value.
 */
export interface CustomMetricItem {
  readonly describedObject: ObjectReference;
  readonly value: Decimal;
  readonly timestamp: number;
  readonly windowSeconds?: number;
}

/**
 * A custom metrics answer: the typed `MetricValueList` and its JSON
 * (`text`, serialized once: the body every runtime sends). Never change it.
 */
export interface CustomAnswer<V extends CustomVersion = CustomVersion> {
  readonly version: V;
  readonly list: MetricValueList<V>;
  readonly text: string;
}

/**
 * The `MetricValueList` of `version` for `items` (order kept), every item
 * naming `metric` and carrying `selector`, serialized once.
 *
 * @param metric the metric name as requested (the path's metric segment)
 * @param selector the metric selector of the read as {@link labelSelectorObject}
 *   gives it, or `null` when the read had no `metricLabelSelector` (Go's
 *   nil; written `null`, the field has no omitempty in either version)
 * @throws StatusError 500 for a value the HPA could not read back exactly
 *   (a Quantity of more than 18 digits, or a MilliValue past int64)
 * @throws RangeError for a timestamp that is not a date, or a window that is
 *   not a non-negative safe integer (a caller's bug, never a tenant's input)
 */
export function customAnswer<V extends CustomVersion>(version: V, metric: string, selector: LabelSelector | null, items: readonly CustomMetricItem[]): CustomAnswer<V> {
  const list = metricValueList(version, metric, selector, items);
  return { version, list, text: JSON.stringify(list) };
}

/**
 * The typed `MetricValueList` of {@link customAnswer}: v1beta2 items are
 * `{describedObject, metric: {name, selector}, timestamp, windowSeconds?,
 * value}`, v1beta1 items `{describedObject, metricName, timestamp, window?,
 * value, selector}`; the list is `{kind: "MetricValueList", apiVersion:
 * "custom.metrics.k8s.io/<version>", metadata: {}, items}`. Errors as
 * {@link customAnswer}.
 */
export function metricValueList<V extends CustomVersion>(version: V, metric: string, selector: LabelSelector | null, items: readonly CustomMetricItem[]): MetricValueList<V> {
  const wire = items.map((item) => {
    const describedObject = objectReference(item.describedObject);
    const timestamp = formatTimestamp(item.timestamp);
    const value = quantityText(metric, item);
    const window = windowOf(item.windowSeconds);
    // fields in the Go types' order; the window only when set (omitempty)
    if (version === "v1beta2") {
      const v: MetricValueV1beta2 =
        window === undefined
          ? { describedObject, metric: { name: metric, selector }, timestamp, value }
          : { describedObject, metric: { name: metric, selector }, timestamp, windowSeconds: window, value };
      return v;
    }
    const v: MetricValueV1beta1 =
      window === undefined
        ? { describedObject, metricName: metric, timestamp, value, selector }
        : { describedObject, metricName: metric, timestamp, window, value, selector };
    return v;
  });
  return { kind: "MetricValueList", apiVersion: customGroupVersion(version), metadata: {}, items: wire } as MetricValueList<V>;
}

/** The reference in Go's field order (kind, namespace, name, apiVersion), empty strings omitted as Go's omitempty does. */
function objectReference(ref: ObjectReference): ObjectReference {
  const out = { kind: ref.kind } as ObjectReference;
  if (ref.namespace !== undefined && ref.namespace !== "") out.namespace = ref.namespace;
  out.name = ref.name;
  if (ref.apiVersion !== "") out.apiVersion = ref.apiVersion;
  return out;
}

function quantityText(metric: string, item: CustomMetricItem): string {
  if (fitsMilliValue(item.value)) return formatQuantity(item.value);
  throw internalError(
    `${CUSTOM_GROUP} metric ${metric}: value ${formatDecimal(item.value)} of ${item.describedObject.kind} ${item.describedObject.name} cannot be read back ` +
      `exactly by the HPA (more than 18 digits, or a MilliValue past int64); scale or round it in the metric rule`,
  );
}

function windowOf(seconds: number | undefined): number | undefined {
  if (seconds === undefined) return undefined;
  if (!Number.isSafeInteger(seconds) || seconds < 0 || seconds > MAX_WINDOW_SECONDS) throw new RangeError(`windowSeconds must be a non-negative integer number of seconds, got ${seconds}`);
  return seconds;
}

/**
 * The `metav1.LabelSelector` object form of a parsed selector, as
 * apimachinery's `metav1.ParseToLabelSelector` builds it from the
 * selector's text (`pkg/apis/meta/v1/helpers.go`), in its JSON form:
 *
 * - `k=v` and `k==v` → `matchLabels[k] = v` (for a key given twice, the
 *   last requirement in key order wins, as Go's map assignment);
 * - `k in (…)`, `k notin (…)` → `{key, operator: "In"|"NotIn", values}`,
 *   values sorted and distinct (Go's `sets.String.List()`);
 * - `k` → `{key, operator: "Exists"}`, `!k` → `{key, operator: "DoesNotExist"}`
 *   (no `values`: omitempty);
 * - empty `matchLabels` / `matchExpressions` are omitted (omitempty), so the
 *   selector with no requirement is `{}`;
 * - `labels.Nothing()` (what a nil LabelSelector becomes) → `null`.
 *
 * Expressions keep the selector's requirement order (sorted by key, as
 * `labels.Parse` leaves them). JSON key order of `matchLabels` may differ
 * from Go's sorted map keys for keys that are array indices; decoders do
 * not care.
 *
 * @throws SelectorError with Go's message for what Go refuses: `!=`
 *   (`"!=" is not a valid label selector operator`), `>` and `<`
 *   (`"gt" isn't supported in label selectors`)
 */
export function labelSelectorObject(selector: Selector): LabelSelector | null {
  if (selector.nothing === true) return null;
  const matchLabels = new Map<string, string>();
  const matchExpressions: NonNullable<LabelSelector["matchExpressions"]> = [];
  for (const req of selector.requirements) {
    switch (req.operator) {
      case "=":
      case "==":
        matchLabels.set(req.key, req.values[0]!);
        break;
      case "in":
      case "notin":
        matchExpressions.push({ key: req.key, operator: req.operator === "in" ? "In" : "NotIn", values: [...new Set(req.values)] });
        break;
      case "exists":
        matchExpressions.push({ key: req.key, operator: "Exists" });
        break;
      case "!":
        matchExpressions.push({ key: req.key, operator: "DoesNotExist" });
        break;
      case "gt":
      case "lt":
        throw new SelectorError(`"${req.operator}" isn't supported in label selectors`);
      default:
        throw new SelectorError(`"${req.operator}" is not a valid label selector operator`);
    }
  }
  const out: LabelSelector = {};
  if (matchLabels.size > 0) out.matchLabels = Object.fromEntries(matchLabels);
  if (matchExpressions.length > 0) out.matchExpressions = matchExpressions;
  return out;
}
