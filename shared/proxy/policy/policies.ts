/**
 * The proxy's cluster policy layer: ExternalMetricPolicy (namespaced) and
 * ClusterExternalMetricPolicy (cluster-scoped) objects of
 * `external-metrics-bridge.io/v1alpha1`, read live from the Kubernetes API
 * and enforced on every values read after authentication and the
 * SubjectAccessReview, before the read is forwarded (app.ts).
 *
 * - **Watch.** One {@link Informer} per kind (paginated list, then watch;
 *   410 → re-list; back-off 1 s doubling to 10 s; kube/informer.ts). Each object is
 *   cut down on receipt to what policy state needs ({@link stripPolicyObject}:
 *   name, namespace, uid, generation, resourceVersion, spec and the status
 *   conditions; never annotations or managedFields). Every change schedules
 *   a rebuild {@link DEBOUNCE_MS} later (changes arriving meanwhile are
 *   batched), so a `kubectl apply` takes effect one watch event plus ≤ 100 ms
 *   (plus the compile) later.
 * - **Compile.** Each changed object with the {@link ClusterPoliciesOptions.compile}
 *   hook (default `compilePolicyObject`, shared/policy/objects.ts, the same
 *   compile path as the bridge's policy files), awaited; reads stay on the
 *   previous policy set meanwhile. The result is kept per object until its
 *   spec or generation changes. The evaluator is the bridge's own
 *   {@link PolicySet} (shared/policy/evaluate.ts), built anew and swapped
 *   atomically on each rebuild ({@link ClusterPolicies.current}).
 * - **Invalid objects fail closed.** An object whose current generation does
 *   not compile (or whose compile throws, rejects or passes
 *   {@link COMPILE_TIMEOUT_MS}) is never half-applied:
 *   - an *edit* of an object this process has seen valid keeps the last
 *     valid generation in force (`Accepted=False`, the reason, and a message
 *     saying which generation stays in force;
 *     `emb_proxy_cluster_policies{state="stale"}`,
 *     `emb_proxy_cluster_policy_refused_edits_total`, a Warning Event);
 *   - an object with no valid generation seen (new, or first read invalid
 *     after a restart) denies every values read in its scope — its
 *     namespace for an ExternalMetricPolicy, every namespace for a
 *     ClusterExternalMetricPolicy — whoever the caller (its `subjects` cannot
 *     be trusted either), with a 403 naming the object and its problem,
 *     until it is fixed or deleted (`state="invalid"`, a Warning Event).
 *   A 403 rather than a 503: the refusal is caused by an object in the
 *   cluster and lasts until someone changes it (retrying does not help, as
 *   with any policy denial); the HPA turns either into ScalingActive=False
 *   without scaling, and a 503 would page whoever runs the proxy for a
 *   tenant's object. Deleting an object removes it.
 * - **Bounds.** Per namespace: {@link MAX_NAMESPACE_POLICY_OBJECTS} objects,
 *   {@link MAX_NAMESPACE_POLICY_SPEC_BYTES} bytes of specs (JSON),
 *   {@link MAX_NAMESPACE_POLICY_RULES} rules (counted from the specs, before
 *   compiling). A namespace past one is not compiled and its values reads are
 *   refused with 503 naming the limit; other namespaces are unaffected.
 *   Cluster-wide: {@link MAX_POLICY_OBJECTS} objects,
 *   {@link MAX_POLICY_SPEC_BYTES} bytes, {@link MAX_POLICY_RULES} rules for
 *   the cluster-scoped objects alone (past one: every values read 503, no
 *   subset is picked: leaving a guardrail out could widen access) and for
 *   all objects together (past one: the namespaces using the most of the
 *   exceeded quantity are refused first, whole, until the rest fits). Each
 *   transition is logged once.
 * - **Readiness.** Until both kinds have been listed once (and the first
 *   rebuild ran) the layer is not ready: values reads get 503 (without
 *   `Retry-After`: app.ts strips it from every values answer, client-go then
 *   makes one attempt). When a list answers 404 (the CRDs are not installed)
 *   this is logged once as an error and the list is retried with back-off;
 *   reads stay 503 (fail closed). When a kind's list and watch keep failing
 *   for longer than {@link RESYNC_TIMEOUT_MS} the policies in force may be
 *   stale with no end: values reads get 503 naming the kind, the time and
 *   the last error, `emb_proxy_cluster_policy_watch_unsynced{kind}` is 1 and
 *   an error is logged, until a list succeeds again. Discovery and `/readyz`
 *   never depend on this layer (an unready pod would break the APIService
 *   for the cluster).
 * - **Decision.** Every applicable policy (the cluster-scoped ones and the
 *   request namespace's) must allow (a namespace policy can only narrow).
 *   With none applicable, `whenNoneApply` decides: `Defer` (default) leaves
 *   the read to the backend's own policy layer (bridge backends are fail
 *   closed by themselves), `Deny` refuses it. A denial is a 403 Status
 *   naming the layer, the policy (`namespace/name` or the cluster policy's
 *   name), the rule index and the requirement the request does not imply.
 *   Counted in `emb_proxy_policy_decisions_total{layer="cluster",decision}`
 *   (`allow`, `deny`, `defer`, `unavailable`).
 * - **Status write-back.** Only the Lease leader (`isLeader`, tls/lease.ts)
 *   writes: `PUT …/{name}/status` with the resourceVersion as read (409 on a
 *   concurrent change: left for the next round, which sees the newer
 *   object), only when the `Accepted` condition or `observedGeneration`
 *   differ from what the object holds, each with a deadline of
 *   {@link STATUS_WRITE_TIMEOUT_MS}; rounds run after each rebuild and every
 *   {@link STATUS_RESYNC_MS}. `lastTransitionTime` changes only when the
 *   condition's status does (metav1.Condition semantics,
 *   k8s.io/apimachinery/pkg/api/meta/conditions.go `SetStatusCondition`).
 *   The leader also creates one `events.k8s.io/v1` Warning Event per refused
 *   generation (deduplicated by object, generation and reason; at most
 *   {@link EVENT_BURST} at once, then one per {@link EVENT_REFILL_MS}),
 *   in the object's namespace (`default` for a cluster-scoped one, as
 *   client-go's `tools/events` recorder does).
 */
import { hostname } from "node:os";
import { BoundedMap } from "../../cache/bounded-map.ts";
import type { Caller } from "../../identity.ts";
import { EXTERNAL_METRICS_GROUP, badRequest, StatusError } from "../../k8s/status.ts";
import { MAX_SELECTOR_LENGTH, parseSelector, SelectorError, type Selector } from "../../k8s/selector.ts";
import { PolicySet, type CompiledPolicy, type PolicyVerdict } from "../../policy/evaluate.ts";
import { EXTERNAL_RESOURCE, isCustomResource } from "../../policy/schema.ts";
import { CUSTOM_GROUP } from "../../k8s/custom-types.ts";
import { ACCEPTED, acceptedCondition, compilePolicyObject, MAX_CONDITION_MESSAGE, setCondition, type Condition, type PolicyObjectResult } from "../../policy/objects.ts";
import { apiDeadline, apiStatus, microTime, type KubeClient, type KubeObject, type ObjectMeta } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import { selectorBytes } from "../request-info.ts";
import { labelSelectorOf } from "../../values/request.ts";
import type { Logger } from "../log.ts";
import type { ProxyMetrics } from "../metrics.ts";

