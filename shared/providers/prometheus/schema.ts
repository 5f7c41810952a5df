/**
 * Config schemas of the `prometheus` provider: the provider instance (which
 * Prometheus HTTP API, how to authenticate, which tenant) and a rule's
 * `query:` section (a series or a template, fixed label matchers, the
 * selector labels and what an empty answer means).
 *
 * Names are checked as Prometheus checks them with its legacy name
 * validation (`prometheus/common` `model/metric.go` `IsValidLegacyMetricName`,
 * `model/labels.go` `LabelName.IsValid` in legacy mode): a metric name
 * `[a-zA-Z_:][a-zA-Z0-9_:]*`, a label name `[a-zA-Z_][a-zA-Z0-9_]*`; names
 * beginning with `__` are reserved for Prometheus' own use (Prometheus docs,
 * "Data model") and refused here.
 *
 * Small on purpose: every deployment imports this file (config validation,
 * the provider tables), so it imports neither the PromQL parser nor the
 * query builder. A template is checked here only for the placeholder; the
 * full parse (`./promql.ts` `parseTemplate`, line and column of the fault)
 * runs where the implementation is loaded ({@link setTemplateCheck}) and
 * again at start-up (`ProviderModule.checkRule`).
 */
import * as z from "../../config/zod.ts";
import { MAX_BACKEND_TIMEOUT_SECONDS } from "../aws/common.ts";
import { labelKeySchema, labelValueSchema, onEmptySchema } from "../label-mapping.ts";
import { gmpFields } from "./gmp-schema.ts";
import { ampFields } from "./amp-schema.ts";
import { isLabelName } from "./names.ts";

/**
 * Flavours of Prometheus HTTP API the provider speaks: `generic` is any
 * server of the Prometheus HTTP API (Prometheus, Thanos, Mimir,
 * VictoriaMetrics); `gmp` Google Cloud Managed Service for Prometheus
 * (`./gmp-schema.ts`); `amp` Amazon Managed Service for Prometheus
 * (`./amp-schema.ts`).
 */
export const FLAVOURS = ["generic", "gmp", "amp"] as const;

/** The matcher placeholder of a template (prometheus-adapter's spelling); must equal `./promql.ts` `MATCHERS_PLACEHOLDER`. */
export const TEMPLATE_PLACEHOLDER = "<<.LabelMatchers>>";

/** Longest template accepted, characters. */
export const MAX_TEMPLATE_LENGTH = 4096;

/** Longest `lookbackSeconds`, seconds (one day). */
export const MAX_LOOKBACK_SECONDS = 86_400;

/**
 * Most series one value query may sum (`maxBatchSize` at most): a Pods read
 * of custom.metrics.k8s.io names up to 1,000 pods (shared/values/custom-read.ts
 * `MAX_PODS_PER_READ`), which one query then reads whole (≈ 40 KiB of query
 * text; VictoriaMetrics refuses a query longer than its `-search.maxQueryLen`,
 * 16 KiB by default).
 */
export const MAX_SERIES_PER_QUERY = 1000;

/** Series one value query sums by default (keeps the query text a few KiB, which every server accepts). */
export const DEFAULT_SERIES_PER_QUERY = 100;

/** A legacy Prometheus metric name (`IsValidLegacyMetricName`), not reserved (`__`). */
export const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

const metricName = z.string().check(
  z.maxLength(512),
  z.regex(METRIC_NAME, "must be a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"),
  z.refine((n) => !n.startsWith("__"), "names beginning with __ are reserved by Prometheus"),
);

/** Why `name` is not a label name a rule may use, or undefined. */
function labelNameProblem(name: string): string | undefined {
  if (name.length > 256 || !isLabelName(name)) return "must be a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)";
  if (name.startsWith("__")) return "label names beginning with __ are reserved by Prometheus";
  return undefined;
}

const promLabelName = z.string().check(
  z.superRefine((name, ctx) => {
    const problem = labelNameProblem(name);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  }),
);

