/**
 * What the proxy checks and reads in a backend's values answer before it
 * passes it on to the HPA: the body's shape ({@link checkValueList}), how
 * long it may be re-used ({@link freshnessMs}, the `Cache-Control` contract
 * with the bridge), and how long to back off after a failure
 * ({@link backoffMs}, the backend's own `Retry-After`).
 *
 * Source of the shapes: k8s.io/metrics `pkg/apis/external_metrics/v1beta1/types.go`
 * (ExternalMetricValue: `metricName string`, `metricLabels map[string]string`,
 * `timestamp metav1.Time`, `window *int64`, `value resource.Quantity`) and
 * apimachinery `pkg/api/resource/quantity.go` (the Quantity grammar).
 */
import { fitsMilliValue, parseDecimal, QuantityError, type Decimal } from "../../k8s/quantity.ts";
import { parseRfc3339 } from "../../k8s/time.ts";
import { clampRetryAfter, MAX_RETRY_AFTER_SECONDS, MIN_RETRY_AFTER_SECONDS } from "../../k8s/status.ts";

/**
 * Why a values answer is refused: `field` is a JSON path such as
 * `items[0].value`; `message` reads after "answered 200 " (`with items[0].value
 * not a Kubernetes Quantity: "NaN"`).
 */
export class ValueListError extends Error {
  readonly field: string;
  constructor(field: string, message: string) {
    super(message);
    this.name = "ValueListError";
    this.field = field;
  }
}

/**
 * Quantity text: `<sign><number><suffix>` with a Decimal SI suffix
 * (`n u m k M G T P E`), a Binary SI suffix (`Ki Mi Gi Ti Pi Ei`) or none
 * (quantity.go, the grammar in the `Quantity` doc comment). The decimal
 * exponent form (`1e3`) is refused although ParseQuantity reads it: no
 * adapter builds it (KEDA, prometheus-adapter and the bridge send
 * canonical Decimal SI text), so it only ever comes from a backend printing
 * floats, as do `NaN` and `Infinity`.
 */
const QUANTITY_TEXT = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$/;
const DECIMAL_SUFFIX: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_SUFFIX: Readonly<Record<string, number>> = { Ki: 1, Mi: 2, Gi: 3, Ti: 4, Pi: 5, Ei: 6 };
/** RFC 3339 date-time as Go's `time.Parse(time.RFC3339, …)` reads `metav1.Time`. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/;

/**
 * The exact value of Quantity text.
 *
 * @returns the value as a {@link Decimal}, e.g. `"1500m"` → 1.5, `"2Ki"` → 2048
 * @throws ValueListError naming `field` when the text is not a Quantity
 *   (numbers, `NaN`, `Infinity`, `1e3`, whitespace, unknown suffixes)
 */
export function parseQuantityText(text: unknown, field: string): Decimal {
  const shown = typeof text === "string" ? JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text) : JSON.stringify(text);
  if (typeof text !== "string") throw new ValueListError(field, `with ${field} not a Quantity string: ${shown}`);
  const m = QUANTITY_TEXT.exec(text);
  if (m === null) throw new ValueListError(field, `with ${field} not a Kubernetes Quantity: ${shown}`);
  let number: Decimal;
  try {
    number = parseDecimal(m[1]!);
  } catch (err) {
    if (err instanceof QuantityError) throw new ValueListError(field, `with ${field} not a Kubernetes Quantity: ${err.message}`);
    throw err;
  }
  const suffix = m[2] ?? "";
  if (suffix in BINARY_SUFFIX) return { mantissa: number.mantissa * 1024n ** BigInt(BINARY_SUFFIX[suffix]!), exponent: number.exponent };
  return { mantissa: number.mantissa, exponent: number.exponent + (DECIMAL_SUFFIX[suffix] ?? 0) };
}

