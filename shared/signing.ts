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
 * `EMB-HMAC-SHA256-1`, key id, timestamp, method (upper case), canonical
 * path, canonical query, then the five identity/request-id header values
 * exactly as sent (empty when absent). The canonical path percent-decodes and
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
 * Everything here uses WebCrypto (`crypto.subtle`), so it runs unchanged on
 * Node, Cloudflare Workers and Lambda. A signature is valid for the clock
 * skew window (default 60 s); read-only GETs replayed inside that window
 * return what the original caller was allowed to see, nothing more.
 */
import { base64url } from "jose";
import { unauthorized, StatusError } from "./k8s/status.ts";
import type { Caller } from "./identity.ts";

/** The scheme tag that starts every canonical request (bump on any change of the canonical form). */
export const SIGNATURE_SCHEME = "EMB-HMAC-SHA256-1";

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

/** Default allowed distance between the signer's and the verifier's clocks, seconds. */
export const DEFAULT_MAX_SKEW_SECONDS = 60;
/** Largest configurable clock skew, seconds. */
export const MAX_MAX_SKEW_SECONDS = 600;
/** Smallest accepted key, bytes (the HMAC-SHA256 output size, RFC 2104 §3). */
export const MIN_KEY_BYTES = 32;
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
 * @returns the keys in order; the first is the one a signer uses
 * @throws SigningKeyError when empty, more than {@link MAX_ACTIVE_KEYS}
 *   keys, an id is invalid or repeated, or a secret is not base64/base64url
 *   of at least {@link MIN_KEY_BYTES} bytes
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
    keys.push({ id, secret });
  });
  return keys;
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

/** What a signer covers besides the caller: method and the full URL (path and query). */
export interface SignedRequestParts {
  method: string;
  /** absolute URL or path with query, e.g. `/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/m?labelSelector=a%3Db` */
  url: string;
  caller: Caller;
  requestId?: string;
}

/**
 * The headers that sign a request: key id, timestamp, signature, identity
 * and request id. Add them to the outgoing request unchanged.
 *
 * @param key the signing key (the first of {@link parseSigningKeys})
 * @param nowMs signing time, ms since the epoch
 */
export async function signRequest(parts: SignedRequestParts, key: SigningKey, nowMs: number): Promise<Record<string, string>> {
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
  const canonical = canonicalRequest(parts.method, parts.url, (name) => headers[name]);
  const mac = await crypto.subtle.sign("HMAC", await importKey(key), new TextEncoder().encode(canonical));
  headers[SIGNATURE_HEADERS.signature] = base64url.encode(new Uint8Array(mac));
  return headers;
}

/** Options of {@link verifyRequest}. */
export interface VerifyOptions {
  /** verifier's clock, ms since the epoch */
  nowMs: number;
  /** allowed |now − timestamp|, seconds (default {@link DEFAULT_MAX_SKEW_SECONDS}) */
  maxSkewSeconds?: number;
}

/**
 * Verify a signed request and return the caller it carries.
 *
 * @param keys accepted keys (any of them may have signed)
 * @throws StatusError 401 when a signature header is missing or malformed,
 *   the key id is unknown, the timestamp is outside the skew window, or the
 *   signature does not match the method, path, query, timestamp, key id,
 *   identity headers and request id
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
  const canonical = canonicalRequest(request.method, request.url, (name) => h.get(name) ?? undefined);
  // crypto.subtle.verify compares in constant time.
  const ok = await crypto.subtle.verify("HMAC", await importKey(key), mac as Uint8Array<ArrayBuffer>, new TextEncoder().encode(canonical));
  if (!ok) throw unauthorized("the request signature does not match the request (method, path, query, timestamp, key id or identity headers changed)");
  try {
    return decodeIdentity(h);
  } catch (err) {
    throw unauthorized(`the signed identity headers are malformed: ${(err as Error).message}`);
  }
}

/**
 * The canonical request a signature covers.
 *
 * @param header returns a header's value as sent (undefined when absent)
 */
export function canonicalRequest(method: string, url: string, header: (name: string) => string | undefined): string {
  const parsed = new URL(url, "http://signing.invalid");
  return [
    SIGNATURE_SCHEME,
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
  ].join("\n");
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
 * request must carry a valid signature and the caller comes from it;
 * otherwise `fallback` decides (e.g. the configured local identity). The
 * environment is read on every request, so a Worker whose secret changes
 * switches without a rebuild.
 *
 * @throws StatusError 401 from {@link verifyRequest}; 500 when the key text
 *   in the environment is malformed (a deployment fault, named without the secret)
 */
export function signatureAuthenticator(
  runtime: { env: Readonly<Record<string, string | undefined>>; now: () => number },
  fallback: (request: Request) => Caller | Promise<Caller>,
): (request: Request) => Promise<Caller> {
  let parsedFrom: string | undefined;
  let parsed: { keys: SigningKey[]; maxSkewSeconds: number } | StatusError | undefined;
  return async (request) => {
    const text = runtime.env[SIGNING_KEYS_ENV];
    if (text === undefined || text.trim() === "") return fallback(request);
    const skewText = runtime.env[SIGNING_SKEW_ENV] ?? "";
    const cacheKey = `${text}\u0000${skewText}`;
    if (parsedFrom !== cacheKey) {
      parsedFrom = cacheKey;
      try {
        parsed = { keys: parseSigningKeys(text), maxSkewSeconds: parseMaxSkew(skewText) };
      } catch (err) {
        parsed = new StatusError(500, `request signing is misconfigured: ${(err as Error).message}`);
      }
    }
    if (parsed instanceof StatusError) throw parsed;
    return verifyRequest(request, parsed!.keys, { nowMs: runtime.now(), maxSkewSeconds: parsed!.maxSkewSeconds });
  };
}

const importedKeys = new WeakMap<SigningKey, Promise<CryptoKey>>();

function importKey(key: SigningKey): Promise<CryptoKey> {
  let imported = importedKeys.get(key);
  if (imported === undefined) {
    imported = crypto.subtle.importKey("raw", key.secret as Uint8Array<ArrayBuffer>, { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
    importedKeys.set(key, imported);
  }
  return imported;
}

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
