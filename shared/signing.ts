/**
 * Request signing between the in-cluster proxy and the bridge function.
 *
 * The proxy authenticates and authorizes the Kubernetes caller, then forwards
 * the request to a function (Worker URL, Lambda Function URL, in-cluster Node
 * service) with the caller's identity in headers and an HMAC-SHA256 signature
 * over everything the function acts on. The function, when signing keys are
 * configured, answers 401 to an unsigned, tampered or stale request and takes
 * the caller's identity only from a request whose signature verifies.
 *
 * Headers (all ASCII; identity values are percent-encoded UTF-8):
 *
 * | header | value |
 * |---|---|
 * | `X-Bridge-Key-Id` | id of the key that signed (`[A-Za-z0-9._-]{1,64}`) |
 * | `X-Bridge-Timestamp` | signing time, whole seconds since the Unix epoch |
 * | `X-Bridge-Signature` | base64url (no padding) HMAC-SHA256 of the canonical request |
 * | `X-Bridge-User` | user name (`user.Info.GetName()`), required |
 * | `X-Bridge-Uid` | user UID, when there is one |
 * | `X-Bridge-Groups` | groups, each percent-encoded, joined with `,` |
 * | `X-Bridge-Extra` | extra attributes as `key=value` pairs joined with `&`, each part percent-encoded, one pair per value |
 * | `X-Request-Id` | the proxy's request id (signed so logs cannot be forged) |
 *
 * Canonical request (lines joined with `\n`): the scheme tag
 * `EMB-HMAC-SHA256-2`, the audience — the origin (`scheme://host[:port]`,
 * WHATWG `URL.origin`: lowercase, default port dropped) the signer
 * addressed — key id, timestamp, method (upper case), canonical path,
 * canonical query, then the five identity/request-id header values exactly
 * as sent (empty when absent). The canonical path percent-decodes and
 * re-encodes every segment (so `|` and `%7C` sign alike, as the function
 * reads them alike); the canonical query is the `URLSearchParams` pairs
 * (WHATWG form decoding, what the function itself reads) re-encoded and
 * sorted. Two requests with the same canonical form mean the same thing to
 * the function.
 *
 * Keys: `BRIDGE_SIGNING_KEYS` is `id:secret[,id:secret]` — one or two keys,
 * each secret base64 or base64url of at least 32 bytes. The proxy signs with
 * the first; the function accepts either, so keys rotate without downtime
 * (add the new key second on the functions, make it first on the proxy, drop
 * the old one). Key material lives in the environment (a Kubernetes Secret,
 * a Worker secret, a Lambda environment variable), never in the config file.
 *
 * Audience: a signature is valid only at the origin it was made for, so a
 * request signed for one function is refused (401) by another function that
 * shares the keys, and a request replayed with a rewritten `Host` is refused
 * by a bridge that knows its own origin. The verifier checks against
 * `BRIDGE_AUDIENCE` (`https://a.example[,https://b.example:8443]`) when it is
 * set — and then never trusts the `Host` header — else against the origin of
 * the URL the request reached it at (Workers and Lambda Function URLs build
 * it from the platform's own host; a plain Node server from the `Host`
 * header, which is why a Node bridge behind a load balancer should set
 * `BRIDGE_AUDIENCE` to the URL the proxy addresses).
 *
 * Unsigned operation: a deployed bridge (Node server, Worker, Lambda) refuses
 * to serve without keys unless `BRIDGE_INSECURE_ALLOW_UNSIGNED=true`
 * ({@link signingMode}); the entry points enforce it and log a warning on
 * every start when it is used.
 *
 * HMAC implementation ({@link HmacSha256}): `node:crypto` (`createHmac`
 * with a cached `KeyObject`, `timingSafeEqual`) where the runtime has it
 * (Node and Lambda: reached through `process.getBuiltinModule`, Node ≥ 22.3,
 * so no module imports `node:` and the Worker bundle needs no
 * `nodejs_compat`), else WebCrypto (`crypto.subtle`, Cloudflare Workers).
 * Both compute the same HMAC-SHA256 (RFC 2104), so either verifies what the
 * other signed; `node:crypto` answers in the calling thread (about 3 µs)
 * where `crypto.subtle.sign` on Node hops to the thread pool (about 30 µs
 * of CPU per call, issue 11 P1/P4). A signature is valid for the clock
 * skew window (default 60 s); read-only GETs replayed inside that window
 * return what the original caller was allowed to see, nothing more, and so
 * do custom reads (a `POST` whose body, the objects read, the `-3` scheme
 * signs: a replay reads the same objects again, nothing else).
 */
import type { KeyObject } from "node:crypto";
import { base64url } from "jose";
import { internalError, unauthorized, StatusError } from "./k8s/status.ts";
import type { Caller } from "./identity.ts";

/** The scheme tag that starts every canonical request of a request without a body (bump on any change of the canonical form). */
export const SIGNATURE_SCHEME = "EMB-HMAC-SHA256-2";
/**
 * The scheme tag of a request with a body (a custom-metrics read that
 * carries the objects the proxy resolved, docs/architecture.md): the
 * canonical request of {@link SIGNATURE_SCHEME} plus a last line, the
 * lowercase hex SHA-256 of the body's bytes.
 */
