/**
 * The one parser of request paths: a raw (still percent-encoded) request
 * target decoded ONCE into typed parts, which every layer then uses — the
 * SubjectAccessReview's attributes (shared/proxy/request-info.ts), the
 * proxy's cluster policy layer, its cache key, the path it forwards (rebuilt
 * from the parts, never copied from the URL), its request log, and the
 * bridge's values route (shared/app.ts). Before this parser each layer
 * decoded on its own and a tenant could make them disagree (issue 23:
 * `…/namespaces/team%2Db/…` authorized as `team-b` by RBAC, matched as
 * `team%2Db` by the cluster policy layer).
 *
 * The parts have the shape of apiserver's `RequestInfo`
 * (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`,
 * `RequestInfoFactory.NewRequestInfo` with `APIPrefixes: {api, apis}`,
 * `GrouplessAPIPrefixes: {api}`): API prefix, group, version, namespace,
 * resource, name, subresource — for any group and version; the External
 * Metrics values route ({@link externalMetricsRead}) is one shape read from
 * them, the Custom Metrics routes ({@link customMetricsRead}) others.
 *
 * How a path is read: the RAW path is split on `/` first, then each segment
 * is percent-decoded (so an encoded `/` can never make a segment boundary).
 * Refused with a 400 Status (`metav1.Status` BadRequest):
 *
 * - a non-canonical percent-encoding: an escape of an unreserved character
 *   (RFC 3986 §2.3: `A-Z a-z 0-9 - . _ ~`, e.g. `%2D`, `%74`, `%2E`), which
 *   no encoder produces and which only serves to spell one name two ways;
 *   an encoded `/` (`%2F`); lowercase hex digits (`%2a`: RFC 3986 §6.2.2.1
 *   normalizes to uppercase, which Go, client-go, browsers and
 *   `encodeURIComponent` all write); an invalid escape (`%zz`, `%4`) or bytes
 *   that are not UTF-8;
 * - a character that must be percent-encoded written raw (outside printable
 *   ASCII, or `#`, `\`);
 * - an empty segment (`//`; one trailing `/` is allowed and recorded, as
 *   apiserver's `splitPath` trims it), a `.` or `..` segment (also `%2E%2E`);
 * - a decoded segment that is not a valid path segment name (apimachinery
 *   `pkg/api/validation/path/name.go` `IsValidPathSegmentName`: not `.` or
 *   `..`, no `/` or `%`) or holds a control character;
 * - a namespace that is not a DNS-1123 label (apimachinery
 *   `pkg/util/validation` `IsDNS1123Label`: at most 63 characters,
 *   `[a-z0-9]([-a-z0-9]*[a-z0-9])?`);
 * - `watch`/`proxy` with nothing after it (as `NewRequestInfo` refuses).
 *
 * Accepted: every other escape (a reserved or other character, UTF-8 bytes),
 * and every printable ASCII character written as is. So both spellings real
 * clients send are read alike: Go's `url.PathEscape` (what client-go uses for
 * a path segment; it escapes `*` as `%2A`, `|` as `%7C`, `,` and `;`), Go's
 * `URL.EscapedPath` (client-go's request URL and the kube-aggregator's
 * forwarded path: `,` and `;` left as is) and the unescaped form (curl). The
 * HPA's custom metrics client sends the `*` object name as `%2A`
 * (`…/namespaces/default/pods/%2A/rps`), its external metrics client the
 * lowercased metric name through `URL.EscapedPath`.
 *
 * A shape the path does not have (a trailing segment after the metric, a
 * missing one) is not refused here: the route answers 404 NotFound, as
 * apiserver does for a path no route serves (its go-restful container's
 * 404), after authentication and authorization.
 */
import { CUSTOM_GROUP, isCustomVersion, type CustomVersion } from "./custom-types.ts";
import { badRequest, notFound, type StatusError } from "./status.ts";
import { GROUP, VERSION } from "./types.ts";