/** Any label value (a UTF-8 string); bounded so a query stays small. */
const promLabelValue = z.string().check(z.maxLength(1024));

/**
 * How one selector label maps to a Prometheus label: its name (the label
 * value is the Prometheus label value), or `{label, values}` whose `values`
 * allow-list maps each allowed selector value to a Prometheus label value
 * (the `LabelMapping` shape of `../label-mapping.ts`).
 */
const selectorLabel = z.union([
  promLabelName,
  z.strictObject({ label: promLabelName, values: z.optional(z.record(labelValueSchema, promLabelValue)) }),
]);

/**
 * How a template is fully checked once the PromQL parser is loaded: returns
 * undefined when valid, else the problem (without position) with its
 * 1-based line and column in the template text. Set by `./index.ts` ({@link setTemplateCheck}).
 */
export type TemplateCheck = (text: string) => { message: string; line: number; column: number } | undefined;

let templateCheck: TemplateCheck | undefined;

/**
 * Install the full template check (the implementation module does, when it
 * loads: the Worker bundles it statically, Node and Lambda load it before
 * building a Prometheus provider, tests load every provider first). Until
 * then a template is checked only for the placeholder, and the
 * implementation parses it at start-up, before serving
 * (`ProviderModule.checkRule`, `./index.ts`).
 */
export function setTemplateCheck(check: TemplateCheck): void {
  templateCheck = check;
}

const template = z.string().check(
  z.minLength(1),
  z.maxLength(MAX_TEMPLATE_LENGTH),
  z.superRefine((text, ctx) => {
    if (!text.includes(TEMPLATE_PLACEHOLDER)) {
      ctx.addIssue({ code: "custom", message: `must contain the matcher placeholder ${TEMPLATE_PLACEHOLDER} inside the braces of every vector selector` });
      return;
    }
    const problem = templateCheck?.(text);
    if (problem !== undefined) {
      ctx.addIssue({ code: "custom", message: `template line ${problem.line}, column ${problem.column}: ${problem.message}` });
    }
  }),
);

/**
 * A rule's `query:` section for `prometheus`:
 * - exactly one of `series` (a metric name; the bridge writes
 *   `series{<matchers>}`) or `template` (PromQL with
 *   {@link TEMPLATE_PLACEHOLDER} in the braces of every vector selector);
 * - `labels`: fixed matchers, Prometheus label name → value;
 * - `selectorLabels`: selector label → Prometheus label name, or
 *   `{label, values}` with an allow-list;
 * - `onEmpty`: no series for a label set (default `unavailable`, 503);
 * - `lookbackSeconds`: sent as `lookback_delta` (default: the rule's `maxAgeSeconds`).
 */
export const prometheusQuerySchema = z
  .strictObject({
    series: z.optional(metricName),
    template: z.optional(template),
    // keys checked below, so that the message says why (a record key's own message is lost: "Invalid key in record")
    labels: z._default(z.record(z.string(), promLabelValue), {}),
    selectorLabels: z._default(z.record(labelKeySchema, selectorLabel), {}),
    onEmpty: onEmptySchema,
    lookbackSeconds: z.optional(z.number().check(z.int(), z.positive(), z.maximum(MAX_LOOKBACK_SECONDS))),
  })
  .check(
    z.superRefine((q, ctx) => {
      if ((q.series === undefined) === (q.template === undefined)) {
        ctx.addIssue({ code: "custom", path: [], message: "needs exactly one of series (a metric name) or template (PromQL)" });
      }
      for (const name of Object.keys(q.labels)) {
        const problem = labelNameProblem(name);
        if (problem !== undefined) ctx.addIssue({ code: "custom", path: ["labels", name], message: problem });
      }
      const seen = new Map<string, string>();
      for (const [label, mapping] of Object.entries(q.selectorLabels)) {
        const name = typeof mapping === "string" ? mapping : mapping.label;
        const earlier = seen.get(name);
        if (earlier !== undefined) ctx.addIssue({ code: "custom", path: ["selectorLabels", label], message: `${name} is also mapped from ${earlier}` });
        seen.set(name, label);
        if (Object.hasOwn(q.labels, name)) ctx.addIssue({ code: "custom", path: ["labels", name], message: `${name} is also mapped from the selector label ${label}` });
      }
    }),
  );

