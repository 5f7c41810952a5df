/**
 * The trivial baselines of the HTTP benchmarks: a Hono route answering a
 * fixed ExternalMetricValueList (the bridge's answer's shape and size), and
 * the same over HTTPS with the proxy's TLS setup (shared/proxy/server.ts: a
 * serving certificate, `requestCert` without rejecting, TLS ≥ 1.2, 64 KiB
 * headers, 65 s keep-alive). Imports only Hono, @hono/node-server and
 * node:https, so a process serving it is "bare Node + Hono".
 */
import https from "node:https";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";

export const V1 = "/apis/external.metrics.k8s.io/v1beta1";

/**
 * The trivial app: GET `/apis/external.metrics.k8s.io/v1beta1/namespaces/:namespace/:metric` → a fixed one-item list.
 *
 * @param spinMicros µs of busy JavaScript before each answer (default 0): the
 *   calibration scenarios of `bench:http-overhead` use it to show what a server
 *   that does only that much more work per request than the trivial route reaches
 * @param hold keep one answer per distinct path and query, as a cache holding
 *   every series read would (default false): a three-item list naming the
 *   request's `labelSelector`, made once per distinct request and kept in a
 *   Map for the process's life — the floor of "a server holding N answers"
 *   for `bench:memory`
 */
export function trivialApp(spinMicros = 0, hold = false): Hono {
  const app = new Hono();
  const body = {
    kind: "ExternalMetricValueList",
    apiVersion: "external.metrics.k8s.io/v1beta1",
    metadata: {},
    items: [{ metricName: "queue_messages_ready", metricLabels: { queue: "bench-q0" }, timestamp: "2026-01-01T00:00:00Z", value: "1" }],
  };
  const spinMs = spinMicros / 1000;
  const held = new Map<string, string>();
  app.get(`${V1}/namespaces/:namespace/:metric`, (c) => {
    if (spinMs > 0) {
      const until = performance.now() + spinMs;
      while (performance.now() < until);
    }
    if (hold) {
      const key = c.req.url;
      let text = held.get(key);
      if (text === undefined) {
        const selector = c.req.query("labelSelector") ?? "";
        const items = [0, 1, 2].map((i) => ({ metricName: "queue_messages_ready", metricLabels: { queue: `${selector.slice(0, 40)}-${i}` }, timestamp: new Date().toISOString().slice(0, 19) + "Z", value: String(i + 1) }));
        held.set(key, (text = JSON.stringify({ ...body, items })));
      }
      return c.body(text, 200, { "Content-Type": "application/json" });
    }
    return c.json(body);
  });
  return app;
}

/**
 * Serve {@link trivialApp} over HTTPS on 127.0.0.1 (ephemeral port) with the
 * proxy's TLS setup and the given serving certificate and key (PEM).
 *
 * @returns the server and its `https://127.0.0.1:<port>` URL
 */
export async function startTrivialHttps(certPem: string, keyPem: string, hold = false): Promise<{ server: https.Server; url: string }> {
  return serveHttps(trivialApp(0, hold), certPem, keyPem);
}

/**
 * Serve `app` over HTTPS on 127.0.0.1 (ephemeral port) with the proxy's TLS
 * setup (see the module doc) and the given serving certificate and key (PEM).
 *
 * @returns the server and its `https://127.0.0.1:<port>` URL
 */
export async function serveHttps(app: Hono, certPem: string, keyPem: string): Promise<{ server: https.Server; url: string }> {
  const listener = getRequestListener(app.fetch);
  const server = https.createServer(
    { cert: certPem, key: keyPem, requestCert: true, rejectUnauthorized: false, minVersion: "TLSv1.2", maxHeaderSize: 64 * 1024 },
    (req, res) => void listener(req, res),
  );
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