/** The path of a request, decoded once into typed parts (see the module doc). */
export interface RequestPath {
  /** the path exactly as received, still percent-encoded (for logs) */
  readonly raw: string;
  /** the decoded path: `/` + segments joined with `/` (+ `/` when {@link trailingSlash}); Go's `URL.Path` */
  readonly path: string;
  /** the decoded segments, none empty, none `.`/`..`, none holding `/`, `%` or a control character */
  readonly segments: readonly string[];
  /** whether the path ended with one `/` (apiserver's `splitPath` trims it) */
  readonly trailingSlash: boolean;
  /** the canonical spelling: each segment escaped by {@link escapePathSegment} (Go's `url.PathEscape`) */
  readonly canonical: string;
  /** the `RequestInfo` parts of the path (see {@link ResourceParts}) */
  readonly resource: ResourceParts;
}

/**
 * The parts apiserver's `RequestInfoFactory.NewRequestInfo` reads from a
 * path's segments, before the verb (which also depends on the method and the
 * query: shared/proxy/request-info.ts). Empty strings for absent parts, as in
 * Go.
 */
export interface ResourceParts {
  /** `/api…` or `/apis…` with enough segments: a resource request */
  readonly isResourceRequest: boolean;
  /** `api` or `apis` (set even when too short to be a resource request, as in Go) */
  readonly apiPrefix: string;
  readonly apiGroup: string;
  readonly apiVersion: string;
  /** `watch` or `proxy` when the path names the verb (`/apis/g/v/watch/…`), else empty */
  readonly verbPrefix: string;
  readonly namespace: string;
  /** the resource; for the External Metrics API the metric name */
  readonly resource: string;
  readonly name: string;
  readonly subresource: string;
  /** the segments after the namespace (or after the version and verb), as `RequestInfo.Parts` */
  readonly parts: readonly string[];
}

/** A request target (path and query) as received, parsed. */
export interface RequestTarget {
  /** the path, decoded once */
  readonly path: RequestPath;
  /** the query as received without its `?` (empty when none) */
  readonly rawQuery: string;
  /** the query parameters (WHATWG form decoding: what every layer reads) */
  readonly query: URLSearchParams;
  /** the query rebuilt by {@link canonicalQuery} (`?` first; empty when none): what the proxy forwards */
  readonly canonicalQuery: string;
}

const API_PREFIXES = new Set(["api", "apis"]);
const GROUPLESS_API_PREFIXES = new Set(["api"]);
const SPECIAL_VERBS = new Set(["proxy", "watch"]);
const SPECIAL_VERBS_NO_SUBRESOURCES = new Set(["proxy"]);
const NAMESPACE_SUBRESOURCES = new Set(["status", "finalize"]);
/** `validation.IsDNS1123Label` (apimachinery `pkg/util/validation/validation.go`): the pattern, at most 63 characters. */
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_LABEL_MAX_LENGTH = 63;
/**
 * A raw path whose every segment is non-empty and made only of characters
 * Go's `url.PathEscape` writes as is (so it is its own decoded and canonical
 * spelling), with at most one trailing `/`: the HPA's usual path.
 */
const CANONICAL_PLAIN = /^(?:\/[A-Za-z0-9\-._~$&+:=@]+)+\/?$/;
/** A raw segment that needs no decoding and no character check: printable ASCII without `%`, `#` or `\`. */
const PLAIN_SEGMENT = /^[!-"$&-[\]-~]+$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const HEX = "0123456789ABCDEF";
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true });
const UTF8 = new TextEncoder();

/**
 * Whether a decoded URL path is `/apis` or under it: the API paths, which
 * need a caller (an authenticated identity or, on a bridge, a signature), as
 * opposed to the probes (`/healthz`, `/livez`, `/readyz`) and `/metrics`.
 * The one test of it (the bridge's app and its Worker entry use it).
 */
export function isApisPath(path: string): boolean {
  return path === "/apis" || path.startsWith("/apis/");
}

/**
 * `validation.IsDNS1123Label`: at most 63 characters of `[a-z0-9-]`,
 * starting and ending with an alphanumeric.
 */
export function isDNS1123Label(value: string): boolean {
  return value.length <= DNS1123_LABEL_MAX_LENGTH && DNS1123_LABEL.test(value);
}