/**
 * Check a 200 answer's body: an `ExternalMetricValueList` with at least one
 * item, every item with a string `metricName`, `metricLabels` an object of
 * strings (or null/absent: KEDA sends `null`, which Go decodes as no labels),
 * an RFC 3339 `timestamp`, an integer `window` when present, and a `value`
 * that is Quantity text whose `MilliValue()` fits int64 (`fitsMilliValue`),
 * so the HPA reads the number the backend meant.
 *
 * @param text the body as received
 * @throws ValueListError naming the first bad field (`kind`, `items`,
 *   `items[3].value`, …)
 */
export function checkValueList(text: string): void {
  const body = parseBody(text);
  if (!isObject(body) || body["kind"] !== "ExternalMetricValueList") throw new ValueListError("kind", "without an ExternalMetricValueList");
  const items = body["items"];
  if (!Array.isArray(items)) throw new ValueListError("items", "without an items list");
  if (items.length === 0) throw new ValueListError("items", "with no items (an empty read is not a value)");
  items.forEach((item: unknown, i) => {
    const at = `items[${i}]`;
    if (!isObject(item)) throw new ValueListError(at, `with ${at} not an object`);
    if (typeof item["metricName"] !== "string") throw new ValueListError(`${at}.metricName`, `with ${at}.metricName not a string`);
    const labels = item["metricLabels"];
    if (labels !== undefined && labels !== null) {
      if (!isObject(labels)) throw new ValueListError(`${at}.metricLabels`, `with ${at}.metricLabels not an object`);
      for (const [k, v] of Object.entries(labels)) {
        if (typeof v !== "string") throw new ValueListError(`${at}.metricLabels`, `with ${at}.metricLabels[${JSON.stringify(k.slice(0, 63))}] not a string`);
      }
    }
    checkSample(item, at, "window");
  });
}

/**
 * Check a 200 answer of a custom.metrics.k8s.io read: a `MetricValueList`
 * of `custom.metrics.k8s.io/<version>` (k8s.io/metrics
 * `pkg/apis/custom_metrics/v1beta2/types.go`, `v1beta1/types.go`) whose
 * every item has a `describedObject` with string `kind` and `name`, the
 * metric's name (v1beta2 `metric.name`, v1beta1 `metricName`), an RFC 3339
 * `timestamp`, an integer window when present (v1beta2 `windowSeconds`,
 * v1beta1 `window`) and a `value` that is Quantity text whose `MilliValue()`
 * fits int64 (as {@link checkValueList}). An Object or namespace read
 * (`exactlyOne`) has exactly one item; a Pods read any number (a pod
 * without data has none: the HPA counts it missing, never 0).
 *
 * @throws ValueListError naming the first bad field
 */
export function checkMetricValueList(text: string, version: "v1beta2" | "v1beta1", exactlyOne: boolean): void {
  const body = parseBody(text);
  if (!isObject(body) || body["kind"] !== "MetricValueList") throw new ValueListError("kind", "without a MetricValueList");
  if (body["apiVersion"] !== `custom.metrics.k8s.io/${version}`) throw new ValueListError("apiVersion", `with apiVersion ${JSON.stringify(String(body["apiVersion"]).slice(0, 60))}, not custom.metrics.k8s.io/${version}`);
  const items = body["items"];
  if (!Array.isArray(items)) throw new ValueListError("items", "without an items list");
  if (exactlyOne && items.length !== 1) throw new ValueListError("items", `with ${items.length} items for one object (exactly one is a value)`);
  items.forEach((item: unknown, i) => {
    const at = `items[${i}]`;
    if (!isObject(item)) throw new ValueListError(at, `with ${at} not an object`);
    const described = item["describedObject"];
    if (!isObject(described) || typeof described["kind"] !== "string" || typeof described["name"] !== "string") {
      throw new ValueListError(`${at}.describedObject`, `with ${at}.describedObject not an object reference (kind, name)`);
    }
    const name = version === "v1beta2" ? (isObject(item["metric"]) ? item["metric"]["name"] : undefined) : item["metricName"];
    const nameField = version === "v1beta2" ? "metric.name" : "metricName";
    if (typeof name !== "string") throw new ValueListError(`${at}.${nameField}`, `with ${at}.${nameField} not a string`);
    checkSample(item, at, version === "v1beta2" ? "windowSeconds" : "window");
  });
}

