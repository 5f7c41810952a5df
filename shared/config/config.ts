/**
 * The bridge's configuration: one `BridgeConfig` YAML document naming
 * provider instances and metric rules, validated with zod. Every error names
 * the source, line, column and field path.
 *
 * ```yaml
 * apiVersion: external-metrics-bridge.io/v1alpha1
 * kind: BridgeConfig
 * defaults: { maxAgeSeconds: 60, cacheTTLSeconds: 5 }
 * providers:
 *   sqs: { type: aws-sqs, region: us-east-1 }
 * metrics:
 *   - name: queue_messages_ready
 *     provider: sqs
 *     query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
 * ```
 *
 * A source may hold several YAML documents; documents of other kinds are
 * returned to the caller untouched (`others`) so that later loaders (the
 * policy loader) read them from the same source.
 */
import * as z from "./zod.ts";
import { isGroupResource } from "../k8s/request-path.ts";
import { metricKey } from "../metric-name.ts";
import { notBuiltMessage, providerEntry, type ProviderInstanceConfig } from "../providers/registry.ts";
import { sharedCacheSchema } from "../cache/shared-tier.ts";
import type { MetricDescribes, MetricRule } from "../providers/types.ts";
import { compileIdentifierPattern, PatternError } from "../policy/regex.ts";
import { loadPolicyConfig, type PolicyConfig, type PolicyLoadOptions } from "../policy/load.ts";
import { policySettingsSchema } from "../policy/schema.ts";
import { ConfigError, issueAt, parseYamlDocuments, zodIssues, type ConfigIssue, type SourceDocument } from "./yaml.ts";

/** API group/version of the project's own objects. */
export const CONFIG_API_VERSION = "external-metrics-bridge.io/v1alpha1";

/** Longest `maxAgeSeconds` accepted (1 hour). */
export const MAX_MAX_AGE_SECONDS = 3600;

/**
 * Metric rule names: letters, digits and `-_.:/|` (a `/` may be written as
 * `|` in requests), at most 253 characters, not `.` or `..`.
 */
const metricNameSchema = z.string().check(
  z.minLength(1),
  z.maxLength(253),
  z.regex(/^[A-Za-z0-9_.:/|-]+$/, "may contain only letters, digits and - _ . : / |"),
  z.refine((n) => n !== "." && n !== "..", "may not be . or .."),
);

const defaultsSchema = z.strictObject({
  /** longest age of a served value, seconds */
  maxAgeSeconds: z._default(z.number().check(z.positive(), z.maximum(MAX_MAX_AGE_SECONDS)), 60),
  /** how long a backend read is re-used, seconds */
  cacheTTLSeconds: z._default(z.number().check(z.minimum(0), z.maximum(MAX_MAX_AGE_SECONDS)), 5),
});

/** A group resource as clients write it: a lowercase plural, then an optional `.group` (the custom paths' own check, shared/k8s/request-path.ts). */
const groupResourceSchema = z.string().check(
  z.maxLength(253),
  z.refine(isGroupResource, "must be a group resource: a lowercase plural, then an optional .group (pods, ingresses.networking.k8s.io)"),
);
/** A label name of a selector (the key the rule's mapping reads). */
const selectorKeySchema = z.string().check(z.minLength(1), z.maxLength(63), z.regex(/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/, "must be a label name"));

/** `describes:` of a custom metric rule (see `MetricDescribes`, shared/providers/types.ts). */
const describesSchema = z.strictObject({
  resource: groupResourceSchema,
  objectLabel: selectorKeySchema,
  namespaceLabel: z.optional(selectorKeySchema),
  identifier: z._default(
    z.union([
      z.strictObject({ from: z.literal("name") }),
      z.strictObject({ from: z.enum(["label", "annotation"]), key: z.string().check(z.minLength(1), z.maxLength(317)) }),
      z.strictObject({ from: z.literal("status"), path: z.string().check(z.regex(/^status(\.[A-Za-z0-9_-]+)+$/, "must be a field path under status, e.g. status.queueURL")) }),
    ]),
    { from: "name" as const },
  ),
  allow: z.optional(z.array(z.string().check(z.minLength(1))).check(z.minLength(1), z.maxLength(64))),
});

const ruleSchema = z.strictObject({
  name: metricNameSchema,
  provider: z.string().check(z.minLength(1)),
  description: z.optional(z.string().check(z.maxLength(1024))),
  maxAgeSeconds: z.optional(z.number().check(z.positive(), z.maximum(MAX_MAX_AGE_SECONDS))),
  cacheTTLSeconds: z.optional(z.number().check(z.minimum(0), z.maximum(MAX_MAX_AGE_SECONDS))),
  query: z._default(z.record(z.string(), z.unknown()), {}),
  /** a custom.metrics.k8s.io rule: the object it describes; absent: an External rule */
  describes: z.optional(describesSchema),
});