/**
 * `path.IsValidPathSegmentName` (apimachinery
 * `pkg/api/validation/path/name.go`): not `.` or `..`, no `/` or `%`.
 */
export function isValidPathSegmentName(name: string): boolean {
  return name !== "." && name !== ".." && !name.includes("/") && !name.includes("%");
}

/** Whether the byte `b` is an RFC 3986 §2.3 unreserved character (`A-Z a-z 0-9 - . _ ~`). */
function isUnreserved(b: number): boolean {
  return (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2d || b === 0x2e || b === 0x5f || b === 0x7e;
}

/**
 * Go's `url.PathEscape` (net/url `escape(s, encodePathSegment)`): the UTF-8
 * bytes of `segment`, unreserved characters and `$ & + : = @` as they are,
 * every other byte as `%XX` with uppercase hex. What client-go writes for a
 * path segment, and the spelling the proxy forwards.
 */
export function escapePathSegment(segment: string): string {
  if (/^[A-Za-z0-9\-._~$&+:=@]*$/.test(segment)) return segment;
  let out = "";
  for (const b of UTF8.encode(segment)) {
    if (isUnreserved(b) || b === 0x24 || b === 0x26 || b === 0x2b || b === 0x3a || b === 0x3d || b === 0x40) out += String.fromCharCode(b);
    else out += `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

/**
 * Go's `url.QueryEscape` (net/url `escape(s, encodeQueryComponent)`):
 * unreserved characters as they are, a space as `+`, every other UTF-8 byte
 * as `%XX` with uppercase hex. What client-go's `url.Values.Encode` writes
 * (`labelSelector=queue%3Dci_jobs`).
 */
export function escapeQueryComponent(text: string): string {
  if (/^[A-Za-z0-9\-._~]*$/.test(text)) return text;
  if (!/[\ud800-\udfff]/.test(text)) {
    // encodeURIComponent escapes the same bytes (uppercase hex) except `!'()*`, and a space as %20
    return encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`).replaceAll("%20", "+");
  }
  let out = "";
  for (const b of UTF8.encode(text)) {
    if (isUnreserved(b)) out += String.fromCharCode(b);
    else if (b === 0x20) out += "+";
    else out += `%${HEX[b >> 4]}${HEX[b & 15]}`;
  }
  return out;
}

/**
 * The canonical query: every parameter in the order received, name and
 * value as Go's `url.QueryEscape` writes them, joined with `&`; `?` first
 * unless empty. For the HPA's `?labelSelector=queue%3Dci_jobs` it is the
 * query as sent.
 */
export function canonicalQuery(query: URLSearchParams): string {
  let out = "";
  for (const [name, value] of query) out += `${out === "" ? "?" : "&"}${escapeQueryComponent(name)}=${escapeQueryComponent(value)}`;
  return out;
}

/** The canonical path of decoded `segments` ({@link escapePathSegment} each), with a trailing `/` when asked. */
export function joinPath(segments: readonly string[], trailingSlash = false): string {
  let out = "";
  for (const s of segments) out += `/${escapePathSegment(s)}`;
  return out === "" ? "/" : trailingSlash ? `${out}/` : out;
}

/**
 * Decode one raw segment (see the module doc for what is refused).
 *
 * @param raw the segment as received, percent-encoded
 * @param where the whole raw path, for messages
 * @param role what the segment is (`metric name`, `namespace`, …), asked only for a message
 * @throws StatusError 400
 */
function decodeSegment(raw: string, where: string, role: () => string): string {
  const refused = (why: string) => refusedPath(where, `${role()} ${JSON.stringify(raw)}: ${why}`);
  let decoded: string;
  if (PLAIN_SEGMENT.test(raw)) decoded = raw;
  else {
    const bytes: number[] = [];
    for (let i = 0; i < raw.length; i++) {
      const c = raw.charCodeAt(i);
      if (c === 0x25) {
        const escape = raw.slice(i, i + 3);
        const hex = raw.slice(i + 1, i + 3);
        if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw refused(`${JSON.stringify(escape)} is not a percent-encoded byte`);
        if (hex !== hex.toUpperCase()) throw refused(`${JSON.stringify(escape)} is written with lowercase hex digits; write ${JSON.stringify(escape.toUpperCase())} (RFC 3986 §6.2.2.1)`);
        const b = parseInt(hex, 16);
        if (b === 0x2f) throw refused(`${JSON.stringify(escape)} is an encoded "/"; a segment may not contain "/"`);
        if (isUnreserved(b)) throw refused(`${JSON.stringify(escape)} encodes ${JSON.stringify(String.fromCharCode(b))}, which must be written as is (RFC 3986 §2.3)`);
        bytes.push(b);
        i += 2;
      } else if (c < 0x21 || c > 0x7e || c === 0x23 || c === 0x5c) {
        throw refused(`the character ${JSON.stringify(raw[i])} must be percent-encoded`);
      } else bytes.push(c);
    }
    try {
      decoded = STRICT_UTF8.decode(Uint8Array.from(bytes));
    } catch {
      throw refused("its bytes are not UTF-8");
    }
  }
  if (decoded === "." || decoded === "..") throw refused(`a path segment may not be ${JSON.stringify(decoded)}`);
  if (decoded.includes("%")) throw refused(`it decodes to ${JSON.stringify(decoded)}; a path segment name may not contain "%"`);
  if (CONTROL.test(decoded)) throw refused("it holds a control character");
  return decoded;
}

/** The 400 for a path the parser refuses. */
function refusedPath(where: string, why: string): StatusError {
  return badRequest(`the request path ${JSON.stringify(where.length > 200 ? `${where.slice(0, 200)}…` : where)} is refused: ${why}`);
}

/**
 * Parse a raw request path (see the module doc).
 *
 * @param raw the path as received (`/apis/…`, percent-encoded, no query)
 * @throws StatusError 400 when it is refused (the message says why)
 */
export function parseRequestPath(raw: string): RequestPath {
  if (raw.charCodeAt(0) !== 0x2f) throw refusedPath(raw, 'a request path starts with "/"');
  const pieces = raw === "/" ? [] : raw.slice(1).split("/");
  let trailingSlash = false;
  if (pieces.length > 1 && pieces[pieces.length - 1] === "") {
    trailingSlash = true;
    pieces.pop();
  }
  let segments: string[];
  // Already canonical (every character one Go writes as is, no escape): the raw
  // segments are the decoded ones; only `.`/`..` are left to refuse.
  const plain = CANONICAL_PLAIN.test(raw);
  if (plain) {
    segments = pieces;
    for (let i = 0; i < segments.length; i++) {
      const s = segments[i]!;
      if (s === "." || s === "..") throw refusedPath(raw, `${segmentRole(pieces, i)} ${JSON.stringify(s)}: a path segment may not be ${JSON.stringify(s)}`);
    }
  } else {
    segments = [];
    for (const piece of pieces) {
      if (piece === "") throw refusedPath(raw, "an empty path segment (`//`)");
      const i = segments.length;
      segments.push(decodeSegment(piece, raw, () => segmentRole(pieces, i)));
    }
  }
  const resource = resolveResourceParts(segments, raw);
  if (resource.namespace !== "" && !isDNS1123Label(resource.namespace)) {
    throw badRequest(
      `namespace ${JSON.stringify(resource.namespace)} is not a valid namespace name: a DNS-1123 label (at most 63 characters of a-z, 0-9 and "-", starting and ending with a letter or digit)`,
    );
  }
  if (plain) return { raw, path: raw, segments, trailingSlash, canonical: raw, resource };
  const path = segments.length === 0 ? "/" : `/${segments.join("/")}${trailingSlash ? "/" : ""}`;
  return { raw, path, segments, trailingSlash, canonical: joinPath(segments, trailingSlash), resource };
}

