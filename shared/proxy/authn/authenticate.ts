/**
 * Who is calling: the delegated authentication chain of an aggregated API
 * server (apiserver `pkg/authentication/authenticatorfactory/delegating.go`),
 * in its order and with its outcomes:
 *
 * 1. front proxy (`request/headerrequest`, `request/x509` `Verifier`): a
 *    client certificate that verifies against `requestheader-client-ca-file`
 *    for clientAuth, with a CN in `requestheader-allowed-names` (any when the
 *    list is empty), makes the identity headers trusted — user from the first
 *    non-empty username header, uid likewise, groups from every value of every
 *    group header (never comma-split), extra from `<prefix><key>` headers with
 *    the key lowercased and percent-decoded;
 * 2. client certificate (`request/x509` `Authenticator`) against
 *    `client-ca-file`: user = CN, groups = O, extra credential id
 *    `X509SHA256=<hex>`;
 * 3. bearer token through a TokenReview (`plugin/pkg/authenticator/token/webhook`),
 *    results cached 10 s (`cache.New(tokenAuth, false, CacheTTL, CacheTTL)`),
 *    keyed by the token's SHA-256 (never the token), in a cache bounded by
 *    entries and bytes ({@link TOKEN_CACHE_BOUNDS}); each review has a 2 s
 *    deadline ({@link TOKEN_REVIEW_TIMEOUT_MS}), shared by every request
 *    waiting for the same token, and a token that could not be reviewed in
 *    time is refused with 401 like any token that does not authenticate;
 * 4. anonymous (`system:anonymous`, group `system:unauthenticated`).
 *
 * As in apiserver's `union` + `NewFailOnError(…, anonymous)`: a step that does
 * not apply (no certificate, no username header, no token) passes to the
 * next; a step that FAILS (a certificate that does not verify, a CN not
 * allowed, an invalid token) is remembered, and if no later step succeeds the
 * request is refused with 401 — it does not become anonymous. Identity
 * headers are never trusted without step 1 succeeding. Every authenticated
 * (non-anonymous) user gets `system:authenticated` (`group.AuthenticatedGroupAdder`).
 */
import { X509Certificate } from "node:crypto";
import type { TLSSocket, DetailedPeerCertificate } from "node:tls";
import { CoalescingCache } from "../../cache/coalescing.ts";
import { ANONYMOUS, type Caller } from "../../identity.ts";
import { MIN_RETRY_AFTER_SECONDS, serviceUnavailable, StatusError } from "../../k8s/status.ts";
import type { AuthenticationConfig, AuthenticationConfigSource } from "./authn-config.ts";
import { digestKey } from "../cache-key.ts";
import type { CertPool } from "./client-cert-checks.ts";
import { subjectOf, thumbprint, verifyClientCertificate } from "./client-cert.ts";

/** `user.CredentialIDKey` (apiserver `pkg/authentication/user/user.go`). */
export const CREDENTIAL_ID_KEY = "authentication.kubernetes.io/credential-id";
/** How long TokenReview answers (both kinds) are re-used, ms (apiserver default `--authentication-token-webhook-cache-ttl` for delegated authn: 10 s). */
export const TOKEN_CACHE_TTL_MS = 10_000;
/** Deadline of one TokenReview (and of the coalesced cache load waiting for it), ms: the agreed budget of an HPA read. */
export const TOKEN_REVIEW_TIMEOUT_MS = 2_000;
/** Bounds of the TokenReview cache: entries, bytes (an entry is the token hash and the user info, ~0.5–2 KB). */
export const TOKEN_CACHE_BOUNDS = { maxEntries: 10_000, maxBytes: 8 * 1024 * 1024 } as const;
/**
 * How long a connection's certificate verification is re-used, ms. The result
 * is kept in a WeakMap keyed by the TLS socket: it goes with the connection,
 * so it is bounded by the connections the server holds, one small entry each.
 */
const CERT_RESULT_TTL_MS = 60_000;

/** Which step authenticated the request. */
export type AuthenticationMethod = "front-proxy" | "x509" | "token" | "anonymous";

