/**
 * The bridge's metrics on AWS Lambda: CloudWatch Embedded Metric Format
 * (EMF) in the per-read audit record, so one log line per read is both the
 * audit trail and the metrics — CloudWatch extracts the metrics from the
 * log group without an agent or an API call (specification:
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html).
 *
 * The record gains `_aws: { Timestamp, CloudWatchMetrics: [directives] }`
 * and, as top-level members, the metric values the directives name (the
 * Prometheus names of `./metrics.ts`, where a Prometheus label becomes an
 * EMF dimension):
 *
 * | metric | unit | dimensions |
 * |---|---|---|
 * | `emb_bridge_requests_total` (1), `emb_bridge_request_duration_seconds` | Count, Seconds | provider, metric |
 * | `emb_bridge_metric_value`, `emb_bridge_metric_value_age_seconds` (on a served value) | None, Seconds | provider, metric |
 * | `emb_bridge_cache_requests_total` (1) | Count | provider, cache (hit, load) |
 * | `emb_bridge_backend_errors_total`, `emb_bridge_backend_throttles_total` (on a failure) | Count | provider, errorKind |
 * | `emb_bridge_policy_decisions_total` (1) | Count | decision (allow, deny) |
 *
 * Dimensions are bounded like the Prometheus labels: rule and provider
 * names from the config, small fixed sets; never the selector or caller
 * (each dimension combination is a billed CloudWatch custom metric).
 * Only values-read records (those with `metric` and `provider`) get `_aws`.
 */
import type { LogRecord } from "./log.ts";

/** The CloudWatch namespace of the metrics, unless `BRIDGE_METRICS_NAMESPACE` names another. */
export const DEFAULT_EMF_NAMESPACE = "ExternalMetricsBridge";

interface Directive {
  Namespace: string;
  Dimensions: string[][];
  Metrics: { Name: string; Unit: string }[];
}

/**
 * `record` with EMF metadata and metric members when it is a values read's
 * audit record (`shared/app.ts`), else `record` unchanged.
 *
 * @param now ms since the epoch (`_aws.Timestamp`)
 */
export function withEmf(record: LogRecord, namespace: string = DEFAULT_EMF_NAMESPACE, now: number = Date.now()): LogRecord {
  const provider = record["provider"];
  const metric = record["metric"];
  if (typeof provider !== "string" || typeof metric !== "string") return record;
  const out: LogRecord = { ...record };
  const directives: Directive[] = [];
  const main: Directive = {
    Namespace: namespace,
    Dimensions: [["provider", "metric"]],
    Metrics: [
      { Name: "emb_bridge_requests_total", Unit: "Count" },
      { Name: "emb_bridge_request_duration_seconds", Unit: "Seconds" },
    ],
  };
  out["emb_bridge_requests_total"] = 1;
  out["emb_bridge_request_duration_seconds"] = typeof record["durationMs"] === "number" ? record["durationMs"] / 1000 : 0;
  if (typeof record["value"] === "number") {
    main.Metrics.push({ Name: "emb_bridge_metric_value", Unit: "None" }, { Name: "emb_bridge_metric_value_age_seconds", Unit: "Seconds" });
    out["emb_bridge_metric_value"] = record["value"];
    out["emb_bridge_metric_value_age_seconds"] = record["ageSeconds"] ?? 0;
  }
  directives.push(main);
  if (typeof record["cache"] === "string") {
    directives.push({ Namespace: namespace, Dimensions: [["provider", "cache"]], Metrics: [{ Name: "emb_bridge_cache_requests_total", Unit: "Count" }] });
    out["emb_bridge_cache_requests_total"] = 1;
  }
  const kind = record["errorKind"];
  if (typeof kind === "string" && record["cache"] !== undefined) {
    // a failure after the policy allowed the read: the backend's (or its answer's)
    const metrics = [{ Name: "emb_bridge_backend_errors_total", Unit: "Count" }];
    out["emb_bridge_backend_errors_total"] = 1;
    if (kind === "throttled") {
      metrics.push({ Name: "emb_bridge_backend_throttles_total", Unit: "Count" });
      out["emb_bridge_backend_throttles_total"] = 1;
    }
    directives.push({ Namespace: namespace, Dimensions: [["provider", "errorKind"]], Metrics: metrics });
  }
  if (typeof record["decision"] === "string") {
    directives.push({ Namespace: namespace, Dimensions: [["decision"]], Metrics: [{ Name: "emb_bridge_policy_decisions_total", Unit: "Count" }] });
    out["emb_bridge_policy_decisions_total"] = 1;
  }
  out["_aws"] = { Timestamp: now, CloudWatchMetrics: directives };
  return out;
}