export const SIGNATURE_SCHEME_BODY = "EMB-HMAC-SHA256-3";
/** Largest body a signed request may carry, bytes (a thousand pod names are about 50 KiB). */
export const MAX_SIGNED_BODY_BYTES = 256 * 1024;

/** Header names (lowercase, as `Headers` reports them). */
export const SIGNATURE_HEADERS = {
  keyId: "x-bridge-key-id",
  timestamp: "x-bridge-timestamp",
  signature: "x-bridge-signature",
  user: "x-bridge-user",
  uid: "x-bridge-uid",
  groups: "x-bridge-groups",
  extra: "x-bridge-extra",
  requestId: "x-request-id",
} as const;

/** Environment variable holding the keys (`id:secret[,id:secret]`). */
export const SIGNING_KEYS_ENV = "BRIDGE_SIGNING_KEYS";
/** Environment variable overriding the allowed clock skew, seconds. */
export const SIGNING_SKEW_ENV = "BRIDGE_SIGNING_MAX_SKEW_SECONDS";
/** Environment variable listing the origins signatures must be made for (`https://a.example[,…]`). */
export const AUDIENCE_ENV = "BRIDGE_AUDIENCE";
/** Environment variable that lets a bridge without keys serve unsigned requests (`true`; insecure). */
export const INSECURE_ALLOW_UNSIGNED_ENV = "BRIDGE_INSECURE_ALLOW_UNSIGNED";
/** Most origins in {@link AUDIENCE_ENV} (each costs one HMAC per request that fails to verify). */
export const MAX_AUDIENCE_ORIGINS = 8;

/** Default allowed distance between the signer's and the verifier's clocks, seconds. */
export const DEFAULT_MAX_SKEW_SECONDS = 60;
/** Largest configurable clock skew, seconds. */
export const MAX_MAX_SKEW_SECONDS = 600;
/** Smallest accepted key, bytes (the HMAC-SHA256 output size, RFC 2104 §3). */
export const MIN_KEY_BYTES = 32;
/**
 * Smallest accepted strength estimate of a key, bits (see
 * {@link keyWeakness}): 128, the smallest security strength NIST SP 800-57
 * Part 1 Rev. 5 accepts beyond 2030 (112 bits only until then), and half of
 * what a 32-byte random key carries.
 */
export const MIN_KEY_STRENGTH_BITS = 128;
/** Most keys active at once: the current one and the one being rotated in or out. */
export const MAX_ACTIVE_KEYS = 2;

const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** What percent-encoded identity headers may contain (unreserved, `%XX`, and the `,` `=` `&` separators). */
const ENCODED_VALUE = /^[A-Za-z0-9%._~!*'()\-,=&]*$/;
const MAX_HEADER_LENGTH = 16 * 1024;

/** One HMAC key: its id and raw secret bytes. */
export interface SigningKey {
  id: string;
  secret: Uint8Array;
}

/** Thrown by {@link parseSigningKeys} for malformed key text (never includes the secret). */
export class SigningKeyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SigningKeyError";
  }
}

/**
 * Parse `id:secret[,id:secret]` (the `BRIDGE_SIGNING_KEYS` format).
 * Whitespace around entries is ignored.
 *
 * A secret must also look random ({@link keyWeakness}): all-zero, constant,
 * repeated-pattern, counter-like and few-symbol secrets (e.g. 32 zero bytes,
 * `"secret"` repeated, bytes 0, 1, 2, …) are refused. A secret made as the
 * docs say (`openssl rand -base64 32`) is refused with probability below
 * 10⁻¹¹.
 *
 * @returns the keys in order; the first is the one a signer uses
 * @throws SigningKeyError when empty, more than {@link MAX_ACTIVE_KEYS}
 *   keys, an id is invalid or repeated, a secret is not base64/base64url
 *   of at least {@link MIN_KEY_BYTES} bytes, or a secret is low-entropy
 *   (the message says which rule, never the secret)
 */