/** The outcome of authentication. */
export interface Authenticated {
  caller: Caller;
  method: AuthenticationMethod;
}

/** What a TokenReview answered (`authentication.k8s.io/v1` `TokenReviewStatus`). */
export interface TokenReviewResult {
  authenticated: boolean;
  user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  error?: string;
}

/**
 * Sends a TokenReview; throws when the API cannot be reached or answers an
 * error, and when `signal` aborts (the request is then cancelled).
 */
export type TokenReviewer = (token: string, signal?: AbortSignal) => Promise<TokenReviewResult>;

/** The request as authentication sees it. */
export interface ConnectionRequest {
  /** the TLS socket (client certificate); undefined on a plain connection */
  socket?: TLSSocket;
  /** Node's `rawHeaders`: `[name, value, name, value, …]`, repeated headers kept apart */
  rawHeaders: readonly string[];
}

/** Options of {@link Authenticator}. */
export interface AuthenticatorOptions {
  config: AuthenticationConfigSource;
  /** undefined turns bearer tokens off */
  tokenReview?: TokenReviewer;
  now?: () => number;
  /** how long TokenReview answers are re-used, ms (default {@link TOKEN_CACHE_TTL_MS}) */
  tokenCacheTtlMs?: number;
  /** deadline of a TokenReview, ms (default {@link TOKEN_REVIEW_TIMEOUT_MS}) */
  tokenReviewTimeoutMs?: number;
}

interface CertResult {
  generation: number;
  at: number;
  frontProxy: { ok: true; cn: string } | { ok: false; error: string } | undefined;
  clientCert: { ok: true; caller: Caller | undefined } | { ok: false; error: string } | undefined;
}

/** The delegated authentication chain. One instance per proxy. */
export class Authenticator {
  readonly #config: AuthenticationConfigSource;
  readonly #tokenReview: TokenReviewer | undefined;
  readonly #now: () => number;
  readonly #tokens: CoalescingCache<TokenReviewResult>;
  readonly #tokenCacheTtlMs: number;
  readonly #certs = new WeakMap<TLSSocket, CertResult>();
  /** counters for /metrics and tests */
  readonly stats = { tokenReviews: 0, tokenCacheHits: 0, certificateVerifications: 0 };

  constructor(options: AuthenticatorOptions) {
    this.#config = options.config;
    this.#tokenReview = options.tokenReview;
    this.#now = options.now ?? Date.now;
    this.#tokenCacheTtlMs = options.tokenCacheTtlMs ?? TOKEN_CACHE_TTL_MS;
    this.#tokens = new CoalescingCache({ ...TOKEN_CACHE_BOUNDS, loadTimeoutMs: options.tokenReviewTimeoutMs ?? TOKEN_REVIEW_TIMEOUT_MS, now: this.#now });
  }

