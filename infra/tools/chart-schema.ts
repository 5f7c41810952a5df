/**
 * The chart's `values.schema.json`, written from two sources:
 * - the proxy's section (`backends`, `routes`, `passthrough`, `cache`,
 *   `discovery`, `clusterPolicies`, `customMetrics` (plus the chart-only `objectResources`), `admission.mode`,
 *   `inProcessBridge.timeoutSeconds`) from the config loader's own zod schema
 *   (`shared/proxy/config.ts` `proxyConfigSchema`, through zod's
 *   `toJSONSchema`): one source of bounds, so helm refuses before install
 *   what the proxy would refuse at start;
 * - the chart's own keys (image, scheduling, security contexts, probes, …),
 *   declared below.
 *
 *   node infra/tools/chart-schema.ts            # exit 1 when the committed schema is stale
 *   node infra/tools/chart-schema.ts --write    # rewrite it (npm run chart:render)
 *
 * What JSON Schema cannot say is added here, and the chart tests
 * (test/project/chart.schema.test.ts) check that every value the schema
 * accepts renders a ProxyConfig the loader loads:
 * - the loader's refinements (code, not schema): a backend `url` is http(s)
 *   without query or fragment (a `pattern`);
 * - a route `metric` is RE2 syntax: `format: regex`, which helm's validator
 *   (santhosh-tekuri/jsonschema, formats asserted for draft-07) checks with
 *   Go's `regexp`, RE2 itself, so lookaround and backreferences are refused;
 *   the proxy's cost bounds on a pattern (shared/policy/regex.ts) are checked
 *   when it starts;
 * - references between values (a route naming a backend, the pass-through
 *   backend's type): the templates `fail` with a message (`helm lint` too).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as z from "../../shared/config/zod.ts";
import { MAX_PATTERN_LENGTH } from "../../shared/policy/regex.ts";
import { proxyConfigSchema } from "../../shared/proxy/config.ts";
import { ROOT } from "./validate.ts";

/** A JSON Schema (draft-07) node. */
export type JsonSchema = { [key: string]: unknown };

/** The committed schema, from the repository root. */
export const SCHEMA_PATH = "infra/helm/external-metrics-bridge/values.schema.json";

/** Pattern of a DNS label (RFC 1123), as Kubernetes names of Services and namespaces. */
const DNS_LABEL = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/** Pattern of a Go/Prometheus duration (`30s`, `1h30m`). */
const DURATION = "^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$";
/** A group resource as the custom paths write it (shared/k8s/request-path.ts `isGroupResource`: the same pattern). */
const GROUP_RESOURCE_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$";

const str = (extra: JsonSchema = {}): JsonSchema => ({ type: "string", ...extra });
const bool = (): JsonSchema => ({ type: "boolean" });
const int = (minimum: number, maximum?: number): JsonSchema => ({ type: "integer", minimum, ...(maximum !== undefined ? { maximum } : {}) });
const port = (): JsonSchema => int(1, 65535);
const strMap = (description?: string): JsonSchema => ({ type: "object", additionalProperties: { type: "string" }, ...(description ? { description } : {}) });
/** A list of Kubernetes objects of one type (checked by the API server, and by kubeconform in the chart tests). */
const list = (description: string): JsonSchema => ({ type: "array", items: { type: "object" }, description });
/** A Kubernetes object of one type, free-form here (checked by the API server, and by kubeconform in the chart tests). */
const k8s = (description: string): JsonSchema => ({ type: "object", description });
/** A closed object: only `properties`, `required` ones required. */
const obj = (properties: Record<string, JsonSchema>, required: string[] = [], extra: JsonSchema = {}): JsonSchema => ({
  type: "object",
  properties,
  additionalProperties: false,
  ...(required.length > 0 ? { required } : {}),
  ...extra,
});

/** A probe's timing (the chart sets the handler: HTTPS GET /livez or /readyz on the API port). */
function probe(what: string, withSuccess: boolean): JsonSchema {
  return obj(
    {
      initialDelaySeconds: int(0),
      periodSeconds: int(1),
      timeoutSeconds: int(1),
      failureThreshold: int(1),
      ...(withSuccess ? { successThreshold: int(1) } : {}),
    },
    [],
    { description: `${what} timing; the handler is the chart's` },
  );
}

