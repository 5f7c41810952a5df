/**
 * The generic flavour's `tenant` (sent as `X-Scope-OrgID`, the header Mimir,
 * Cortex and Thanos read) through REAL servers: vmauth v1.151.0 routes by
 * that header (`src_headers`) to one VictoriaMetrics, adding
 * `extra_label=tenant=<tenant>` to every proxied query (VictoriaMetrics'
 * own label-enforcing tenancy), so each tenant sees only its series. Two
 * bridges configured for two tenants read two different values of the
 * "same" series; a bridge without a tenant, or with a tenant the server does
 * not know, gets a Status, never a value (and never the other tenants' sum).
 *
 * Sources: vmauth docs "Routing by header" and "extra_label"
 * (docs/victoriametrics/vmauth.md), Grafana Mimir "About authentication
 * and authorization" (`X-Scope-OrgID`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, OPEN_CONFIG_HEAD } from "../helpers/bridge.ts";
import {
  PROMETHEUS_BUILD_TIMEOUT_MS,
  startExporter,
  startVictoriaMetrics,
  startVmauth,
  victoriaMetricsBinary,
  vmauthBinary,
  type Exporter,
  type PrometheusServer,
} from "../helpers/prometheus.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

let exporter: Exporter;
let vm: PrometheusServer;
let front: PrometheusServer;

beforeAll(async () => {
  const [vmBinary, authBinary] = [victoriaMetricsBinary(), vmauthBinary()];
  exporter = await startExporter([
    { name: "emb_queue_ready", labels: { tenant: "team-a", queue: "orders" }, value: 3 },
    { name: "emb_queue_ready", labels: { tenant: "team-b", queue: "orders" }, value: 9 },
  ]);
  vm = await startVictoriaMetrics({ binary: vmBinary, targets: [exporter.target] });
  await vm.waitForSeries('emb_queue_ready{tenant="team-b"}');
  const route = (tenant: string) => `http://127.0.0.1:${vm.port}/?extra_label=tenant=${tenant}`;
  front = await startVmauth({ binary: authBinary, header: "X-Scope-OrgID", routes: { "team-a": route("team-a"), "team-b": route("team-b") } });
}, PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await front?.stop();
  await vm?.stop();
  await exporter?.close();
});

async function readAs(tenant: string | undefined) {
  const config = `
${OPEN_CONFIG_HEAD}providers:
  prom:
    type: prometheus
    url: ${front.url}
    timeoutSeconds: 2
${tenant === undefined ? "" : `    tenant: ${tenant}\n`}metrics:
  - name: queue_ready
    provider: prom
    query: { series: emb_queue_ready, selectorLabels: { queue: queue }, onEmpty: { value: "0" } }
`;
  const bridge = buildBridge(config, "test.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
  const res = await bridge.app.fetch(new Request(`http://bridge${NS}/queue_ready?labelSelector=${encodeURIComponent("queue=orders")}`));
  return { status: res.status, body: (await res.json()) as any };
}

describe("tenant: X-Scope-OrgID reaches a real tenant-routing front", () => {
  it("reads each tenant's own series through the same URL (team-a 3, team-b 9; never their sum 12)", async () => {
    const a = await readAs("team-a");
    const b = await readAs("team-b");
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.body.items.map((i: any) => i.value)).toEqual(["3"]);
    expect(b.body.items.map((i: any) => i.value)).toEqual(["9"]);
  });

  it("without a tenant, or with one the server does not know, is a Status, never a value (not even onEmpty's)", async () => {
    for (const tenant of [undefined, "team-c"]) {
      const r = await readAs(tenant);
      expect(r.status).toBe(500);
      expect(r.body.items).toBeUndefined();
      expect(r.body.message).toMatch(/provider prom: .*HTTP 400.*missing route/);
    }
  });
});