  /** Entries and bytes held by the TokenReview cache, and its bounds. */
  tokenCacheStats(): { entries: number; bytes: number; maxEntries: number; maxBytes: number } {
    return { entries: this.#tokens.size, bytes: this.#tokens.bytes, ...TOKEN_CACHE_BOUNDS };
  }

  /**
   * Authenticate one request.
   *
   * @param signal the request's signal: when the client goes away the wait
   *   for a TokenReview ends (cancelled if nobody else waits for it)
   * @throws StatusError 401 when a presented credential fails (a token that
   *   could not be reviewed, within the deadline or at all, included) and
   *   nothing else authenticates; 503 before the authentication ConfigMap was read
   */
  async authenticate(request: ConnectionRequest, signal?: AbortSignal): Promise<Authenticated> {
    const config = this.#config.current();
    if (config === undefined) {
      throw serviceUnavailable("the proxy has not loaded kube-system/extension-apiserver-authentication yet", MIN_RETRY_AFTER_SECONDS);
    }
    const errors: string[] = [];
    const headers = headerMap(request.rawHeaders);
    const certs = await this.#verifyCertificates(request.socket, config);

    // 1. front proxy
    if (certs?.frontProxy !== undefined && config.requestHeader !== undefined) {
      if (!certs.frontProxy.ok) errors.push(`front-proxy: ${certs.frontProxy.error}`);
      else {
        const caller = identityFromHeaders(headers, config.requestHeader);
        if (caller !== undefined) return { caller: withAuthenticatedGroup(caller), method: "front-proxy" };
      }
    }
    // 2. client certificate
    if (certs?.clientCert !== undefined) {
      if (!certs.clientCert.ok) errors.push(`client certificate: ${certs.clientCert.error}`);
      else if (certs.clientCert.caller !== undefined) return { caller: withAuthenticatedGroup(certs.clientCert.caller), method: "x509" };
    }
    // 3. bearer token
    const token = bearerToken(headers.get("authorization")?.[0]);
    if (token !== undefined && this.#tokenReview !== undefined) {
      try {
        const result = await this.#reviewToken(token, signal);
        const user = result.user;
        if (result.authenticated && user?.username) {
          const caller: Caller = {
            user: user.username,
            ...(user.uid ? { uid: user.uid } : {}),
            groups: [...(user.groups ?? [])],
            extra: Object.fromEntries(Object.entries(user.extra ?? {}).map(([k, v]) => [k, [...v]])),
          };
          return { caller: withAuthenticatedGroup(caller), method: "token" };
        }
        errors.push(`token: invalid bearer token${result.error ? `: ${result.error}` : ""}`);
      } catch (err) {
        errors.push(`token: TokenReview failed: ${(err as Error).message}`);
      }
    }
    if (errors.length > 0) {
      // The Status says only "Unauthorized", as apiserver's; the reasons go to the log (error.cause).
      throw new StatusError(401, "Unauthorized", undefined, { cause: new Error(errors.join("; ")) });
    }
    return { caller: ANONYMOUS, method: "anonymous" };
  }

  async #reviewToken(token: string, signal: AbortSignal | undefined): Promise<TokenReviewResult> {
    const key = digestKey(token);
    const { value: pending, outcome } = this.#tokens.get(
      key,
      this.#tokenCacheTtlMs,
      async (loadSignal) => {
        this.stats.tokenReviews++;
        return compactReview(await this.#tokenReview!(token, loadSignal));
      },
      signal ? { signal } : {},
    );
    const result = await pending;
    if (outcome === "hit" || outcome === "coalesced") this.stats.tokenCacheHits++;
    return result;
  }

  /** Verify the connection's client certificate against both pools, once per connection and configuration. */
  async #verifyCertificates(socket: TLSSocket | undefined, config: AuthenticationConfig): Promise<CertResult | undefined> {
    if (socket === undefined || typeof socket.getPeerCertificate !== "function") return undefined;
    const now = this.#now();
    const cached = this.#certs.get(socket);
    if (cached !== undefined && cached.generation === config.generation && now - cached.at < CERT_RESULT_TTL_MS) return cached;
    const peer = socket.getPeerCertificate(true);
    if (peer === null || peer.raw === undefined || Object.keys(peer).length === 0) return undefined;
    this.stats.certificateVerifications++;
    const leaf = new X509Certificate(peer.raw);
    const intermediates = peerIntermediates(peer);
    const result: CertResult = { generation: config.generation, at: now, frontProxy: undefined, clientCert: undefined };
    if (config.requestHeader !== undefined) {
      const rh = config.requestHeader;
      result.frontProxy = await verifyAgainst(leaf, intermediates, rh.pool, now).then(
        ({ commonName }) =>
          rh.allowedNames.length > 0 && !rh.allowedNames.includes(commonName)
            ? { ok: false as const, error: `x509: subject with cn=${commonName} is not in the allowed list` }
            : { ok: true as const, cn: commonName },
        (err: Error) => ({ ok: false as const, error: err.message }),
      );
    }
    if (config.clientCA !== undefined) {
      result.clientCert = await verifyAgainst(leaf, intermediates, config.clientCA, now).then(
        async ({ commonName, organizations }) => {
          if (commonName === "") return { ok: true as const, caller: undefined };
          const fingerprint = thumbprint(leaf);
          const caller: Caller = { user: commonName, groups: organizations, extra: { [CREDENTIAL_ID_KEY]: [`X509SHA256=${fingerprint}`] } };
          return { ok: true as const, caller };
        },
        (err: Error) => ({ ok: false as const, error: err.message }),
      );
    }
    this.#certs.set(socket, result);
    return result;
  }
}

