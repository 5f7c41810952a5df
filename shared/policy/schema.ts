/**
 * Schemas of the policy objects (zod; the TypeScript types are inferred):
 *
 * - `ExternalMetricPolicy` — who may read which metrics and series
 *   (semantics: `../shared/POLICY.md`, guide: `docs/policy.md`);
 * - the `policy:` section of `BridgeConfig` — the default when no policy
 *   applies, the local caller identity, extra policy files;
 * - the label selector a rule allows, written as a `metav1.LabelSelector`
 *   (`k8s.io/apimachinery/pkg/apis/meta/v1/types.go`) or as a selector
 *   string (`labels.Parse` syntax, which also has `k>n`, `k<n`, `k!=v`).
 *
 * ```yaml
 * apiVersion: external-metrics-bridge.io/v1alpha1
 * kind: ExternalMetricPolicy
 * metadata: { name: team-a, namespace: team-a }   # no namespace: cluster scope
 * spec:
 *   subjects: { users: [jane], groups: [team-a], serviceAccounts: [kube-system/horizontal-pod-autoscaler] }
 *   rules:
 *     - metric: "queue_messages_(ready|delayed)"
 *       selector: { matchExpressions: [{ key: queue, operator: In, values: [team-a-jobs] }] }
 *     - metric: http_requests_per_second          # custom.metrics.k8s.io reads of pods and ingresses
 *       resources: [pods, ingresses.networking.k8s.io]
 *       selector: {}
 *     - { metric: ".*", deny: true }
 *   defaultAction: Deny
 * ```
 */
import * as z from "../config/zod.ts";
import { isGroupResource } from "../k8s/request-path.ts";
import { MAX_PATTERN_LENGTH } from "./regex.ts";

/**
 * API group/version of ExternalMetricPolicy: the project's own group, equal
 * to `CONFIG_API_VERSION` of `shared/config/config.ts` (kept as its own
 * constant because config.ts imports this module; a test checks they agree).
 */
export const POLICY_API_VERSION = "external-metrics-bridge.io/v1alpha1";

/** The kind of policy objects (namespaced in a cluster; in files, no namespace means cluster scope). */
export const POLICY_KIND = "ExternalMetricPolicy";

/** The kind of cluster-scoped policy objects (never has `metadata.namespace`). */
export const CLUSTER_POLICY_KIND = "ClusterExternalMetricPolicy";

/**
 * Bounds shared with the CRDs (infra/helm/external-metrics-bridge/files/crds/,
 * `maxItems`/`maxLength`/`maxProperties`; test/policy/policy.objects.test.ts checks
 * both refuse the same objects).
 */
export const POLICY_LIMITS = {
  /** rules per policy */
  rules: 256,
  /** entries of each subjects list */
  subjects: 256,
  /** characters of a user or group name */
  name: 1024,
  /** matchLabels entries and matchExpressions of one selector */
  selectorTerms: 64,
  /** values of one matchExpression */
  values: 256,
  /** characters of a rule's description */
  description: 1024,
  /** entries of a rule's `resources` */
  resources: 16,
  /** characters of one `resources` entry: a plural (DNS-1123 label, 63) `.` a group (DNS-1123 subdomain, 253) */
  resource: 63 + 1 + 253,
} as const;

/** The `resources` entry of the External Metrics API (`external.metrics.k8s.io`), and a rule's default. */
export const EXTERNAL_RESOURCE = "external";

/** The `resources` entry that covers every custom.metrics.k8s.io resource (not `external`). */
export const EVERY_CUSTOM_RESOURCE = "*";

/**
 * Whether a rule's `resources` cover `resource` (a read's resource, or
 * another rule's entry): listed, or a custom resource under
 * {@link EVERY_CUSTOM_RESOURCE} (`*` never covers `external`, which is
 * always named).
 */
export function coversResource(resources: readonly string[], resource: string): boolean {
  return resources.includes(resource) || (resource !== EXTERNAL_RESOURCE && resources.includes(EVERY_CUSTOM_RESOURCE));
}

/**
 * Whether `resource` names a custom read's resource (anything but
 * {@link EXTERNAL_RESOURCE}): a custom.metrics.k8s.io group resource.
 */
export function isCustomResource(resource: string | undefined): resource is string {
  return resource !== undefined && resource !== EXTERNAL_RESOURCE;
}

/**
 * A rule's `resources`: 1..{@link POLICY_LIMITS}.resources distinct entries,
 * each `external`, a lowercase group resource as the custom paths write it
 * (`shared/k8s/request-path.ts` `isGroupResource`: `pods`, `namespaces`,
 * `ingresses.networking.k8s.io`), or `*` (every custom resource:
 * {@link coversResource}). Checked by hand, the count first, so a
 * hostile list (10,000 entries) costs one issue, not one per entry.
 */