/** API group and version of the policy kinds. */
export const POLICY_GROUP_VERSION = "external-metrics-bridge.io/v1alpha1";
/** Collection paths (all namespaces) of the two kinds. */
export const POLICY_PATHS = {
  ExternalMetricPolicy: `/apis/${POLICY_GROUP_VERSION}/externalmetricpolicies`,
  ClusterExternalMetricPolicy: `/apis/${POLICY_GROUP_VERSION}/clusterexternalmetricpolicies`,
} as const;
/** The two kinds. */
export type PolicyKind = keyof typeof POLICY_PATHS;

/** Most policy objects of all kinds and namespaces together, and of cluster-scoped ones alone. */
export const MAX_POLICY_OBJECTS = 10_000;
/** Most bytes of policy specs (their JSON) of all objects together, and of cluster-scoped ones alone. */
export const MAX_POLICY_SPEC_BYTES = 8 * 1024 * 1024;
/** Most rules of all policies together, and of cluster-scoped ones alone. */
export const MAX_POLICY_RULES = 100_000;
/** Most ExternalMetricPolicy objects in one namespace; past it that namespace's values reads are refused (503). */
export const MAX_NAMESPACE_POLICY_OBJECTS = 1_000;
/** Most bytes of ExternalMetricPolicy specs (JSON) in one namespace; past it that namespace's values reads are refused (503). */
export const MAX_NAMESPACE_POLICY_SPEC_BYTES = 1024 * 1024;
/** Most rules of the ExternalMetricPolicies of one namespace; past it that namespace's values reads are refused (503). */
export const MAX_NAMESPACE_POLICY_RULES = 10_000;
/** Longest time a kind's list and watch may keep failing before values reads are refused (503), ms. */
export const RESYNC_TIMEOUT_MS = 5 * 60_000;
/** Longest wait for the compile of one object, ms; past it the object counts as invalid. */
export const COMPILE_TIMEOUT_MS = 10_000;
/** Delay between a watch event and the rebuild of the policy set, ms (events meanwhile are batched). */
export const DEBOUNCE_MS = 50;
/** Deadline of one status write (or Event create), ms. */
export const STATUS_WRITE_TIMEOUT_MS = 5_000;
/** Period of the status round that retries failed writes and follows leadership changes, ms. */
export const STATUS_RESYNC_MS = 10_000;
/** Longest back-off between failed lists of a kind, ms (a CRD installed later is seen this late at most). */
export const MAX_LIST_BACKOFF_MS = 10_000;
/** Most Events written at once about invalid objects (token bucket size). */
export const EVENT_BURST = 25;
/** One more Event may be written every this many ms once {@link EVENT_BURST} is spent. */
export const EVENT_REFILL_MS = 10_000;
/** Most (object, generation, reason) keys remembered as already reported by an Event (oldest forgotten first). */
export const EVENT_MEMO_ENTRIES = 4096;
/** `reportingController` of the Events the proxy writes. */
export const EVENT_REPORTING_CONTROLLER = "external-metrics-bridge.io/proxy";
/** Longest `note` of an Event, bytes (kube-apiserver's `NoteLengthLimit`, pkg/apis/core/validation/events.go). */
const EVENT_NOTE_LIMIT = 1024;
/** Longest part of an object's problem quoted in a 403 message, characters. */
const MAX_QUOTED_PROBLEM = 1024;

/** What to do with a read no cluster policy applies to. */
export type WhenNoneApply = "Defer" | "Deny";

/** `metav1.Condition` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), as objects.ts builds it. */
export type PolicyCondition = Condition;

/** A policy object as read from the API (fields used). */
export interface PolicyObject extends KubeObject {
  spec?: unknown;
  status?: { observedGeneration?: number; conditions?: PolicyCondition[]; [field: string]: unknown };
}

/**
 * The result of compiling one policy object: objects.ts
 * {@link PolicyObjectResult} — `policy` set only when the object is valid
 * (no issues), `issues` every problem (`path`: the field), `conditions`
 * holding the `Accepted` condition for the object's `metadata.generation`.
 */
export type PolicyCompileResult = PolicyObjectResult;

/**
 * Compiles one policy object: {@link ClusterPoliciesOptions.compile}.
 *
 * Contract:
 * - `obj` is what the layer keeps of the object ({@link stripPolicyObject})
 *   with `apiVersion` and `kind` set: `metadata` (name, namespace for an
 *   ExternalMetricPolicy, uid, generation, resourceVersion), `spec`
 *   (untrusted: anything the CRD schema lets through) and maybe `status`.
 *   It must not be modified.
 * - Returns (or resolves to) a {@link PolicyCompileResult}: `policy` only
 *   when the object is valid and wholly compiled (it is then enforced as
 *   is); otherwise the `issues`, and the `Accepted=False` condition (built
 *   from the issues when `conditions` lacks it).
 * - A throw, a rejection, or no answer within {@link COMPILE_TIMEOUT_MS}
 *   (`compileTimeoutMs`) means "invalid object" (reason `InvalidSpec`, the
 *   error's message): it fails closed exactly like an object that does not
 *   compile (the previous valid generation stays in force, or the object
 *   denies its scope). A late answer is ignored.
 * - It is called for the objects that changed since the last rebuild, all
 *   of them at once (the calls may run concurrently: a compiler with its own
 *   queue or worker thread decides how); reads are decided by the previous
 *   policy set until every call of the rebuild has settled. A result for a
 *   spec that changed meanwhile is used for that rebuild only.
 */
export type PolicyCompiler = (obj: PolicyObject & { apiVersion: string; kind: PolicyKind }) => PolicyCompileResult | Promise<PolicyCompileResult>;

/** Limits of the layer (defaults: the MAX_* constants). */
export interface ClusterPolicyLimits {
  /** objects of all kinds together, and cluster-scoped ones alone (default {@link MAX_POLICY_OBJECTS}) */
  maxObjects?: number;
  /** bytes of specs (JSON) of all objects together, and of cluster-scoped ones alone (default {@link MAX_POLICY_SPEC_BYTES}) */
  maxSpecBytes?: number;
  /** rules of all objects together, and of cluster-scoped ones alone (default {@link MAX_POLICY_RULES}) */
  maxRules?: number;
  /** ExternalMetricPolicy objects in one namespace (default {@link MAX_NAMESPACE_POLICY_OBJECTS}) */
  maxNamespaceObjects?: number;
  /** bytes of specs (JSON) in one namespace (default {@link MAX_NAMESPACE_POLICY_SPEC_BYTES}) */
  maxNamespaceSpecBytes?: number;
  /** rules in one namespace (default {@link MAX_NAMESPACE_POLICY_RULES}) */
  maxNamespaceRules?: number;
}