/**
 * What segment `i` of `pieces` (raw segments) is, for a message: the
 * `RequestInfo` part it would fill — `namespace`, `metric name` (the
 * resource of the External Metrics API), `resource`, `name`,
 * `subresource` — else `path segment`.
 */
function segmentRole(pieces: readonly string[], i: number): string {
  const marker = "\u0000";
  try {
    const parts = resolveResourceParts(pieces.map((p, j) => (j === i ? marker : p)), "");
    if (parts.namespace === marker && parts.resource !== "namespaces") return "namespace";
    if (parts.resource === marker) return parts.apiGroup === GROUP ? "metric name" : "resource";
    if (parts.name === marker) return parts.resource === "namespaces" ? "namespace" : parts.apiGroup === CUSTOM_GROUP && parts.resource === "metrics" ? "metric name" : "name";
    if (parts.subresource === marker) return parts.apiGroup === CUSTOM_GROUP ? "metric name" : "subresource";
  } catch {
    // a path naming the verb and nothing else: no part to name
  }
  return "path segment";
}

/**
 * Parse a request target as received (`/path?query`; an absolute-form target
 * `https://host/path?query`, RFC 9112 §3.2.2, is read from its path).
 *
 * @throws StatusError 400 when the path is refused ({@link parseRequestPath})
 *   or the target holds a fragment (`#`, never part of a request target)
 */
