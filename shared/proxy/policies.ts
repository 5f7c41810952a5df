/**
 * The proxy's cluster policy layer: ExternalMetricPolicy (namespaced) and
 * ClusterExternalMetricPolicy (cluster-scoped) objects of
 * `external-metrics-bridge.io/v1alpha1`, read live from the Kubernetes API
 * and enforced on every values read after authentication and the
 * SubjectAccessReview, before the read is forwarded (app.ts).
 *
 * - **Watch.** One {@link Informer} per kind (list, then watch; 410 → re-list;
 *   back-off 1 s doubling to 10 s; kube.ts). Every change schedules a rebuild
 *   {@link DEBOUNCE_MS} later (changes arriving meanwhile are batched), so a
 *   `kubectl apply` takes effect one watch event plus ≤ 100 ms later.
 * - **Compile.** Each object with `compilePolicyObject` (shared/policy/objects.ts,
 *   the same compile path as the bridge's policy files); the result is kept
 *   per object until its spec or generation changes. The evaluator is the
 *   bridge's own {@link PolicySet} (shared/policy/evaluate.ts), built anew
 *   and swapped atomically on each rebuild ({@link ClusterPolicies.current}).
 * - **Invalid objects** are left out whole (never half-applied) and reported
 *   in their `status.conditions` (type `Accepted`, status False, reason
 *   `InvalidPattern` / `InvalidSelector` / `InvalidSpec`) and in the log and
 *   `emb_proxy_cluster_policies{state="invalid"}`.
 * - **Bounds.** At most {@link MAX_POLICY_OBJECTS} objects,
 *   {@link MAX_POLICY_SPEC_BYTES} bytes of specs (JSON) and
 *   {@link MAX_POLICY_RULES} rules together. Beyond any of them no subset is
 *   picked (leaving a policy out could widen access: policies only narrow):
 *   the layer turns unavailable and every values read is refused with 503
 *   naming the limit, until objects are deleted; the log says so once.
 * - **Readiness.** Until both kinds have been listed once (and the first
 *   rebuild ran) the layer is not ready: values reads get 503 (without
 *   `Retry-After`: app.ts strips it from every values answer, client-go then
 *   makes one attempt). When a list answers 404 (the CRDs are not installed)
 *   this is logged once as an error and the list is retried with back-off;
 *   reads stay 503 (fail closed). Discovery and `/readyz` never depend on
 *   this layer (an unready pod would break the APIService for the cluster).
 * - **Decision.** Every applicable policy (the cluster-scoped ones and the
 *   request namespace's) must allow (a namespace policy can only narrow).
 *   With none applicable, `whenNoneApply` decides: `Defer` (default) leaves
 *   the read to the backend's own policy layer (bridge backends are fail
 *   closed by themselves), `Deny` refuses it. A denial is a 403 Status
 *   naming the layer, the policy (`namespace/name` or the cluster policy's
 *   name), the rule index and the requirement the request does not imply.
 *   Counted in `emb_proxy_policy_decisions_total{layer="cluster",decision}`
 *   (`allow`, `deny`, `defer`, `unavailable`).
 * - **Status write-back.** Only the Lease leader (`isLeader`, lease.ts)
 *   writes: `PUT …/{name}/status` with the resourceVersion as read (409 on a
 *   concurrent change: left for the next round, which sees the newer
 *   object), only when the `Accepted` condition or `observedGeneration`
 *   differ from what the object holds, each with a deadline of
 *   {@link STATUS_WRITE_TIMEOUT_MS}; rounds run after each rebuild and every
 *   {@link STATUS_RESYNC_MS}. `lastTransitionTime` changes only when the
 *   condition's status does (metav1.Condition semantics,
 *   k8s.io/apimachinery/pkg/api/meta/conditions.go `SetStatusCondition`).
 */
import { BoundedMap } from "../cache.ts";
import type { Caller } from "../identity.ts";
import { EXTERNAL_METRICS_GROUP, badRequest, StatusError } from "../k8s/status.ts";
import { parseSelector, SelectorError, type Selector } from "../k8s/selector.ts";
import { PolicySet, type CompiledPolicy, type PolicyVerdict } from "../policy/evaluate.ts";
import { ACCEPTED, compilePolicyObject, setCondition, type Condition } from "../policy/objects.ts";
import { apiDeadline, apiStatus, Informer, type KubeClient, type KubeObject } from "./kube.ts";
import { selectorBytes } from "./request-info.ts";
import type { Logger } from "./log.ts";
import type { ProxyMetrics } from "./metrics.ts";

