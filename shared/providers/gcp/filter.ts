/**
 * Cloud Monitoring filter strings, built so that no value can change their
 * structure (Cloud Monitoring "Monitoring filters" reference,
 * https://cloud.google.com/monitoring/api/v3/filters: comparisons
 * `<selector> = <string>`, combined with `AND`, `OR` and parentheses;
 * strings in double quotes, where a backslash escapes the next character).
 *
 * Every value — label values from a selector, static values from the
 * config — goes through {@link quoteFilterString}: `\` becomes `\\` and `"`
 * becomes `\"`, so the literal always ends at the closing quote the builder
 * wrote; `AND`, `OR`, parentheses or `=` inside a value stay text. Control
 * characters are refused outright: no Kubernetes label value contains one,
 * and refusing is safer than relying on an escape the reference does not
 * spell out. Field names are never taken from requests; those from the
 * config are checked against {@link FILTER_FIELD}.
 */

/** A field a filter may compare: `metric.type`, `resource.type`, `metric.labels.K`, `resource.labels.K`. */
export const FILTER_FIELD = /^(?:metric\.type|resource\.type|(?:metric|resource)\.labels\.[A-Za-z_][A-Za-z0-9_]{0,99})$/;

/** Thrown for a value or field that cannot be written into a filter. */
export class FilterError extends Error {
  override name = "FilterError";
}

/** Why `value` cannot be quoted, or `undefined` when it can. */
export function filterValueProblem(value: string): string | undefined {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) return "contains a control character";
  if (value.length > 1024) return "is longer than 1024 characters";
  return undefined;
}

/**
 * `value` as a filter string literal: `"…"` with `\` and `"` escaped.
 *
 * @throws FilterError when the value contains a control character or is
 *   longer than 1024 characters
 */
export function quoteFilterString(value: string): string {
  const problem = filterValueProblem(value);
  if (problem !== undefined) throw new FilterError(`filter value ${JSON.stringify(value.slice(0, 80))} ${problem}`);
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** A comparison `field = "value"`. @throws FilterError on a bad field or value */
export function filterEquals(field: string, value: string): string {
  if (!FILTER_FIELD.test(field)) throw new FilterError(`"${field}" is not a filter field (metric.type, resource.type, metric.labels.K, resource.labels.K)`);
  return `${field} = ${quoteFilterString(value)}`;
}

/** What a ListTimeSeries filter selects. */
export interface TimeSeriesFilterSpec {
  /** `metric.type`, e.g. `pubsub.googleapis.com/subscription/num_undelivered_messages` */
  metricType: string;
  /** `resource.type`, e.g. `pubsub_subscription` */
  resourceType?: string;
  /** comparisons every series must satisfy, `[field, value]` */
  fixed: readonly (readonly [string, string])[];
  /**
   * Alternatives, one per series of a batch: a series must satisfy every
   * comparison of at least one alternative. Empty: no alternatives.
   */
  alternatives: readonly (readonly (readonly [string, string])[])[];
}

/**
 * The filter for `ListTimeSeries`:
 * `metric.type = "T" AND resource.type = "R" AND f = "v" … AND ((a = "1" AND b = "2") OR (…))`.
 *
 * @throws FilterError on a bad field or value
 */
export function timeSeriesFilter(spec: TimeSeriesFilterSpec): string {
  const parts = [filterEquals("metric.type", spec.metricType)];
  if (spec.resourceType !== undefined) parts.push(filterEquals("resource.type", spec.resourceType));
  for (const [field, value] of spec.fixed) parts.push(filterEquals(field, value));
  const alternatives = spec.alternatives.filter((a) => a.length > 0);
  if (alternatives.length > 0) {
    const terms = alternatives.map((alt) => `(${alt.map(([f, v]) => filterEquals(f, v)).join(" AND ")})`);
    parts.push(terms.length === 1 ? terms[0]! : `(${terms.join(" OR ")})`);
  }
  return parts.join(" AND ");
}