/** Settings of {@link ClusterPolicies}. */
export interface ClusterPoliciesOptions {
  kc: KubeClient;
  /** decision when no policy applies (default Defer) */
  whenNoneApply?: WhenNoneApply;
  log: Logger;
  metrics?: ProxyMetrics;
  /** whether this replica writes status and Events (the Lease holder); undefined: this replica always writes */
  isLeader?: () => boolean;
  /** rebuild delay after a change, ms (default {@link DEBOUNCE_MS}; at most 100) */
  debounceMs?: number;
  /** status round period, ms (default {@link STATUS_RESYNC_MS}) */
  statusResyncMs?: number;
  /** limits (defaults: the MAX_* constants) */
  limits?: ClusterPolicyLimits;
  /** first list back-off, ms (default 1 000; doubling to {@link MAX_LIST_BACKOFF_MS}) */
  backoffMs?: number;
  /** longest time a kind's list and watch may fail before values reads are refused, ms (default {@link RESYNC_TIMEOUT_MS}) */
  resyncTimeoutMs?: number;
  /** compiles one object (default: objects.ts `compilePolicyObject`); the contract is {@link PolicyCompiler}'s */
  compile?: PolicyCompiler;
  /** longest wait for one `compile`, ms (default {@link COMPILE_TIMEOUT_MS}) */
  compileTimeoutMs?: number;
  /** items per page of the lists (default kube/informer.ts `LIST_PAGE_SIZE`, 500) */
  listPageSize?: number;
  /** `reportingInstance` of the Events written (default: the host name, i.e. the pod's name) */
  instance?: string;
}

/** A compile result as kept for an object. */
interface Compiled {
  policy?: CompiledPolicy;
  /** the problems, `path: message` joined by `; ` (invalid only) */
  message?: string;
  /** the Accepted condition as compiled */
  condition: PolicyCondition;
}

/** One object and what became of it. */
interface Entry {
  kind: PolicyKind;
  key: string;
  obj: PolicyObject;
  /** undefined for a ClusterExternalMetricPolicy */
  namespace: string | undefined;
  generation: number | undefined;
  /** JSON of generation + spec: the compile result is reused while it is unchanged */
  fingerprint: string;
  bytes: number;
  /** rules listed in the spec (counted before compiling) */
  rules: number;
  compiled?: Compiled;
  /** the last generation of this object this process saw valid (kept in force while a later one is invalid) */
  lastValid?: { policy: CompiledPolicy; generation: number | undefined };
  /** the Accepted condition to write, from the last rebuild (undefined: nothing to write) */
  condition?: PolicyCondition;
  /** how the last rebuild treated it */
  state?: "accepted" | "stale" | "invalid" | "over-limit";
}

/** What the last rebuild put in force, swapped whole. */
interface Enforced {
  set: PolicySet;
  /** policies standing for objects never seen valid (rules: none, defaultAction Deny), by id */
  invalid: Map<string, { ref: string; problem: string }>;
  /** namespaces whose values reads are refused (503), and why */
  overNamespaces: Map<string, string>;
}

/** What a values read asks the layer. */
export interface ClusterPolicyRequest {
  caller: Caller;
  namespace: string;
  /** the metric's lookup key (lowercased, `/` for `|`: shared/metric-name.ts `metricName(...).key`) */
  metric: string;
  /**
   * what is read: `external` (absent) or a custom read's group resource as
   * its path writes it (`pods`, `namespaces` for namespace metrics,
   * `ingresses.networking.k8s.io`); policy rules decide by their
   * `resources:` (shared/policy/evaluate.ts). For a cluster-scoped object
   * `namespace` is "" and only cluster-scoped policies apply.
   */
  resource?: string | undefined;
  /** the request URL (its `labelSelector`, for a custom read its `metricLabelSelector`, is read when `selector` is not given) */
  url: URL;
  /**
   * The request's `labelSelector` (for a custom read: its
   * `metricLabelSelector`, the series selector; the pods' `labelSelector`
   * is not a cloud selector and is not checked) already parsed (request-info.ts
   * `RequestInfo.labelSelector`, carried by the authorizer's memo:
   * authz/authorize.ts `authorizeRequest(…, withSelector)`), so a read parses its
   * selector once. The caller vouches that it is the URL's only
   * `labelSelector` (app.ts `checkRequestSize` refuses several, and longer
   * than {@link MAX_SELECTOR_LENGTH}, before authentication). Undefined: the
   * URL is read and parsed here (400 when it does not parse).
   */
  selector?: Selector | undefined;
}

/** A 403 Forbidden of the cluster policy layer (as status.ts `forbidden`, a subclass so app.ts counts it apart from RBAC denials). */
export class ClusterPolicyDenied extends StatusError {}

/**
 * Bounds of the memo of parsed selectors read from URLs (the HPA sends the
 * same few selectors every 15 s): entries, bytes (each entry counted by
 * {@link selectorMemoBytes}). Used only when a read comes without
 * {@link ClusterPolicyRequest.selector}.
 */
export const SELECTOR_MEMO_BOUNDS = { maxEntries: 1024, maxBytes: 1024 * 1024 } as const;

/** A kind whose list and watch are failing: since when (performance.now, ms) and the last error. */
interface Unsynced {
  since: number;
  error: string;
  timer: ReturnType<typeof setTimeout> | undefined;
  reported: boolean;
}

/**
 * Live cluster policies. {@link start} begins watching; {@link current} is
 * the policy set in force; {@link authorize} decides a values read.
 */
export class ClusterPolicies {
  readonly whenNoneApply: WhenNoneApply;
  readonly #o: ClusterPoliciesOptions;
  readonly #limits: Required<ClusterPolicyLimits>;
  readonly #entries = new Map<string, Entry>();
  readonly #informers: Informer<PolicyObject>[] = [];
  readonly #listed = new Set<PolicyKind>();
  readonly #missing = new Set<PolicyKind>();
  readonly #unsynced = new Map<PolicyKind, Unsynced>();
  #enforced: Enforced;
  #ready = false;
  #overLimit: string | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #resync: ReturnType<typeof setInterval> | undefined;
  #rebuilding: Promise<void> | undefined;
  #rebuildAgain = false;
  #syncing: Promise<void> | undefined;
  #syncAgain = false;
  #stopped = false;
  readonly #writing = new Set<string>();
  readonly #selectors = new BoundedMap<string, Selector>({ ...SELECTOR_MEMO_BOUNDS, sizeOf: selectorMemoBytes });
  readonly #invalidLogged = new Map<string, string>();
  /** namespaces refused for their limits at the last rebuild (logged on each change) */
  #overNamespacesLogged = new Map<string, string>();
  /** (object, generation, reason) already reported by an Event, oldest first */
  readonly #eventsSent = new Set<string>();
  #eventTokens = EVENT_BURST;
  #eventRefilledAt = performance.now();
  readonly #eventFailuresLogged = new Set<string>();
  /** counters for tests */
  readonly stats = { rebuilds: 0, compiles: 0, statusWrites: 0, statusConflicts: 0, events: 0 };

