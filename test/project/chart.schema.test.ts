/**
 * A chart that cannot install a proxy that will not start (issue 27, item 2):
 * the proxy's part of values.schema.json is generated from the config
 * loader's own schema (infra/tools/chart-schema.ts, `npm run chart:render`),
 * so
 * - the committed schema is what the generator writes (stale: this fails);
 * - what the loader refuses, helm refuses (and the loader does refuse it:
 *   the same values rendered without schema validation do not load);
 * - every value the schema accepts (property-based, bounds and enums read
 *   from the committed schema, boundary values included) renders a
 *   ProxyConfig the loader loads, holding those values;
 * - the combinations the templates `fail` on are refused by
 *   `helm lint --strict` too, with the template's message;
 * - the keys chart users set (affinity, serviceAccount, replicaCount, …) are
 *   accepted.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { SCHEMA_PATH, schemaIsStale, schemaText, type JsonSchema } from "../../infra/tools/chart-schema.ts";
import { helmLint, ROOT } from "../../infra/tools/validate.ts";
import { loadProxyConfig, type ProxyConfig } from "../../shared/proxy/config.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { ensureChartTools, expectValid, find, render, renderError, valuesFile, type K8sObject } from "./chart.helpers.ts";

const SCHEMA = JSON.parse(readFileSync(join(ROOT, SCHEMA_PATH), "utf8")) as JsonSchema;
const SCHEMA_REFUSAL = "values don't meet the specifications of the schema";

beforeAll(ensureChartTools, 30 * 60_000);

/** The ProxyConfig the rendered ConfigMap holds, as the proxy loads it. @throws ConfigError when the proxy would refuse it */
function proxyConfigOf(list: K8sObject[]): ProxyConfig {
  return loadProxyConfig(find(list, "ConfigMap").data["proxy.yaml"], "configmap proxy.yaml");
}

/** The schema node at `path` (properties by name). */
function node(...path: string[]): JsonSchema {
  let s: JsonSchema = SCHEMA;
  for (const key of path) s = (s["properties"] as Record<string, JsonSchema>)[key]!;
  if (s === undefined) throw new Error(`no ${path.join(".")} in the schema`);
  return s;
}

describe("values.schema.json is generated from the proxy's config schema", () => {
  it("the committed file is what npm run chart:render writes", () => {
    expect(schemaIsStale(), `${SCHEMA_PATH} is stale: run npm run chart:render`).toBe(false);
    expect(readFileSync(join(ROOT, SCHEMA_PATH), "utf8")).toBe(schemaText());
  });

  it("carries the loader's bounds (shared/proxy/config.ts)", () => {
    expect(node("cache", "maxBytes")).toMatchObject({ type: "integer", minimum: 65536, maximum: 1073741824 });
    expect(node("cache", "ttlSeconds")).toMatchObject({ minimum: 0, maximum: 30 });
    expect(node("cache", "maxEntries")).toMatchObject({ type: "integer", maximum: 1_000_000 });
    expect(node("discovery", "ttlSeconds")).toMatchObject({ maximum: 300 });
    expect(node("routes")["items"]).toMatchObject({ properties: { metric: { format: "regex", maxLength: 1024 } } });
  });
});

