/**
 * The authorization attributes kube-apiserver computes for a request, ported
 * from apiserver `pkg/endpoints/request/requestinfo.go`
 * (`RequestInfoFactory.NewRequestInfo`, with `APIPrefixes: {api, apis}`,
 * `GrouplessAPIPrefixes: {api}`) and `pkg/endpoints/filters/authorization.go`
 * (`GetAuthorizerAttributes`: label and field selectors parsed into
 * requirements).
 *
 * For the External Metrics API this gives:
 * - `GET /apis/external.metrics.k8s.io/v1beta1/namespaces/ns/metric` →
 *   resource request, verb `list` (a collection: no name), group
 *   `external.metrics.k8s.io`, version `v1beta1`, resource `metric`,
 *   namespace `ns`, and the `labelSelector` requirements;
 * - `GET /apis/external.metrics.k8s.io/v1beta1` (and `/apis`, `/metrics`, …)
 *   → non-resource request, verb `get`, the path.
 */
import { EVERYTHING, MAX_SELECTOR_LENGTH, parseSelector, type Requirement, type Selector } from "../k8s/selector.ts";
import { isValidPathSegmentName, resolveResourceParts, type RequestTarget, type ResourceParts } from "../k8s/request-path.ts";
import { badRequest } from "../k8s/status.ts";

/** `request.RequestInfo` plus the parsed selectors of `authorizer.AttributesRecord`. */
export interface RequestInfo {
  isResourceRequest: boolean;
  /** the percent-decoded URL path (Go's `req.URL.Path`) */
  path: string;
  verb: string;
  apiPrefix: string;
  apiGroup: string;
  apiVersion: string;
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
  parts: string[];
  /** label selector requirements (empty when absent or unparseable) */
  labelRequirements: readonly Requirement[];
  /**
   * The request's `labelSelector`, parsed once here for every layer that
   * reads it (the authorizer's review, the proxy's cluster policy layer:
   * policy/policies.ts): set for a verb that takes selectors (`list`, `watch`,
   * `deletecollection`) whose query holds at most one `labelSelector` that
   * parses ({@link EVERYTHING} when absent or empty); undefined otherwise
   * (several, unparseable, or a verb without selectors), and the layer that
   * needs it then reads the URL itself. Frozen: shared between requests.
   */
  labelSelector: Selector | undefined;
  /** field selector requirements (empty when absent or unparseable) */
  fieldRequirements: readonly FieldRequirement[];
}

/** One `fields.Requirement` (`pkg/fields/requirements.go`). */
export interface FieldRequirement {
  field: string;
  operator: "=" | "!=";
  value: string;
}

const VERBS_WITH_SELECTORS = new Set(["list", "watch", "deletecollection"]);

/**
 * Compute the request info of `method` + a request target.
 *
 * - Given a {@link RequestTarget} (shared/k8s/request-path.ts
 *   `parseRequestTarget`: the path decoded once, what the proxy uses), the
 *   attributes are that target's parts: the SubjectAccessReview then names
 *   exactly the namespace and resource every later layer uses.
 * - Given a `URL`, this is the plain apiserver port (checked against
 *   k8s.io/apiserver by test/proxy/proxy.oracle.test.ts): the path decoded as Go's
 *   `req.URL.Path`, then split.
 *
 * Both read the parts with the same `RequestInfoFactory` logic
 * (request-path.ts `resolveResourceParts`).
 *
 * @throws StatusError 400 when the path is not valid percent-encoding (Go's
 *   server refuses such a URL before any handler), or names the verb
 *   `watch`/`proxy` and nothing after it
 */