export function parseSigningKeys(text: string): SigningKey[] {
  const entries = text
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e.length > 0);
  if (entries.length === 0) throw new SigningKeyError(`${SIGNING_KEYS_ENV} holds no key (expected id:secret[,id:secret])`);
  if (entries.length > MAX_ACTIVE_KEYS) {
    throw new SigningKeyError(`${SIGNING_KEYS_ENV} holds ${entries.length} keys; at most ${MAX_ACTIVE_KEYS} may be active (current and rotating)`);
  }
  const keys: SigningKey[] = [];
  entries.forEach((entry, i) => {
    const colon = entry.indexOf(":");
    if (colon < 0) throw new SigningKeyError(`${SIGNING_KEYS_ENV} entry ${i + 1} is not id:secret`);
    const id = entry.slice(0, colon);
    const encoded = entry.slice(colon + 1);
    if (!KEY_ID.test(id)) throw new SigningKeyError(`${SIGNING_KEYS_ENV} entry ${i + 1}: key id must match ${KEY_ID.source}`);
    if (keys.some((k) => k.id === id)) throw new SigningKeyError(`${SIGNING_KEYS_ENV}: key id "${id}" appears twice`);
    const secret = decodeBase64(encoded);
    if (secret === undefined) throw new SigningKeyError(`${SIGNING_KEYS_ENV}: the secret of key "${id}" is not base64 or base64url`);
    if (secret.length < MIN_KEY_BYTES) {
      throw new SigningKeyError(`${SIGNING_KEYS_ENV}: the secret of key "${id}" is ${secret.length} bytes; at least ${MIN_KEY_BYTES} are required`);
    }
    const weakness = keyWeakness(secret);
    if (weakness !== undefined) {
      throw new SigningKeyError(
        `${SIGNING_KEYS_ENV}: the secret of key "${id}" is not random enough (${weakness}); make one with: openssl rand -base64 32`,
      );
    }
    keys.push({ id, secret });
  });
  return keys;
}

/**
 * Why a key's bytes do not look random, or undefined when they do.
 *
 * A uniformly random secret of n bytes has two properties this checks, on
 * its bytes and again on the differences of successive bytes (mod 256, also
 * uniformly random for a random key: the map is a bijection), so counters
 * and arithmetic progressions (0, 1, 2, …) fail too:
 *
 * 1. **enough distinct values**: with d distinct values among n, the secret
 *    carries at most n·log2(d) bits; that must reach
 *    {@link MIN_KEY_STRENGTH_BITS}. For n = 32 that is d ≥ 16 (31
 *    differences: d ≥ 18), where a random 32-byte key has ~30 distinct
 *    values; P(d ≤ 15) ≈ 3·10⁻¹⁷ and, for the differences, P(d ≤ 17) ≈
 *    1.3·10⁻¹² (exact occupancy counts, Stirling numbers of the second kind).
 *    All-zero and constant keys have d = 1: 0 bits.
 * 2. **no repeated pattern**: the secret is not a shorter block written
 *    again (a period p ≤ n/2, e.g. a 16-byte key pasted twice, "abc" × 11);
 *    for random bytes that happens with probability < n·256^(−n/2).
 *
 * Longer secrets made of few symbols (64 bytes of hex text: 16 symbols, 256
 * bits) pass rule 1, since n grows with them.
 *
 * @param secret the raw key bytes
 * @returns which rule fails, as text without the secret, or undefined
 */
export function keyWeakness(secret: Uint8Array): string | undefined {
  const deltas = new Uint8Array(Math.max(0, secret.length - 1));
  for (let i = 1; i < secret.length; i++) deltas[i - 1] = (secret[i]! - secret[i - 1]! + 256) & 0xff;
  for (const [what, bytes] of [
    ["bytes", secret],
    ["differences between successive bytes", deltas],
  ] as const) {
    const distinct = new Set(bytes).size;
    const bits = distinct <= 1 ? 0 : bytes.length * Math.log2(distinct);
    if (bits < MIN_KEY_STRENGTH_BITS) {
      return `its ${bytes.length} ${what} take only ${distinct} distinct value${distinct === 1 ? "" : "s"}: at most ${Math.floor(bits)} bits, fewer than ${MIN_KEY_STRENGTH_BITS}`;
    }
    const period = smallestPeriod(bytes);
    if (period <= bytes.length / 2) return `its ${what} repeat a ${period}-byte pattern`;
  }
  return undefined;
}

/** The smallest p ≥ 1 with bytes[i] = bytes[i + p] for every i (bytes.length when none): the KMP failure function. */
function smallestPeriod(bytes: Uint8Array): number {
  const n = bytes.length;
  const fail = new Int32Array(n);
  for (let i = 1, k = 0; i < n; i++) {
    while (k > 0 && bytes[i] !== bytes[k]) k = fail[k - 1]!;
    if (bytes[i] === bytes[k]) k++;
    fail[i] = k;
  }
  return n === 0 ? 0 : n - fail[n - 1]!;
}

/**
 * Parse the allowed clock skew from its environment text.
 *
 * @returns seconds, {@link DEFAULT_MAX_SKEW_SECONDS} when `text` is empty
 * @throws SigningKeyError when not an integer in 1…{@link MAX_MAX_SKEW_SECONDS}
 */
export function parseMaxSkew(text: string | undefined): number {
  if (text === undefined || text.trim() === "") return DEFAULT_MAX_SKEW_SECONDS;
  const n = Number(text.trim());
  if (!Number.isInteger(n) || n < 1 || n > MAX_MAX_SKEW_SECONDS) {
    throw new SigningKeyError(`${SIGNING_SKEW_ENV} must be an integer number of seconds in 1…${MAX_MAX_SKEW_SECONDS}`);
  }
  return n;
}

