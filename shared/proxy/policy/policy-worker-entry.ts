/**
 * The policy worker thread (policy-worker.ts starts it): decides
 * AdmissionReviews (admission-review.ts) against its own compiled copy of
 * the cluster policies, and vets policy objects (objects.ts
 * `compilePolicyObject`), one task at a time, answering each with a
 * {@link WorkerReply}. The host terminates it when a task passes its budget.
 * Built as its own entry point `policy-worker.mjs` in the proxy bundle
 * (infra/proxy/build.ts).
 *
 * @throws Error at load when started outside a worker thread
 */
import { isMainThread, parentPort } from "node:worker_threads";
import { StatusError } from "../../k8s/status.ts";
import { PolicySet, type CompiledPolicy } from "../../policy/evaluate.ts";
import { compilePolicyObject } from "../../policy/objects.ts";
import { compileMetricPattern, type MetricPattern } from "../../policy/regex.ts";
import { parseReview, reviewText, uidFromPrefix, type ReviewDraft } from "./admission-review.ts";
import { portablePolicy, restorePolicy, type VetResult, type WorkerReply, type WorkerTask } from "./policy-worker.ts";

if (isMainThread || parentPort === null) throw new Error("policy-worker-entry runs only as a worker thread of policy-worker.ts");
const port = parentPort;

/** The policy set loaded last, and its generation. */
let policies: { generation: number; set: PolicySet } | undefined;
/** This worker's copy of each policy it was sent, by the host's key. */
const known = new Map<number, CompiledPolicy>();
/** Compiled patterns by source, reused across loads (a rebuild changes few); cleared past 100 000 entries. */
let patterns = new Map<string, MetricPattern>();

function compileCached(source: string): MetricPattern {
  let p = patterns.get(source);
  if (p === undefined) {
    p = compileMetricPattern(source);
    if (patterns.size >= 100_000) patterns = new Map();
    patterns.set(source, p);
  }
  return p;
}

function run(id: number, task: WorkerTask): unknown {
  switch (task.op) {
    case "policies": {
      for (const [key, p] of task.added) known.set(key, restorePolicy(p, compileCached));
      const list = task.order.map((key) => {
        const p = known.get(key);
        if (p === undefined) throw new Error(`policy ${key} was never sent to this worker`);
        return p;
      });
      const keep = new Set(task.order);
      for (const key of known.keys()) if (!keep.has(key)) known.delete(key);
      policies = { generation: task.generation, set: new PolicySet(list, task.defaultAction, task.defaultNote) };
      return null;
    }
    case "review": {
      const text = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength).toString("utf8");
      if (task.unavailable === true) {
        const { request } = parseReview(text);
        port.postMessage({ id, uid: request.uid } satisfies WorkerReply);
        throw Object.assign(new Error("the cluster policies could not be loaded into the webhook's worker within its CPU budget"), { unavailable: true });
      }
      // kube-apiserver writes request.uid first: read it before the whole text is parsed, so an
      // answer can be made even when parsing and checking pass the budget (confirmed after parsing).
      const early = uidFromPrefix(text);
      if (early !== undefined) port.postMessage({ id, uid: early } satisfies WorkerReply);
      const set = task.generation !== undefined && policies?.generation === task.generation ? policies.set : undefined;
      if (task.generation !== undefined && set === undefined) throw new Error("the review's policy set is not loaded");
      const draft: ReviewDraft = reviewText(
        task.path,
        text,
        { policies: set, mode: task.mode, whenNoneApply: task.whenNoneApply, authenticated: task.authenticated },
        (uid) => port.postMessage({ id, uid } satisfies WorkerReply),
      );
      return draft;
    }
    case "vet": {
      const { policy, issues, conditions } = compilePolicyObject(task.obj, new Date(task.nowMs));
      const valid = policy !== undefined && issues.length === 0;
      return { valid, issues, conditions, ...(valid ? { policy: portablePolicy(policy) } : {}) } satisfies VetResult;
    }
  }
}

port.on("message", (message: { id: number } & WorkerTask) => {
  const { id } = message;
  let reply: WorkerReply;
  try {
    reply = { id, ok: true, result: run(id, message) };
  } catch (err) {
    const e = err as Error & { unavailable?: boolean };
    reply = {
      id,
      ok: false,
      message: e instanceof Error ? e.message : String(err),
      ...(err instanceof StatusError ? { status: { code: err.code, message: err.message } } : {}),
      ...(e.unavailable === true ? { unavailable: true } : {}),
    };
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true } satisfies WorkerReply);