export const resourcesSchema: z.ZodMiniType<string[]> = z.pipe(
  z.unknown(),
  z.transform((value, ctx): string[] => {
    const fail = (message: string, path: PropertyKey[] = []) => {
      ctx.issues.push({ code: "custom", message, input: value, path } as never);
      return z.NEVER;
    };
    if (!Array.isArray(value)) return fail("resources must be a list: external and/or group resources (pods, ingresses.networking.k8s.io)");
    if (value.length < 1 || value.length > POLICY_LIMITS.resources) {
      return fail(`resources has ${value.length} entries: list 1 to ${POLICY_LIMITS.resources} (omit it for [external])`);
    }
    const seen = new Set<string>();
    let bad = false;
    value.forEach((entry: unknown, i) => {
      if (typeof entry !== "string" || entry.length > POLICY_LIMITS.resource || (entry !== EVERY_CUSTOM_RESOURCE && !isGroupResource(entry))) {
        const shown = typeof entry === "string" ? JSON.stringify(entry.length > 80 ? `${entry.slice(0, 80)}…` : entry) : JSON.stringify(entry ?? null);
        fail(
          `${shown} is not a resource: write external (the External Metrics API), a lowercase group resource as the ` +
            `custom metrics paths write it, at most ${POLICY_LIMITS.resource} characters (pods, namespaces, ingresses.networking.k8s.io), ` +
            `or * (every custom metrics resource)`,
          [i],
        );
        bad = true;
      } else if (seen.has(entry)) {
        fail(`duplicate resource "${entry}"`, [i]);
        bad = true;
      } else seen.add(entry);
    });
    return bad ? z.NEVER : (value as string[]);
  }),
);

/** A decision. */
export const actionSchema = z.enum(["Allow", "Deny"]);
/** `Allow` or `Deny`. */
export type Action = z.infer<typeof actionSchema>;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A namespace name (DNS-1123 label, apimachinery `pkg/util/validation`). */
export const namespaceSchema = z.string().check(z.maxLength(63), z.regex(DNS1123_LABEL, "must be a DNS-1123 label (a namespace name)"));

/** `NAMESPACE/NAME` of a ServiceAccount. */
export const serviceAccountRefSchema = z.string().check(
  z.maxLength(63 + 1 + 253),
  z.refine((s) => {
    const [ns, name, ...rest] = s.split("/");
    return rest.length === 0 && ns !== undefined && name !== undefined && DNS1123_LABEL.test(ns) && DNS1123_SUBDOMAIN.test(name);
  }, "must be NAMESPACE/NAME of a service account"),
);

/** `metav1.LabelSelector` as written in YAML. */
export const labelSelectorObjectSchema = z.strictObject({
  matchLabels: z.optional(
    z.record(z.string(), z.string()).check(
      z.refine((m) => Object.keys(m).length <= POLICY_LIMITS.selectorTerms, `at most ${POLICY_LIMITS.selectorTerms} labels`),
    ),
  ),
  matchExpressions: z.optional(
    z
      .array(
        z.strictObject({
          key: z.string(),
          operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
          values: z.optional(z.array(z.string()).check(z.maxLength(POLICY_LIMITS.values))),
        }),
      )
      .check(z.maxLength(POLICY_LIMITS.selectorTerms)),
  ),
});

/** A selector as written. */
export type SelectorInput = string | z.infer<typeof labelSelectorObjectSchema>;

/**
 * A selector: a string in `labels.Parse` syntax, or a `metav1.LabelSelector`
 * object. (Not a `z.union`: its errors would only say "Invalid input"; an
 * object is checked against the LabelSelector schema so the message names
 * the bad field.)
 */
export const selectorInputSchema: z.ZodMiniType<SelectorInput> = z.pipe(
  z.unknown(),
  z.transform((value, ctx): SelectorInput => {
    if (typeof value === "string") return value;
    const parsed = labelSelectorObjectSchema.safeParse(value);
    if (parsed.success) return parsed.data;
    // the object's own issues (messages and paths kept), below this value's path
    for (const issue of parsed.error.issues) ctx.issues.push({ ...issue, input: value } as never);
    return z.NEVER;
  }),
);

function subjectList<T extends z.ZodMiniType>(item: T) {
  return z.array(item).check(z.maxLength(POLICY_LIMITS.subjects));
}

/** `spec.subjects`: omitted → the policy applies to every caller. */
export const subjectsSchema = z
  .strictObject({
    /** user names as Kubernetes authentication reports them */
    users: z.optional(subjectList(z.string().check(z.minLength(1), z.maxLength(POLICY_LIMITS.name)))),
    /** group names; a caller in any of them matches */
    groups: z.optional(subjectList(z.string().check(z.minLength(1), z.maxLength(POLICY_LIMITS.name)))),
    /** `NAMESPACE/NAME`: the user `system:serviceaccount:NAMESPACE:NAME` */
    serviceAccounts: z.optional(subjectList(serviceAccountRefSchema)),
  })
  .check(
    z.refine(
      (s) => (s.users?.length ?? 0) + (s.groups?.length ?? 0) + (s.serviceAccounts?.length ?? 0) > 0,
      "list at least one user, group or service account (omit subjects to apply the policy to every caller)",
    ),
  );

