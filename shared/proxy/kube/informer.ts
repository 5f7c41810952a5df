/**
 * List and watch of a Kubernetes collection over the proxy's client
 * (client.ts): {@link listAllPages}, a whole collection page by page, and
 * the {@link Informer}, list then watch with client-go's reflector semantics
 * (`tools/cache/reflector.go`, `tools/pager/pager.go`; cited where
 * implemented). Used by the proxy's watches (the authentication ConfigMap,
 * the serving Secret, the cluster policies) and the CLI's cluster reads.
 */
import { ApiError, apiStatus, ResponseTooLargeError, type CallOptions, type KubeClient, type KubeList, type KubeObject, type KubeStatus, type MAX_RESPONSE_BYTES } from "./client.ts";

/**
 * Items asked for per page of an {@link Informer}'s list (`limit`), as
 * client-go's pager (`tools/pager/pager.go` `defaultPageSize` 500). A page
 * whose body is over {@link MAX_RESPONSE_BYTES} is asked again with half the
 * limit, down to 1 (an object is at most ~1.5 MiB: etcd's request limit).
 */
export const LIST_PAGE_SIZE = 500;

/** Settings of an {@link Informer}. */
export interface InformerOptions<T extends KubeObject> {
  /** collection path, e.g. `/api/v1/namespaces/ns/secrets` */
  path: string;
  /** e.g. `metadata.name=foo` */
  fieldSelector?: string;
  /**
   * `Accept` of the list pages and of the watch (default `application/json`):
   * client-go's metadata client asks `as=PartialObjectMetadataList` for a list
   * and `as=PartialObjectMetadata` for a watch (`metadata/metadata.go`)
   */
  accept?: { list: string; watch: string };
  /** deadline of each page of a list, ms (default 10 000) */
  listTimeoutMs?: number;
  /** items asked for per page (`limit`), default {@link LIST_PAGE_SIZE}; halved for a page over {@link MAX_RESPONSE_BYTES} */
  pageSize?: number;
  /**
   * Applied to every object as it is received (each item of a list page,
   * each watch event's object) before it is stored or handed on: keep only
   * what the consumer needs, so that large fields (annotations,
   * managedFields) are garbage as soon as the page or event is parsed.
   * client-go's `TransformFunc` (tools/cache/controller.go, set with
   * `SharedInformer.SetTransform`). Default: the object as received.
   */
  transform?: (obj: T) => T;
  /** after every successful list, with its items (before add/update/delete of the differences) */
  onListed?: (items: T[]) => void;
  onAdd?: (obj: T) => void;
  onUpdate?: (obj: T) => void;
  onDelete?: (obj: T) => void;
  /** a list or watch failed; the next list follows in `retryMs` */
  onError?: (err: Error, retryMs: number) => void;
  /** first back-off after a failure, ms (default 1 000; doubles to `maxBackoffMs`, reset by a successful list) */
  backoffMs?: number;
  /** default 30 000 */
  maxBackoffMs?: number;
}

/** A watch event (k8s.io/apimachinery/pkg/apis/meta/v1/watch.go `WatchEvent`). */
interface WatchEvent<T> {
  type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";
  object: T | KubeStatus;
}

/** Thrown inside the loop when the watch's resourceVersion is gone (410): re-list. */
class Gone extends Error {}

/** Most times one list starts again from its first page after a 410 Expired `continue` token before it counts as failed. */
export const MAX_LIST_RESTARTS = 3;

/** Options of {@link listAllPages}. */
export interface PagedListOptions<T extends KubeObject> {
  fieldSelector?: string;
  /** items a page (default {@link LIST_PAGE_SIZE}; at least 1) */
  pageSize?: number;
  /** the call options of each page, asked once a page (so each page has its own deadline; `accept` too) */
  pageOptions: () => CallOptions;
  /** the whole list's cancellation: aborted, the list throws its reason */
  stop?: AbortSignal;
  /** applied to each item as its page arrives (default: none) */
  transform?: (obj: T) => T;
  /** counters to add to: pages asked, pages asked again smaller, restarts after an expired token */
  stats?: { pages: number; pagesTooLarge: number; listRestarts: number };
  /** told the smaller page size after a page over the bound (a caller that lists again may start from it) */
  onPageSize?: (pageSize: number) => void;
}

/**
 * Every item of a collection, page by page (`limit`, `continue`: client-go
 * `tools/pager/pager.go`), without `resourceVersion` (a consistent read: the
 * watch cache ignores `limit` for `resourceVersion=0`). A page over
 * {@link MAX_RESPONSE_BYTES} is asked again with half the items (the
 * `continue` token does not fix the limit); a 410 Expired on a `continue`
 * token (the snapshot was compacted) starts the list again from its first
 * page, at most {@link MAX_LIST_RESTARTS} times, so the items are one
 * consistent snapshot (client-go's pager would fall back to one unpaginated
 * list, which would drop the page bound). Used by the {@link Informer} and
 * the CLI's cluster reads (functions/cli/cluster.ts).
 *
 * @returns the items (transformed) and the list's resourceVersion ("" when
 *   the server gave none)
 * @throws ApiError (the server's answer; a 410 after the restarts),
 *   {@link ResponseTooLargeError} when a page of one item is over the bound,
 *   a page's deadline error, or `stop`'s reason
 */
