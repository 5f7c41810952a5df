/**
 * The bridge configuration and Cloud Monitoring series shared by the
 * gcp-monitoring suites (Node, Lambda and Worker runtimes): one
 * `pubsub_backlog` rule reading Pub/Sub's undelivered-messages metric
 * (https://cloud.google.com/monitoring/api/metrics_gcp#gcp-pubsub) of
 * project `test-project`, every read allowed (not a policy test).
 */

/** The Cloud Monitoring metric type the `pubsub_backlog` rule reads. */
export const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";

/**
 * A BridgeConfig YAML with one `gcp` provider at `endpoint` (a fake's base
 * URL) and the `pubsub_backlog` rule. `credentials` is the YAML flow mapping
 * of `credentials:`; `cacheTTLSeconds` and `maxAgeSeconds` (seconds, default
 * 300) are the defaults; `providerLines` are extra provider keys, one
 * `key: value` per entry (e.g. `timeoutSeconds: 1`).
 */
export function gcpBacklogConfig(
  endpoint: string,
  options: { credentials: string; cacheTTLSeconds: number; maxAgeSeconds?: number; providerLines?: readonly string[] },
): string {
  const extra = (options.providerLines ?? []).map((line) => `    ${line}\n`).join("");
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: ${options.maxAgeSeconds ?? 300}, cacheTTLSeconds: ${options.cacheTTLSeconds} }
providers:
  gcp:
    type: gcp-monitoring
    project: test-project
    endpoint: ${endpoint}
    credentials: ${options.credentials}
${extra}metrics:
  - name: pubsub_backlog
    provider: gcp
    query:
      metricType: ${BACKLOG}
      resourceType: pubsub_subscription
      selectorLabels: { subscription: resource.labels.subscription_id }
`;
}

/**
 * The single series the external-account suites read: subscription
 * `orders` with a backlog of 42 messages, its point ended 30 seconds ago.
 */
export function ordersBacklogSeries() {
  return [
    {
      metricType: BACKLOG,
      resourceType: "pubsub_subscription",
      resourceLabels: { project_id: "test-project", subscription_id: "orders" },
      points: [{ end: Date.now() - 30_000, value: { int64Value: "42" } }],
    },
  ];
}