/** API group and version of the policy kinds. */
export const POLICY_GROUP_VERSION = "external-metrics-bridge.io/v1alpha1";
/** Collection paths (all namespaces) of the two kinds. */
export const POLICY_PATHS = {
  ExternalMetricPolicy: `/apis/${POLICY_GROUP_VERSION}/externalmetricpolicies`,
  ClusterExternalMetricPolicy: `/apis/${POLICY_GROUP_VERSION}/clusterexternalmetricpolicies`,
} as const;
/** The two kinds. */
export type PolicyKind = keyof typeof POLICY_PATHS;

/** Most policy objects (both kinds together) the layer enforces; beyond it reads are refused (503). */
export const MAX_POLICY_OBJECTS = 10_000;
/** Most bytes of policy specs (their JSON, both kinds together); beyond it reads are refused (503). */
export const MAX_POLICY_SPEC_BYTES = 8 * 1024 * 1024;
/** Most rules of all policies together; beyond it reads are refused (503). */
export const MAX_POLICY_RULES = 100_000;
/** Delay between a watch event and the rebuild of the policy set, ms (events meanwhile are batched). */
export const DEBOUNCE_MS = 50;
/** Deadline of one status write, ms. */
export const STATUS_WRITE_TIMEOUT_MS = 5_000;
/** Period of the status round that retries failed writes and follows leadership changes, ms. */
export const STATUS_RESYNC_MS = 10_000;
/** Longest back-off between failed lists of a kind, ms (a CRD installed later is seen this late at most). */
export const MAX_LIST_BACKOFF_MS = 10_000;

/** What to do with a read no cluster policy applies to. */
export type WhenNoneApply = "Defer" | "Deny";

/** `metav1.Condition` (k8s.io/apimachinery/pkg/apis/meta/v1/types.go), as objects.ts builds it. */
export type PolicyCondition = Condition;

/** A policy object as read from the API (fields used). */
export interface PolicyObject extends KubeObject {
  spec?: unknown;
  status?: { observedGeneration?: number; conditions?: PolicyCondition[]; [field: string]: unknown };
}

/** Settings of {@link ClusterPolicies}. */
export interface ClusterPoliciesOptions {
  kc: KubeClient;
  /** decision when no policy applies (default Defer) */
  whenNoneApply?: WhenNoneApply;
  log: Logger;
  metrics?: ProxyMetrics;
  /** whether this replica writes status (the Lease holder); undefined: this replica always writes */
  isLeader?: () => boolean;
  /** rebuild delay after a change, ms (default {@link DEBOUNCE_MS}; at most 100) */
  debounceMs?: number;
  /** status round period, ms (default {@link STATUS_RESYNC_MS}) */
  statusResyncMs?: number;
  /** limits (defaults: the MAX_POLICY_* constants) */
  limits?: { maxObjects?: number; maxSpecBytes?: number; maxRules?: number };
  /** first list back-off, ms (default 1 000; doubling to {@link MAX_LIST_BACKOFF_MS}) */
  backoffMs?: number;
}

/** One object and what became of it. */
interface Entry {
  kind: PolicyKind;
  key: string;
  obj: PolicyObject;
  /** JSON of generation + spec: the compile result is reused while it is unchanged */
  fingerprint: string;
  bytes: number;
  compiled?: { policy?: CompiledPolicy; message?: string; condition?: PolicyCondition };
}

