/**
 * The pods of a custom.metrics.k8s.io Pods read (`…/namespaces/{ns}/pods/%2A/{metric}?labelSelector=…`,
 * the HPA's `type: Pods` metrics): the names of the pods of the namespace
 * that match the read's `labelSelector`, from a metadata-only informer on
 * pods (docs/architecture.md "A custom read", contract C3).
 *
 * - The informer (kube/informer.ts) lists and watches `/api/v1/pods` of all
 *   namespaces with `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`
 *   (and `as=PartialObjectMetadata` for the watch), as client-go's metadata
 *   informer does (`metadata/metadata.go`): the API server sends only
 *   `metadata`; each object is cut down further to namespace, name, labels
 *   and resourceVersion as it arrives (`transform`).
 * - It starts on the first Pods read (a proxy that serves no Pods read lists
 *   no pod) and keeps running.
 * - Bounded by entries and bytes (ProxyConfig `customMetrics.pods`; bytes
 *   estimated as names, label keys and values in UTF-16 plus 128 a pod). Past
 *   either bound the informer is stopped and its objects dropped: Pods reads
 *   are 503 (a partial index would make the HPA average over the wrong
 *   pods), and the next read after {@link OVERFLOW_RETRY_MS} starts it again.
 * - A read waits for the first complete list until its deadline; not synced
 *   by then → 503. More matching pods than {@link MAX_PODS_PER_READ} → 400
 *   naming the limit. No 503 here carries `Retry-After` (one attempt for the
 *   HPA's client-go: forward/forward.ts).
 *
 * Label matching is the selector module's (`shared/k8s/selector`:
 * `parseSelector`, `matchesLabels`: apimachinery `labels.Parse`/`Matches`).
 */
import { matchesLabels, MAX_SELECTOR_LENGTH, parseSelector, SelectorError } from "../../k8s/selector.ts";
import { badRequest, StatusError } from "../../k8s/status.ts";
import { Informer } from "../kube/informer.ts";
import type { KubeClient, KubeObject } from "../kube/client.ts";
import type { Logger } from "../log.ts";

/** `Accept` of the pod list: metadata only (apiserver `pkg/endpoints/handlers/response.go` `asPartialObjectMetadataList`). */
export const POD_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/** `Accept` of the pod watch: each event's object as `PartialObjectMetadata`. */
export const POD_WATCH_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
/**
 * Most pods one Pods read may name: the bridge's `MAX_PODS_PER_READ`
 * (shared/values/custom-read.ts), which refuses more. Not imported: that
 * module brings the bridge's whole values read (~40 KiB) into the proxy's
 * bundle for one number; test/proxy/proxy.custom.test.ts checks they agree.
 */
export const MAX_PODS_PER_READ = 1000;
/** How long after an overflow (too many pods for the bounds) a Pods read starts the informer again, ms. */
export const OVERFLOW_RETRY_MS = 60_000;
/** Fixed estimate of one indexed pod besides its strings, bytes. */
const POD_ENTRY_BYTES = 128;

/** One pod as kept: labels only (the name and namespace are the index's keys). */
type PodLabels = Readonly<Record<string, string>>;

/** Options of {@link PodIndex}. */
export interface PodIndexOptions {
  kc: KubeClient;
  /** most pods kept */
  maxEntries: number;
  /** most bytes kept (estimated) */
  maxBytes: number;
  log: Logger;
  /** clock, ms (overflow retry) */
  now?: () => number;
}

/** The pod metadata informer and its index by namespace. One per proxy; started on the first {@link select}. */
export class PodIndex {
  readonly #o: PodIndexOptions;
  readonly #now: () => number;
  #informer: Informer<KubeObject> | undefined;
  /** namespace → pod name → labels */
  #byNamespace = new Map<string, Map<string, PodLabels>>();
  #entries = 0;
  #bytes = 0;
  /** resolved by the first complete list of the running informer */
  #synced: { promise: Promise<void>; resolve: () => void; done: boolean } = deferred();
  /** when the bounds were last passed (ms), undefined when not */
  #overflowAt: number | undefined;
  #overflowReason = "";
  /** the last list/watch failure (said in the 503 of a read that found the index not synced) */
  #lastError: string | undefined;