/**
 * Parse the accepted audience from its environment text.
 *
 * @param text comma-separated absolute `http:`/`https:` origins, e.g.
 *   `https://bridge.example.com,https://bridge.example.com:8443`; a trailing
 *   `/` is allowed, any other path, query, fragment or user info is not
 * @returns the origins as WHATWG `URL.origin` spells them (lowercase host,
 *   default port dropped); undefined when `text` is empty (the URL the
 *   request reached the bridge at is the audience)
 * @throws SigningKeyError for a malformed entry or more than {@link MAX_AUDIENCE_ORIGINS}
 */
export function parseAudience(text: string | undefined): string[] | undefined {
  if (text === undefined || text.trim() === "") return undefined;
  const entries = text
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  if (entries.length > MAX_AUDIENCE_ORIGINS) throw new SigningKeyError(`${AUDIENCE_ENV} lists ${entries.length} origins; at most ${MAX_AUDIENCE_ORIGINS} are allowed`);
  const origins = entries.map((entry) => {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new SigningKeyError(`${AUDIENCE_ENV}: ${JSON.stringify(truncate(entry))} is not an absolute URL (expected e.g. https://bridge.example.com)`);
    }
    if (url.protocol !== "https:" && url.protocol !== "http:") throw new SigningKeyError(`${AUDIENCE_ENV}: ${JSON.stringify(truncate(entry))} is not an http or https origin`);
    if (url.username !== "" || url.password !== "" || url.pathname !== "/" || url.search !== "" || url.hash !== "") {
      throw new SigningKeyError(`${AUDIENCE_ENV}: ${JSON.stringify(truncate(entry))} must be an origin (scheme://host[:port]) without path, query or user info`);
    }
    return url.origin;
  });
  return [...new Set(origins)];
}

/** What the runtime's environment says about unsigned requests (see {@link signingMode}). */
export type SigningMode =
  /** keys are configured: every `/apis` request must be signed */
  | { mode: "signed" }
  /** no keys, and the operator allowed unsigned requests explicitly: log `warning` on every start */
  | { mode: "insecure"; warning: string }
  /** no keys and no permission: refuse to serve `/apis` (Node exits; Worker and Lambda answer 500 with `message`) */
  | { mode: "refused"; message: string };

/**
 * Whether a deployed bridge may serve: with `BRIDGE_SIGNING_KEYS` it serves
 * signed requests only; without keys it refuses unless the operator set
 * `BRIDGE_INSECURE_ALLOW_UNSIGNED=true` (or the Node server's
 * `--insecure-allow-unsigned` flag, passed as `insecureAllowUnsigned`), in
 * which case every `/apis` request is served as the config's
 * `policy.localIdentity` — anyone who can reach the bridge reads what that
 * identity may read.
 *
 * @param env the runtime's environment (`process.env`, Worker bindings)
 * @param options.insecureAllowUnsigned the Node flag
 * @param options.flag how the entry point spells its flag, for messages (e.g. `--insecure-allow-unsigned`)
 * @returns never throws; a value of {@link INSECURE_ALLOW_UNSIGNED_ENV} other than `true`/`false`/empty is refused with a message
 */
export function signingMode(
  env: Readonly<Record<string, string | undefined>>,
  options: { insecureAllowUnsigned?: boolean; flag?: string } = {},
): SigningMode {
  if ((env[SIGNING_KEYS_ENV] ?? "").trim() !== "") return { mode: "signed" };
  const setting = (env[INSECURE_ALLOW_UNSIGNED_ENV] ?? "").trim().toLowerCase();
  const how = `set ${SIGNING_KEYS_ENV} (the in-cluster proxy's keys, id:secret[,id:secret]), or set ${INSECURE_ALLOW_UNSIGNED_ENV}=true${options.flag !== undefined ? ` (or pass ${options.flag})` : ""} to serve unsigned requests on purpose`;
  if (setting !== "" && setting !== "true" && setting !== "false") {
    return { mode: "refused", message: `${INSECURE_ALLOW_UNSIGNED_ENV} must be true or false, not ${JSON.stringify(truncate(setting))}; ${SIGNING_KEYS_ENV} is not set` };
  }
  if (setting === "true" || options.insecureAllowUnsigned === true) {
    return {
      mode: "insecure",
      warning:
        `running insecure: ${SIGNING_KEYS_ENV} is not set and ${options.insecureAllowUnsigned === true && setting !== "true" ? options.flag ?? "the insecure flag" : `${INSECURE_ALLOW_UNSIGNED_ENV}=true`} ` +
        `is, so every unsigned request is served as the config's policy.localIdentity; anyone who can reach this bridge reads what that identity may read. ` +
        `Set ${SIGNING_KEYS_ENV} for any deployment the in-cluster proxy calls`,
    };
  }
  return { mode: "refused", message: `request signing is not configured: ${SIGNING_KEYS_ENV} is empty or missing, so this bridge refuses to serve; ${how}` };
}

/**
 * The log record an entry point writes for a signing mode at start (Node,
 * Lambda cold start) or on an isolate's first request (Worker): the
 * insecure warning (`warn`), the refusal (`error`); undefined when signed.
 */
export function signingNotice(mode: SigningMode): { level: "warn" | "error"; msg: string } | undefined {
  if (mode.mode === "insecure") return { level: "warn", msg: mode.warning };
  if (mode.mode === "refused") return { level: "error", msg: mode.message };
  return undefined;
}