/** Copy of `schema` without the annotations zod adds that do not hold for chart values (`default`, `$schema`). */
function bare(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(bare);
  if (schema === null || typeof schema !== "object") return schema;
  return Object.fromEntries(
    Object.entries(schema)
      .filter(([k]) => k !== "default" && k !== "$schema")
      .map(([k, v]) => [k, bare(v)]),
  );
}

/** The loader's schema as JSON Schema: what a ProxyConfig document may hold (inputs: fields with defaults are optional). */
export function proxyJsonSchema(): JsonSchema {
  return bare(z.toJSONSchema(proxyConfigSchema, { target: "draft-7", io: "input", unrepresentable: "throw" })) as JsonSchema;
}

function at(schema: JsonSchema, ...path: string[]): JsonSchema {
  let node: unknown = schema;
  for (const key of path) {
    node = (node as JsonSchema | undefined)?.[key];
    if (node === undefined) throw new Error(`the proxy config schema has no ${path.join(".")}: chart-schema.ts must follow shared/proxy/config.ts`);
  }
  return node as JsonSchema;
}

/**
 * The proxy's parts of the chart values, from the loader's schema.
 *
 * @returns `backend` (one named backend: a network backend, since the chart
 *   renders the `inProcess` one itself from `inProcessBridge`), `backendName`,
 *   `routes`, `passthrough`, `cache`, `discovery`, `clusterPolicies`, `customMetrics`,
 *   `admissionMode`, `timeoutSeconds`
 * @throws Error when the loader's schema no longer has a part the chart maps
 */
export function proxySections(): Record<string, JsonSchema> {
  const proxy = proxyJsonSchema();
  const loaderBackend = at(proxy, "properties", "backends", "additionalProperties");
  const { bridgeConfig: _inProcessOnly, ...backendProps } = at(loaderBackend, "properties") as Record<string, JsonSchema>;
  const types = (at(loaderBackend, "properties", "type", "enum") as unknown as string[]).filter((t) => t !== "inProcess");
  const backend: JsonSchema = {
    ...loaderBackend,
    properties: {
      ...backendProps,
      // the loader's refinements: http(s), no query or fragment
      url: { ...backendProps["url"], pattern: "^https?://[^?#]*$", description: "backend base URL (http or https, no query or fragment)" },
      type: { ...backendProps["type"], enum: types, description: "bridge: signed bridge function; passthrough: an existing adapter (e.g. KEDA)" },
    },
    required: ["url"],
    // the loader's checks across a backend's fields
    dependencies: { clientCertFile: ["clientKeyFile"], clientKeyFile: ["clientCertFile"] },
    if: { properties: { type: { const: "passthrough" } }, required: ["type"] },
    else: { not: { required: ["bearerTokenFile"] }, description: "bridge backends are authenticated by the request signature, not a bearer token" },
  };
  const backendName = at(proxy, "properties", "backends", "propertyNames");
  const routes = at(proxy, "properties", "routes");
  const route = at(routes, "items");
  const metric = at(route, "properties", "metric");
  return {
    backend,
    backendName,
    routes: {
      ...routes,
      items: { ...route, properties: { ...(route["properties"] as object), metric: { ...metric, maxLength: MAX_PATTERN_LENGTH, format: "regex", description: "RE2 pattern of the whole lowercased metric name" } } },
    },
    passthrough: { anyOf: [{ const: "" }, { ...at(proxy, "properties", "passthrough"), ...backendName }], description: "backend (type passthrough) for metrics no route claims; \"\" = none" },
    cache: at(proxy, "properties", "cache"),
    discovery: at(proxy, "properties", "discovery"),
    clusterPolicies: at(proxy, "properties", "clusterPolicies"),
    customMetrics: at(proxy, "properties", "customMetrics"),
    admissionMode: at(proxy, "properties", "admission", "properties", "mode"),
    timeoutSeconds: at(loaderBackend, "properties", "timeoutSeconds"),
  };
}