describe("helm refuses what the proxy refuses", () => {
  // Each: the --set arguments, the schema path helm names. The same values
  // rendered with --skip-schema-validation give a ProxyConfig the loader refuses.
  it.each([
    ["cache.maxBytes under 64 KiB", ["--set", "cache.maxBytes=1000"], "/cache/maxBytes"],
    ["cache.ttlSeconds over 30", ["--set", "cache.ttlSeconds=100"], "/cache/ttlSeconds"],
    ["cache.maxEntries over 1,000,000", ["--set", "cache.maxEntries=100000000"], "/cache/maxEntries"],
    ["a fractional cache.maxEntries", ["--set", "cache.maxEntries=10.5"], "/cache/maxEntries"],
    ["discovery.ttlSeconds over 300", ["--set", "discovery.ttlSeconds=301"], "/discovery/ttlSeconds"],
    ["a route pattern with lookahead", ["--set-json", 'routes=[{"metric":"(?!internal_).*","backend":"functions"}]'], "/routes/0/metric"],
    ["a route pattern with lookbehind", ["--set-json", 'routes=[{"metric":"(?<=a)b","backend":"functions"}]'], "/routes/0/metric"],
    ["a route pattern with a backreference", ["--set-json", 'routes=[{"metric":"(a)\\\\1","backend":"functions"}]'], "/routes/0/metric"],
    ["a route pattern over 1024 characters", ["--set-json", `routes=[{"metric":"${"a".repeat(1025)}","backend":"functions"}]`], "/routes/0/metric"],
    ["a backend timeout of 0", ["--set", "backends.functions.timeoutSeconds=0"], "/backends/functions/timeoutSeconds"],
    ["a backend URL with a query", ["--set", "backends.functions.url=https://fn.example.com/?x=1"], "/backends/functions/url"],
    ["a backend URL that is not http(s)", ["--set", "backends.functions.url=ftp://fn.example.com"], "/backends/functions/url"],
    ["a bridge backend with a bearer token", ["--set", "backends.functions.bearerTokenFile=/var/run/token"], "/backends/functions"],
    ["a client certificate without its key", ["--set", "backends.functions.clientCertFile=/etc/tls/tls.crt"], "/backends/functions"],
    ["a misspelled cache key", ["--set", "cache.maxByte=100000"], "additional properties 'maxByte' not allowed"],
    ["a resyncTimeoutSeconds over a day", ["--set", "clusterPolicies.resyncTimeoutSeconds=86401"], "/clusterPolicies/resyncTimeoutSeconds"],
    ["an unknown admission mode", ["--set", "admission.mode=Audit"], "/admission/mode"],
  ])("%s", (_what, args, where) => {
    const message = renderError(...args);
    expect(message).toContain(SCHEMA_REFUSAL);
    expect(message).toContain(where);
    // the proxy would have refused it at start
    const unchecked = render("--skip-schema-validation", ...args);
    expect(() => proxyConfigOf(unchecked)).toThrow(ConfigError);
  });
});

describe("helm accepts the keys chart users set", () => {
  it("affinity, serviceAccount, replicaCount, tolerations, nodeSelector, resources render valid objects", () => {
    const affinity = { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: "kubernetes.io/os", operator: "In", values: ["linux"] }] }] } } };
    const tolerations = [{ key: "dedicated", operator: "Equal", value: "platform", effect: "NoSchedule" }];
    const file = valuesFile({
      affinity,
      serviceAccount: { create: true, name: "emb-proxy", annotations: { "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/emb" } },
      replicaCount: 3,
      tolerations,
      nodeSelector: { "kubernetes.io/os": "linux" },
      resources: { requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "192Mi" } },
    });
    const list = render("--values", file);
    const d = find(list, "Deployment");
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.spec).toMatchObject({ affinity, tolerations, nodeSelector: { "kubernetes.io/os": "linux" }, serviceAccountName: "emb-proxy" });
    expect(d.spec.template.spec.containers[0].resources).toEqual({ requests: { cpu: "100m", memory: "128Mi" }, limits: { memory: "192Mi" } });
    expect(find(list, "ServiceAccount", "emb-proxy").metadata.annotations).toEqual({ "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/emb" });
    expectValid(list);
  });
});

/** An arbitrary number the schema node accepts: its bounds (inclusive or exclusive) and values between. */
function numberIn(s: JsonSchema): fc.Arbitrary<number> {
  const integer = s["type"] === "integer";
  const step = integer ? 1 : 0.001;
  const min = (s["minimum"] as number | undefined) ?? ((s["exclusiveMinimum"] as number | undefined) ?? -step) + step;
  const max = (s["maximum"] as number | undefined) ?? ((s["exclusiveMaximum"] as number | undefined) ?? 2 ** 31) - step;
  const between = integer ? fc.integer({ min, max }) : fc.double({ min, max, noNaN: true, noDefaultInfinity: true }).map((x) => Math.round(x * 1000) / 1000);
  return fc.oneof(fc.constantFrom(min, max), between);
}