/** What a signer covers besides the caller: method and the full URL (origin, path and query). */
export interface SignedRequestParts {
  method: string;
  /**
   * the absolute URL the request is sent to, e.g.
   * `https://bridge.example.com/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/m?labelSelector=a%3Db`;
   * its origin is the audience the signature is bound to
   */
  url: string;
  caller: Caller;
  requestId?: string;
  /** the request body, sent as is: signed with {@link SIGNATURE_SCHEME_BODY} (at most {@link MAX_SIGNED_BODY_BYTES}) */
  body?: Uint8Array;
}

/**
 * The headers that sign a request: key id, timestamp, signature, identity
 * and request id. Add them to the outgoing request unchanged.
 *
 * @param key the signing key (the first of {@link parseSigningKeys})
 * @param nowMs signing time, ms since the epoch
 * @param hmac the HMAC implementation (default {@link defaultHmac}: `node:crypto` where available, else WebCrypto)
 * @throws TypeError when `parts.url` is not an absolute http(s) URL (a signature must name its audience),
 *   or the body is larger than {@link MAX_SIGNED_BODY_BYTES}
 */
export async function signRequest(parts: SignedRequestParts, key: SigningKey, nowMs: number, hmac: HmacSha256 = defaultHmac): Promise<Record<string, string>> {
  const audience = originOf(parts.url);
  if (audience === undefined) throw new TypeError(`signRequest needs the absolute http(s) URL the request is sent to, not ${JSON.stringify(truncate(parts.url))}`);
  const identity = encodeIdentity(parts.caller);
  const headers: Record<string, string> = {
    [SIGNATURE_HEADERS.keyId]: key.id,
    [SIGNATURE_HEADERS.timestamp]: String(Math.floor(nowMs / 1000)),
    [SIGNATURE_HEADERS.user]: identity.user,
  };
  if (identity.uid !== "") headers[SIGNATURE_HEADERS.uid] = identity.uid;
  if (identity.groups !== "") headers[SIGNATURE_HEADERS.groups] = identity.groups;
  if (identity.extra !== "") headers[SIGNATURE_HEADERS.extra] = identity.extra;
  if (parts.requestId !== undefined && parts.requestId !== "") headers[SIGNATURE_HEADERS.requestId] = parts.requestId;
  if (parts.body !== undefined && parts.body.length > MAX_SIGNED_BODY_BYTES) {
    throw new TypeError(`a signed request body is at most ${MAX_SIGNED_BODY_BYTES} bytes, not ${parts.body.length}`);
  }
  const bodySha256 = parts.body === undefined ? undefined : await sha256Hex(parts.body);
  const canonical = canonicalRequest(parts.method, parts.url, (name) => headers[name], audience, bodySha256);
  headers[SIGNATURE_HEADERS.signature] = base64url.encode(await hmac.sign(key, canonical));
  return headers;
}

/** Options of {@link verifyRequest}. */
export interface VerifyOptions {
  /** verifier's clock, ms since the epoch */
  nowMs: number;
  /** allowed |now − timestamp|, seconds (default {@link DEFAULT_MAX_SKEW_SECONDS}) */
  maxSkewSeconds?: number;
  /**
   * the origins a signature may be made for ({@link parseAudience}); default:
   * the origin of `request.url`, the URL the request reached the bridge at
   */
  audience?: readonly string[];
  /** the HMAC implementation (default {@link defaultHmac}) */
  hmac?: HmacSha256;
  /**
   * the request's body as received (the caller reads it, bounded by
   * {@link MAX_SIGNED_BODY_BYTES}): the signature must then be a
   * {@link SIGNATURE_SCHEME_BODY} one over exactly these bytes; undefined
   * for a request without a body ({@link SIGNATURE_SCHEME})
   */
  body?: Uint8Array;
}

/**
 * Verify a signed request and return the caller it carries.
 *
 * @param keys accepted keys (any of them may have signed)
 * @throws StatusError 401 when a signature header is missing or malformed,
 *   the key id is unknown, the timestamp is outside the skew window, or the
 *   signature does not match the audience (origin), method, path, query,
 *   timestamp, key id, identity headers and request id (and, with
 *   `options.body`, the body; a body-less signature never verifies a request
 *   with a body, nor the other way round), or the body is larger than
 *   {@link MAX_SIGNED_BODY_BYTES}
 */
