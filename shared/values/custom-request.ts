/**
 * The HTTP form of a custom.metrics.k8s.io read (contract C2 of issue 26,
 * docs/architecture.md "A custom read"): what the in-cluster proxy sends
 * and every runtime's `POST` route (shared/app.ts) reads back into the
 * typed parts of {@link CustomValuesRead}.
 *
 * - the target: the custom values path, parsed by the one request path
 *   parser (shared/k8s/request-path.ts `parseRequestTarget`,
 *   `customMetricsRead`), and the query's `labelSelector` and
 *   `metricLabelSelector` as the HPA's client sends them
 *   (k8s.io/metrics `pkg/client/custom_metrics/versioned_client.go`), each
 *   at most once;
 * - the body, JSON (`Content-Type: application/json`, at most
 *   `MAX_SIGNED_BODY_BYTES`, signed with `EMB-HMAC-SHA256-3` when the bridge
 *   has signing keys), one member per shape:
 *   - Pods (`selected`) read: `{"pods": ["web-1", …]}`, the names the proxy
 *     resolved from `labelSelector`;
 *   - Object read: `{"object": {"kind", "apiVersion", "name", "namespace"?,
 *     "labels"?, "annotations"?, "status"?}}`, the object as the proxy read it;
 *   - namespace read: `{}`.
 *   Nothing else: an unknown member, a wrong type or the other shape's
 *   member is a 400, so a body is read one way only.
 */
import { CUSTOM_GROUP } from "../k8s/custom-types.ts";
import { customMetricsRead, notFoundPath, parseRequestTarget, type CustomMetricsRead } from "../k8s/request-path.ts";
import { badRequest, StatusError } from "../k8s/status.ts";
import { labelSelectorOf } from "./request.ts";
import { statusHttpAnswer, type ValuesHttpAnswer } from "./answer.ts";
import { MAX_PODS_PER_READ, type CustomValuesOutcome, type DescribedObject, type ReadObjects } from "./custom-read.ts";

/** The target of a custom read: the parsed path and the two selectors of its query. */
export interface CustomTarget {
  read: CustomMetricsRead;
  /** the pods' `labelSelector` as sent (query-decoded); "" when none */
  labelSelector: string;
  /** the `metricLabelSelector` as sent (query-decoded); "" when none */
  metricLabelSelector: string;
}

/** Whether a decoded path is under `/apis/custom.metrics.k8s.io` (the group itself included). */
export function isCustomGroupPath(path: string): boolean {
  const prefix = `/apis/${CUSTOM_GROUP}`;
  return path === prefix || path.startsWith(`${prefix}/`);
}

/**
 * The target of a custom read as received (path and query, still
 * percent-encoded).
 *
 * @param method the request method, for the 404 message
 * @throws StatusError 404 when the path is not a custom values path (one of
 *   the shapes of `customMetricsRead`), 400 when the path is refused by the
 *   parser or a selector is given more than once
 */
export function parseCustomTarget(target: string, method: string): CustomTarget {
  const parsed = parseRequestTarget(target);
  const read = customMetricsRead(parsed.path);
  if (read === undefined) throw notFoundPath(method, parsed.path);
  const metricSelectors = parsed.query.getAll("metricLabelSelector");
  if (metricSelectors.length > 1) throw badRequest("metricLabelSelector may be given only once");
  return { read, labelSelector: labelSelectorOf(parsed.query), metricLabelSelector: metricSelectors[0] ?? "" };
}

/** Longest kind, apiVersion, name or namespace accepted in a described object, characters (a DNS subdomain is 253). */
const MAX_NAME_LENGTH = 253;

/**
 * The objects a custom read's body carries, for the shape of its path.
 *
 * @param bytes the body as received (UTF-8 JSON, already bounded)
 * @returns the pods (`selected`), the object (`object`), or undefined (`namespace`)
 * @throws StatusError 400 when the body is not UTF-8 JSON, is not an object,
 *   holds another member than its shape's, or a member of the wrong type
 *   (pods: at most `MAX_PODS_PER_READ` strings; object: string `kind`,
 *   `apiVersion` and `name`, optional string `namespace`, string maps
 *   `labels` and `annotations`, any JSON `status`)
 */
