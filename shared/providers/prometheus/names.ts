/**
 * Prometheus names, checked without the PromQL grammar: what the config
 * schema (`./schema.ts`, imported by every deployment) and the query
 * builder (`./promql.ts`) share.
 */

/** A label name Prometheus accepts unquoted: `[a-zA-Z_][a-zA-Z0-9_]*` (prometheus/common model/labels.go, legacy validation). */
export const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Whether `name` is a label name in the legacy charset ({@link LABEL_NAME}). */
export function isLabelName(name: string): boolean {
  return LABEL_NAME.test(name);
}
