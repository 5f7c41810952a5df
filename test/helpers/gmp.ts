/**
 * The bridge configuration shared by the Managed Service for Prometheus
 * suites (Node and Worker): one `gmp` provider of project `test-project`
 * and the `queue_ready` rule reading the gauge `emb_queue_ready` by queue,
 * every read allowed (not a policy test).
 */

/** The project the suites read. */
export const GMP_PROJECT = "test-project";

/**
 * A BridgeConfig YAML with the `gmp` provider at `endpoint` (the front's
 * origin, `test/fakes/gmp-front.ts`); `credentials` is the YAML flow mapping
 * of `credentials:`; `maxAgeSeconds` (default 300) and `cacheTTLSeconds`
 * (default 0) are the defaults.
 */
export function gmpConfig(endpoint: string, options: { credentials: string; maxAgeSeconds?: number; cacheTTLSeconds?: number }): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: ${options.maxAgeSeconds ?? 300}, cacheTTLSeconds: ${options.cacheTTLSeconds ?? 0} }
providers:
  gmp:
    type: prometheus
    flavour: gmp
    project: ${GMP_PROJECT}
    endpoint: ${endpoint}
    credentials: ${options.credentials}
    timeoutSeconds: 2
metrics:
  - name: queue_ready
    provider: gmp
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
`;
}