/**
 * An arbitrary value of a schema node holding numbers, enums, booleans and
 * closed objects of those (the proxy's numeric sections): optional
 * properties are sometimes absent.
 */
function fromSchema(s: JsonSchema): fc.Arbitrary<unknown> {
  if (Array.isArray(s["enum"])) return fc.constantFrom(...(s["enum"] as unknown[]));
  if (s["type"] === "boolean") return fc.boolean();
  if (s["type"] === "number" || s["type"] === "integer") return numberIn(s);
  if (s["type"] === "object" && s["properties"] !== undefined) {
    const props = s["properties"] as Record<string, JsonSchema>;
    return fc.record(Object.fromEntries(Object.entries(props).map(([k, v]) => [k, fromSchema(v)])), { requiredKeys: (s["required"] as string[] | undefined) ?? [] });
  }
  throw new Error(`no generator for ${JSON.stringify(s).slice(0, 200)}`);
}

/**
 * RE2 patterns the schema accepts, boundary lengths included. Not sampled:
 * patterns within the schema's syntax and length that exceed the proxy's
 * cost bounds (shared/policy/regex.ts: more than 32 variable repeats, e.g.
 * `x{1,1000}`), which JSON Schema cannot measure; the proxy refuses those
 * at start, naming the route.
 */
const PATTERNS = ["a", ".*", "queue_.*", "pubsub_.*|gcp/.*", "sqs_(messages|age)_[a-z0-9]+", "(?i)Orders", "[[:alpha:]]+", "x{1000}", "a".repeat(1024)];
/** Backend names (DNS labels of the schema's propertyNames). */
const NAMES = ["a", "aws", "gcp-1", "keda", "x".repeat(63)];
const URLS = ["https://emb.example.workers.dev", "http://10.0.0.1:8080", "https://abc.lambda-url.eu-west-1.on.aws/prefix", "https://keda-operator-metrics-apiserver.keda.svc:443"];

const backendArb = fc.record(
  {
    url: fc.constantFrom(...URLS),
    type: fc.constantFrom(...(node("backends")["additionalProperties"] as { properties: { type: { enum: string[] } } }).properties.type.enum),
    timeoutSeconds: fromSchema(node("inProcessBridge", "timeoutSeconds")),
    insecureSkipTLSVerify: fc.boolean(),
    caFile: fc.constant("/etc/ca/ca.crt"),
    serverName: fc.constant("backend.example.com"),
    clientCert: fc.boolean(),
    bearer: fc.boolean(),
  },
  { requiredKeys: ["url", "type", "clientCert", "bearer"] },
).map(({ clientCert, bearer, ...b }) => ({
  ...b,
  ...(clientCert ? { clientCertFile: "/etc/tls/tls.crt", clientKeyFile: "/etc/tls/tls.key" } : {}),
  ...(bearer && b.type === "passthrough" ? { bearerTokenFile: "/var/run/secrets/kubernetes.io/serviceaccount/token" } : {}),
}));