const providerEntrySchema = z.looseObject({
  type: z.string().check(z.minLength(1)),
});

/** Schema of the BridgeConfig document before provider-specific validation. */
export const bridgeConfigSchema = z.strictObject({
  apiVersion: z.literal(CONFIG_API_VERSION),
  kind: z.literal("BridgeConfig"),
  metadata: z.optional(z.looseObject({ name: z.optional(z.string()) })),
  defaults: z._default(defaultsSchema, { maxAgeSeconds: 60, cacheTTLSeconds: 5 }),
  providers: z.record(z.string().check(z.regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, "provider names are DNS labels")), providerEntrySchema),
  metrics: z.array(ruleSchema).check(z.minLength(1, "at least one metric rule is required")),
  /** ExternalMetricPolicy settings (`shared/policy/schema.ts`, `docs/policy.md`) */
  policy: z.optional(policySettingsSchema),
});

/** The validated configuration. */
export interface BridgeConfig {
  /** where it was read from */
  source: string;
  /** provider instances by name */
  providers: Record<string, ProviderInstanceConfig>;
  /** External metric rules in file order (the rules without `describes:`) */
  metrics: MetricRule[];
  /**
   * custom.metrics.k8s.io rules in file order (the rules with `describes:`):
   * kept apart so no External read, discovery list or policy tool ever sees
   * them (docs/architecture.md "A custom read")
   */
  customMetrics: MetricRule[];
  /**
   * compiled policies, default action and local identity; undefined when the
   * source has no `policy:` section and no policies (nothing is authorized)
   */
  policy?: PolicyConfig;
}

/** A loaded source: the BridgeConfig and the documents of other kinds. */
export interface LoadedSource {
  config: BridgeConfig;
  /** documents whose kind is not BridgeConfig, for other loaders */
  others: SourceDocument[];
}

/**
 * Parse and validate a config source.
 *
 * @param text YAML text with exactly one `kind: BridgeConfig` document
 * @param source name used in error messages (file path or binding name)
 * @param options `readFile` for the policy files of `policy.files` (Node)
 * @throws ConfigError listing every problem with its line and field path
 *   (ExternalMetricPolicy documents included, see `shared/policy/load.ts`)
 */
export function loadConfig(text: string, source: string, options: PolicyLoadOptions = {}): LoadedSource {
  return loadConfigDocuments(parseYamlDocuments(text, source), source, options);
}

/**
 * {@link loadConfig} on documents already parsed by `parseYamlDocuments`
 * (for a tool that needs the documents too and parses the text once:
 * `functions/config-check.ts`). Same result, same errors.
 */
export function loadConfigDocuments(docs: readonly SourceDocument[], source: string, options: PolicyLoadOptions = {}): LoadedSource {
  const isBridge = (d: SourceDocument) => (d.value as { kind?: unknown } | null)?.kind === "BridgeConfig";
  const bridgeDocs = docs.filter(isBridge);
  if (bridgeDocs.length !== 1) {
    throw new ConfigError([
      {
        source,
        line: 1,
        column: 1,
        path: "",
        message: `expected exactly one document with kind: BridgeConfig, found ${bridgeDocs.length}`,
      },
    ]);
  }
  const config = validateBridgeConfig(bridgeDocs[0]!);
  const others = docs.filter((d) => !isBridge(d));
  const policy = loadPolicyConfig(bridgeDocs[0]!, others, options);
  if (policy !== undefined) config.policy = policy;
  return { config, others };
}