  constructor(options: PodIndexOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Pods and estimated bytes held, and whether the first list completed. */
  get stats(): { entries: number; bytes: number; synced: boolean; started: boolean } {
    return { entries: this.#entries, bytes: this.#bytes, synced: this.#synced.done, started: this.#informer !== undefined };
  }

  /**
   * The names of the pods of `namespace` whose labels match `labelSelector`,
   * sorted. Starts the informer on first use.
   *
   * @param labelSelector the read's `labelSelector` as sent ("" selects every pod of the namespace)
   * @param signal the read's deadline (and its caller's departure)
   * @throws StatusError 400 (selector does not parse; more than
   *   {@link MAX_PODS_PER_READ} pods match), 503 without Retry-After (not
   *   synced before `signal` aborts; the bounds were passed)
   */
  async select(namespace: string, labelSelector: string, signal: AbortSignal): Promise<string[]> {
    let selector;
    try {
      selector = parseSelector(labelSelector, { maxLength: MAX_SELECTOR_LENGTH });
    } catch (err) {
      if (err instanceof SelectorError) throw badRequest(`invalid labelSelector: ${err.message}`);
      throw err;
    }
    if (this.#overflowAt !== undefined) {
      if (this.#now() - this.#overflowAt < OVERFLOW_RETRY_MS) throw this.#overflowError();
      this.#overflowAt = undefined;
    }
    this.#start();
    if (!this.#synced.done) await waitFor(this.#synced.promise, signal, () => this.#lastError);
    if (this.#overflowAt !== undefined) throw this.#overflowError();
    const names: string[] = [];
    for (const [name, labels] of this.#byNamespace.get(namespace) ?? []) {
      if (!matchesLabels(selector, labels)) continue;
      names.push(name);
      if (names.length > MAX_PODS_PER_READ) {
        throw badRequest(`labelSelector ${JSON.stringify(labelSelector.slice(0, 200))} selects more than ${MAX_PODS_PER_READ} pods in namespace ${JSON.stringify(namespace)}; a Pods metric read may name at most ${MAX_PODS_PER_READ}`);
      }
    }
    return names.sort();
  }

  /** Stop the informer (shutdown). */
  async stop(): Promise<void> {
    const informer = this.#informer;
    this.#informer = undefined;
    await informer?.stop();
  }

  #overflowError(): StatusError {
    return new StatusError(503, `the proxy does not serve Pods metrics now: ${this.#overflowReason} (ProxyConfig customMetrics.pods); it tries again ${OVERFLOW_RETRY_MS / 1000} s after`);
  }

  #start(): void {
    if (this.#informer !== undefined) return;
    this.#clear();
    this.#synced = deferred();
    const informer = new Informer<KubeObject>(this.#o.kc, {
      path: "/api/v1/pods",
      accept: { list: POD_LIST_ACCEPT, watch: POD_WATCH_ACCEPT },
      transform: (obj) => ({
        metadata: {
          ...(obj.metadata?.namespace !== undefined ? { namespace: obj.metadata.namespace } : {}),
          ...(obj.metadata?.name !== undefined ? { name: obj.metadata.name } : {}),
          ...(obj.metadata?.resourceVersion !== undefined ? { resourceVersion: obj.metadata.resourceVersion } : {}),
          ...(obj.metadata?.labels !== undefined ? { labels: obj.metadata.labels } : {}),
        },
      }),
      onListed: () => {
        // The informer adds, updates and deletes the differences right after; the index follows those.
        queueMicrotask(() => {
          if (this.#informer !== informer) return;
          this.#synced.done = true;
          this.#synced.resolve();
        });
      },
      onAdd: (obj) => this.#put(informer, obj),
      onUpdate: (obj) => this.#put(informer, obj),
      onDelete: (obj) => this.#remove(obj),
      onError: (err, retryMs) => {
        this.#lastError = err.message;
        this.#o.log({ level: "warn", msg: "pod metadata list/watch failed", error: err.message, retryMs });
      },
    });
    this.#informer = informer;
    informer.start();
    this.#o.log({ level: "info", msg: "pod metadata informer started (first Pods read)", maxEntries: this.#o.maxEntries, maxBytes: this.#o.maxBytes });
  }

  #put(informer: Informer<KubeObject>, obj: KubeObject): void {
    if (this.#informer !== informer) return;
    const namespace = obj.metadata?.namespace ?? "";
    const name = obj.metadata?.name ?? "";
    let pods = this.#byNamespace.get(namespace);
    if (pods === undefined) this.#byNamespace.set(namespace, (pods = new Map()));
    const labels: PodLabels = obj.metadata?.labels ?? {};
    const old = pods.get(name);
    if (old !== undefined) this.#bytes -= podBytes(name, old);
    else this.#entries++;
    pods.set(name, labels);
    this.#bytes += podBytes(name, labels);
    if (this.#entries > this.#o.maxEntries || this.#bytes > this.#o.maxBytes) this.#overflow();
  }

  #remove(obj: KubeObject): void {
    const namespace = obj.metadata?.namespace ?? "";
    const name = obj.metadata?.name ?? "";
    const pods = this.#byNamespace.get(namespace);
    const old = pods?.get(name);
    if (pods === undefined || old === undefined) return;
    pods.delete(name);
    if (pods.size === 0) this.#byNamespace.delete(namespace);
    this.#entries--;
    this.#bytes -= podBytes(name, old);
  }

  /** Past a bound: stop the informer, drop everything, refuse Pods reads for {@link OVERFLOW_RETRY_MS}. */
  #overflow(): void {
    this.#overflowAt = this.#now();
    this.#overflowReason = `the cluster has more pods than the pod informer may hold (${this.#entries} pods, ~${this.#bytes} bytes; at most ${this.#o.maxEntries} pods and ${this.#o.maxBytes} bytes)`;
    this.#o.log({ level: "error", msg: "pod metadata informer over its bounds: stopped, Pods reads refused", reason: this.#overflowReason });
    const informer = this.#informer;
    this.#informer = undefined;
    void informer?.stop();
    this.#clear();
    // Waiting reads see the overflow at once.
    this.#synced.done = true;
    this.#synced.resolve();
  }

  #clear(): void {
    this.#byNamespace = new Map();
    this.#entries = 0;
    this.#bytes = 0;
  }
}

/** Estimated bytes of one indexed pod. */
function podBytes(name: string, labels: PodLabels): number {
  let bytes = POD_ENTRY_BYTES + name.length * 2;
  for (const key in labels) bytes += (key.length + labels[key]!.length) * 2 + 32;
  return bytes;
}

function deferred(): { promise: Promise<void>; resolve: () => void; done: boolean } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve, done: false };
}

/**
 * Wait for `promise` until `signal` aborts.
 * @param lastError the informer's last list/watch failure, said in the refusal (e.g. the proxy's missing RBAC)
 * @throws StatusError 503 (no Retry-After) when it aborts first
 */
async function waitFor(promise: Promise<void>, signal: AbortSignal, lastError: () => string | undefined): Promise<void> {
  const refused = () => {
    const error = lastError();
    return new StatusError(503, `the proxy's pod metadata informer has not listed the cluster's pods yet (within the read's deadline)${error !== undefined ? `: ${error.slice(0, 300)}` : ""}; no value is reported`);
  };
  if (signal.aborted) throw refused();
  let onAbort!: () => void;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(refused());
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener("abort", onAbort);
  }
}
