/**
 * The answer of a values read: the `ExternalMetricValueList` built from a
 * provider's series (k8s.io/metrics `pkg/apis/external_metrics/v1beta1/types.go`),
 * checked (staleness, the Quantity range the HPA can read back) and
 * serialized once, and that answer or a Status as the status, headers and
 * body every runtime sends ({@link valuesHttpAnswer}).
 */
import { fitsMilliValue, formatDecimal, formatQuantity, type Decimal } from "../k8s/quantity.ts";
import { internalError, serviceUnavailable, StatusError } from "../k8s/status.ts";
import { externalMetricValueList, formatTimestamp, type ExternalMetricValue } from "../k8s/types.ts";
import type { MetricRule, Series } from "../providers/types.ts";

/**
 * The 503 for a series older than its rule's `maxAgeSeconds`: no stale value
 * is ever reported (an External answer here, a custom one in
 * ./custom-read.ts).
 *
 * @param ageMs the series' age at the read, ms
 */
export function staleSeries(rule: MetricRule, series: Series, ageMs: number): StatusError {
  return serviceUnavailable(
    `metric ${rule.name}: newest value of series ${JSON.stringify(series.labels)} is ${Math.round(ageMs / 1000)} s old, ` +
      `older than maxAgeSeconds (${rule.maxAgeSeconds}); no stale value is reported`,
  );
}

/**
 * A values read that succeeded: the items and their JSON, serialized once
 * (`text`, the body every runtime sends and the proxy stores). The same
 * object is returned again while the same readings come back (see
 * {@link answerFor}); never change it.
 */
export interface ValuesAnswer {
  /** the `ExternalMetricValueList` items, one per series */
  readonly items: readonly ExternalMetricValue[];
  /** the `ExternalMetricValueList` JSON of {@link items} */
  readonly text: string;
  /** sum of the values, as a float: what the HPA compares with its target (the served-value gauge, the audit record's `value`) */
  readonly sum: number;
  /** ms since the epoch: the oldest item's timestamp, or the build time when that was earlier */
  readonly oldest: number;
  /** the rule it was built for */
  readonly rule: MetricRule;
  /** the series it was built from: the readings {@link answerFor} compares */
  readonly series: readonly Series[];
}

/** Longest answer text kept to be served again, characters. */
export const MEMO_ANSWER_LENGTH = 2048;

/**
 * The answer for `series` read by `rule` at `now`: `last` itself when it
 * was built from the same readings (same label object and `Decimal`, both
 * immutable and shared by every hit of one cached reading,
 * `Provider.peek`; same timestamp and window) and is still within
 * `maxAgeSeconds`, else a new one. Fresh objects (a load, a provider
 * without `peek`) never match, so the answer is then built again: the
 * comparison by identity is only a shortcut.
 *
 * @param requested the metric name as requested (`metricName` of each item)
 * @throws StatusError 503 for an empty read ("no value is reported", never 0)
 *   or a series older than `rule.maxAgeSeconds`; 500 for a value the HPA
 *   could not read back exactly (more than 18 digits, or a MilliValue past int64)
 */
export function answerFor(rule: MetricRule, requested: string, series: readonly Series[], now: number, last: ValuesAnswer | undefined): ValuesAnswer {
  if (series.length === 0) {
    throw serviceUnavailable(`metric ${rule.name}: provider ${rule.provider} returned no series; no value is reported`);
  }
  if (last !== undefined && last.rule === rule && sameReadings(last.series, series) && now - last.oldest <= rule.maxAgeSeconds * 1000) return last;
  let sum = 0;
  let oldest = now;
  const items: ExternalMetricValue[] = series.map((s) => {
    const ageMs = now - s.timestamp;
    if (ageMs > rule.maxAgeSeconds * 1000) throw staleSeries(rule, s, ageMs);
    const quantity = quantityOf(s.value);
    if (quantity === null) {
      throw internalError(
        `metric ${rule.name}: value ${formatDecimal(s.value)} of series ${JSON.stringify(s.labels)} cannot be read back ` +
          `exactly by the HPA (its Quantity ${formatQuantity(s.value)} has more than 18 digits, or its MilliValue overflows ` +
          `int64 past about 9.22e15); scale or round it in the metric rule`,
      );
    }
    sum += numberOf(s.value);
    if (s.timestamp < oldest) oldest = s.timestamp;
    const item: ExternalMetricValue = {
      metricName: requested,
      metricLabels: { ...s.labels },
      timestamp: timestampText(s.timestamp),
      value: quantity,
    };
    if (s.windowSeconds !== undefined) item.window = s.windowSeconds;
    return item;
  });
  return { items, text: JSON.stringify(externalMetricValueList(items)), sum, oldest, rule, series };
}