  constructor(options: ClusterPoliciesOptions) {
    this.#o = options;
    this.whenNoneApply = options.whenNoneApply ?? "Defer";
    const l = options.limits ?? {};
    this.#limits = {
      maxObjects: l.maxObjects ?? MAX_POLICY_OBJECTS,
      maxSpecBytes: l.maxSpecBytes ?? MAX_POLICY_SPEC_BYTES,
      maxRules: l.maxRules ?? MAX_POLICY_RULES,
      maxNamespaceObjects: l.maxNamespaceObjects ?? MAX_NAMESPACE_POLICY_OBJECTS,
      maxNamespaceSpecBytes: l.maxNamespaceSpecBytes ?? MAX_NAMESPACE_POLICY_SPEC_BYTES,
      maxNamespaceRules: l.maxNamespaceRules ?? MAX_NAMESPACE_POLICY_RULES,
    };
    this.#enforced = { set: this.#newSet([]), invalid: new Map(), overNamespaces: new Map() };
  }

  /** Start watching both kinds and log the `whenNoneApply` setting (no-op when started). */
  start(): void {
    if (this.#informers.length > 0) return;
    this.#o.log({
      level: "info",
      msg:
        this.whenNoneApply === "Defer"
          ? "cluster policies: on; a read no ExternalMetricPolicy or ClusterExternalMetricPolicy applies to is left to the backend's own policy (whenNoneApply: Defer)"
          : "cluster policies: on; a read no ExternalMetricPolicy or ClusterExternalMetricPolicy applies to is denied (whenNoneApply: Deny)",
    });
    for (const kind of Object.keys(POLICY_PATHS) as PolicyKind[]) {
      this.#o.metrics?.clusterPolicyWatchUnsynced.set({ kind }, 0);
      const informer = new Informer<PolicyObject>(this.#o.kc, {
        path: POLICY_PATHS[kind],
        backoffMs: this.#o.backoffMs ?? 1000,
        maxBackoffMs: MAX_LIST_BACKOFF_MS,
        ...(this.#o.listPageSize !== undefined ? { pageSize: this.#o.listPageSize } : {}),
        transform: stripPolicyObject,
        onListed: () => {
          if (this.#missing.delete(kind)) this.#o.log({ level: "info", msg: `cluster policies: ${kind} is served by the API now` });
          this.#listed.add(kind);
          this.#synced(kind);
          this.#schedule();
        },
        onAdd: (obj) => this.#put(kind, obj),
        onUpdate: (obj) => this.#put(kind, obj),
        onDelete: (obj) => {
          if (this.#entries.delete(entryKey(kind, obj))) this.#schedule();
        },
        onError: (err, retryMs) => {
          this.#unsync(kind, err);
          if (apiStatus(err) === 404) {
            if (!this.#missing.has(kind)) {
              this.#missing.add(kind);
              this.#o.log({
                level: "error",
                msg: `cluster policies: the API has no ${kind} (404 on ${POLICY_PATHS[kind]}): install the CRDs (infra/helm/external-metrics-bridge/files/crds/); values reads are refused (503) until they are listed`,
                retryMs,
              });
            }
            this.#listed.delete(kind);
            this.#schedule();
            return;
          }
          this.#o.log({
            level: "warn",
            msg: `cluster policies: list or watch of ${kind} failed; the policies last read stay in force for at most ${Math.round(this.#resyncTimeoutMs() / 1000)} s of failures`,
            error: err.message,
            retryMs,
          });
        },
      });
      this.#informers.push(informer);
    }
    for (const i of this.#informers) i.start();
    this.#resync = setInterval(() => this.#requestStatusSync(), this.#o.statusResyncMs ?? STATUS_RESYNC_MS);
    this.#resync.unref?.();
  }

  /** Stop watching and writing (writes in flight finish or time out). Never throws. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    clearInterval(this.#resync);
    for (const u of this.#unsynced.values()) clearTimeout(u.timer);
    await Promise.all(this.#informers.map((i) => i.stop()));
    await this.#rebuilding;
    await this.#syncing;
  }

  /**
   * The policy set in force (swapped whole on every rebuild; never partly
   * updated). Its `defaultAction` is Allow for `whenNoneApply: Defer`
   * (nothing to say: the backend decides) and Deny for `Deny`. An object
   * never seen valid stands in it as a policy with no rules and
   * `defaultAction: Deny` for everyone in its scope; an object whose latest
   * edit is invalid stands as its last valid generation. The policies of a
   * namespace refused for its limits are not in it ({@link unavailableIn}).
   */
  current(): PolicySet {
    return this.#enforced.set;
  }

  /** Why values reads in `namespace` are refused (its policies exceed the limits), or undefined. */
  unavailableIn(namespace: string): string | undefined {
    return this.#enforced.overNamespaces.get(namespace);
  }

  /** Whether the layer decides reads now (both kinds listed and in sync, within the cluster-wide limits). */
  ready(): boolean {
    return this.notReadyReason() === undefined;
  }

  /** Why reads are refused now in every namespace (undefined when ready). */
  notReadyReason(): string | undefined {
    if (this.#missing.size > 0) {
      return `the Kubernetes API does not serve ${[...this.#missing].join(" and ")} (are the external-metrics-bridge CRDs installed?)`;
    }
    if (!this.#ready) return "the ExternalMetricPolicy and ClusterExternalMetricPolicy objects have not been listed yet";
    if (this.#overLimit !== undefined) return this.#overLimit;
    const bound = this.#resyncTimeoutMs();
    const now = performance.now();
    for (const [kind, u] of this.#unsynced) {
      if (now - u.since >= bound) {
        return (
          `the list and watch of ${kind} have failed for ${Math.round((now - u.since) / 1000)} s, longer than the ` +
          `${Math.round(bound / 1000)} s the proxy keeps enforcing policies it cannot refresh (last error: ${u.error})`
        );
      }
    }
    return undefined;
  }

  /**
   * Counts of objects by state: `accepted` (enforced as they are); `invalid`
   * (their current generation does not compile) with the message and, for
   * an edit refused, `inForce`: the generation still enforced (absent: the
   * object denies its scope); `overLimit`: namespaces refused and why.
   */
  summary(): { accepted: number; invalid: { id: string; message: string; inForce?: number | "previous" }[]; overLimit: { namespace: string; reason: string }[] } {
    let accepted = 0;
    const invalid: { id: string; message: string; inForce?: number | "previous" }[] = [];
    for (const e of this.#entries.values()) {
      if (e.state === "accepted") accepted++;
      else if (e.state === "stale") invalid.push({ id: describe(e), message: e.compiled?.message ?? "", inForce: e.lastValid?.generation ?? "previous" });
      else if (e.state === "invalid") invalid.push({ id: describe(e), message: e.compiled?.message ?? "" });
    }
    const overLimit = [...this.#enforced.overNamespaces].map(([namespace, reason]) => ({ namespace, reason }));
    return { accepted, invalid, overLimit };
  }

  /**
   * Estimated bytes of the objects the layer holds (their JSON as kept by
   * {@link stripPolicyObject}), computed on each call: what a large
   * annotation or managedFields costs after its page was parsed (nothing).
   */
  heldBytes(): number {
    let bytes = 0;
    for (const e of this.#entries.values()) bytes += Buffer.byteLength(JSON.stringify(e.obj), "utf8");
    return bytes;
  }

  /**
   * Decide a values read.
   *
   * @returns `allow` (every applicable policy allows) or `defer` (none
   *   applies and `whenNoneApply` is Defer: the backend decides)
   * @throws StatusError 503 (no Retry-After) while the layer is not ready,
   *   over its cluster-wide limits, or its watch has not resynced within the
   *   bound, and for a namespace whose policies exceed their limits (naming
   *   the limit); 400 for a `labelSelector` that does not parse
   *   (apimachinery's message); {@link ClusterPolicyDenied} 403 naming the
   *   layer, policy, rule and missing requirement, or the invalid object
   *   that denies the namespace (or cluster) and its problem
   */
  authorize(request: ClusterPolicyRequest): "allow" | "defer" {
    const reason = this.notReadyReason();
    if (reason !== undefined) {
      this.#count("unavailable");
      throw new StatusError(503, `the cluster policy layer of the proxy cannot decide reads: ${reason}`);
    }
    const enforced = this.#enforced;
    const over = enforced.overNamespaces.get(request.namespace);
    if (over !== undefined) {
      this.#count("unavailable");
      throw new StatusError(503, `the cluster policy layer of the proxy cannot decide reads in namespace ${JSON.stringify(request.namespace)}: ${over}`);
    }
    const resource = request.resource ?? EXTERNAL_RESOURCE;
    const custom = isCustomResource(resource);
    const selector = request.selector ?? this.#selector(request.url, custom ? "metricLabelSelector" : "labelSelector");
    const decision = enforced.set.evaluate({ caller: request.caller, namespace: request.namespace, metric: request.metric, selector, resource });
    const deny = (message: string) => {
      this.#count("deny");
      const [group, kind] = custom ? [CUSTOM_GROUP, resource] : [EXTERNAL_METRICS_GROUP, "externalmetrics"];
      return new ClusterPolicyDenied(
        403,
        `${kind}.${group} ${JSON.stringify(request.metric)} is forbidden: ` +
          `user ${JSON.stringify(request.caller.user)} may not read it in namespace ${JSON.stringify(request.namespace)}: ${message}`,
        { name: request.metric, group, kind },
      );
    };
    if (decision.byDefault) {
      if (this.whenNoneApply === "Deny") {
        const scope = request.namespace === "" ? "for a cluster-scoped object" : `in namespace ${JSON.stringify(request.namespace)}`;
        throw deny(
          `denied by the cluster policy layer: no ClusterExternalMetricPolicy or ExternalMetricPolicy ${scope} ` +
            `applies to this user, and the proxy's clusterPolicies.whenNoneApply is Deny`,
        );
      }
      this.#count("defer");
      return "defer";
    }
    if (decision.decision === "Deny") {
      const invalid = enforced.invalid.get(decision.deniedBy!.policy);
      if (invalid !== undefined) {
        const scope = decision.deniedBy!.policy.includes("/") ? `every values read in namespace ${JSON.stringify(request.namespace)}` : "every values read in the cluster";
        throw deny(
          `denied by the cluster policy layer: ${invalid.ref} is invalid (${invalid.problem}) and no valid generation of it has been seen, ` +
            `so it denies ${scope} until it is fixed or deleted`,
        );
      }
      throw deny(`denied by the cluster policy layer: ${verdictText(decision.deniedBy!)}`);
    }
    this.#count("allow");
    return "allow";
  }

  #count(decision: "allow" | "deny" | "defer" | "unavailable"): void {
    this.#o.metrics?.policyDecisions.inc({ layer: "cluster", decision });
  }

  #resyncTimeoutMs(): number {
    return this.#o.resyncTimeoutMs ?? RESYNC_TIMEOUT_MS;
  }

  /** A list or watch of `kind` failed: start (or go on) counting the time out of sync. */
  #unsync(kind: PolicyKind, err: Error): void {
    const known = this.#unsynced.get(kind);
    if (known !== undefined) {
      known.error = err.message;
      return;
    }
    const u: Unsynced = { since: performance.now(), error: err.message, timer: undefined, reported: false };
    this.#unsynced.set(kind, u);
    if (this.#stopped) return;
    u.timer = setTimeout(() => {
      if (this.#unsynced.get(kind) !== u || this.#stopped) return;
      u.reported = true;
      this.#o.metrics?.clusterPolicyWatchUnsynced.set({ kind }, 1);
      this.#o.log({
        level: "error",
        msg: `cluster policies: the list and watch of ${kind} have failed for ${Math.round(this.#resyncTimeoutMs() / 1000)} s; the policies in force may be stale, so values reads are refused (503) until a list succeeds`,
        error: u.error,
      });
    }, this.#resyncTimeoutMs());
    u.timer.unref?.();
  }

  /** A list of `kind` succeeded: in sync again. */
  #synced(kind: PolicyKind): void {
    const u = this.#unsynced.get(kind);
    if (u === undefined) return;
    clearTimeout(u.timer);
    this.#unsynced.delete(kind);
    if (u.reported) {
      this.#o.metrics?.clusterPolicyWatchUnsynced.set({ kind }, 0);
      this.#o.log({ level: "info", msg: `cluster policies: ${kind} listed again; values reads are decided again` });
    }
  }

  #selector(url: URL, parameter: "labelSelector" | "metricLabelSelector"): Selector {
    const text = parameter === "labelSelector" ? labelSelectorOf(url.searchParams) : singleParameter(url.searchParams, parameter);
    const known = this.#selectors.get(text);
    if (known !== undefined) return known;
    let selector: Selector;
    try {
      selector = parseSelector(text, { maxLength: MAX_SELECTOR_LENGTH });
    } catch (err) {
      if (err instanceof SelectorError) throw badRequest(`invalid ${parameter} ${JSON.stringify(text.slice(0, 200))}: ${err.message}`);
      throw err;
    }
    Object.freeze(selector);
    this.#selectors.set(text, selector);
    return selector;
  }

  /** Entries and estimated bytes of the memo of selectors parsed from URLs (see {@link SELECTOR_MEMO_BOUNDS}). */
  get selectorMemo(): { entries: number; bytes: number } {
    return { entries: this.#selectors.size, bytes: this.#selectors.bytes };
  }

  #put(kind: PolicyKind, obj: PolicyObject): void {
    const key = entryKey(kind, obj);
    const specText = JSON.stringify(obj.spec ?? null);
    const generation = obj.metadata?.["generation"];
    const fingerprint = `${String(generation ?? "")}\n${specText}`;
    const old = this.#entries.get(key);
    if (old !== undefined && old.fingerprint === fingerprint) {
      old.obj = obj; // a status or metadata change: same policy, new resourceVersion
      this.#requestStatusSync();
      return;
    }
    const rules = (obj.spec as { rules?: unknown } | null | undefined)?.rules;
    const fields = {
      obj,
      fingerprint,
      generation: typeof generation === "number" ? generation : undefined,
      bytes: Buffer.byteLength(specText, "utf8"),
      rules: Array.isArray(rules) ? rules.length : 0,
    };
    if (old !== undefined) {
      // An edit: the last valid generation is kept for as long as the new one is not valid.
      Object.assign(old, fields);
      delete old.compiled;
    } else {
      this.#entries.set(key, { kind, key, namespace: kind === "ClusterExternalMetricPolicy" ? undefined : (obj.metadata?.namespace ?? ""), ...fields });
    }
    this.#schedule();
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#rebuild();
    }, Math.min(100, this.#o.debounceMs ?? DEBOUNCE_MS));
    this.#timer.unref?.();
  }

  #newSet(policies: CompiledPolicy[]): PolicySet {
    return new PolicySet(
      policies,
      this.whenNoneApply === "Deny" ? "Deny" : "Allow",
      this.whenNoneApply === "Deny" ? "the proxy's clusterPolicies.whenNoneApply is Deny" : "the proxy's clusterPolicies.whenNoneApply is Defer: the backend's own policy decides",
    );
  }

  /** Run a rebuild, or have the one running run again when it ends (rebuilds never overlap). */
  #rebuild(): void {
    if (this.#rebuilding !== undefined) {
      this.#rebuildAgain = true;
      return;
    }
    this.#rebuilding = (async () => {
      do {
        this.#rebuildAgain = false;
        try {
          await this.#rebuildOnce();
        } catch (err) {
          // Never expected (compile failures are per object); the set in force stays.
          this.#o.log({ level: "error", msg: "cluster policies: rebuilding the policy set failed; the set in force stays", error: (err as Error).message });
        }
      } while (this.#rebuildAgain && !this.#stopped);
    })().finally(() => {
      this.#rebuilding = undefined;
    });
  }

  /** Check the limits, compile what changed, and swap in a new policy set. */
  async #rebuildOnce(): Promise<void> {
    this.stats.rebuilds++;
    const limits = this.#limits;
    const entries = [...this.#entries.values()].sort((a, b) => (a.kind === b.kind ? (a.key < b.key ? -1 : 1) : a.kind === "ClusterExternalMetricPolicy" ? -1 : 1));
    // Usage by scope: the cluster-scoped objects, and each namespace.
    const cluster: Usage = { objects: 0, bytes: 0, rules: 0 };
    const namespaces = new Map<string, Usage>();
    for (const e of entries) {
      let u = cluster;
      if (e.namespace !== undefined) {
        u = namespaces.get(e.namespace) ?? { objects: 0, bytes: 0, rules: 0 };
        namespaces.set(e.namespace, u);
      }
      u.objects++;
      u.bytes += e.bytes;
      u.rules += e.rules;
    }
    const over = overLimit(cluster, limits.maxObjects, limits.maxSpecBytes, limits.maxRules, "cluster-scoped policy objects (ClusterExternalMetricPolicy)");
    const overNamespaces = new Map<string, string>();
    if (over === undefined) {
      for (const [ns, u] of namespaces) {
        const why = overLimit(u, limits.maxNamespaceObjects, limits.maxNamespaceSpecBytes, limits.maxNamespaceRules, `ExternalMetricPolicy objects in namespace ${JSON.stringify(ns)}`);
        if (why !== undefined) overNamespaces.set(ns, `${why}; remove objects from the namespace (other namespaces are not affected)`);
      }
      this.#fitTotal(cluster, namespaces, overNamespaces);
    }
    if (over !== this.#overLimit) {
      this.#o.log(
        over === undefined
          ? { level: "info", msg: "cluster policies: back within the cluster-wide limits" }
          : { level: "error", msg: `cluster policies: ${over}; no subset is enforced (leaving a policy out could widen access), so values reads are refused (503) until objects are deleted` },
      );
      this.#overLimit = over;
    }
    if (over === undefined) this.#logNamespaces(overNamespaces);

    // Compile what changed, in the scopes within their limits.
    const admitted = (e: Entry) => over === undefined && (e.namespace === undefined || !overNamespaces.has(e.namespace));
    await Promise.all(entries.filter((e) => admitted(e) && e.compiled === undefined).map((e) => this.#compileEntry(e)));

    const policies: CompiledPolicy[] = [];
    const invalid = new Map<string, { ref: string; problem: string }>();
    const counts = { accepted: 0, stale: 0, invalid: 0, "over-limit": 0 };
    for (const e of entries) {
      const c = e.compiled;
      if (!admitted(e) || c === undefined) {
        e.state = "over-limit";
        e.condition = undefined;
      } else if (c.policy !== undefined) {
        e.state = "accepted";
        e.condition = c.condition;
        policies.push(c.policy);
      } else if (e.lastValid !== undefined) {
        e.state = "stale";
        const kept = e.lastValid.generation !== undefined ? `generation ${e.lastValid.generation}` : "the previous valid version";
        e.condition = withNote(c.condition, `generation ${e.generation ?? "?"} is not enforced: ${kept} stays in force until this one is fixed`);
        policies.push(e.lastValid.policy);
      } else {
        e.state = "invalid";
        const scope = e.namespace === undefined ? "every values read in the cluster" : `every values read in namespace ${JSON.stringify(e.namespace)}`;
        e.condition = withNote(c.condition, `no valid generation of this object has been seen, so it denies ${scope}, whoever reads, until it is fixed or deleted`);
        const stand = denyAll(e);
        policies.push(stand);
        invalid.set(stand.id, { ref: describe(e), problem: cut(c.message ?? c.condition.message, MAX_QUOTED_PROBLEM) });
      }
      counts[e.state]++;
      this.#logInvalid(e);
    }
    if (over === undefined) this.#enforced = { set: this.#newSet(policies), invalid, overNamespaces };
    this.#ready = this.#listed.size === this.#informers.length && this.#informers.length > 0;
    for (const [state, n] of Object.entries(counts)) this.#o.metrics?.clusterPolicies.set({ state }, n);
    for (const key of this.#invalidLogged.keys()) if (!this.#entries.has(key)) this.#invalidLogged.delete(key);
    this.#requestStatusSync();
  }

  /**
   * Refuse whole namespaces, those using the most of the exceeded quantity
   * first, until the cluster-scoped objects plus the namespaces left fit the
   * cluster-wide limits (the cluster-scoped ones alone fit: checked before).
   */
  #fitTotal(cluster: Usage, namespaces: Map<string, Usage>, overNamespaces: Map<string, string>): void {
    const limits = this.#limits;
    const total: Usage = { ...cluster };
    for (const [ns, u] of namespaces) {
      if (overNamespaces.has(ns)) continue;
      total.objects += u.objects;
      total.bytes += u.bytes;
      total.rules += u.rules;
    }
    const dims = [
      { field: "objects" as const, limit: limits.maxObjects, what: "policy objects" },
      { field: "bytes" as const, limit: limits.maxSpecBytes, what: "bytes of policy specs" },
      { field: "rules" as const, limit: limits.maxRules, what: "policy rules" },
    ];
    const orders = new Map<string, string[]>();
    for (const d of dims) {
      if (total[d.field] <= d.limit) continue;
      let order = orders.get(d.field);
      if (order === undefined) {
        order = [...namespaces.keys()].filter((ns) => !overNamespaces.has(ns)).sort((a, b) => namespaces.get(b)![d.field] - namespaces.get(a)![d.field] || (a < b ? -1 : 1));
        orders.set(d.field, order);
      }
      for (const ns of order) {
        if (total[d.field] <= d.limit) break;
        if (overNamespaces.has(ns)) continue;
        const u = namespaces.get(ns)!;
        overNamespaces.set(
          ns,
          `the ExternalMetricPolicy objects of all namespaces together exceed the proxy's cluster-wide limit of ${d.limit} ${d.what}, ` +
            `and namespace ${JSON.stringify(ns)} is among those with the most (${u[d.field]}), which are refused first; remove objects from it`,
        );
        total.objects -= u.objects;
        total.bytes -= u.bytes;
        total.rules -= u.rules;
      }
    }
  }

  /** Log the namespaces that went over or came back within their limits since the last rebuild. */
  #logNamespaces(now: Map<string, string>): void {
    for (const [ns, why] of now) {
      if (this.#overNamespacesLogged.get(ns) === why) continue;
      this.#o.log({ level: "error", msg: `cluster policies: values reads in namespace ${JSON.stringify(ns)} are refused (503): ${why}` });
    }
    for (const ns of this.#overNamespacesLogged.keys()) {
      if (!now.has(ns)) this.#o.log({ level: "info", msg: `cluster policies: namespace ${JSON.stringify(ns)} is back within the limits` });
    }
    this.#overNamespacesLogged = new Map(now);
  }

  /** Log an invalid object once per message and state. */
  #logInvalid(e: Entry): void {
    if (e.state === "accepted") {
      this.#invalidLogged.delete(e.key);
      return;
    }
    if (e.state !== "stale" && e.state !== "invalid") return;
    const message = e.compiled?.message ?? "";
    const mark = `${e.state}\n${e.generation ?? ""}\n${message}`;
    if (this.#invalidLogged.get(e.key) === mark) return;
    this.#invalidLogged.set(e.key, mark);
    if (e.state === "stale") {
      this.#o.metrics?.clusterPolicyRefusedEdits.inc();
      this.#o.log({
        level: "warn",
        msg: `cluster policies: ${describe(e)} generation ${e.generation ?? "?"} is invalid and not enforced; generation ${e.lastValid?.generation ?? "?"} stays in force`,
        reason: e.compiled?.condition.reason,
        error: message,
      });
    } else {
      this.#o.log({
        level: "warn",
        msg: `cluster policies: ${describe(e)} is invalid and was never valid: it denies every values read in ${e.namespace === undefined ? "the cluster" : `namespace ${JSON.stringify(e.namespace)}`} until it is fixed or deleted`,
        reason: e.compiled?.condition.reason,
        error: message,
      });
    }
  }

  /** Compile one entry with the hook (bounded in time; a failure is an invalid object). */
  async #compileEntry(e: Entry): Promise<void> {
    this.stats.compiles++;
    const fingerprint = e.fingerprint;
    const generation = e.generation;
    const input = { ...e.obj, apiVersion: POLICY_GROUP_VERSION, kind: e.kind };
    const compile = this.#o.compile ?? ((obj: unknown) => compilePolicyObject(obj));
    const timeoutMs = this.#o.compileTimeoutMs ?? COMPILE_TIMEOUT_MS;
    let result: PolicyCompileResult;
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      result = await Promise.race([
        Promise.resolve().then(() => compile(input)),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`the policy compiler did not finish within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
      if (result === null || typeof result !== "object" || !Array.isArray(result.issues)) throw new Error("the policy compiler returned no result");
    } catch (err) {
      const message = `the policy could not be compiled: ${(err as Error)?.message ?? String(err)}`;
      result = { issues: [{ source: "", line: 0, column: 0, path: "", message }], conditions: [] };
    } finally {
      clearTimeout(timer);
    }
    const valid = result.policy !== undefined && result.issues.length === 0;
    const condition =
      result.conditions.find((c) => c.type === ACCEPTED && c.status === (valid ? "True" : "False")) ??
      acceptedCondition(valid ? [] : result.issues.length > 0 ? result.issues : [{ source: "", line: 0, column: 0, path: "", message: "the policy compiler gave no policy" }], generation);
    const compiled: Compiled = valid
      ? { policy: result.policy!, condition }
      : { message: condition.message || result.issues.map((i) => `${i.path ? `${i.path}: ` : ""}${i.message}`).join("; "), condition };
    if (this.#entries.get(e.key) !== e) return; // deleted meanwhile
    // A valid generation is kept even when a newer edit arrived meanwhile: it was seen valid.
    if (valid) e.lastValid = { policy: result.policy!, generation };
    if (e.fingerprint === fingerprint) e.compiled = compiled;
  }

  #requestStatusSync(): void {
    if (this.#stopped) return;
    if (this.#syncing !== undefined) {
      this.#syncAgain = true;
      return;
    }
    this.#syncing = this.#syncStatus().finally(() => {
      this.#syncing = undefined;
      if (this.#syncAgain && !this.#stopped) {
        this.#syncAgain = false;
        this.#requestStatusSync();
      }
    });
  }

  /** Write the `Accepted` condition of every object whose status differs, and the Events of refused generations (leader only). */
  async #syncStatus(): Promise<void> {
    if (this.#o.isLeader !== undefined && !this.#o.isLeader()) return;
    for (const e of [...this.#entries.values()]) {
      if (this.#stopped) return;
      const want = e.condition;
      if (want === undefined || this.#writing.has(e.key)) continue;
      const next = desiredStatus(e.obj, want);
      if (next === undefined) continue;
      this.#writing.add(e.key);
      try {
        const written = await this.#o.kc.replace<PolicyObject>(statusPath(e.kind, e.obj), { ...e.obj, kind: e.kind, apiVersion: POLICY_GROUP_VERSION, status: next }, apiDeadline(STATUS_WRITE_TIMEOUT_MS));
        this.stats.statusWrites++;
        const current = this.#entries.get(e.key);
        if (current !== undefined && current.obj === e.obj) current.obj = stripPolicyObject(written);
      } catch (err) {
        if (apiStatus(err) === 409) this.stats.statusConflicts++; // changed meanwhile: the watch brings the newer object, the next round writes
        else if (apiStatus(err) !== 404) this.#o.log({ level: "warn", msg: `cluster policies: writing the status of ${describe(e)} failed; retried at the next round`, error: (err as Error).message });
      } finally {
        this.#writing.delete(e.key);
      }
    }
    for (const e of [...this.#entries.values()]) {
      if (this.#stopped) return;
      if (e.state !== "stale" && e.state !== "invalid") continue;
      if (!(await this.#event(e))) return;
    }
  }

  /**
   * Create the Warning Event of a refused generation of `e`, once per
   * (object, generation, reason), within the rate bound.
   *
   * @returns false when no more Events should be tried this round (rate
   *   bound reached, or the API refused the write)
   */
  async #event(e: Entry): Promise<boolean> {
    const condition = e.condition;
    if (condition === undefined) return true;
    const mark = `${e.key}\n${e.generation ?? ""}\n${condition.reason}\n${e.state}`;
    if (this.#eventsSent.has(mark)) return true;
    const now = performance.now();
    const refill = Math.floor((now - this.#eventRefilledAt) / EVENT_REFILL_MS);
    if (refill > 0) {
      this.#eventTokens = Math.min(EVENT_BURST, this.#eventTokens + refill);
      this.#eventRefilledAt += refill * EVENT_REFILL_MS;
    }
    if (this.#eventTokens <= 0) {
      this.#o.metrics?.clusterPolicyEvents.inc({ result: "dropped" });
      return false;
    }
    this.#eventTokens--;
    const namespace = e.namespace ?? "default";
    const name = e.obj.metadata?.name ?? "";
    const nowMs = Date.now();
    const event = {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { name: `${name.slice(0, 200)}.${(BigInt(nowMs) * 1_000_000n + BigInt(this.stats.events % 1_000_000)).toString(16)}`, namespace },
      eventTime: microTime(nowMs),
      reportingController: EVENT_REPORTING_CONTROLLER,
      reportingInstance: (this.#o.instance ?? hostname()).slice(0, 128),
      action: e.state === "stale" ? "KeepPreviousGeneration" : e.namespace === undefined ? "DenyCluster" : "DenyNamespace",
      reason: condition.reason,
      type: "Warning",
      regarding: {
        apiVersion: POLICY_GROUP_VERSION,
        kind: e.kind,
        name,
        ...(e.namespace !== undefined ? { namespace: e.namespace } : {}),
        ...(e.obj.metadata?.["uid"] !== undefined ? { uid: e.obj.metadata["uid"] } : {}),
        ...(e.obj.metadata?.resourceVersion !== undefined ? { resourceVersion: e.obj.metadata.resourceVersion } : {}),
      },
      note: cutBytes(condition.message, EVENT_NOTE_LIMIT),
    };
    try {
      await this.#o.kc.create(`/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`, event, apiDeadline(STATUS_WRITE_TIMEOUT_MS));
      this.stats.events++;
      this.#o.metrics?.clusterPolicyEvents.inc({ result: "written" });
      this.#eventsSent.add(mark);
      if (this.#eventsSent.size > EVENT_MEMO_ENTRIES) this.#eventsSent.delete(this.#eventsSent.values().next().value!);
      return true;
    } catch (err) {
      this.#o.metrics?.clusterPolicyEvents.inc({ result: "failed" });
      const code = String(apiStatus(err) ?? (err as Error).name);
      if (!this.#eventFailuresLogged.has(code)) {
        this.#eventFailuresLogged.add(code);
        this.#o.log({
          level: "warn",
          msg: `cluster policies: creating an Event about ${describe(e)} failed (the proxy needs create on events.events.k8s.io); retried at the next round, logged once per error code`,
          error: (err as Error).message,
        });
      }
      return false;
    }
  }
}

/** Objects, bytes of specs and rules of one scope. */
interface Usage {
  objects: number;
  bytes: number;
  rules: number;
}

/** Which limit `u` passes, as a sentence naming it, or undefined. */
function overLimit(u: Usage, maxObjects: number, maxBytes: number, maxRules: number, what: string): string | undefined {
  if (u.objects > maxObjects) return `${u.objects} ${what} exceed the limit of ${maxObjects} objects`;
  if (u.bytes > maxBytes) return `the specs of the ${what} take ${u.bytes} bytes, over the limit of ${maxBytes}`;
  if (u.rules > maxRules) return `the ${what} have ${u.rules} rules, over the limit of ${maxRules}`;
  return undefined;
}

/** The stand-in of an object never seen valid: no rules, defaultAction Deny, for every caller in its scope. */
function denyAll(e: Entry): CompiledPolicy {
  const name = e.obj.metadata?.name ?? "";
  return {
    name,
    namespace: e.namespace,
    id: e.namespace === undefined ? name : `${e.namespace}/${name}`,
    subjects: undefined,
    rules: [],
    defaultAction: "Deny",
    source: describe(e),
    line: 0,
  };
}

/** `condition` with `; note` appended to its message (the problem cut first so the whole stays within the CRD's bound). */
function withNote(condition: PolicyCondition, note: string): PolicyCondition {
  const room = MAX_CONDITION_MESSAGE - note.length - 2;
  return { ...condition, message: `${cut(condition.message, room)}; ${note}` };
}

function cut(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, Math.max(0, max - 1))}…` : text;
}

/** `text` cut to at most `max` bytes of UTF-8 (never inside a character). */
function cutBytes(text: string, max: number): string {
  if (Buffer.byteLength(text, "utf8") <= max) return text;
  let out = text.slice(0, max);
  while (Buffer.byteLength(`${out}…`, "utf8") > max) out = out.slice(0, -1);
  return `${out}…`;
}

/**
 * What the layer keeps of a policy object as it is received (list page or
 * watch event): `apiVersion`, `kind`, `metadata.{name, namespace, uid,
 * generation, resourceVersion}`, `spec`, and `status.{observedGeneration,
 * conditions}` (the CRD's status schema; needed for the status write-back,
 * whose PUT changes only status). Annotations, labels, managedFields and
 * anything else are dropped before the object is stored.
 */
export function stripPolicyObject(obj: PolicyObject): PolicyObject {
  const m = obj.metadata ?? {};
  const metadata: ObjectMeta = {};
  for (const field of ["name", "namespace", "uid", "generation", "resourceVersion"] as const) if (m[field] !== undefined) (metadata as Record<string, unknown>)[field] = m[field];
  const out: PolicyObject = { metadata };
  if (obj.apiVersion !== undefined) out.apiVersion = obj.apiVersion;
  if (obj.kind !== undefined) out.kind = obj.kind;
  if (obj.spec !== undefined) out.spec = obj.spec;
  const status = obj.status;
  if (status !== undefined && status !== null && typeof status === "object") {
    out.status = {
      ...(status.observedGeneration !== undefined ? { observedGeneration: status.observedGeneration } : {}),
      ...(Array.isArray(status.conditions) ? { conditions: status.conditions } : {}),
    };
  }
  return out;
}

/**
 * The status to write so `obj` carries condition `want` (other conditions
 * kept; `lastTransitionTime` kept while the status is unchanged: objects.ts
 * `setCondition`, as apimachinery's `meta.SetStatusCondition`) and
 * `status.observedGeneration`, or undefined when it already does.
 */
export function desiredStatus(obj: PolicyObject, want: PolicyCondition): PolicyObject["status"] | undefined {
  const status = obj.status ?? {};
  const { conditions, changed } = setCondition(status.conditions, want);
  const observedGeneration = want.observedGeneration;
  if (!changed && status.observedGeneration === observedGeneration) return undefined;
  return { ...status, ...(observedGeneration !== undefined ? { observedGeneration } : {}), conditions };
}

/** `…/{name}/status` of an object of `kind`. */
function statusPath(kind: PolicyKind, obj: KubeObject): string {
  const name = encodeURIComponent(obj.metadata?.name ?? "");
  if (kind === "ClusterExternalMetricPolicy") return `${POLICY_PATHS.ClusterExternalMetricPolicy}/${name}/status`;
  return `/apis/${POLICY_GROUP_VERSION}/namespaces/${encodeURIComponent(obj.metadata?.namespace ?? "")}/externalmetricpolicies/${name}/status`;
}

/**
 * Estimated bytes of one entry of the selector memo: the text as UTF-16, the
 * parsed selector (request-info.ts `selectorBytes`), and 128 for the map's
 * node and the selector object.
 */
function selectorMemoBytes(text: string, selector: Selector): number {
  return 128 + text.length * 2 + selectorBytes(selector);
}

function entryKey(kind: PolicyKind, obj: KubeObject): string {
  return `${kind}/${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

function describe(e: Entry): string {
  return e.kind === "ClusterExternalMetricPolicy" ? `ClusterExternalMetricPolicy ${e.obj.metadata?.name}` : `ExternalMetricPolicy ${e.obj.metadata?.namespace}/${e.obj.metadata?.name}`;
}

/** A deny verdict with the policy's kind: `ExternalMetricPolicy team-a/narrow: policy team-a/narrow rules[0] … does not imply "queue=a"`. */
/** The one value of a query parameter ("" when absent); 400 when it is given more than once (as `labelSelectorOf`). */
function singleParameter(query: URLSearchParams, name: string): string {
  const values = query.getAll(name);
  if (values.length > 1) throw badRequest(`${name} may be given only once`);
  return values[0] ?? "";
}

function verdictText(v: PolicyVerdict): string {
  const kind = v.policy.includes("/") ? "ExternalMetricPolicy" : "ClusterExternalMetricPolicy";
  return `${kind} ${v.policy}: ${v.explanation}`;
}
