/**
 * Untrusted policy work off the request loop: one long-lived
 * `node:worker_threads` Worker (policy-worker-entry.ts) that decides
 * AdmissionReviews (admission-review.ts) and vets policy objects
 * (compilePolicyObject) within time budgets, so no review and no policy
 * object can hold the thread that answers `/healthz`, discovery and HPA reads
 * (Node docs, "Worker threads": a Worker has its own event loop and V8
 * isolate; `worker.terminate()` stops JavaScript execution as soon as possible).
 *
 * - **One task at a time**, in order; a task's budget runs from the moment it
 *   is handed to a worker that has loaded its modules (a new worker gets
 *   {@link START_BUDGET_MS} for that). A task over its budget: the worker is
 *   terminated (whatever it was computing stops), the task fails with
 *   {@link BudgetExceededError}, and a new worker starts for the next task.
 * - **Policies.** A review of an HPA needs the cluster policies: the
 *   {@link PolicySet} in force (its identity changes on every rebuild of
 *   ClusterPolicies) is sent once per set as a change to the worker's copy —
 *   the policies it has not seen as plain data ({@link portablePolicy}; a
 *   policy object that did not change keeps its compiled policy across
 *   rebuilds, so a rebuild sends what changed), the others by key — and the
 *   worker compiles the new ones (compiled RE2 programs cannot cross
 *   threads), within {@link POLICIES_BUDGET_MS}.
 * - **Bundle.** The worker file is found next to this module:
 *   `policy-worker-entry.ts` from sources (Node's type stripping),
 *   `policy-worker.mjs` beside `main.mjs` or one directory up (from `chunks/`)
 *   in the esbuild bundle (infra/proxy/build.ts).
 * - The worker is `unref`ed: it never keeps the process alive. It starts on
 *   the first task and stops after {@link IDLE_MS} without one (its isolate
 *   holds several MB).
 */
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";
import type { Selector } from "../../k8s/selector.ts";
import { PolicySet, type CompiledPolicy } from "../../policy/evaluate.ts";
import type { PolicyObjectResult } from "../../policy/objects.ts";
import { compileMetricPattern, type MetricPattern } from "../../policy/regex.ts";
import type { Action } from "../../policy/schema.ts";
import type { AdmissionMode, AdmissionPath, ReviewDraft } from "./admission-review.ts";

/** Budget of one AdmissionReview in the worker, ms (kube-apiserver gives the webhook `timeoutSeconds: 3` in all). */
export const REVIEW_BUDGET_MS = 2_000;
/** Budget of loading one cluster policy set into the worker (a rebuild of its copy), ms. */
export const POLICIES_BUDGET_MS = 5_000;
/** Budget of vetting one policy object in the worker, ms. */
export const VET_BUDGET_MS = 2_000;
/** Longest a new worker may take to load its modules (not counted in the budgets above), ms. */
export const START_BUDGET_MS = 10_000;
/** How long a worker thread with nothing to do is kept before it is stopped (the next task starts one), ms. */
export const IDLE_MS = 60_000;

/** A task that passed its budget; the worker that ran it was terminated. */
export class BudgetExceededError extends Error {
  /** `request.uid` of the AdmissionReview, when the worker had read it */
  readonly uid: string | undefined;
  constructor(message: string, uid?: string) {
    super(message);
    this.name = "BudgetExceededError";
    this.uid = uid;
  }
}

/** One rule of a {@link PortablePolicy}. */
export interface PortableRule {
  index: number;
  /** the `metric` pattern as written */
  metric: string;
  /** the rule's `resources` (`["external"]` when absent) */
  resources: string[];
  /** the allowed selector; undefined for a deny rule */
  selector: Selector | undefined;
  selectorText: string;
  line: number;
}

/** A {@link CompiledPolicy} as plain data (structured-clonable): patterns as text, subjects as arrays. */
export interface PortablePolicy {
  name: string;
  namespace: string | undefined;
  id: string;
  subjects: { users: string[]; groups: string[] } | undefined;
  rules: PortableRule[];
  defaultAction: Action;
  source: string;
  line: number;
}