/** The whole values schema (what `values.schema.json` holds). */
export function valuesSchema(): JsonSchema {
  const p = proxySections();
  return {
    $schema: "http://json-schema.org/draft-07/schema#",
    title: "external-metrics-bridge proxy chart values",
    description: "Written by npm run chart:render (infra/tools/chart-schema.ts): do not edit.",
    type: "object",
    additionalProperties: false,
    properties: {
      global: { type: "object", description: "parent charts' global values (unused)" },
      namespace: obj({ create: bool() }),
      crds: obj(
        { install: bool(), keep: bool(), annotations: strMap() },
        [],
        { description: "install and upgrade the policy CRDs with the release (templates/crds.yaml); keep: helm.sh/resource-policy keep" },
      ),
      image: obj(
        {
          registry: str({ pattern: "^([a-zA-Z0-9.-]+(:[0-9]+)?)?$", description: "prefixed to repository when set" }),
          repository: str({ minLength: 1 }),
          tag: str({ minLength: 1 }),
          digest: str({ pattern: "^(sha256:[a-f0-9]{64})?$", description: "pins the image; the tag is then informational" }),
          pullPolicy: { enum: ["Always", "IfNotPresent", "Never"] },
        },
        ["repository", "tag"],
      ),
      imagePullSecrets: { type: "array", items: obj({ name: str({ minLength: 1 }) }, ["name"]) },
      replicas: int(0),
      replicaCount: { type: ["integer", "null"], minimum: 0, description: "alias of replicas; wins when set" },
      fullnameOverride: str({ maxLength: 63, pattern: "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$" }),
      logLevel: { enum: ["debug", "info", "warn", "error"] },
      env: list("EnvVar list appended to the proxy container's env"),
      extraArgs: { type: "array", items: str({ pattern: "^--" }) },
      extraVolumes: list("Volume list appended to the pod's volumes"),
      extraVolumeMounts: list("VolumeMount list appended to the proxy container's"),
      extraObjects: { type: "array", items: { type: ["object", "string"] }, description: "manifests rendered with the release (a string goes through tpl)" },
      commonLabels: strMap("labels on every object"),
      commonAnnotations: strMap("annotations on every object"),
      podAnnotations: strMap(),
      podLabels: strMap(),
      hostNetwork: bool(),
      dnsPolicy: { enum: ["", "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] },
      dnsConfig: k8s("PodDNSConfig"),
      backends: { type: "object", additionalProperties: p["backend"], propertyNames: p["backendName"], description: "named backends (ProxyConfig backends)" },
      inProcessBridge: obj({ enabled: bool(), timeoutSeconds: p["timeoutSeconds"]!, config: str(), serviceAccountAnnotations: strMap() }),
      routes: p["routes"]!,
      passthrough: p["passthrough"]!,
      cache: p["cache"]!,
      discovery: p["discovery"]!,
      clusterPolicies: p["clusterPolicies"]!,
      customMetrics: {
        ...p["customMetrics"]!,
        properties: {
          ...((p["customMetrics"]!["properties"] ?? {}) as Record<string, JsonSchema>),
          objectResources: {
            type: "array",
            items: str({ pattern: GROUP_RESOURCE_PATTERN }),
            uniqueItems: true,
            description: "group resources Object reads describe (services, ingresses.networking.k8s.io): the proxy's ServiceAccount gets `get` on each",
          },
        },
      },
      signing: obj({ secretName: str({ minLength: 1 }), secretKey: str({ minLength: 1 }) }),
      tls: obj({
        mode: { enum: ["secret", "existing", "certManager"] },
        secretName: str({ minLength: 1 }),
        leaseName: str(),
        certValiditySeconds: int(1),
        caValiditySeconds: int(1),
        rotationOverlapSeconds: int(0),
        certManager: obj({
          caDuration: str({ pattern: DURATION }),
          duration: str({ pattern: DURATION }),
          renewBefore: str({ pattern: DURATION }),
          issuerRef: obj(
            { name: str(), kind: { enum: ["Issuer", "ClusterIssuer"] }, group: str({ minLength: 1 }) },
            [],
            { description: "an existing (Cluster)Issuer signing the serving certificate (name \"\" = the chart's self-signed CA chain)" },
          ),
        }),
      }),
      registration: obj({
        selfRegister: bool(),
        render: bool(),
        caBundle: str({ description: "PEM" }),
        groupPriorityMinimum: int(1, 20000),
        versionPriority: int(1, 1000),
      }),
      admission: obj({
        enabled: bool(),
        mode: p["admissionMode"]!,
        port: port(),
        servicePort: port(),
        clientCA: obj({
          configMap: str({ pattern: "^([a-z0-9]([-.a-z0-9]*[a-z0-9])?)?$", description: "ConfigMap holding the CA bundle of kube-apiserver's webhook client certificate (\"\" = no client authentication)" }),
          key: str({ pattern: "^[-._a-zA-Z0-9]+$" }),
        }),
      }),
      service: obj({
        name: str({ pattern: DNS_LABEL, maxLength: 63 }),
        port: port(),
        type: { enum: ["ClusterIP", "NodePort", "LoadBalancer"] },
        annotations: strMap(),
      }),
      serviceAccount: obj({
        create: bool(),
        name: str({ pattern: "^([a-z0-9]([-.a-z0-9]*[a-z0-9])?)?$", maxLength: 253, description: "\"\" = the release's name" }),
        annotations: strMap(),
      }),
      hpa: obj({ serviceAccountNamespace: str({ pattern: DNS_LABEL, maxLength: 63 }), serviceAccountName: str({ minLength: 1 }), clusterWide: bool() }),
      metricsReaders: {
        type: "array",
        items: str({ pattern: "^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$" }),
        description: "ServiceAccounts namespace/name allowed to GET /metrics",
      },
      serviceMonitor: obj({
        enabled: bool(),
        labels: strMap(),
        interval: str({ pattern: DURATION }),
        scrapeTimeout: str({ pattern: DURATION }),
        credentials: obj(
          { secretName: str({ pattern: "^([a-z0-9]([-.a-z0-9]*[a-z0-9])?)?$" }), key: str({ pattern: "^[-._a-zA-Z0-9]+$" }) },
          [],
          { description: "Secret (this namespace) holding the bearer token Prometheus sends; \"\" = a token of the chart's scraper ServiceAccount" },
        ),
        relabelings: list("RelabelConfig list"),
        metricRelabelings: list("RelabelConfig list"),
      }),
      networkPolicy: obj({
        enabled: bool(),
        ingressFrom: list("NetworkPolicyPeer list for the API port ([] = any source)"),
        webhookIngressFrom: list("NetworkPolicyPeer list for the webhook port ([] = any source)"),
        egress: list("NetworkPolicyEgressRule list ([] = egress unrestricted)"),
      }),
      proxy: obj({ securePort: port(), shutdownDelaySeconds: int(0), drainTimeoutSeconds: int(0), readinessIntervalSeconds: int(1) }),
      podSecurityContext: k8s("PodSecurityContext of the proxy's pod"),
      securityContext: k8s("SecurityContext of the proxy container"),
      startupProbe: probe("startup probe", false),
      livenessProbe: probe("liveness probe", false),
      readinessProbe: probe("readiness probe", true),
      resources: {
        type: ["object", "null"],
        properties: {
          requests: { type: "object", additionalProperties: { type: ["string", "number"] } },
          limits: { type: "object", additionalProperties: { type: ["string", "number"] } },
          claims: { type: "array" },
        },
        additionalProperties: false,
      },
      podDisruptionBudget: obj({
        enabled: { type: ["boolean", "null"], description: "null = only when replicas > 1" },
        minAvailable: { type: ["integer", "string"] },
        maxUnavailable: { type: ["integer", "string", "null"] },
      }),
      topologySpreadConstraints: list("TopologySpreadConstraint list; labelSelector defaults to the proxy pods' selector"),
      affinity: k8s("Affinity; {} = a preferred anti-affinity by hostname"),
      nodeSelector: strMap(),
      tolerations: list("Toleration list"),
      priorityClassName: str(),
    },
  };
}

/** The text of `values.schema.json` (two-space JSON, newline-terminated). */
export function schemaText(): string {
  return `${JSON.stringify(valuesSchema(), null, 2)}\n`;
}

/** Whether the committed schema differs from {@link schemaText} (missing counts as stale). */
export function schemaIsStale(): boolean {
  try {
    return readFileSync(join(ROOT, SCHEMA_PATH), "utf8") !== schemaText();
  } catch {
    return true;
  }
}

function main(argv: readonly string[]): number {
  if (argv.includes("--write")) {
    writeFileSync(join(ROOT, SCHEMA_PATH), schemaText());
    console.log(`wrote ${SCHEMA_PATH}`);
    return 0;
  }
  if (!schemaIsStale()) return 0;
  console.error(`${SCHEMA_PATH} is stale: run npm run chart:render`);
  return 1;
}

if (import.meta.main) process.exit(main(process.argv.slice(2)));