/**
 * `max-age` of a values answer, whole seconds: how long every item stays
 * within its rule's `maxAgeSeconds` — max(0, floor(maxAgeSeconds − age of
 * the oldest item)). The contract with the in-cluster proxy (docs/proxy.md):
 * it stores the answer for at most min(its own TTL, this); `max-age=0` is
 * not stored.
 *
 * @param now ms since the epoch
 */
export function freshFor(answer: ValuesAnswer, now: number): number {
  return Math.max(0, Math.floor(answer.rule.maxAgeSeconds - (now - answer.oldest) / 1000));
}

/** What a runtime sends for a values read: status, headers (plain object) and body text. */
export interface ValuesHttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A values read's outcome as HTTP: 200 with `Content-Type: application/json`
 * and `Cache-Control: private, max-age=<freshFor>` (`private`: the answer
 * was made for one caller's authorization), or the Status with its code,
 * `Cache-Control: no-store` and its own headers (`Retry-After` where set).
 * The same for the Hono routes of every runtime and the proxy's
 * in-process backend.
 *
 * @param now ms since the epoch (for `max-age`)
 */
export function valuesHttpAnswer(outcome: ValuesAnswer | StatusError, now: number): ValuesHttpAnswer {
  if (!(outcome instanceof StatusError)) {
    return { status: 200, body: outcome.text, headers: { "Content-Type": "application/json", "Cache-Control": `private, max-age=${freshFor(outcome, now)}` } };
  }
  return statusHttpAnswer(outcome);
}

/** A Status as HTTP: its code, JSON, `Cache-Control: no-store` and its own headers (`Retry-After` where set). */
export function statusHttpAnswer(err: StatusError): ValuesHttpAnswer {
  const headers: Record<string, string> = { "Content-Type": "application/json", "Cache-Control": "no-store" };
  Object.assign(headers, err.headers());
  return { status: err.code, body: JSON.stringify(err.toStatus()), headers };
}

/**
 * Whether `now` holds the same readings as `before`, in the same order: the
 * same label object and `Decimal` (both immutable and shared by every hit of
 * one cached reading), timestamp and window.
 */
function sameReadings(before: readonly Series[], now: readonly Series[]): boolean {
  if (before.length !== now.length) return false;
  for (let i = 0; i < now.length; i++) {
    const a = before[i]!;
    const b = now[i]!;
    if (a.labels !== b.labels || a.value !== b.value || a.timestamp !== b.timestamp || a.windowSeconds !== b.windowSeconds) return false;
  }
  return true;
}

/** Each value as a float for the served-value gauge, made once per reading (values are shared, immutable). */
const numbers = new WeakMap<Decimal, number>();

function numberOf(value: Decimal): number {
  let n = numbers.get(value);
  if (n === undefined) {
    n = Number(formatDecimal(value));
    numbers.set(value, n);
  }
  return n;
}

/**
 * The Quantity text of each value already checked, or null when the HPA could
 * not read it back exactly ({@link fitsMilliValue}). Values are immutable
 * `Decimal` objects that every hit of one cached reading shares, so the
 * bigint work is done once per reading; entries live as long as their value.
 */
const quantities = new WeakMap<Decimal, string | null>();

function quantityOf(value: Decimal): string | null {
  let quantity = quantities.get(value);
  if (quantity === undefined) {
    quantity = fitsMilliValue(value) ? formatQuantity(value) : null;
    quantities.set(value, quantity);
  }
  return quantity;
}

/** {@link formatTimestamp} of the last few series timestamps (a cached reading's is the same on every hit); at most 1,024. */
const timestamps = new Map<number, string>();

function timestampText(ms: number): string {
  let text = timestamps.get(ms);
  if (text === undefined) {
    text = formatTimestamp(ms);
    if (timestamps.size >= 1024) timestamps.clear();
    timestamps.set(ms, text);
  }
  return text;
}