/** The plain-data form of one compiled policy (no pattern is compiled). */
export function portablePolicy(p: CompiledPolicy): PortablePolicy {
  return {
    name: p.name,
    namespace: p.namespace,
    id: p.id,
    subjects: p.subjects === undefined ? undefined : { users: [...p.subjects.users], groups: [...p.subjects.groups] },
    rules: p.rules.map((r) => ({ index: r.index, metric: r.pattern.source, resources: [...r.resources], selector: r.selector, selectorText: r.selectorText, line: r.line })),
    defaultAction: p.defaultAction,
    source: p.source,
    line: p.line,
  };
}

/**
 * Rebuild one compiled policy from its plain-data form: only its patterns
 * are compiled (regex.ts `compileMetricPattern`, within its cost bounds); the
 * schema, selectors and subjects were checked where the form was made.
 *
 * @param compile compiles one pattern (default compileMetricPattern; a memo may be passed)
 * @throws PatternError when a pattern is refused (the form came from a compiled policy, so it should not be)
 */
export function restorePolicy(q: PortablePolicy, compile: (source: string) => MetricPattern = compileMetricPattern): CompiledPolicy {
  return {
    name: q.name,
    namespace: q.namespace,
    id: q.id,
    subjects: q.subjects === undefined ? undefined : { users: new Set(q.subjects.users), groups: new Set(q.subjects.groups) },
    rules: q.rules.map((r) => ({ index: r.index, pattern: compile(r.metric), resources: r.resources, selector: r.selector, selectorText: r.selectorText, line: r.line })),
    defaultAction: q.defaultAction,
    source: q.source,
    line: q.line,
  };
}

/** What the worker is asked (host → worker). */
export type WorkerTask =
  | {
      /**
       * the policy set in force, as a change to the worker's copy: `order`
       * lists every policy by key (the worker drops the others), `added` the
       * policies this worker has not been sent yet (a policy object that did
       * not change keeps its key across rebuilds)
       */
      op: "policies";
      generation: number;
      order: number[];
      added: [key: number, policy: PortablePolicy][];
      defaultAction: Action;
      defaultNote: string | undefined;
    }
  | {
      op: "review";
      path: AdmissionPath;
      /** the AdmissionReview's bytes (UTF-8 JSON), transferred to the worker (not copied) */
      body: Uint8Array;
      /** the policy set generation the review needs loaded (undefined: none) */
      generation: number | undefined;
      mode: AdmissionMode;
      whenNoneApply: "Defer" | "Deny";
      authenticated: boolean;
      /** the policies could not be loaded: read the uid and fail (the host refuses the review) */
      unavailable?: boolean;
    }
  | { op: "vet"; obj: unknown; nowMs: number };

/** What the worker answers (worker → host): `uid` early for a review, then one result or error. */
export type WorkerReply =
  | { ready: true }
  | { id: number; uid: string }
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; message: string; status?: { code: number; message: string }; unavailable?: boolean };

/**
 * The worker's result of a `vet` task: compilePolicyObject's issues and
 * conditions, and the compiled policy in its plain-data form when valid (the
 * compiled patterns cannot cross threads).
 */
export type VetResult = Omit<PolicyObjectResult, "policy"> & { valid: boolean; policy?: PortablePolicy };

/** A task failed in the worker with a Status (e.g. a 400 for a body that is not an AdmissionReview). */
export class WorkerStatusError extends Error {
  readonly code: number;
  constructor(code: number, message: string) {
    super(message);
    this.name = "WorkerStatusError";
    this.code = code;
  }
}

/** A task as queued: a policy set to load is turned into its `policies` message when it is handed to the worker. */
type QueuedTask = Exclude<WorkerTask, { op: "policies" }> | { op: "load"; generation: number; set: PolicySet };

interface Pending {
  id: number;
  task: QueuedTask;
  budgetMs: number;
  what: string;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
  uid?: string;
}