export function parseRequestTarget(target: string): RequestTarget {
  let rest = target;
  if (!rest.startsWith("/")) {
    const scheme = /^https?:\/\/[^/?#]*/i.exec(rest);
    if (scheme === null) throw badRequest(`the request target ${JSON.stringify(target.slice(0, 200))} is not a path`);
    rest = rest.slice(scheme[0].length) || "/";
    if (!rest.startsWith("/")) rest = `/${rest}`;
  }
  if (rest.includes("#")) throw badRequest("a request target may not contain a fragment (#)");
  const q = rest.indexOf("?");
  const rawPath = q < 0 ? rest : rest.slice(0, q);
  const rawQuery = q < 0 ? "" : rest.slice(q + 1);
  return new Target(parseRequestPath(rawPath), rawQuery);
}

/** A {@link RequestTarget} whose query is parsed on first use (a read that needs no parameter never builds a URLSearchParams). */
class Target implements RequestTarget {
  readonly path: RequestPath;
  readonly rawQuery: string;
  #query: URLSearchParams | undefined;
  #canonical: string | undefined;
  constructor(path: RequestPath, rawQuery: string) {
    this.path = path;
    this.rawQuery = rawQuery;
  }
  get query(): URLSearchParams {
    return (this.#query ??= new URLSearchParams(this.rawQuery));
  }
  get canonicalQuery(): string {
    return (this.#canonical ??= this.rawQuery === "" ? "" : isCanonicalQuery(this.rawQuery) ? `?${this.rawQuery}` : canonicalQuery(this.query));
  }
}

/**
 * Whether a raw query is already what {@link canonicalQuery} would write:
 * `name=value` pairs joined by `&`, each made of unreserved characters, `+`
 * and uppercase `%XX` escapes of ASCII bytes that are not unreserved (the
 * HPA's `labelSelector=queue%3Dci_jobs`). Anything else (a raw `=` in a
 * value, a lowercase or needless escape, UTF-8 bytes, an empty pair) is
 * written again by {@link canonicalQuery}.
 */
function isCanonicalQuery(raw: string): boolean {
  let equals = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === 0x26) {
      if (equals !== 1 || raw.charCodeAt(i - 1) === 0x26 || i === 0) return false;
      equals = 0;
    } else if (c === 0x3d) {
      if (++equals > 1 || i === 0 || raw.charCodeAt(i - 1) === 0x26) return false;
    } else if (c === 0x25) {
      if (i + 2 >= raw.length) return false;
      const hi = HEX.indexOf(raw[i + 1]!);
      const lo = HEX.indexOf(raw[i + 2]!);
      if (hi < 0 || lo < 0 || hi > 7) return false;
      const b = hi * 16 + lo;
      if (isUnreserved(b) || b === 0x20) return false;
      i += 2;
    } else if (!(isUnreserved(c) || c === 0x2b)) return false;
  }
  return equals === 1;
}

/**
 * The `RequestInfo` parts of decoded path segments, as
 * `RequestInfoFactory.NewRequestInfo` computes them (apiserver
 * `pkg/endpoints/request/requestinfo.go`): shared by this parser and the
 * apiserver port (shared/proxy/request-info.ts `requestInfo` of a URL).
 *
 * @param segments the decoded path split on `/` (apiserver's `splitPath`)
 * @param where the path for the error message
 * @throws StatusError 400 when the path names the verb `watch` or `proxy`
 *   and nothing after it ("unable to determine kind and namespace")
 */
export function resolveResourceParts(segments: readonly string[], where: string): ResourceParts {
  const out = {
    isResourceRequest: false,
    apiPrefix: "",
    apiGroup: "",
    apiVersion: "",
    verbPrefix: "",
    namespace: "",
    resource: "",
    name: "",
    subresource: "",
    parts: [] as readonly string[],
  };
  let parts = segments;
  if (parts.length < 3 || !API_PREFIXES.has(parts[0]!)) return out;
  out.apiPrefix = parts[0]!;
  parts = parts.slice(1);
  if (!GROUPLESS_API_PREFIXES.has(out.apiPrefix)) {
    if (parts.length < 3) return out;
    out.apiGroup = parts[0]!;
    parts = parts.slice(1);
  }
  out.isResourceRequest = true;
  out.apiVersion = parts[0]!;
  parts = parts.slice(1);
  if (SPECIAL_VERBS.has(parts[0]!)) {
    if (parts.length < 2) throw badRequest(`unable to determine kind and namespace from url ${where}`);
    out.verbPrefix = parts[0]!;
    parts = parts.slice(1);
  }
  if (parts[0] === "namespaces" && parts.length > 1) {
    out.namespace = parts[1]!;
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2]!)) parts = parts.slice(2);
  }
  out.parts = parts;
  if (parts.length >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.has(out.verbPrefix)) out.subresource = parts[2]!;
  if (parts.length >= 2) out.name = parts[1]!;
  if (parts.length >= 1) out.resource = parts[0]!;
  return out;
}

