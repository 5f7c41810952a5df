/**
 * Templates of per-namespace identities, shared by the AWS roles
 * (`./aws/identity.ts`, `credentials.assumeRole`) and the Google service
 * accounts (`./gcp/impersonation.ts`, `credentials.impersonate`): a string
 * whose one placeholder, `{namespace}`, stands for the request namespace,
 * or a map namespace → value. Schemas only (zod), no I/O.
 */
import * as z from "../config/zod.ts";

/** The one placeholder of identity templates: the request namespace. */
export const NAMESPACE_PLACEHOLDER = "{namespace}";

/** A Kubernetes namespace name (RFC 1123 label). */
export const NAMESPACE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** `{…}` placeholders of a template other than {@link NAMESPACE_PLACEHOLDER}. */
export function unknownPlaceholders(template: string): string[] {
  return [...template.matchAll(/\{[^}]*\}?/g)].map((m) => m[0]).filter((p) => p !== NAMESPACE_PLACEHOLDER);
}

/** Refuses a string with a placeholder other than `{namespace}`, naming it. */
export const noUnknownPlaceholder = z.refine<string>((t) => unknownPlaceholders(t).length === 0, {
  error: (issue) => `unknown placeholder ${unknownPlaceholders(String(issue.input))[0]}: the only placeholder is ${NAMESPACE_PLACEHOLDER}`,
});

/**
 * A per-namespace template: no unknown placeholder, contains `{namespace}`,
 * and once `{namespace}` is replaced by a namespace, matches `shape`.
 *
 * @param shape what a filled-in value must match
 * @param what e.g. `an IAM role ARN such as arn:aws:iam::123456789012:role/emb-{namespace}`
 * @param alternative the map field to use instead, for the message, e.g. `roleArns`
 */
export function namespaceTemplate(shape: RegExp, what: string, alternative: string) {
  return z.string().check(
    noUnknownPlaceholder,
    z.refine((t: string) => t.includes(NAMESPACE_PLACEHOLDER), `must contain ${NAMESPACE_PLACEHOLDER}: one identity per namespace (use ${alternative} to list them instead)`),
    z.refine((t: string) => unknownPlaceholders(t).length > 0 || shape.test(t.replaceAll(NAMESPACE_PLACEHOLDER, "team-a")), `must be ${what}`),
  );
}

/** A map namespace → `value`, its keys namespace names. */
export function namespaceMap<T extends z.ZodMiniType<string>>(value: T) {
  return z.record(z.string(), value).check(
    z.refine((m) => Object.keys(m).every((k) => NAMESPACE_NAME.test(k)), {
      error: (issue) => `keys must be namespace names (RFC 1123 labels); "${Object.keys(issue.input as object).find((k) => !NAMESPACE_NAME.test(k))}" is not`,
    }),
  );
}

/**
 * The value of `namespace`: the map's entry, or the template filled in.
 * @returns undefined when the map has no entry for it
 */
export function identityOf(template: string | undefined, map: Readonly<Record<string, string>> | undefined, namespace: string): string | undefined {
  if (map !== undefined) return Object.hasOwn(map, namespace) ? map[namespace] : undefined;
  return template?.replaceAll(NAMESPACE_PLACEHOLDER, namespace);
}

/**
 * Entries kept while among the `max` last used (a `Map`'s insertion order:
 * least recently used first); `drop` is told of each entry pushed out.
 */
export class RecentlyUsed<V> {
  readonly #entries = new Map<string, V>();
  readonly #max: number;
  readonly #drop: ((value: V) => void) | undefined;
  /** @param max most entries, ≥ 1 */
  constructor(max: number, drop?: (value: V) => void) {
    this.#max = max;
    this.#drop = drop;
  }
  /** The entry of `key`, made by `make` when absent; now the most recently used. */
  get(key: string, make: () => V): V {
    let value = this.#entries.get(key);
    if (value !== undefined) {
      this.#entries.delete(key);
    } else {
      value = make();
      if (this.#entries.size >= this.#max) {
        const [oldest, dropped] = this.#entries.entries().next().value!;
        this.#entries.delete(oldest);
        this.#drop?.(dropped);
      }
    }
    this.#entries.set(key, value);
    return value;
  }
  get size(): number {
    return this.#entries.size;
  }
}