/** Validated `query:` section of a Prometheus rule. */
export type PrometheusQuery = z.infer<typeof prometheusQuerySchema>;

/** An environment variable name (where a secret is read from; secrets are never written in the config). */
const envName = z.string().check(z.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"));

/**
 * How the bridge authenticates to the HTTP API: a bearer token
 * (`Authorization: Bearer`) or HTTP basic auth (RFC 7617), each secret read
 * from the environment variable named here (`RuntimeEnv.env`: process.env,
 * Worker secrets) at every call, so a rotated secret is used at once.
 */
const auth = z.union([
  z.strictObject({ bearerTokenEnv: envName }),
  z.strictObject({ basicAuth: z.strictObject({ usernameEnv: envName, passwordEnv: envName }) }),
]);

/** The fields every flavour has. */
const commonFields = {
  /** per-call timeout, seconds (default 2, at most 4); also sent as the query's `timeout` */
  timeoutSeconds: z._default(z.number().check(z.positive(), z.maximum(MAX_BACKEND_TIMEOUT_SECONDS)), 2),
  /** how long a read waits for others to share its query, seconds (default 0.01) */
  batchWindowSeconds: z._default(z.number().check(z.minimum(0), z.maximum(1)), 0.01),
  /**
   * most series one query sums (default 100: a query's `=~` alternation of
   * 100 values is cheap for Prometheus, and with refresh-ahead it saves
   * ≥ 500× the queries, bench P2-prometheus; at most 1,000, so a Pods read of
   * 1,000 pods is one query, bench P7)
   */
  maxBatchSize: z._default(z.number().check(z.int(), z.minimum(1), z.maximum(MAX_SERIES_PER_QUERY)), DEFAULT_SERIES_PER_QUERY),
  /**
   * Refresh-ahead (`../refresh-ahead.ts`): reload every series read since
   * its last load shortly before its cached value expires, batched (one
   * query pair per `maxBatchSize` series of one shape per TTL), so the HPA
   * controller's blocking reads hit the cache. Absent: on in a long-lived
   * process (the Node server), off on Cloudflare Workers and AWS Lambda,
   * which cancel or freeze work between requests.
   */
  refreshAhead: z.optional(z.boolean()),
};

/** Config of one `prometheus` provider instance, by `flavour` (default `generic`). */
export const prometheusProviderSchema = z.discriminatedUnion("flavour", [
  z.strictObject({
    /** which API: `generic` (default) */
    flavour: z._default(z.literal("generic"), "generic"),
    /** base URL of the HTTP API: `http://prometheus:9090`, `https://mimir.example/prometheus`; the bridge appends `/api/v1/query` */
    url: z.url({ protocol: /^https?$/ }),
    auth: z.optional(auth),
    /** sent as `X-Scope-OrgID` (Mimir, Cortex, Thanos receive/query-frontend tenancy) */
    tenant: z.optional(z.string().check(z.minLength(1), z.maxLength(256), z.regex(/^[\x21-\x7e]+$/, "must be printable ASCII without spaces"))),
    ...commonFields,
  }),
  z.strictObject({ flavour: z.literal("gmp"), ...gmpFields, ...commonFields }),
  z.strictObject({ ...ampFields, ...commonFields }),
]);

/** Validated `prometheus` provider instance config. */
export type PrometheusProviderConfig = z.infer<typeof prometheusProviderSchema>;

/** This provider's schemas under the names every provider folder's `schema.ts` exports them (`../provider-list.ts`). */
export { prometheusProviderSchema as providerSchema, prometheusQuerySchema as querySchema };
