/**
 * The one small bounded memo of the code base ({@link BoundedMap}: entries
 * and bytes, least recently used first, no expiry), and {@link ownString},
 * which keeps a memo key from holding the larger string it was cut from.
 * The TTL cache of backend reads is `./coalescing.ts`.
 */

/** One entry of a {@link BoundedMap}: a node of its recency list. */
interface BoundedNode<K, V> {
  key: K;
  value: V;
  /** accounted size, bytes */
  bytes: number;
  /** towards the least recently used end */
  older: BoundedNode<K, V> | undefined;
  /** towards the most recently used end */
  newer: BoundedNode<K, V> | undefined;
}

/** Options of a {@link BoundedMap}. */
export interface BoundedMapOptions<K, V> {
  /** most entries kept (≥ 1) */
  maxEntries: number;
  /** most bytes kept, as counted by `sizeOf` (> 0) */
  maxBytes: number;
  /**
   * Estimated bytes one entry holds, key and value and bookkeeping included
   * (e.g. `key.length × 2 + 64` for a string key whose value is shared).
   * Called once per {@link BoundedMap.set}; must not throw.
   */
  sizeOf: (key: K, value: V) => number;
}

/**
 * A copy of `text` that refers to no other string. V8 keeps a substring (a
 * "sliced string") and a concatenation (a "cons string") as references to
 * the strings they were made from, so a memo key cut from a request's URL
 * (`url.pathname + url.search`) would keep the whole URL alive as long as
 * the entry (measured in `npm run bench:memory`'s heap snapshot: 10,000
 * request-memo keys held 10,000 full `https://…` URLs, ≈ 1.7 MB). A JSON
 * round trip makes a fresh flat string on every engine (Node, workerd);
 * about 0.5 µs for a 150-character key, paid once per stored entry.
 */
export function ownString(text: string): string {
  return JSON.parse(JSON.stringify(text)) as string;
}

/**
 * A map bounded by entries AND bytes, least recently used dropped first:
 * the one small bounded memo of this code base (the proxy's authorization
 * memo, route memo and parsed-selector memo use it). A memo, not a cache:
 * it has no expiry — what it holds must stay true while the process runs
 * (e.g. a value derived from its key only).
 *
 * - `get` and `set` are O(1): a `Map` from key to a node of a doubly linked
 *   recency list (a hit moves one node; no re-hashing, no allocation).
 * - Each entry counts `sizeOf(key, value)` bytes; past `maxEntries` or
 *   `maxBytes` the least recently used entries are dropped.
 * - A string key is stored as its own flat copy ({@link ownString}), so an
 *   entry never keeps alive the larger string its key was cut from.
 * - An entry larger than `maxBytes` on its own is refused (`set` returns
 *   false and nothing is dropped for it); an older entry of the same key is
 *   then removed, so a stale value is never answered.
 *
 * @example
 * const routes = new BoundedMap<string, string>({ maxEntries: 10_000, maxBytes: 2 << 20, sizeOf: (k) => k.length * 2 + 64 });
 */
export class BoundedMap<K, V> {
  readonly maxEntries: number;
  readonly maxBytes: number;
  readonly #sizeOf: (key: K, value: V) => number;
  readonly #nodes = new Map<K, BoundedNode<K, V>>();
  /** least recently used */
  #oldest: BoundedNode<K, V> | undefined;
  /** most recently used */
  #newest: BoundedNode<K, V> | undefined;
  #bytes = 0;
  /** entries dropped to stay within the bounds */
  evictions = 0;

  constructor(options: BoundedMapOptions<K, V>) {
    if (!(options.maxEntries >= 1) || !(options.maxBytes > 0)) throw new RangeError("BoundedMap needs maxEntries ≥ 1 and maxBytes > 0");
    this.maxEntries = options.maxEntries;
    this.maxBytes = options.maxBytes;
    this.#sizeOf = options.sizeOf;
  }

  /** The value of `key` (it becomes the most recently used), or undefined. */
  get(key: K): V | undefined {
    const node = this.#nodes.get(key);
    if (node === undefined) return undefined;
    if (node !== this.#newest) {
      this.#unlink(node);
      this.#append(node);
    }
    return node.value;
  }

  /** Whether `key` is held (its recency is not changed). */
  has(key: K): boolean {
    return this.#nodes.has(key);
  }

  /**
   * Keep `value` for `key` as the most recently used entry, dropping least
   * recently used entries past the bounds.
   *
   * @returns false when the entry alone is larger than `maxBytes` (not kept)
   */
  set(key: K, value: V): boolean {
    this.delete(key);
    if (typeof key === "string") key = ownString(key) as K;
    const bytes = this.#sizeOf(key, value);
    if (!(bytes <= this.maxBytes)) return false;
    const node: BoundedNode<K, V> = { key, value, bytes, older: undefined, newer: undefined };
    this.#nodes.set(key, node);
    this.#append(node);
    this.#bytes += bytes;
    while (this.#oldest !== undefined && (this.#nodes.size > this.maxEntries || this.#bytes > this.maxBytes)) {
      this.delete(this.#oldest.key);
      this.evictions++;
    }
    return true;
  }

  /** Forget `key`; returns whether it was held. */
  delete(key: K): boolean {
    const node = this.#nodes.get(key);
    if (node === undefined) return false;
    this.#nodes.delete(key);
    this.#unlink(node);
    this.#bytes -= node.bytes;
    return true;
  }

  /** Forget everything. */
  clear(): void {
    this.#nodes.clear();
    this.#oldest = this.#newest = undefined;
    this.#bytes = 0;
  }

  /** Entries held. */
  get size(): number {
    return this.#nodes.size;
  }

  /** Bytes accounted to the entries held (their `sizeOf` sum). */
  get bytes(): number {
    return this.#bytes;
  }

  /** Keys from the least to the most recently used (for tests and diagnostics). */
  *keys(): IterableIterator<K> {
    for (let n = this.#oldest; n !== undefined; n = n.newer) yield n.key;
  }

  #unlink(node: BoundedNode<K, V>): void {
    if (node.older !== undefined) node.older.newer = node.newer;
    else this.#oldest = node.newer;
    if (node.newer !== undefined) node.newer.older = node.older;
    else this.#newest = node.older;
    node.older = node.newer = undefined;
  }

  #append(node: BoundedNode<K, V>): void {
    node.older = this.#newest;
    if (this.#newest !== undefined) this.#newest.newer = node;
    else this.#oldest = node;
    this.#newest = node;
  }
}