async function verifyAgainst(
  leaf: X509Certificate,
  intermediates: X509Certificate[],
  pool: CertPool,
  nowMs: number,
): Promise<{ commonName: string; organizations: string[] }> {
  await verifyClientCertificate(leaf, intermediates, pool, new Date(nowMs));
  return subjectOf(leaf);
}

/** The certificates the client sent after its leaf (Node links them through `issuerCertificate`). */
function peerIntermediates(peer: DetailedPeerCertificate): X509Certificate[] {
  const out: X509Certificate[] = [];
  let current = peer;
  for (let i = 0; i < 10; i++) {
    const next = current.issuerCertificate;
    if (next === undefined || next === null || next === current || next.raw === undefined || next.raw.equals(current.raw)) break;
    out.push(new X509Certificate(next.raw));
    current = next;
  }
  return out;
}

/** Lowercased header name → every value in arrival order (repeated headers kept apart). */
export function headerMap(rawHeaders: readonly string[]): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const list = map.get(name);
    if (list === undefined) map.set(name, [rawHeaders[i + 1]!]);
    else list.push(rawHeaders[i + 1]!);
  }
  return map;
}

/**
 * The front proxy's asserted identity (`headerrequest.requestHeaderAuthRequestHandler`);
 * undefined when no username header has a value.
 */
export function identityFromHeaders(
  headers: ReadonlyMap<string, readonly string[]>,
  rh: Pick<AuthenticationConfig["requestHeader"] & object, "usernameHeaders" | "uidHeaders" | "groupHeaders" | "extraPrefixes">,
): Caller | undefined {
  const first = (names: readonly string[]) => {
    for (const name of names) {
      const value = headers.get(name.toLowerCase())?.[0];
      if (value !== undefined && value !== "") return value;
    }
    return "";
  };
  const user = first(rh.usernameHeaders);
  if (user === "") return undefined;
  const uid = first(rh.uidHeaders);
  const groups: string[] = [];
  for (const name of rh.groupHeaders) for (const v of headers.get(name.toLowerCase()) ?? []) if (v !== "") groups.push(v);
  // A Map, not an object: header-chosen keys such as "constructor" or "__proto__" are data here.
  const extra = new Map<string, string[]>();
  for (const prefix of rh.extraPrefixes) {
    const p = prefix.toLowerCase();
    for (const [name, values] of headers) {
      if (!name.startsWith(p)) continue;
      const key = pathUnescape(name.slice(p.length));
      extra.set(key, [...(extra.get(key) ?? []), ...values]);
    }
  }
  return { user, ...(uid !== "" ? { uid } : {}), groups, extra: Object.fromEntries(extra) };
}

/** Go's `url.PathUnescape`, keeping the raw text when it is malformed (`unescapeExtraKey`). */
function pathUnescape(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** `Authorization: Bearer <token>` (apiserver `request/bearertoken`); undefined when absent or not bearer. */
function bearerToken(header: string | undefined): string | undefined {
  const auth = header?.trim();
  if (!auth) return undefined;
  const parts = auth.split(" ");
  if (parts.length < 2 || parts[0]!.toLowerCase() !== "bearer" || parts[1] === "") return undefined;
  return parts[1];
}

/** The parts of a TokenReview answer authentication uses, with the error text cut to 1 KiB (it only goes to the log). */
function compactReview(result: TokenReviewResult): TokenReviewResult {
  return {
    authenticated: result.authenticated === true,
    ...(result.user ? { user: result.user } : {}),
    ...(result.error ? { error: result.error.slice(0, 1024) } : {}),
  };
}

/** `group.AuthenticatedGroupAdder`. */
function withAuthenticatedGroup(caller: Caller): Caller {
  if (caller.user === ANONYMOUS.user) return caller;
  if (caller.groups.includes("system:authenticated") || caller.groups.includes("system:unauthenticated")) return caller;
  return { ...caller, groups: [...caller.groups, "system:authenticated"] };
}