export async function listAllPages<T extends KubeObject>(kc: KubeClient, path: string, options: PagedListOptions<T>): Promise<{ items: T[]; resourceVersion: string }> {
  const { stop, stats } = options;
  let pageSize = Math.max(1, Math.floor(options.pageSize ?? LIST_PAGE_SIZE));
  const items: T[] = [];
  let next: string | undefined;
  let resourceVersion = "";
  let restarts = 0;
  for (;;) {
    let page: KubeList<T>;
    try {
      if (stats) stats.pages++;
      page = await kc.list<T>(path, { ...(options.fieldSelector ? { fieldSelector: options.fieldSelector } : {}), limit: pageSize, ...(next !== undefined ? { continue: next } : {}) }, options.pageOptions());
    } catch (err) {
      if (stop?.aborted) throw stop.reason;
      if (err instanceof ResponseTooLargeError && pageSize > 1) {
        if (stats) stats.pagesTooLarge++;
        pageSize = Math.max(1, Math.floor(pageSize / 2));
        options.onPageSize?.(pageSize);
        continue;
      }
      if (apiStatus(err) === 410 && next !== undefined && restarts < MAX_LIST_RESTARTS) {
        restarts++;
        if (stats) stats.listRestarts++;
        items.length = 0;
        next = undefined;
        continue;
      }
      throw err;
    }
    if (stop?.aborted) throw stop.reason;
    for (const obj of page.items ?? []) items.push(options.transform ? options.transform(obj) : obj);
    resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
    next = page.metadata?.continue || undefined;
    if (next === undefined) return { items, resourceVersion };
  }
}

/**
 * List, then watch from the list's resourceVersion, as client-go's reflector
 * does (`tools/cache/reflector.go` `ListAndWatch`, `watchHandler`):
 *
 * - the list is paginated ({@link listAllPages}: `limit`,
 *   {@link LIST_PAGE_SIZE} by default, and `continue`), each page with its
 *   deadline and at most {@link MAX_RESPONSE_BYTES} (a page over it is asked
 *   again with half the limit, which later lists keep);
 *   {@link InformerOptions.transform} is applied to each item as the page
 *   arrives. A 410 Expired on a `continue` token starts the list again from
 *   its first page, at most {@link MAX_LIST_RESTARTS} times (the reflector's
 *   re-list with `resourceVersion=""` after `isExpiredError`);
 * - the list replaces the known objects: new ones are added, changed ones
 *   (another `resourceVersion`) updated, vanished ones deleted;
 * - the watch (`?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=N`,
 *   N random in 5–10 min as the reflector's `minWatchTimeout`) streams
 *   newline-delimited JSON events (each transformed as it is parsed); every
 *   event (BOOKMARK too) moves RV on;
 * - when the server ends the stream, the watch is opened again from the last
 *   RV (no list); a watch that ended within 1 s without an event counts as a
 *   failure (the reflector's "very short watch");
 * - an ERROR event or HTTP answer with 410 Gone (RV too old, compacted) →
 *   list again at once (the reflector's `isExpiredError` path); a second 410
 *   in a row waits for the back-off;
 * - any other failure → `onError`, then list again after a back-off of 1 s
 *   doubling to 30 s (reset by a successful list).
 *
 * State is bounded by what the selector matches, as transformed.
 */
export class Informer<T extends KubeObject> {
  readonly #kc: KubeClient;
  readonly #o: InformerOptions<T>;
  readonly #store = new Map<string, T>();
  #stop = new AbortController();
  #running: Promise<void> | undefined;
  #pageSize: number;
  /** counters for tests */
  readonly stats = { lists: 0, watches: 0, gone: 0, pages: 0, listRestarts: 0, pagesTooLarge: 0 };

  constructor(kc: KubeClient, options: InformerOptions<T>) {
    this.#kc = kc;
    this.#o = options;
    this.#pageSize = Math.max(1, Math.floor(options.pageSize ?? LIST_PAGE_SIZE));
  }