export async function verifyRequest(request: Request, keys: readonly SigningKey[], options: VerifyOptions): Promise<Caller> {
  const h = request.headers;
  const keyId = h.get(SIGNATURE_HEADERS.keyId);
  const timestamp = h.get(SIGNATURE_HEADERS.timestamp);
  const signature = h.get(SIGNATURE_HEADERS.signature);
  if (signature === null || keyId === null || timestamp === null) {
    throw unauthorized(
      "the request is not signed: this bridge requires X-Bridge-Signature, X-Bridge-Key-Id and X-Bridge-Timestamp from the in-cluster proxy",
    );
  }
  const key = keys.find((k) => k.id === keyId);
  if (key === undefined) throw unauthorized(`the request is signed with an unknown key id ${JSON.stringify(truncate(keyId))}`);
  if (!/^\d{1,12}$/.test(timestamp)) throw unauthorized("X-Bridge-Timestamp must be whole seconds since the Unix epoch");
  const maxSkew = options.maxSkewSeconds ?? DEFAULT_MAX_SKEW_SECONDS;
  const skew = Math.floor(options.nowMs / 1000) - Number(timestamp);
  if (Math.abs(skew) > maxSkew) {
    throw unauthorized(
      `the request signature is ${skew > 0 ? `${skew} s old` : `${-skew} s in the future`}; at most ${maxSkew} s of clock skew is allowed`,
    );
  }
  for (const name of [SIGNATURE_HEADERS.user, SIGNATURE_HEADERS.uid, SIGNATURE_HEADERS.groups, SIGNATURE_HEADERS.extra]) {
    const value = h.get(name);
    if (value !== null && (value.length > MAX_HEADER_LENGTH || !ENCODED_VALUE.test(value))) {
      throw unauthorized(`${name} is not a percent-encoded value`);
    }
  }
  const mac = decodeBase64(signature);
  if (mac === undefined || mac.length !== 32) throw unauthorized("X-Bridge-Signature is not a base64url HMAC-SHA256");
  const audience = options.audience ?? [new URL(request.url).origin];
  const hmac = options.hmac ?? defaultHmac;
  if (options.body !== undefined && options.body.length > MAX_SIGNED_BODY_BYTES) {
    throw unauthorized(`the signed request body is larger than ${MAX_SIGNED_BODY_BYTES} bytes`);
  }
  const bodySha256 = options.body === undefined ? undefined : await sha256Hex(options.body);
  let ok = false;
  for (const origin of audience) {
    const canonical = canonicalRequest(request.method, request.url, (name) => h.get(name) ?? undefined, origin, bodySha256);
    // Both implementations compare in constant time.
    ok = await hmac.verify(key, mac, canonical);
    if (ok) break;
  }
  if (!ok) {
    throw unauthorized(
      `the request signature does not match the request: it was signed for another audience than ${audience.join(", ")}, ` +
        `or the method, path, query, timestamp, key id, identity headers${bodySha256 === undefined ? "" : " or body"} changed` +
        (bodySha256 === undefined ? "" : ` (a request with a body must be signed with ${SIGNATURE_SCHEME_BODY})`),
    );
  }
  try {
    return decodeIdentity(h);
  } catch (err) {
    throw unauthorized(`the signed identity headers are malformed: ${(err as Error).message}`);
  }
}

/**
 * The canonical request a signature covers.
 *
 * @param url the request URL (absolute, or a path with query when `audience` is given)
 * @param header returns a header's value as sent (undefined when absent)
 * @param audience the origin the signature is bound to (default: the origin of `url`)
 * @param bodySha256 the lowercase hex SHA-256 of the body, for a request
 *   with one: the scheme is then {@link SIGNATURE_SCHEME_BODY} and the
 *   digest the last line
 * @throws TypeError when neither `audience` nor an absolute `url` names the origin
 */
export function canonicalRequest(method: string, url: string, header: (name: string) => string | undefined, audience?: string, bodySha256?: string): string {
  const parsed = new URL(url, "http://signing.invalid");
  const origin = audience ?? originOf(url);
  if (origin === undefined) throw new TypeError(`the canonical request needs an origin: ${JSON.stringify(truncate(url))} is not an absolute http(s) URL`);
  const lines = [
    bodySha256 === undefined ? SIGNATURE_SCHEME : SIGNATURE_SCHEME_BODY,
    origin,
    header(SIGNATURE_HEADERS.keyId) ?? "",
    header(SIGNATURE_HEADERS.timestamp) ?? "",
    method.toUpperCase(),
    canonicalPath(parsed.pathname),
    canonicalQuery(parsed.search),
    header(SIGNATURE_HEADERS.user) ?? "",
    header(SIGNATURE_HEADERS.uid) ?? "",
    header(SIGNATURE_HEADERS.groups) ?? "",
    header(SIGNATURE_HEADERS.extra) ?? "",
    header(SIGNATURE_HEADERS.requestId) ?? "",
  ];
  if (bodySha256 !== undefined) lines.push(bodySha256);
  return lines.join("\n");
}

/** `node:crypto` through `process.getBuiltinModule` (Node ≥ 22.3, Lambda); undefined elsewhere (Workers without `nodejs_compat`): no static `node:` import. */
function nodeCryptoModule(): typeof import("node:crypto") | undefined {
  return (globalThis as { process?: { getBuiltinModule?: (id: "node:crypto") => typeof import("node:crypto") | undefined } }).process?.getBuiltinModule?.("node:crypto");
}

/**
 * The lowercase hex SHA-256 of `bytes`: `node:crypto` `createHash` where the
 * runtime has it (Node, Lambda; synchronous), else WebCrypto
 * `crypto.subtle.digest` (Workers). FIPS 180-4 either way.
 */