/**
 * How long a values answer may be stored, ms: min(`ttlMs`, the backend's
 * `Cache-Control: max-age`). `no-store`, `no-cache` and `max-age=0` give 0
 * (only shared while in flight); a malformed `max-age` gives 0 (fail
 * closed); no `Cache-Control` gives `ttlMs` (passthrough adapters send none).
 *
 * @param cacheControl the backend's header value, or undefined
 * @param ttlMs the proxy's own TTL, ms
 */
export function freshnessMs(cacheControl: string | undefined, ttlMs: number): number {
  if (cacheControl === undefined) return ttlMs;
  let ms = ttlMs;
  for (const raw of cacheControl.split(",")) {
    const [name, value] = raw.trim().split("=", 2) as [string, string | undefined];
    const directive = name.toLowerCase();
    if (directive === "no-store" || directive === "no-cache") return 0;
    if (directive === "max-age") {
      const v = value?.replace(/^"|"$/g, "");
      if (v === undefined || !/^[0-9]{1,10}$/.test(v)) return 0;
      ms = Math.min(ms, Number(v) * 1000);
    }
  }
  return ms;
}

/**
 * Back-off after a failed values read, ms: the backend's `Retry-After`
 * (delta-seconds or an HTTP-date, RFC 9110 §10.2.3), else the Status body's
 * `details.retryAfterSeconds`, else {@link MIN_RETRY_AFTER_SECONDS} (1 s);
 * clamped to [1 s, {@link MAX_RETRY_AFTER_SECONDS} (30 s)] and rounded up to
 * whole seconds (`clampRetryAfter`, shared/k8s/status.ts).
 *
 * @param retryAfter the header value, or undefined
 * @param detailsSeconds `details.retryAfterSeconds` of a Status body, or undefined
 * @param nowMs the current time, ms since epoch (for an HTTP-date)
 */
export function backoffMs(retryAfter: string | undefined, detailsSeconds: unknown, nowMs: number): number {
  let seconds: number | undefined;
  const header = retryAfter?.trim();
  if (header !== undefined && header !== "") {
    if (/^[0-9]{1,10}$/.test(header)) seconds = Number(header);
    else {
      const at = Date.parse(header);
      if (!Number.isNaN(at)) seconds = (at - nowMs) / 1000;
    }
  }
  if (seconds === undefined && typeof detailsSeconds === "number" && Number.isFinite(detailsSeconds)) seconds = detailsSeconds;
  return clampRetryAfter(seconds ?? MIN_RETRY_AFTER_SECONDS) * 1000;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A backend answer's JSON. @throws ValueListError when it is not JSON */
function parseBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new ValueListError("", "with a body that is not JSON");
  }
}

/**
 * The sample fields every value list item has (External and custom alike):
 * an RFC 3339 `timestamp` (the shape Go reads, and a date that exists:
 * Date.parse takes 2026-02-30 as 2 March), an integer window when present
 * (`windowField`: `window`, or v1beta2's `windowSeconds`) and a `value`
 * whose `MilliValue()` fits int64.
 *
 * @throws ValueListError naming the field
 */
function checkSample(item: Record<string, unknown>, at: string, windowField: "window" | "windowSeconds"): void {
  const ts = item["timestamp"];
  if (typeof ts !== "string" || !RFC3339.test(ts) || parseRfc3339(ts) === undefined) {
    throw new ValueListError(`${at}.timestamp`, `with ${at}.timestamp not an RFC 3339 time: ${JSON.stringify(typeof ts === "string" ? ts.slice(0, 40) : ts)}`);
  }
  const window = item[windowField];
  if (window !== undefined && window !== null && !Number.isSafeInteger(window)) throw new ValueListError(`${at}.${windowField}`, `with ${at}.${windowField} not an integer`);
  const value = parseQuantityText(item["value"], `${at}.value`);
  if (!fitsMilliValue(value)) {
    throw new ValueListError(`${at}.value`, `with ${at}.value ${JSON.stringify(item["value"])} too large for the HPA (its MilliValue does not fit int64)`);
  }
}
