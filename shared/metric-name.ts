/**
 * External metric names as they travel in request paths.
 *
 * - client-go lowercases the resource segment (`rest/request.go`,
 *   `strings.ToLower(r.resource)`), so names are compared lowercased.
 * - A path segment may not contain `/` or `%` and may not be `.` or `..`
 *   (apiserver `pkg/endpoints/handlers/rest.go` path-segment validation,
 *   apimachinery `pkg/api/validation/path/name.go`).
 * - Names that need a `/` (Cloud Monitoring metric types) spell it `\|`
 *   (the custom-metrics-apiserver convention) or a bare `|` (the Cloud
 *   Monitoring adapter's convention); both are accepted.
 */
import { badRequest } from "./k8s/status.ts";

/** Longest metric name segment accepted, in characters. */
export const MAX_METRIC_NAME_LENGTH = 512;

/**
 * Check one metric name, already percent-decoded by the request path parser
 * (shared/k8s/request-path.ts, which refuses `.`, `..`, `/`, `%` and control
 * characters in any segment), and give its rule lookup key: `\|` and `|`
 * turned into `/`, lowercased.
 *
 * @param requested the decoded path segment naming the metric
 * @returns `{ requested, key }`: `requested` is the name as sent (used in
 *   `metricName` of the answer), `key` the lookup key
 * @throws StatusError 400 when the name is empty, `.`, `..`, longer than
 *   {@link MAX_METRIC_NAME_LENGTH} characters, or contains `/`, `%` or a
 *   control character
 */
export function metricName(requested: string): { requested: string; key: string } {
  if (requested.length === 0) throw badRequest("metric name must not be empty");
  if (requested.length > MAX_METRIC_NAME_LENGTH) {
    throw badRequest(`metric name is longer than ${MAX_METRIC_NAME_LENGTH} characters`);
  }
  if (requested === "." || requested === "..") {
    throw badRequest(`metric name may not be ${JSON.stringify(requested)}`);
  }
  for (const bad of ["/", "%"]) {
    if (requested.includes(bad)) {
      throw badRequest(`metric name ${JSON.stringify(requested)} may not contain ${JSON.stringify(bad)}`);
    }
  }
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(requested)) {
    throw badRequest(`metric name ${JSON.stringify(requested)} may not contain control characters`);
  }
  return { requested, key: metricKey(requested) };
}

/**
 * The case-insensitive lookup key of a metric name: `\|` and `|` become
 * `/`, then lowercased. Used both for configured rule names and requests.
 */
export function metricKey(name: string): string {
  return name.replaceAll("\\|", "/").replaceAll("|", "/").toLowerCase();
}

/**
 * The name a metric is listed under in discovery (and can be requested by):
 * the lookup key with `/` written as `|`.
 */
export function discoveryName(name: string): string {
  return metricKey(name).replaceAll("/", "|");
}