export function requestInfo(method: string, url: URL | RequestTarget): RequestInfo {
  let path: string;
  let resource: ResourceParts;
  let query: URLSearchParams;
  if (url instanceof URL) {
    try {
      path = decodeURIComponent(url.pathname);
    } catch {
      throw badRequest(`the request path ${JSON.stringify(url.pathname)} is not valid percent-encoding`);
    }
    resource = resolveResourceParts(splitPath(path), url.pathname);
    query = url.searchParams;
  } else {
    path = url.path.path;
    resource = url.path.resource;
    query = url.query;
  }
  const info: RequestInfo = {
    isResourceRequest: resource.isResourceRequest,
    path,
    verb: method.toLowerCase(),
    apiPrefix: resource.apiPrefix,
    apiGroup: resource.apiGroup,
    apiVersion: resource.apiVersion,
    namespace: resource.namespace,
    resource: resource.resource,
    subresource: resource.subresource,
    name: resource.name,
    parts: [...resource.parts],
    labelRequirements: [],
    fieldRequirements: [],
    labelSelector: undefined,
  };
  if (!info.isResourceRequest) return info;
  const verbViaPathPrefix = resource.verbPrefix !== "";
  if (verbViaPathPrefix) info.verb = resource.verbPrefix;
  else info.verb = { POST: "create", GET: "get", HEAD: "get", PUT: "update", PATCH: "patch", DELETE: "delete" }[method.toUpperCase()] ?? "";

  // The first labelSelector parsed at most once (apiserver reads the first value).
  let labels: string[] | undefined;
  let parsed: Selector | null | undefined; // undefined: not parsed yet; null: does not parse
  const label = (): string | undefined => (labels ??= query.getAll("labelSelector"))[0];
  const parsedLabel = (): Selector | null => {
    if (parsed !== undefined) return parsed;
    const text = label();
    if (text === undefined || text === "") return (parsed = EVERYTHING);
    try {
      return (parsed = Object.freeze(parseSelector(text, { maxLength: MAX_SELECTOR_LENGTH }))); // longer ones were refused before (app.ts checkRequestSize)
    } catch {
      return (parsed = null);
    }
  };
  if (info.name === "" && info.verb === "get") {
    const watch = query.getAll("watch");
    // runtime.Convert_Slice_string_To_bool: only absent, "0" and "false" are false.
    info.verb = watch.length > 0 && watch[0] !== "0" && watch[0]!.toLowerCase() !== "false" ? "watch" : "list";
    // The name comes from `fieldSelector=metadata.name=…` only when the list
    // options decoded, which fails when either selector does not parse.
    const fieldSelector = query.getAll("fieldSelector")[0];
    if (fieldSelector !== undefined && parsedLabel() !== null) {
      const name = parseFieldSelector(fieldSelector)?.find((r) => r.field === "metadata.name" && r.operator === "=")?.value;
      if (name !== undefined && isValidPathSegmentName(name)) info.name = name;
    }
  }
  if (info.name === "" && info.verb === "delete") info.verb = "deletecollection";

  if (!verbViaPathPrefix && VERBS_WITH_SELECTORS.has(info.verb)) {
    const field = query.getAll("fieldSelector")[0];
    if (field !== undefined && field !== "") info.fieldRequirements = parseFieldSelector(field) ?? [];
    const selector = parsedLabel();
    // labels.Parse failed: authorize the unrestricted action
    info.labelRequirements = selector === null ? [] : selector.requirements;
    if (selector !== null && labels!.length <= 1) info.labelSelector = selector;
  }
  return info;
}

/**
 * Estimated bytes a parsed selector holds, for the memos that keep one
 * (authz/authorize.ts, policy/policies.ts): per requirement 64 plus its key as UTF-16,
 * per value 16 plus the value as UTF-16.
 */
export function selectorBytes(selector: Selector): number {
  let bytes = 0;
  for (const r of selector.requirements) {
    bytes += 64 + r.key.length * 2;
    for (const v of r.values) bytes += 16 + v.length * 2;
  }
  return bytes;
}

/** Go's `splitPath`: trim `/`, split, `[]` for the root. */
function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, "");
  return trimmed === "" ? [] : trimmed.split("/");
}

/**
 * `fields.ParseSelector` (apimachinery `pkg/fields/selector.go`): terms split
 * on unescaped `,` and sorted; each `lhs(!=|==|=)rhs` with `\\`, `\,`, `\=`
 * escapes in the value. Requirements whose field and value are both empty
 * are dropped (`Transform` to `Everything`).
 *
 * @returns undefined when the selector does not parse
 */
export function parseFieldSelector(selector: string): FieldRequirement[] | undefined {
  const terms: string[] = [];
  let start = 0;
  let inSlash = false;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (inSlash) inSlash = false;
    else if (c === "\\") inSlash = true;
    else if (c === ",") {
      terms.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  if (selector.length > 0) terms.push(selector.slice(start));
  terms.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const out: FieldRequirement[] = [];
  for (const term of terms) {
    if (term === "") continue;
    const split = splitTerm(term);
    if (split === undefined) return undefined;
    const value = unescapeFieldValue(split.rhs);
    if (value === undefined) return undefined;
    if (split.lhs === "" && value === "") continue;
    out.push({ field: split.lhs, operator: split.op === "!=" ? "!=" : "=", value });
  }
  return out;
}

function splitTerm(term: string): { lhs: string; op: string; rhs: string } | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of ["!=", "==", "="]) {
      if (term.startsWith(op, i)) return { lhs: term.slice(0, i), op, rhs: term.slice(i + op.length) };
    }
  }
  return undefined;
}

/** `fields.UnescapeValue`; undefined on an invalid escape or an unescaped `,`/`=`. */
function unescapeFieldValue(s: string): string | undefined {
  let out = "";
  let inSlash = false;
  for (const c of s) {
    if (inSlash) {
      if (c !== "\\" && c !== "," && c !== "=") return undefined;
      out += c;
      inSlash = false;
      continue;
    }
    if (c === "\\") inSlash = true;
    else if (c === "," || c === "=") return undefined;
    else out += c;
  }
  return inSlash ? undefined : out;
}