export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const nodeCrypto = nodeCryptoModule();
  if (nodeCrypto !== undefined && typeof nodeCrypto.createHash === "function") return nodeCrypto.createHash("sha256").update(bytes).digest("hex");
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  let hex = "";
  for (const byte of digest) hex += byte.toString(16).padStart(2, "0");
  return hex;
}

/** The WHATWG origin of an absolute http(s) URL; undefined for a relative or other URL. */
function originOf(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.origin : undefined;
  } catch {
    return undefined;
  }
}

/** Each path segment percent-decoded (when valid) and re-encoded with `encodeURIComponent`. */
function canonicalPath(pathname: string): string {
  return pathname
    .split("/")
    .map((segment) => {
      try {
        return encodeURIComponent(decodeURIComponent(segment));
      } catch {
        return segment; // invalid escapes: signed as sent; the function refuses them with 400
      }
    })
    .join("/");
}

/** Query pairs as `URLSearchParams` reads them, re-encoded and sorted by name then value. */
function canonicalQuery(search: string): string {
  const pairs = [...new URLSearchParams(search)].map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`);
  pairs.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return pairs.join("&");
}

/** The identity header values for a caller (percent-encoded). */
export function encodeIdentity(caller: Caller): { user: string; uid: string; groups: string; extra: string } {
  const extra: string[] = [];
  for (const key of Object.keys(caller.extra).sort()) {
    for (const value of caller.extra[key] ?? []) extra.push(`${encodeURIComponent(key)}=${encodeURIComponent(value)}`);
  }
  return {
    user: encodeURIComponent(caller.user),
    uid: caller.uid !== undefined && caller.uid !== "" ? encodeURIComponent(caller.uid) : "",
    groups: caller.groups.filter((g) => g !== "").map(encodeURIComponent).join(","),
    extra: extra.join("&"),
  };
}

/** The caller from verified identity headers. @throws Error when the user is missing or an escape is invalid */
function decodeIdentity(h: Headers): Caller {
  const user = decodeURIComponent(h.get(SIGNATURE_HEADERS.user) ?? "");
  if (user === "") throw new Error("X-Bridge-User is missing");
  const uid = decodeURIComponent(h.get(SIGNATURE_HEADERS.uid) ?? "");
  const groupsText = h.get(SIGNATURE_HEADERS.groups) ?? "";
  const groups = groupsText === "" ? [] : groupsText.split(",").map(decodeURIComponent);
  // A Map, not an object: keys such as "constructor" or "__proto__" are data here.
  const extra = new Map<string, string[]>();
  const extraText = h.get(SIGNATURE_HEADERS.extra) ?? "";
  if (extraText !== "") {
    for (const pair of extraText.split("&")) {
      const eq = pair.indexOf("=");
      if (eq < 0) throw new Error("X-Bridge-Extra entries must be key=value");
      const key = decodeURIComponent(pair.slice(0, eq));
      const values = extra.get(key) ?? [];
      values.push(decodeURIComponent(pair.slice(eq + 1)));
      extra.set(key, values);
    }
  }
  return { user, ...(uid !== "" ? { uid } : {}), groups, extra: Object.fromEntries(extra) };
}

/**
 * An `authenticate` hook for the bridge app (`shared/app.ts`): when
 * `BRIDGE_SIGNING_KEYS` is set in the runtime's environment, every `/apis`
 * request must carry a valid signature made for this bridge's audience
 * (`BRIDGE_AUDIENCE`, else the URL the request reached it at) and the caller
 * comes from it; otherwise `fallback` decides (e.g. the configured local
 * identity). The environment is read on every request, so a Worker whose
 * secret changes switches without a rebuild. Whether a bridge without keys
 * may serve at all is the entry point's decision ({@link signingMode}).
 *
 * The returned hook takes the request's body bytes for a request with a
 * body (the app reads a custom read's `POST` body bounded before calling
 * it): the signature must then be an {@link SIGNATURE_SCHEME_BODY} one over
 * exactly those bytes, so a custom read signed without its body (`-2`) or
 * unsigned is refused (401). Without `body` the `-2` scheme is verified, as
 * for every External `GET`.
 *
 * @returns the caller: `fallback`'s answer as it gives it (without keys), else a promise
 * @throws StatusError (as a rejected promise) 401 from {@link verifyRequest}; 500 when the key text,
 *   the skew or the audience in the environment is malformed (a deployment
 *   fault, named without the secret)
 */
export function signatureAuthenticator(
  runtime: { env: Readonly<Record<string, string | undefined>>; now: () => number },
  fallback: (request: Request) => Caller | Promise<Caller>,
): (request: Request, body?: Uint8Array) => Caller | Promise<Caller> {
  let parsedFrom: string | undefined;
  let parsed: { keys: SigningKey[]; maxSkewSeconds: number; audience: string[] | undefined } | StatusError | undefined;
  // Without keys the fallback answers as it does (synchronously for the configured identity); with keys, a promise.
  return (request, body) => {
    const text = runtime.env[SIGNING_KEYS_ENV];
    if (text === undefined || text.trim() === "") return fallback(request);
    const skewText = runtime.env[SIGNING_SKEW_ENV] ?? "";
    const audienceText = runtime.env[AUDIENCE_ENV] ?? "";
    const cacheKey = `${text}\u0000${skewText}\u0000${audienceText}`;
    if (parsedFrom !== cacheKey) {
      parsedFrom = cacheKey;
      try {
        parsed = { keys: parseSigningKeys(text), maxSkewSeconds: parseMaxSkew(skewText), audience: parseAudience(audienceText) };
      } catch (err) {
        parsed = internalError(`request signing is misconfigured: ${(err as Error).message}`, undefined, err);
      }
    }
    if (parsed instanceof StatusError) return Promise.reject(parsed);
    const { keys, maxSkewSeconds, audience } = parsed!;
    return verifyRequest(request, keys, { nowMs: runtime.now(), maxSkewSeconds, ...(audience !== undefined ? { audience } : {}), ...(body !== undefined ? { body } : {}) });
  };
}

/**
 * HMAC-SHA256 (RFC 2104) over a canonical request's UTF-8 bytes: the one
 * interface the signer ({@link signRequest}) and the verifier
 * ({@link verifyRequest}) use, with a `node:crypto` and a WebCrypto
 * implementation that produce the same 32-byte MACs.
 */
export interface HmacSha256 {
  /** which implementation this is (for tests and logs) */
  readonly name: "node:crypto" | "webcrypto";
  /** The 32-byte MAC of `data` (UTF-8) under `key.secret`. */
  sign(key: SigningKey, data: string): Promise<Uint8Array> | Uint8Array;
  /** Whether `mac` is the MAC of `data` under `key.secret`, compared in constant time (false for a wrong length). */
  verify(key: SigningKey, mac: Uint8Array, data: string): Promise<boolean> | boolean;
}

/** Each key imported once (a WebCrypto import is async and costs more than a MAC); a failed import is forgotten, so the next use tries again. */
const importedKeys = new WeakMap<SigningKey, Promise<CryptoKey>>();

function importKey(key: SigningKey): Promise<CryptoKey> {
  let imported = importedKeys.get(key);
  if (imported === undefined) {
    const importing = crypto.subtle.importKey("raw", key.secret as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    importedKeys.set(key, (imported = importing));
    importing.catch(() => {
      if (importedKeys.get(key) === importing) importedKeys.delete(key);
    });
  }
  return imported;
}

const utf8 = new TextEncoder();

/** HMAC-SHA256 with WebCrypto (`crypto.subtle`): every runtime; `verify` is constant-time (WebCrypto spec). */
export const webCryptoHmac: HmacSha256 = {
  name: "webcrypto",
  async sign(key, data) {
    return new Uint8Array(await crypto.subtle.sign("HMAC", await importKey(key), utf8.encode(data)));
  },
  async verify(key, mac, data) {
    return crypto.subtle.verify("HMAC", await importKey(key), mac as Uint8Array<ArrayBuffer>, utf8.encode(data));
  },
};

/**
 * HMAC-SHA256 with `node:crypto` (`createHmac` on a `KeyObject` made once
 * per key; `timingSafeEqual`), synchronous in the calling thread; undefined
 * where the runtime has no `process.getBuiltinModule` (Cloudflare Workers
 * without `nodejs_compat`; Node < 22.3). No static `node:` import, so a
 * Worker bundle stays free of Node modules.
 */
export function nodeCryptoHmac(): HmacSha256 | undefined {
  const nodeCrypto = nodeCryptoModule();
  if (nodeCrypto === undefined || typeof nodeCrypto.createHmac !== "function") return undefined;
  const { createHmac, createSecretKey, timingSafeEqual } = nodeCrypto;
  const keyObjects = new WeakMap<SigningKey, KeyObject>();
  const macOf = (key: SigningKey, data: string): Uint8Array => {
    let keyObject = keyObjects.get(key);
    if (keyObject === undefined) {
      keyObject = createSecretKey(key.secret);
      keyObjects.set(key, keyObject);
    }
    return createHmac("sha256", keyObject).update(data, "utf8").digest();
  };
  return {
    name: "node:crypto",
    sign: macOf,
    verify(key, mac, data) {
      const expected = macOf(key, data);
      return mac.length === expected.length && timingSafeEqual(mac, expected);
    },
  };
}

/** The runtime's HMAC: {@link nodeCryptoHmac} where available (Node, Lambda), else {@link webCryptoHmac} (Workers). */
export const defaultHmac: HmacSha256 = nodeCryptoHmac() ?? webCryptoHmac;

/** Decode base64 or base64url (padding optional) with jose's codec; undefined when not valid. */
function decodeBase64(text: string): Uint8Array | undefined {
  const normalized = text.trim().replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  if (!/^[A-Za-z0-9_-]*$/.test(normalized) || normalized.length % 4 === 1) return undefined;
  try {
    return base64url.decode(normalized);
  } catch {
    return undefined;
  }
}

function truncate(text: string, max = 64): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