export function readObjectsOf(shape: CustomMetricsRead["shape"], bytes: Uint8Array): ReadObjects | undefined {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw badRequest("the request body is not UTF-8");
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw badRequest(`the request body is not JSON: ${(err as Error).message}`);
  }
  if (!isPlainObject(body)) throw badRequest(`the request body must be a JSON object (${bodyHelp(shape)})`);
  const member = shape === "selected" ? "pods" : shape === "object" ? "object" : undefined;
  for (const key of Object.keys(body)) {
    if (key !== member) throw badRequest(`the request body of a ${shapeName(shape)} read may not hold ${JSON.stringify(key.slice(0, 64))} (${bodyHelp(shape)})`);
  }
  if (member === undefined) return undefined;
  if (!(member in body)) throw badRequest(`the request body of a ${shapeName(shape)} read must hold ${JSON.stringify(member)} (${bodyHelp(shape)})`);
  if (member === "pods") {
    const pods = body["pods"];
    if (!Array.isArray(pods) || !pods.every((p) => typeof p === "string")) throw badRequest(`"pods" must be a list of pod names`);
    if (pods.length > MAX_PODS_PER_READ) throw badRequest(`a Pods read may name at most ${MAX_PODS_PER_READ} pods, not ${pods.length}`);
    return { pods: pods as string[] };
  }
  return { object: describedObjectOf(body["object"]) };
}

/** `"object"` of a body checked member by member (see {@link readObjectsOf}). @throws StatusError 400 */
function describedObjectOf(value: unknown): DescribedObject {
  if (!isPlainObject(value)) throw badRequest(`"object" must be a JSON object`);
  const known = new Set(["kind", "apiVersion", "name", "namespace", "labels", "annotations", "status"]);
  for (const key of Object.keys(value)) if (!known.has(key)) throw badRequest(`"object" may not hold ${JSON.stringify(key.slice(0, 64))}: only ${[...known].join(", ")}`);
  const text = (key: string, required: boolean): string | undefined => {
    const v = value[key];
    if (v === undefined && !required) return undefined;
    if (typeof v !== "string" || (required && v === "") || v.length > MAX_NAME_LENGTH) {
      throw badRequest(`"object.${key}" must be a ${required ? "non-empty " : ""}string of at most ${MAX_NAME_LENGTH} characters`);
    }
    return v;
  };
  const map = (key: string): Record<string, string> | undefined => {
    const v = value[key];
    if (v === undefined) return undefined;
    if (!isPlainObject(v) || !Object.values(v).every((x) => typeof x === "string")) throw badRequest(`"object.${key}" must be a map of strings`);
    // a null-prototype copy: keys such as "__proto__" stay data
    return Object.assign(Object.create(null) as Record<string, string>, v);
  };
  const namespace = text("namespace", false);
  const labels = map("labels");
  const annotations = map("annotations");
  return {
    kind: text("kind", true)!,
    apiVersion: text("apiVersion", true)!,
    name: text("name", true)!,
    ...(namespace !== undefined ? { namespace } : {}),
    ...(labels !== undefined ? { labels } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
    ...(value["status"] !== undefined ? { status: value["status"] } : {}),
  };
}

/**
 * The JSON body of a custom read carrying `objects` (what the proxy sends
 * and {@link readObjectsOf} reads back): `{"pods": […]}`, `{"object": {…}}`,
 * or `{}` for none (a namespace read).
 */
export function customReadBody(objects: ReadObjects | undefined): string {
  if (objects === undefined) return "{}";
  return JSON.stringify("pods" in objects ? { pods: objects.pods } : { object: objects.object });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function shapeName(shape: CustomMetricsRead["shape"]): string {
  return shape === "selected" ? "Pods" : shape === "object" ? "Object" : "namespace";
}

function bodyHelp(shape: CustomMetricsRead["shape"]): string {
  if (shape === "selected") return `a Pods read's body is {"pods": ["<pod name>", …]}`;
  if (shape === "object") return `an Object read's body is {"object": {"kind", "apiVersion", "name", "namespace", "labels", "annotations", "status"}}`;
  return "a namespace read's body is {}";
}

/**
 * A custom read's outcome as HTTP: 200 with the `MetricValueList` text,
 * `Content-Type: application/json` and `Cache-Control: no-store` (the
 * answer was made for one caller and one set of objects; the HPA asks
 * again every sync), or the Status (./answer.ts `statusHttpAnswer`; the
 * custom read already dropped any `Retry-After` from a 503). The same for
 * the POST route of every runtime and the proxy's in-process backend.
 */
export function customHttpAnswer(outcome: CustomValuesOutcome): ValuesHttpAnswer {
  if (outcome instanceof StatusError) return statusHttpAnswer(outcome);
  return { status: 200, body: outcome.text, headers: { "Content-Type": "application/json", "Cache-Control": "no-store" } };
}