/** A values read of the External Metrics API: its namespace and metric name, decoded and checked. */
export interface ExternalMetricsRead {
  namespace: string;
  /** the metric name as requested (the `resource` part), decoded; not yet lowercased (shared/metric-name.ts `metricName`) */
  metric: string;
}

/**
 * The External Metrics values route read from a parsed path: exactly
 * `/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}`
 * (no trailing `/`, no further segment).
 *
 * @returns the namespace and metric name, or undefined for another path
 *   under the group version (the caller answers 404: {@link notFoundPath})
 */
export function externalMetricsRead(path: RequestPath): ExternalMetricsRead | undefined {
  const s = path.segments;
  if (s.length !== 6 || path.trailingSlash || s[0] !== "apis" || s[1] !== GROUP || s[2] !== VERSION || s[3] !== "namespaces") return undefined;
  return { namespace: s[4]!, metric: s[5]! };
}

/**
 * The canonical path of an External Metrics values read (what the proxy
 * forwards): `/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}`,
 * each part escaped by {@link escapePathSegment}.
 */
export function externalMetricsPath(read: ExternalMetricsRead): string {
  return joinPath(["apis", GROUP, VERSION, "namespaces", read.namespace, read.metric]);
}

/** apiserver's 404 for a path no route serves (`the server could not find the requested resource`), naming the path as received. */
export function notFoundPath(method: string, path: RequestPath): StatusError {
  return notFound(`the server could not find the requested resource (${method} ${path.raw})`);
}

/**
 * A values read of the Custom Metrics API (`custom.metrics.k8s.io`), its
 * parts decoded and checked. The three shapes the Go client
 * (k8s.io/metrics `pkg/client/custom_metrics/versioned_client.go`) sends:
 *
 * - `object`: one object's metric, `…/namespaces/{ns}/{resource}/{name}/{metric}`,
 *   or for a cluster-scoped object `…/{resource}/{name}/{metric}` (`namespace` "");
 * - `selected`: every object matching the query's `labelSelector`, the name
 *   `*` (`GetForObjects`; the HPA's Pods metrics: `…/namespaces/{ns}/pods/%2A/{metric}`,
 *   `*` sent as `%2A`, read alike written raw);
 * - `namespace`: a metric describing a namespace, the `metrics`
 *   pseudo-resource `…/namespaces/{ns}/metrics/{metric}`; `resource` is
 *   then `namespaces` and `name` the namespace (the described object).
 *
 * apiserver's RequestInfo of the same path (what the SubjectAccessReview
 * carries) is {@link RequestPath.resource}: resource, name `*` or the
 * object's, subresource the metric; for `namespace` reads resource
 * `metrics` and name the metric.
 */