/** Settings of {@link PolicyWorker}. */
export interface PolicyWorkerOptions {
  /** default {@link REVIEW_BUDGET_MS} */
  reviewBudgetMs?: number;
  /** default {@link POLICIES_BUDGET_MS} */
  policiesBudgetMs?: number;
  /** default {@link VET_BUDGET_MS} */
  vetBudgetMs?: number;
  /** most tasks waiting (default 1 024); beyond, a task fails at once (the callers bound themselves far below) */
  maxQueued?: number;
  /** how long an idle worker thread is kept, ms (default {@link IDLE_MS}) */
  idleMs?: number;
}

let workerFile: URL | undefined;

/**
 * The worker module's URL (see the module comment).
 *
 * @throws Error when none exists (a bundle shipped without its worker file)
 */
function workerUrl(): URL {
  if (workerFile !== undefined) return workerFile;
  for (const candidate of ["./policy-worker-entry.ts", "./policy-worker.mjs", "../policy-worker.mjs"]) {
    const url = new URL(candidate, import.meta.url);
    if (existsSync(url)) return (workerFile = url);
  }
  throw new Error(`policy worker: policy-worker-entry.ts/.mjs not found beside ${import.meta.url}`);
}

/** The worker thread and its task queue (see the module comment). */
export class PolicyWorker {
  readonly #o: PolicyWorkerOptions;
  #worker: Worker | undefined;
  /** generation of the policy set the current worker holds (undefined: none yet) */
  #loaded: number | undefined;
  readonly #queue: Pending[] = [];
  #running: Pending | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #nextId = 1;
  #closed = false;
  /** whether the current worker has loaded its modules (budgets run from then) */
  #ready = false;
  #idle: ReturnType<typeof setTimeout> | undefined;
  readonly #generations = new WeakMap<PolicySet, number>();
  #generation = 0;
  /** the key under which each compiled policy was sent to the current worker */
  #sent = new WeakMap<CompiledPolicy, number>();
  #nextKey = 1;
  /** counters for logs and tests: workers started, tasks over budget (each terminated a worker), tasks done */
  readonly stats = { started: 0, overBudget: 0, tasks: 0 };

  constructor(options: PolicyWorkerOptions = {}) {
    this.#o = options;
  }

  /**
   * Decide an AdmissionReview in the worker.
   *
   * @param policies the cluster policies in force (sent to the worker when this set is new to it)
   * @returns the draft answer (admission-review.ts `completeReview` finishes it)
   * @throws WorkerStatusError with the Status code (400) when the text is not an AdmissionReview;
   *   BudgetExceededError when loading the policies or the review passes its budget
   *   (its `uid` set when the review's uid was read); Error when the worker cannot start
   */
  async review(task: {
    path: AdmissionPath;
    /** the body as read; it is copied once into a buffer that is then transferred to the worker (no string is made on this thread) */
    body: Uint8Array;
    policies: PolicySet | undefined;
    mode: AdmissionMode;
    whenNoneApply: "Defer" | "Deny";
    authenticated: boolean;
  }): Promise<ReviewDraft> {
    let generation: number | undefined;
    if (task.policies !== undefined && task.path === "hpa") {
      generation = this.#generations.get(task.policies);
      if (generation === undefined) {
        generation = ++this.#generation;
        this.#generations.set(task.policies, generation);
      }
      if (this.#loaded !== generation || this.#worker === undefined) {
        // Queued right before the review (nothing can come between): when loading fails, the review
        // finds its set missing and is refused with its uid (see #pump).
        this.#run({ op: "load", generation, set: task.policies }, this.#o.policiesBudgetMs ?? POLICIES_BUDGET_MS, "loading the cluster policies into the webhook's worker").catch(
          () => undefined,
        );
      }
    }
    const { policies: _p, body, ...rest } = task;
    // A buffer of our own: the body's may be shared with the stream that produced it.
    const owned = new Uint8Array(body);
    return (await this.#run({ op: "review", ...rest, body: owned, generation }, this.#o.reviewBudgetMs ?? REVIEW_BUDGET_MS, "the review")) as ReviewDraft;
  }