  /** Start listing and watching (no-op when running). */
  start(): void {
    if (this.#running !== undefined) return;
    this.#stop = new AbortController();
    this.#running = this.#loop(this.#stop.signal);
  }

  /** Stop: the list or watch in flight is aborted. Never throws. */
  async stop(): Promise<void> {
    this.#stop.abort(new Error("informer stopped"));
    await this.#running;
    this.#running = undefined;
  }

  async #loop(stop: AbortSignal): Promise<void> {
    const initial = this.#o.backoffMs ?? 1000;
    const max = this.#o.maxBackoffMs ?? 30_000;
    let backoff = initial;
    let rv: string | undefined;
    let goneInRow = 0;
    while (!stop.aborted) {
      try {
        if (rv === undefined) {
          rv = await this.#list(stop);
          backoff = initial;
        }
        rv = await this.#watch(rv, stop);
        goneInRow = 0;
      } catch (err) {
        if (stop.aborted) break;
        rv = undefined;
        if (err instanceof Gone) {
          this.stats.gone++;
          if (++goneInRow === 1) continue; // list again at once
        }
        this.#o.onError?.(err as Error, backoff);
        await sleep(backoff, stop);
        backoff = Math.min(backoff * 2, max);
      }
    }
  }

  /** @returns the list's resourceVersion */
  async #list(stop: AbortSignal): Promise<string> {
    this.stats.lists++;
    const { items, resourceVersion } = await listAllPages<T>(this.#kc, this.#o.path, {
      ...(this.#o.fieldSelector ? { fieldSelector: this.#o.fieldSelector } : {}),
      pageSize: this.#pageSize,
      pageOptions: () => ({
        signal: AbortSignal.any([stop, AbortSignal.timeout(this.#o.listTimeoutMs ?? 10_000)]),
        ...(this.#o.accept !== undefined ? { accept: this.#o.accept.list } : {}),
      }),
      stop,
      ...(this.#o.transform ? { transform: this.#o.transform } : {}),
      stats: this.stats,
      onPageSize: (size) => (this.#pageSize = size),
    });
    this.#o.onListed?.(items);
    const seen = new Set<string>();
    for (const obj of items) {
      const key = keyOf(obj);
      seen.add(key);
      const old = this.#store.get(key);
      this.#store.set(key, obj);
      if (old === undefined) this.#o.onAdd?.(obj);
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion) this.#o.onUpdate?.(obj);
    }
    for (const [key, obj] of this.#store) {
      if (seen.has(key)) continue;
      this.#store.delete(key);
      this.#o.onDelete?.(obj);
    }
    return resourceVersion;
  }

  /** Watch from `rv` until the server ends the stream. @returns the last resourceVersion seen */
  async #watch(rv: string, stop: AbortSignal): Promise<string> {
    this.stats.watches++;
    const transform = this.#o.transform ?? ((obj: T) => obj);
    const timeoutSeconds = Math.floor(300 * (1 + Math.random()));
    const q = new URLSearchParams({ watch: "1", resourceVersion: rv, allowWatchBookmarks: "true", timeoutSeconds: String(timeoutSeconds) });
    if (this.#o.fieldSelector) q.set("fieldSelector", this.#o.fieldSelector);
    // The server ends the watch after timeoutSeconds; past that plus a margin the client gives up on it.
    const local = new AbortController();
    const signal = AbortSignal.any([stop, local.signal, AbortSignal.timeout(timeoutSeconds * 1000 + 30_000)]);
    const startedAt = Date.now();
    let events = 0;
    let failure: Error | undefined;
    try {
      await this.#kc.stream(
        `${this.#o.path}?${q}`,
        (line) => {
          if (failure !== undefined) return;
          let event: WatchEvent<T>;
          try {
            event = JSON.parse(line) as WatchEvent<T>;
          } catch {
            failure = new Error("the watch sent a line that is not JSON");
            return local.abort(failure);
          }
          events++;
          if (event.type === "ERROR") {
            const status = event.object as KubeStatus;
            failure = status.code === 410 ? new Gone(status.message ?? "resourceVersion too old") : new ApiError(status.code ?? 500, status, `watch ${this.#o.path}`);
            return local.abort(failure);
          }
          const next = (event.object as T).metadata?.resourceVersion;
          if (next) rv = next;
          if (event.type === "BOOKMARK") return;
          const obj = transform(event.object as T);
          const key = keyOf(obj);
          if (event.type === "DELETED") {
            this.#store.delete(key);
            this.#o.onDelete?.(obj);
          } else {
            const had = this.#store.has(key);
            this.#store.set(key, obj);
            if (had) this.#o.onUpdate?.(obj);
            else this.#o.onAdd?.(obj);
          }
        },
        { signal, ...(this.#o.accept !== undefined ? { accept: this.#o.accept.watch } : {}) },
      );
    } catch (err) {
      if (failure !== undefined) throw failure;
      if (apiStatus(err) === 410) throw new Gone((err as Error).message);
      throw err;
    }
    if (failure !== undefined) throw failure;
    if (events === 0 && Date.now() - startedAt < 1000) throw new Error(`very short watch of ${this.#o.path}: ended within 1 s without an event`);
    return rv;
  }
}

function keyOf(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolvePromise) => {
    if (signal.aborted) return resolvePromise();
    const timer = setTimeout(done, ms);
    timer.unref?.();
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolvePromise();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
