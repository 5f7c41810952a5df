/**
 * The libraries the proxy is built on, loaded and used once as the proxy
 * uses them, with none of its own code or state: the third baseline of
 * `npm run bench:memory` (trivial-https-main.ts, `TRIVIAL_LIBRARIES=1`, a
 * chunk of its own so the other baselines never load it). It answers what
 * issue 11's P5 row (≤ 100 MB RSS) leaves for the proxy's own code once the
 * project's rule "YAML, schemas, CLI parsing and the Prometheus client come
 * from a well-kept library" is kept:
 *
 * - yaml: parses a ProxyConfig document (functions/proxy/main.ts reads one);
 * - zod (`zod/mini` with its English messages, shared/config/zod.ts, as
 *   every schema of the project): a strict object schema of the same shape
 *   checks it (shared/proxy/config.ts);
 * - re2js: compiles and matches a metric pattern (shared/policy/regex.ts,
 *   the routes and the policies);
 * - prom-client: a Registry with the default process metrics under a prefix
 *   and 19 counters, gauges and histograms, rendered once
 *   (shared/proxy/metrics.ts);
 * - commander: a command with 38 options parses an argument vector
 *   (functions/proxy/main.ts).
 *
 * Importing this module does all of it; it exports what it made so nothing
 * is collected.
 */
import { Command, Option } from "commander";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import { RE2JS } from "re2js";
import { parse } from "yaml";
import * as z from "../../shared/config/zod.ts";

const document = parse(`apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  sqs: { url: "http://127.0.0.1:8080", timeoutSeconds: 3 }
routes:
  - { metric: "queue_.*", backend: sqs }
cache: { ttlSeconds: 30, maxEntries: 10000 }
`) as unknown;

const schema = z.strictObject({
  apiVersion: z.literal("external-metrics-bridge.io/v1alpha1"),
  kind: z.literal("ProxyConfig"),
  backends: z.record(z.string(), z.strictObject({ url: z.url(), timeoutSeconds: z.optional(z.number().check(z.positive())) })),
  routes: z.array(z.strictObject({ metric: z.string(), backend: z.string() })).check(z.minLength(1)),
  cache: z.optional(z.strictObject({ ttlSeconds: z.int().check(z.minimum(0), z.maximum(30)), maxEntries: z.int().check(z.positive()) })),
});
const config = schema.parse(document);

const pattern = RE2JS.compile(`^(?:${config.routes[0]!.metric})$`);
if (!pattern.matches("queue_messages_ready")) throw new Error("re2js: the route pattern did not match");

const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: "trivial_" });
for (let i = 0; i < 19; i++) {
  const name = `trivial_metric_${i}`;
  if (i % 3 === 0) new Counter({ name: `${name}_total`, help: name, labelNames: ["code"], registers: [registry] }).inc({ code: "200" });
  else if (i % 3 === 1) new Gauge({ name, help: name, labelNames: ["cache"], registers: [registry] }).set({ cache: "values" }, 1);
  else new Histogram({ name: `${name}_seconds`, help: name, labelNames: ["code"], registers: [registry] }).observe({ code: "200" }, 0.001);
}
const metricsText = await registry.metrics();

const command = new Command("proxy");
for (let i = 0; i < 38; i++) command.addOption(new Option(`--option-${i} <value>`, `option ${i}`).env(`TRIVIAL_OPTION_${i}`));
command.parse(["node", "proxy", "--option-0", "1"]);

/** What was made, kept alive for the process's life. */
export const made = { config, pattern, registry, metricsText, command };