function validateBridgeConfig(sd: SourceDocument): BridgeConfig {
  const parsed = bridgeConfigSchema.safeParse(sd.value);
  if (!parsed.success) throw new ConfigError(zodIssues(sd, parsed.error));
  const raw = parsed.data;
  const issues: ConfigIssue[] = [];

  const providers: Record<string, ProviderInstanceConfig> = {};
  for (const [name, entry] of Object.entries(raw.providers)) {
    const module = providerEntry(entry.type);
    if (module === undefined) {
      issues.push(issueAt(sd, ["providers", name, "type"], notBuiltMessage(entry.type)));
      continue;
    }
    const { type: _type, sharedCache, ...rest } = entry;
    const result = module.providerSchema.safeParse(rest);
    // `sharedCache:` is every provider type's (the shared read tier: shared/cache/shared-tier.ts)
    const tier = sharedCache === undefined ? undefined : sharedCacheSchema.safeParse(sharedCache);
    if (tier !== undefined && !tier.success) issues.push(...zodIssues(sd, tier.error, ["providers", name, "sharedCache"]));
    if (!result.success) issues.push(...zodIssues(sd, result.error, ["providers", name]));
    else providers[name] = { type: entry.type, config: result.data, ...(tier?.success === true ? { sharedCache: tier.data } : {}) };
  }

  const metrics: MetricRule[] = [];
  const customMetrics: MetricRule[] = [];
  const seen = new Map<string, number>();
  raw.metrics.forEach((rule, i) => {
    const key = metricKey(rule.name);
    // External rules share one name space; a custom rule's name is unique per resource it describes
    const scope = rule.describes === undefined ? key : `${rule.describes.resource}\u0000${key}`;
    const earlier = seen.get(scope);
    if (earlier !== undefined) {
      const where = rule.describes === undefined ? "" : ` for ${rule.describes.resource}`;
      issues.push(issueAt(sd, ["metrics", i, "name"], `metric "${rule.name}"${where} is already defined by metrics[${earlier}] (names are case-insensitive)`));
    }
    seen.set(scope, i);
    const describes = rule.describes === undefined ? undefined : describesOf(rule.describes, (path, message) => issues.push(issueAt(sd, ["metrics", i, "describes", ...path], message)));
    const entry = raw.providers[rule.provider];
    if (entry === undefined) {
      issues.push(issueAt(sd, ["metrics", i, "provider"], `no provider named "${rule.provider}" in providers`));
      return;
    }
    const module = providerEntry(entry.type);
    if (module === undefined) return; // already reported
    const query = module.querySchema.safeParse(rule.query);
    if (!query.success) {
      issues.push(...zodIssues(sd, query.error, ["metrics", i, "query"]));
      return;
    }
    const maxAgeSeconds = rule.maxAgeSeconds ?? raw.defaults.maxAgeSeconds;
    const cacheTTLSeconds = rule.cacheTTLSeconds ?? Math.min(raw.defaults.cacheTTLSeconds, maxAgeSeconds);
    if (cacheTTLSeconds > maxAgeSeconds) {
      issues.push(issueAt(sd, ["metrics", i, "cacheTTLSeconds"], `must not exceed maxAgeSeconds (${maxAgeSeconds})`));
    }
    (describes === undefined ? metrics : customMetrics).push({
      name: rule.name,
      key,
      index: i,
      provider: rule.provider,
      maxAgeSeconds,
      cacheTTLSeconds,
      ...(rule.description !== undefined ? { description: rule.description } : {}),
      query: query.data,
      ...(describes !== undefined ? { describes } : {}),
    });
  });

  if (issues.length > 0) throw new ConfigError(issues);
  return { source: sd.source, providers, metrics, customMetrics };
}

/**
 * The validated `describes:` of a custom rule: the identifier's source
 * normalized and the `allow` patterns compiled (RE2, case-sensitive, cost
 * bounded before compiling: shared/policy/regex.ts); each refusal goes to
 * `issue` with its path inside `describes`. A Pods or namespace rule's
 * identifier is the object's name: they are resolved by name only.
 */
function describesOf(raw: z.infer<typeof describesSchema>, issue: (path: (string | number)[], message: string) => void): MetricDescribes {
  const identifier: MetricDescribes["identifier"] = raw.identifier.from === "status" ? { from: "status", path: raw.identifier.path.split(".").slice(1) } : raw.identifier;
  if ((raw.resource === "pods" || raw.resource === "namespaces") && identifier.from !== "name") {
    issue(["identifier"], `a ${raw.resource} rule identifies its objects by name (the proxy resolves ${raw.resource} by name only)`);
  }
  if (raw.namespaceLabel !== undefined && raw.namespaceLabel === raw.objectLabel) issue(["namespaceLabel"], "must differ from objectLabel");
  const allow: { source: string; matches(identifier: string): boolean }[] = [];
  raw.allow?.forEach((source, j) => {
    try {
      allow.push(compileIdentifierPattern(source));
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      issue(["allow", j], err.message);
    }
  });
  return {
    resource: raw.resource,
    objectLabel: raw.objectLabel,
    ...(raw.namespaceLabel !== undefined ? { namespaceLabel: raw.namespaceLabel } : {}),
    identifier,
    ...(raw.allow !== undefined ? { allow } : {}),
  };
}