/** Proxy values the schema accepts whose references agree (routes name backends; the pass-through is of type passthrough). */
const proxyValuesArb = fc
  .record({
    backends: fc.dictionary(fc.constantFrom(...NAMES), backendArb, { minKeys: 1, maxKeys: 3 }),
    routePicks: fc.array(fc.tuple(fc.constantFrom(...PATTERNS), fc.nat()), { maxLength: 3 }),
    usePassthrough: fc.boolean(),
    cache: fromSchema(node("cache")),
    discovery: fromSchema(node("discovery")),
    clusterPolicies: fromSchema(node("clusterPolicies")),
    admissionMode: fromSchema(node("admission", "mode")),
  })
  .map(({ backends, routePicks, usePassthrough, ...rest }) => {
    const names = Object.keys(backends);
    const passthrough = usePassthrough ? (names.find((n) => backends[n]!.type === "passthrough") ?? "") : "";
    const routes = routePicks.map(([metric, i]) => ({ metric, backend: names[i % names.length]! }));
    return { backends, routes: routes.length === 0 && passthrough === "" ? [{ metric: ".*", backend: names[0]! }] : routes, passthrough, ...rest };
  });

describe("every value the schema accepts renders a ProxyConfig the proxy loads", () => {
  it("property: backends, routes, pass-through, cache, discovery, cluster policies and admission mode, boundary values included", () => {
    fc.assert(
      fc.property(proxyValuesArb, (v) => {
        const file = valuesFile({
          backends: { functions: null, ...v.backends },
          routes: v.routes,
          passthrough: v.passthrough,
          cache: v.cache,
          discovery: v.discovery,
          clusterPolicies: v.clusterPolicies,
          admission: { mode: v.admissionMode },
        });
        const config = proxyConfigOf(render("--values", file));
        expect(Object.fromEntries(config.backends.map(({ name, ...b }) => [name, b]))).toMatchObject(v.backends);
        expect(config.routes.map((r) => r.backend)).toEqual(v.routes.map((r) => r.backend));
        expect(config.passthrough ?? "").toBe(v.passthrough);
        expect(config.cache).toMatchObject(v.cache as object);
        expect(config.discovery).toMatchObject(v.discovery as object);
        expect(config.clusterPolicies).toMatchObject(v.clusterPolicies as object);
        expect(config.admission?.mode).toBe(v.admissionMode);
      }),
      { numRuns: 25 },
    );
  }, 120_000);
});

describe("the combinations the templates refuse are refused by helm lint --strict too", () => {
  it.each([
    [
      "a ServiceMonitor with an existing token Secret and no metricsReaders",
      { serviceMonitor: { enabled: true, credentials: { secretName: "prom-token" } } },
      "set metricsReaders to the ServiceAccount whose token that Secret holds",
    ],
    [
      "tls.mode existing without self-registration and without a CA",
      { tls: { mode: "existing" }, registration: { selfRegister: false } },
      "nothing writes the APIService's caBundle",
    ],
    ["a route naming no backend", { routes: [{ metric: ".*", backend: "nowhere" }] }, 'routes[0].backend nowhere: no such backend (backends: functions)'],
    ["a pass-through backend of type bridge", { passthrough: "functions" }, 'passthrough functions: the pass-through backend must have type passthrough'],
    ["no route and no pass-through", { routes: [] }, "no metric could be served"],
    ["a backend named inprocess next to the in-process bridge", { inProcessBridge: { enabled: true, config: "kind: BridgeConfig" }, backends: { inprocess: { url: "https://x.example.com" } } }, "backends.inprocess: the name is taken"],
  ])("%s", (_what, values, message) => {
    const file = valuesFile(values);
    expect(renderError("--values", file)).toContain(message);
    const lint = helmLint([file]);
    expect(lint.ok, lint.output).toBe(false);
    expect(lint.output).toContain(message);
  });

  it("and lint passes the same values once completed (the refusals are the combinations, not the keys)", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    for (const values of [
      { serviceMonitor: { enabled: true, credentials: { secretName: "prom-token" } }, metricsReaders: ["monitoring/prometheus-k8s"] },
      { tls: { mode: "existing" }, registration: { selfRegister: false, caBundle: pem } },
      { routes: [], passthrough: "keda", backends: { keda: { url: "https://keda.example.svc", type: "passthrough" } } },
    ]) {
      const lint = helmLint([valuesFile(values)]);
      expect(lint.ok, lint.output).toBe(true);
    }
  });
});