/** What a values read asks the layer. */
export interface ClusterPolicyRequest {
  caller: Caller;
  namespace: string;
  /** the metric's lookup key (lowercased, `/` for `|`: shared/metric-name.ts) */
  metric: string;
  /** the request URL (its `labelSelector` is read when `selector` is not given) */
  url: URL;
  /**
   * The request's `labelSelector` already parsed (request-info.ts
   * `RequestInfo.labelSelector`, carried by the authorizer's memo:
   * authorize.ts `authorizeRequest(…, withSelector)`), so a read parses its
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
/** Longest `labelSelector`, characters (app.ts `MAX_SELECTOR_LENGTH`, the bridge's limit). */
const MAX_SELECTOR_LENGTH = 4096;

/**
 * Live cluster policies. {@link start} begins watching; {@link current} is
 * the policy set in force; {@link authorize} decides a values read.
 */
export class ClusterPolicies {
  readonly whenNoneApply: WhenNoneApply;
  readonly #o: ClusterPoliciesOptions;
  readonly #entries = new Map<string, Entry>();
  readonly #informers: Informer<PolicyObject>[] = [];
  readonly #listed = new Set<PolicyKind>();
  readonly #missing = new Set<PolicyKind>();
  #set: PolicySet;
  #ready = false;
  #overLimit: string | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #resync: ReturnType<typeof setInterval> | undefined;
  #syncing: Promise<void> | undefined;
  #syncAgain = false;
  #stopped = false;
  readonly #writing = new Set<string>();
  readonly #selectors = new BoundedMap<string, Selector>({ ...SELECTOR_MEMO_BOUNDS, sizeOf: selectorMemoBytes });
  readonly #invalidLogged = new Map<string, string>();
  /** counters for tests */
  readonly stats = { rebuilds: 0, compiles: 0, statusWrites: 0, statusConflicts: 0 };