/** One rule: a metric pattern, the resources it covers, and either the selector it allows or `deny: true`. */
export const policyRuleSchema = z
  .strictObject({
    /** RE2 pattern matched against the whole lowercased metric name */
    metric: z.string().check(z.minLength(1), z.maxLength(MAX_PATTERN_LENGTH)),
    /** the reads the rule covers: `external` and/or custom group resources (absent: `[external]`) */
    resources: z.optional(resourcesSchema),
    /** the request's selector must be a subset of this one */
    selector: z.optional(selectorInputSchema),
    deny: z.optional(z.literal(true)),
    description: z.optional(z.string().check(z.maxLength(POLICY_LIMITS.description))),
  })
  .check(
    z.superRefine((rule, ctx) => {
      if ((rule.selector === undefined) === (rule.deny === undefined)) {
        ctx.addIssue({
          code: "custom",
          message: "a rule has exactly one of selector (what it allows; {} allows every series) or deny: true",
        });
      }
    }),
  );

const policyNameSchema = z.string().check(z.maxLength(253), z.regex(DNS1123_SUBDOMAIN, "must be a DNS-1123 subdomain"));

/** `spec` of both kinds (the CRDs' `spec` schema). */
export const policySpecSchema = z.strictObject({
  subjects: z.optional(subjectsSchema),
  /** top to bottom; the first rule whose metric matches decides */
  rules: z._default(z.array(policyRuleSchema).check(z.maxLength(POLICY_LIMITS.rules)), []),
  /** when no rule's metric matches (default Deny) */
  defaultAction: z._default(actionSchema, "Deny"),
});

/**
 * An ExternalMetricPolicy object. `status` (what a cluster's proxy wrote
 * back, e.g. in `kubectl get -o yaml` output) is allowed and ignored.
 */
export const policySchema = z.strictObject({
  apiVersion: z.literal(POLICY_API_VERSION),
  kind: z.literal(POLICY_KIND),
  metadata: z.looseObject({
    name: policyNameSchema,
    /** omitted → (files only) the policy is cluster-scoped and applies in every namespace */
    namespace: z.optional(namespaceSchema),
  }),
  spec: policySpecSchema,
  status: z.optional(z.unknown()),
});
/** A validated ExternalMetricPolicy object. */
export type PolicyObject = z.infer<typeof policySchema>;

/** A ClusterExternalMetricPolicy object: as {@link policySchema}, never with a namespace. */
export const clusterPolicySchema = z.strictObject({
  apiVersion: z.literal(POLICY_API_VERSION),
  kind: z.literal(CLUSTER_POLICY_KIND),
  metadata: z.looseObject({
    name: policyNameSchema,
    namespace: z.optional(
      z.string().check(
        z.refine((ns) => ns === "", `a ${CLUSTER_POLICY_KIND} is cluster-scoped: remove metadata.namespace (or use kind ${POLICY_KIND})`),
      ),
    ),
  }),
  spec: policySpecSchema,
  status: z.optional(z.unknown()),
});
/** A validated ClusterExternalMetricPolicy object. */
export type ClusterPolicyObject = z.infer<typeof clusterPolicySchema>;

/** A Kubernetes user (see `shared/identity.ts` `Caller`). */
export const callerSchema = z.strictObject({
  user: z.string().check(z.minLength(1)),
  uid: z.optional(z.string()),
  groups: z._default(z.array(z.string().check(z.minLength(1))), []),
  extra: z._default(z.record(z.string(), z.array(z.string())), {}),
});

/**
 * The `policy:` section of BridgeConfig.
 *
 * ```yaml
 * policy:
 *   defaultAction: Deny              # when no ExternalMetricPolicy applies
 *   localIdentity:                   # the caller when no proxy signs requests
 *     user: system:serviceaccount:kube-system:horizontal-pod-autoscaler
 *     groups: [system:serviceaccounts, system:authenticated]
 *   files: [policies/teams.yaml]     # Node only; relative to the config file
 * ```
 */
export const policySettingsSchema = z.strictObject({
  defaultAction: actionSchema,
  /** default: the anonymous user (`system:anonymous`, group `system:unauthenticated`) */
  localIdentity: z.optional(callerSchema),
  files: z._default(z.array(z.string().check(z.minLength(1))), []),
});
/** The validated `policy:` section. */
export type PolicySettings = z.infer<typeof policySettingsSchema>;