  /**
   * Compile a policy object in the worker and report whether it is valid.
   *
   * @param nowMs the time stamped on its condition (ms since the epoch)
   * @throws BudgetExceededError past {@link VET_BUDGET_MS}; Error when the worker cannot start
   */
  async vet(obj: unknown, nowMs = Date.now()): Promise<VetResult> {
    return (await this.#run({ op: "vet", obj, nowMs }, this.#o.vetBudgetMs ?? VET_BUDGET_MS, "vetting the policy object")) as VetResult;
  }

  /** Stop the worker; tasks waiting or running fail. Never throws. */
  async close(): Promise<void> {
    this.#closed = true;
    const failed = [...(this.#running ? [this.#running] : []), ...this.#queue.splice(0)];
    this.#running = undefined;
    clearTimeout(this.#timer);
    clearTimeout(this.#idle);
    for (const p of failed) p.reject(new Error("the policy worker was closed"));
    const w = this.#worker;
    this.#worker = undefined;
    await w?.terminate();
  }

  #run(task: QueuedTask, budgetMs: number, what: string): Promise<unknown> {
    if (this.#closed) return Promise.reject(new Error("the policy worker was closed"));
    if (this.#queue.length >= (this.#o.maxQueued ?? 1024)) return Promise.reject(new Error("the policy worker has too many tasks waiting"));
    return new Promise((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, task, budgetMs, what, resolve, reject });
      this.#pump();
    });
  }

  #pump(): void {
    if (this.#running !== undefined || this.#closed) return;
    clearTimeout(this.#idle);
    const next = this.#queue.shift();
    if (next === undefined) {
      // Idle: let the thread go after a while (its isolate holds several MB); the next task starts a new one.
      if (this.#worker !== undefined) {
        this.#idle = setTimeout(() => this.#retire(), this.#o.idleMs ?? IDLE_MS);
        this.#idle.unref?.();
      }
      return;
    }
    let worker: Worker;
    try {
      worker = this.#ensure();
    } catch (err) {
      next.reject(err as Error);
      this.#pump();
      return;
    }
    // A review needs the set it is decided against: when loading it failed, the worker only reads the
    // review's uid and answers "unavailable", so the review is refused with its uid.
    if (next.task.op === "review" && next.task.generation !== undefined && this.#loaded !== next.task.generation) {
      next.task = { ...next.task, generation: undefined, unavailable: true };
    }
    this.#running = next;
    // The budget counts the task's own work: it starts once the worker has loaded its modules.
    if (this.#ready) this.#timer = setTimeout(() => this.#overBudget(next), next.budgetMs);
    const transfer = next.task.op === "review" && next.task.body.buffer instanceof ArrayBuffer ? [next.task.body.buffer] : [];
    worker.postMessage({ id: next.id, ...(next.task.op === "load" ? this.#policiesMessage(next.task.generation, next.task.set) : next.task) }, transfer);
  }

  /** The `policies` message for `set`: only the policies this worker has not been sent are converted and cloned. */
  #policiesMessage(generation: number, set: PolicySet): WorkerTask {
    const order: number[] = [];
    const added: [number, PortablePolicy][] = [];
    for (const p of set.policies) {
      let key = this.#sent.get(p);
      if (key === undefined) {
        key = this.#nextKey++;
        this.#sent.set(p, key);
        added.push([key, portablePolicy(p)]);
      }
      order.push(key);
    }
    return { op: "policies", generation, order, added, defaultAction: set.defaultAction, defaultNote: set.defaultNote };
  }

  #onReady(worker: Worker): void {
    if (worker !== this.#worker) return;
    this.#ready = true;
    clearTimeout(this.#timer);
    const p = this.#running;
    if (p !== undefined) this.#timer = setTimeout(() => this.#overBudget(p), p.budgetMs);
  }

  #ensure(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const worker = new Worker(workerUrl());
    worker.unref();
    this.stats.started++;
    this.#loaded = undefined;
    this.#sent = new WeakMap();
    this.#ready = false;
    // A worker that never finishes loading counts against the task waiting for it.
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#running !== undefined && this.#overBudget(this.#running), START_BUDGET_MS);
    worker.on("message", (reply: WorkerReply) => this.#reply(worker, reply));
    worker.on("error", (err: Error) => this.#lost(worker, `the policy worker failed: ${err.message}`));
    worker.on("exit", (code) => this.#lost(worker, `the policy worker exited (code ${code})`));
    this.#worker = worker;
    return worker;
  }

  #reply(worker: Worker, reply: WorkerReply): void {
    if ("ready" in reply) return this.#onReady(worker);
    const p = this.#running;
    if (worker !== this.#worker || p === undefined || reply.id !== p.id) return;
    if ("uid" in reply) {
      p.uid = reply.uid;
      return;
    }
    clearTimeout(this.#timer);
    this.#running = undefined;
    this.stats.tasks++;
    if (reply.ok) {
      if (p.task.op === "load") this.#loaded = p.task.generation;
      p.resolve(reply.result);
    } else if (p.task.op === "load") {
      // Its copy may be half updated: start over with a new worker.
      this.#worker = undefined;
      this.#loaded = undefined;
      void worker.terminate();
      p.reject(new BudgetExceededError(`loading the cluster policies into the webhook's worker failed: ${reply.message}`));
    } else if (reply.unavailable === true) p.reject(new BudgetExceededError(reply.message, p.uid));
    else p.reject(reply.status !== undefined ? new WorkerStatusError(reply.status.code, reply.status.message) : new Error(reply.message));
    this.#pump();
  }

  #overBudget(p: Pending): void {
    if (this.#running !== p) return;
    this.stats.overBudget++;
    this.#running = undefined;
    const w = this.#worker;
    this.#worker = undefined;
    this.#loaded = undefined;
    void w?.terminate();
    p.reject(new BudgetExceededError(`${p.what} did not finish within its CPU budget of ${p.budgetMs} ms; the worker was stopped`, p.uid));
    this.#pump();
  }

  #retire(): void {
    if (this.#running !== undefined || this.#queue.length > 0) return;
    const w = this.#worker;
    this.#worker = undefined;
    this.#loaded = undefined;
    void w?.terminate();
  }

  #lost(worker: Worker, message: string): void {
    if (worker !== this.#worker) return;
    this.#worker = undefined;
    this.#loaded = undefined;
    const p = this.#running;
    this.#running = undefined;
    clearTimeout(this.#timer);
    p?.reject(new Error(message));
    this.#pump();
  }
}

/** The compile hook of ClusterPolicies (`ClusterPoliciesOptions.compile`) and its worker. */
export interface OffThreadCompiler {
  /**
   * Compile `obj` in the worker within its budget (schema, selectors,
   * patterns: everything compilePolicyObject does); when valid, rebuild the
   * policy on this thread from its plain-data form, compiling only its
   * patterns (bounded by their cost bounds, regex.ts: a few ms at most, where
   * compiling the object here would cost ~0.5 ms a KiB of spec); when
   * invalid, the worker's issues and `Accepted=False` condition. The result
   * equals compilePolicyObject's.
   *
   * @throws BudgetExceededError when vetting passes its budget (the object
   *   then counts as invalid: fail closed); Error when the worker cannot start
   */
  compile(obj: unknown): Promise<PolicyObjectResult>;
  /** Stop the worker (when the compiler owns it). Never throws. */
  close(): Promise<void>;
}

/**
 * A compile hook for ClusterPolicies that keeps untrusted objects' cost off
 * the request loop (see {@link OffThreadCompiler}).
 *
 * @param options.worker the worker to use (default: a new one, owned and closed by the compiler)
 */
export function createOffThreadCompiler(options: { worker?: PolicyWorker; vetBudgetMs?: number } = {}): OffThreadCompiler {
  const worker = options.worker ?? new PolicyWorker({ ...(options.vetBudgetMs !== undefined ? { vetBudgetMs: options.vetBudgetMs } : {}) });
  return {
    async compile(obj: unknown): Promise<PolicyObjectResult> {
      const now = Date.now();
      const vetted = await worker.vet(obj, now);
      if (!vetted.valid || vetted.policy === undefined) return { issues: vetted.issues, conditions: vetted.conditions };
      return { policy: restorePolicy(vetted.policy), issues: vetted.issues, conditions: vetted.conditions };
    },
    close: () => (options.worker === undefined ? worker.close() : Promise.resolve()),
  };
}