  constructor(options: ClusterPoliciesOptions) {
    this.#o = options;
    this.whenNoneApply = options.whenNoneApply ?? "Defer";
    this.#set = this.#newSet([]);
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
      const informer = new Informer<PolicyObject>(this.#o.kc, {
        path: POLICY_PATHS[kind],
        backoffMs: this.#o.backoffMs ?? 1000,
        maxBackoffMs: MAX_LIST_BACKOFF_MS,
        onListed: () => {
          if (this.#missing.delete(kind)) this.#o.log({ level: "info", msg: `cluster policies: ${kind} is served by the API now` });
          this.#listed.add(kind);
          this.#schedule();
        },
        onAdd: (obj) => this.#put(kind, obj),
        onUpdate: (obj) => this.#put(kind, obj),
        onDelete: (obj) => {
          if (this.#entries.delete(entryKey(kind, obj))) this.#schedule();
        },
        onError: (err, retryMs) => {
          if (apiStatus(err) === 404) {
            if (!this.#missing.has(kind)) {
              this.#missing.add(kind);
              this.#o.log({
                level: "error",
                msg: `cluster policies: the API has no ${kind} (404 on ${POLICY_PATHS[kind]}): install the CRDs (infra/helm/external-metrics-bridge/crds/); values reads are refused (503) until they are listed`,
                retryMs,
              });
            }
            this.#listed.delete(kind);
            this.#schedule();
            return;
          }
          this.#o.log({ level: "warn", msg: `cluster policies: list or watch of ${kind} failed; the policies last read stay in force`, error: err.message, retryMs });
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
    await Promise.all(this.#informers.map((i) => i.stop()));
    await this.#syncing;
  }

  /**
   * The policy set in force (swapped whole on every rebuild; never partly
   * updated). Its `defaultAction` is Allow for `whenNoneApply: Defer`
   * (nothing to say: the backend decides) and Deny for `Deny`.
   */
  current(): PolicySet {
    return this.#set;
  }

  /** Whether the layer decides reads now (both kinds listed, within the limits). */
  ready(): boolean {
    return this.notReadyReason() === undefined;
  }

  /** Why reads are refused now (undefined when ready). */
  notReadyReason(): string | undefined {
    if (this.#missing.size > 0) {
      return `the Kubernetes API does not serve ${[...this.#missing].join(" and ")} (are the external-metrics-bridge CRDs installed?)`;
    }
    if (!this.#ready) return "the ExternalMetricPolicy and ClusterExternalMetricPolicy objects have not been listed yet";
    return this.#overLimit;
  }

  /** Counts of objects by state, and the invalid ones' ids with their messages. */
  summary(): { accepted: number; invalid: { id: string; message: string }[] } {
    let accepted = 0;
    const invalid: { id: string; message: string }[] = [];
    for (const e of this.#entries.values()) {
      if (e.compiled?.policy !== undefined) accepted++;
      else if (e.compiled !== undefined) invalid.push({ id: describe(e), message: e.compiled.message ?? "" });
    }
    return { accepted, invalid };
  }

  /**
   * Decide a values read.
   *
   * @returns `allow` (every applicable policy allows) or `defer` (none
   *   applies and `whenNoneApply` is Defer: the backend decides)
   * @throws StatusError 503 (no Retry-After) while the layer is not ready or
   *   over its limits; 400 for a `labelSelector` that does not parse
   *   (apimachinery's message); {@link ClusterPolicyDenied} 403 naming the
   *   layer, policy, rule and missing requirement
   */
  authorize(request: ClusterPolicyRequest): "allow" | "defer" {
    const reason = this.notReadyReason();
    if (reason !== undefined) {
      this.#count("unavailable");
      throw new StatusError(503, `the cluster policy layer of the proxy cannot decide reads: ${reason}`);
    }
    const selector = request.selector ?? this.#selector(request.url);
    const decision = this.#set.evaluate({ caller: request.caller, namespace: request.namespace, metric: request.metric, selector });
    const deny = (message: string) => {
      this.#count("deny");
      return new ClusterPolicyDenied(
        403,
        `externalmetrics.${EXTERNAL_METRICS_GROUP} ${JSON.stringify(request.metric)} is forbidden: ` +
          `user ${JSON.stringify(request.caller.user)} may not read it in namespace ${JSON.stringify(request.namespace)}: ${message}`,
        { name: request.metric, group: EXTERNAL_METRICS_GROUP, kind: "externalmetrics" },
      );
    };
    if (decision.byDefault) {
      if (this.whenNoneApply === "Deny") {
        throw deny(
          `denied by the cluster policy layer: no ClusterExternalMetricPolicy or ExternalMetricPolicy in namespace ${JSON.stringify(request.namespace)} ` +
            `applies to this user, and the proxy's clusterPolicies.whenNoneApply is Deny`,
        );
      }
      this.#count("defer");
      return "defer";
    }
    if (decision.decision === "Deny") throw deny(`denied by the cluster policy layer: ${verdictText(decision.deniedBy!)}`);
    this.#count("allow");
    return "allow";
  }

  #count(decision: "allow" | "deny" | "defer" | "unavailable"): void {
    this.#o.metrics?.policyDecisions.inc({ layer: "cluster", decision });
  }

  #selector(url: URL): Selector {
    const values = url.searchParams.getAll("labelSelector");
    if (values.length > 1) throw badRequest("labelSelector may be given only once");
    const text = values[0] ?? "";
    const known = this.#selectors.get(text);
    if (known !== undefined) return known;
    let selector: Selector;
    try {
      selector = parseSelector(text, { maxLength: MAX_SELECTOR_LENGTH });
    } catch (err) {
      if (err instanceof SelectorError) throw badRequest(`invalid labelSelector ${JSON.stringify(text.slice(0, 200))}: ${err.message}`);
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
    const fingerprint = `${String((obj.metadata as { generation?: unknown } | undefined)?.generation ?? "")}\n${specText}`;
    const old = this.#entries.get(key);
    if (old !== undefined && old.fingerprint === fingerprint) {
      old.obj = obj; // a status or metadata change: same policy, new resourceVersion
      this.#requestStatusSync();
      return;
    }
    this.#entries.set(key, { kind, key, obj, fingerprint, bytes: Buffer.byteLength(specText, "utf8") });
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

  /** Recompile what changed and swap in a new policy set. */
  #rebuild(): void {
    this.stats.rebuilds++;
    const limits = {
      maxObjects: this.#o.limits?.maxObjects ?? MAX_POLICY_OBJECTS,
      maxSpecBytes: this.#o.limits?.maxSpecBytes ?? MAX_POLICY_SPEC_BYTES,
      maxRules: this.#o.limits?.maxRules ?? MAX_POLICY_RULES,
    };
    const entries = [...this.#entries.values()].sort((a, b) => (a.kind === b.kind ? (a.key < b.key ? -1 : 1) : a.kind === "ClusterExternalMetricPolicy" ? -1 : 1));
    let bytes = 0;
    for (const e of entries) bytes += e.bytes;
    let over: string | undefined;
    if (entries.length > limits.maxObjects) over = `${entries.length} policy objects exceed the limit of ${limits.maxObjects}`;
    else if (bytes > limits.maxSpecBytes) over = `the policy specs take ${bytes} bytes, over the limit of ${limits.maxSpecBytes}`;
    const policies: CompiledPolicy[] = [];
    if (over === undefined) {
      let rules = 0;
      for (const e of entries) {
        if (e.compiled === undefined) e.compiled = this.#compile(e);
        if (e.compiled.policy !== undefined) {
          policies.push(e.compiled.policy);
          rules += e.compiled.policy.rules.length;
        }
      }
      if (rules > limits.maxRules) over = `the policies have ${rules} rules, over the limit of ${limits.maxRules}`;
    }
    if (over !== this.#overLimit) {
      this.#o.log(
        over === undefined
          ? { level: "info", msg: "cluster policies: back within the limits" }
          : { level: "error", msg: `cluster policies: ${over}; no subset is enforced (leaving policies out could widen access), so values reads are refused (503) until objects are deleted` },
      );
      this.#overLimit = over;
    }
    if (over === undefined) this.#set = this.#newSet(policies);
    this.#ready = this.#listed.size === this.#informers.length && this.#informers.length > 0;
    const invalid = entries.filter((e) => e.compiled !== undefined && e.compiled.policy === undefined).length;
    this.#o.metrics?.clusterPolicies.set({ state: "accepted" }, over === undefined ? policies.length : 0);
    this.#o.metrics?.clusterPolicies.set({ state: "invalid" }, invalid);
    for (const key of this.#invalidLogged.keys()) if (!this.#entries.has(key)) this.#invalidLogged.delete(key);
    this.#requestStatusSync();
  }

  #compile(e: Entry): NonNullable<Entry["compiled"]> {
    this.stats.compiles++;
    const result = compilePolicyObject({ ...e.obj, apiVersion: POLICY_GROUP_VERSION, kind: e.kind });
    const condition = result.conditions.find((c) => c.type === ACCEPTED);
    if (result.policy !== undefined && result.issues.length === 0) {
      this.#invalidLogged.delete(e.key);
      return { policy: result.policy, ...(condition ? { condition } : {}) };
    }
    const message = condition?.message ?? result.issues.map((i) => `${i.path ? `${i.path}: ` : ""}${i.message}`).join("; ");
    if (this.#invalidLogged.get(e.key) !== message) {
      this.#invalidLogged.set(e.key, message);
      this.#o.log({ level: "warn", msg: `cluster policies: ${describe(e)} is invalid and left out`, reason: condition?.reason, error: message });
    }
    return { message, ...(condition ? { condition } : {}) };
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

  /** Write the `Accepted` condition of every object whose status differs (leader only). */
  async #syncStatus(): Promise<void> {
    if (this.#o.isLeader !== undefined && !this.#o.isLeader()) return;
    for (const e of [...this.#entries.values()]) {
      if (this.#stopped) return;
      const want = e.compiled?.condition;
      if (want === undefined || this.#writing.has(e.key)) continue;
      const next = desiredStatus(e.obj, want);
      if (next === undefined) continue;
      this.#writing.add(e.key);
      try {
        const written = await this.#o.kc.replace<PolicyObject>(statusPath(e.kind, e.obj), { ...e.obj, kind: e.kind, apiVersion: POLICY_GROUP_VERSION, status: next }, apiDeadline(STATUS_WRITE_TIMEOUT_MS));
        this.stats.statusWrites++;
        const current = this.#entries.get(e.key);
        if (current !== undefined && current.obj === e.obj) current.obj = written;
      } catch (err) {
        if (apiStatus(err) === 409) this.stats.statusConflicts++; // changed meanwhile: the watch brings the newer object, the next round writes
        else if (apiStatus(err) !== 404) this.#o.log({ level: "warn", msg: `cluster policies: writing the status of ${describe(e)} failed; retried at the next round`, error: (err as Error).message });
      } finally {
        this.#writing.delete(e.key);
      }
    }
  }
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
function verdictText(v: PolicyVerdict): string {
  const kind = v.policy.includes("/") ? "ExternalMetricPolicy" : "ClusterExternalMetricPolicy";
  return `${kind} ${v.policy}: ${v.explanation}`;
}