export interface CustomMetricsRead {
  readonly version: CustomVersion;
  readonly shape: "object" | "selected" | "namespace";
  /** the described objects' namespace; "" for cluster-scoped objects */
  readonly namespace: string;
  /** the group resource as the client writes it: plural, lowercase, `.{group}` outside the core group (`pods`, `deployments.apps`); `namespaces` for a `namespace` read */
  readonly resource: string;
  /** the object's name; `*` for a `selected` read; the namespace for a `namespace` read */
  readonly name: string;
  /** the metric name as requested, decoded */
  readonly metric: string;
}

/** A group resource as client-go writes it (lowercased): a plural of DNS-label characters, then an optional `.{group}` (DNS subdomain characters). */
const GROUP_RESOURCE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?)?$/;

/** Whether `text` is a group resource as client-go writes it (`pods`, `deployments.apps`): the custom paths' resource, and a metric rule's `describes.resource`. */
export function isGroupResource(text: string): boolean {
  return GROUP_RESOURCE.test(text);
}

/**
 * The Custom Metrics values route read from a parsed path (see
 * {@link CustomMetricsRead} for the shapes); no trailing `/`, no other
 * segment count. A resource `namespaces` is read only as the `metrics`
 * pseudo-resource's shape (the Go client sends namespace metrics no other
 * way).
 *
 * @returns the parts, or undefined for another path (the caller answers
 *   404: {@link notFoundPath})
 * @throws StatusError 400 when the shape matches but the metric name holds
 *   `?` (the parser already refuses `/`, `%`, `.`, `..` and control
 *   characters in every segment), or the resource is not a lowercase group
 *   resource
 */
export function customMetricsRead(path: RequestPath): CustomMetricsRead | undefined {
  const s = path.segments;
  if (path.trailingSlash || s[0] !== "apis" || s[1] !== CUSTOM_GROUP || s.length < 6) return undefined;
  const version = s[2]!;
  if (!isCustomVersion(version)) return undefined;
  let read: CustomMetricsRead;
  if (s[3] === "namespaces" && s.length === 7 && s[5] === "metrics") {
    read = { version, shape: "namespace", namespace: s[4]!, resource: "namespaces", name: s[4]!, metric: s[6]! };
  } else if (s[3] === "namespaces" && s.length === 8 && s[5] !== "namespaces") {
    read = { version, shape: s[6] === "*" ? "selected" : "object", namespace: s[4]!, resource: s[5]!, name: s[6]!, metric: s[7]! };
  } else if (s[3] !== "namespaces" && s.length === 6) {
    read = { version, shape: s[4] === "*" ? "selected" : "object", namespace: "", resource: s[3]!, name: s[4]!, metric: s[5]! };
  } else return undefined;
  if (read.metric.includes("?")) throw refusedPath(path.raw, `metric name ${JSON.stringify(read.metric)}: a custom metric name may not contain "?"`);
  if (!GROUP_RESOURCE.test(read.resource)) throw refusedPath(path.raw, `resource ${JSON.stringify(read.resource)}: not a group resource (lowercase plural, then an optional ".group")`);
  return read;
}

/**
 * The canonical path of a Custom Metrics values read (what the proxy
 * forwards), each part escaped by {@link escapePathSegment} (`*` as `%2A`,
 * as the Go client sends it).
 */
export function customMetricsPath(read: CustomMetricsRead): string {
  const base = ["apis", CUSTOM_GROUP, read.version];
  if (read.shape === "namespace") return joinPath([...base, "namespaces", read.namespace, "metrics", read.metric]);
  if (read.namespace === "") return joinPath([...base, read.resource, read.name, read.metric]);
  return joinPath([...base, "namespaces", read.namespace, read.resource, read.name, read.metric]);
}
