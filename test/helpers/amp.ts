/**
 * The config the `amp` flavour's suites read with: one `prometheus`
 * provider `amp` of flavour `amp` (region, workspace, the front door's
 * endpoint, the given credentials) and one rule `queue_ready` summing
 * `emb_queue_ready` by `queue` (docs/providers/prometheus.md).
 */
import { OPEN_CONFIG_HEAD } from "./bridge.ts";

/**
 * @param amp the workspace's region and id, and the SigV4 front door's endpoint
 * @param credentials the provider's `credentials:` (YAML flow text)
 * @param labels fixed matchers of the rule (YAML flow text), e.g. `{ job: exporter }`
 */
export function ampConfig(amp: { region: string; workspaceId: string; endpoint: string }, credentials: string, labels?: string): string {
  return `
${OPEN_CONFIG_HEAD}providers:
  amp:
    type: prometheus
    flavour: amp
    region: ${amp.region}
    workspaceId: ${amp.workspaceId}
    endpoint: ${amp.endpoint}
    credentials: ${credentials}
metrics:
  - name: queue_ready
    provider: amp
    query: { series: emb_queue_ready, ${labels !== undefined ? `labels: ${labels}, ` : ""}selectorLabels: { queue: queue } }
`;
}
