/**
 * Drive a Lambda handler the way Lambda does for HTTP: a `Request` becomes
 * a payload-format-2.0 event built from a recorded fixture (Function URL or
 * API Gateway HTTP API), the handler's result becomes a `Response`.
 *
 * Fixtures (`test/fixtures/lambda/*.json`) follow the documented payloads —
 * AWS Lambda Developer Guide "Invoking Lambda function URLs › Request and
 * response payloads", API Gateway Developer Guide "Lambda proxy integrations
 * for HTTP APIs › payload format version 2.0", aws/aws-lambda-go
 * `events/testdata` — carrying the headers an HPA read through the
 * aggregator has. They were not captured from a live AWS account (none is
 * reachable here). Per request the converter replaces `rawPath`,
 * `rawQueryString` (byte for byte: Go's `+` and `%3D` stay as sent),
 * `headers` (lowercased, repeats joined with `,`), `cookies`,
 * `queryStringParameters`, `body`/`isBase64Encoded` and
 * `requestContext.http.method/path`, `requestId`, `time`, `timeEpoch`.
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import type { ContractTarget } from "./contract.ts";

/** The recorded event shapes. */
export const LAMBDA_FIXTURES = {
  "Function URL": "function-url.json",
  "API Gateway HTTP API v2": "api-gateway-http-v2.json",
} as const;

/** Name of a recorded event shape. */
export type LambdaEventShape = keyof typeof LAMBDA_FIXTURES;

/** A payload-format-2.0 HTTP event (the fields this converter touches). */
export interface HttpEventV2 {
  version: "2.0";
  routeKey: string;
  rawPath: string;
  rawQueryString: string;
  headers: Record<string, string>;
  cookies?: string[];
  queryStringParameters?: Record<string, string>;
  body?: string;
  isBase64Encoded: boolean;
  requestContext: {
    domainName: string;
    http: { method: string; path: string; protocol: string; sourceIp: string; userAgent: string };
    requestId: string;
    time: string;
    timeEpoch: number;
    [key: string]: unknown;
  };
  [key: string]: unknown;
}

/** The result shape Lambda accepts for payload format 2.0 (structured form). */
export interface HttpResultV2 {
  statusCode: number;
  headers?: Record<string, string>;
  cookies?: string[];
  body?: string;
  isBase64Encoded?: boolean;
}

/** A fresh copy of a recorded event. */
export function loadFixture(shape: LambdaEventShape): HttpEventV2 {
  const url = new URL(`../fixtures/lambda/${LAMBDA_FIXTURES[shape]}`, import.meta.url);
  return JSON.parse(readFileSync(url, "utf8")) as HttpEventV2;
}

/**
 * The origin a request of `shape` reaches the function at, as the Lambda
 * handler sees it (`https://` + `requestContext.domainName`): what the
 * in-cluster proxy addresses, so the audience a signature must be made for.
 */
export function lambdaOrigin(shape: LambdaEventShape): string {
  return `https://${loadFixture(shape).requestContext.domainName}`;
}

/** Content types Lambda passes as text; other bodies arrive base64-encoded. */
function isTextType(contentType: string | null): boolean {
  return contentType === null || /^(text\/|application\/(json|xml|x-www-form-urlencoded|javascript|yaml))/i.test(contentType);
}

/** Lambda's CLF-like `time`: `21/Nov/2026:09:40:12 +0000`. */
function clfTime(ms: number): string {
  const d = new Date(ms);
  const month = d.toLocaleString("en-US", { month: "short", timeZone: "UTC" });
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(d.getUTCDate())}/${month}/${d.getUTCFullYear()}:${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} +0000`;
}

/**
 * Turn `path` (raw, with query) and `init` into an event of `shape`.
 * The path is split at the first `?` without URL parsing, so its encoding
 * reaches the handler as a client sent it.
 */
export async function toEvent(shape: LambdaEventShape, path: string, init: RequestInit = {}): Promise<HttpEventV2> {
  const event = loadFixture(shape);
  const q = path.indexOf("?");
  const rawPath = q === -1 ? path : path.slice(0, q);
  const rawQueryString = q === -1 ? "" : path.slice(q + 1);
  const method = (init.method ?? "GET").toUpperCase();
  // Headers as a client would send them: the fixture's transport headers plus the request's own.
  const request = new Request(`https://${event.requestContext.domainName}${rawPath}`, { ...init, method });
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers)) headers[k.toLowerCase()] = v;
  const cookies: string[] = [];
  request.headers.forEach((value, key) => {
    if (key === "cookie") cookies.push(...value.split(/;\s*/));
    else headers[key] = value;
  });
  const now = Date.now();
  event.rawPath = rawPath;
  event.rawQueryString = rawQueryString;
  event.headers = headers;
  if (cookies.length > 0) event.cookies = cookies;
  else delete event.cookies;
  const params: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(rawQueryString)) params[k] = params[k] === undefined ? v : `${params[k]},${v}`;
  if (Object.keys(params).length > 0) event.queryStringParameters = params;
  else delete event.queryStringParameters;
  delete event.body;
  event.isBase64Encoded = false;
  if (init.body !== undefined && init.body !== null) {
    const bytes = Buffer.from(await request.arrayBuffer());
    headers["content-length"] = String(bytes.length);
    if (isTextType(request.headers.get("content-type"))) event.body = bytes.toString("utf8");
    else {
      event.body = bytes.toString("base64");
      event.isBase64Encoded = true;
    }
  } else if (method === "GET" && "content-length" in headers) headers["content-length"] = "0";
  event.requestContext.http = { ...event.requestContext.http, method, path: rawPath };
  event.requestContext.requestId = randomUUID();
  event.requestContext.timeEpoch = now;
  event.requestContext.time = clfTime(now);
  return event;
}

/**
 * Turn a handler result into a `Response`, as the Function URL / HTTP API
 * front end does: `isBase64Encoded` bodies are decoded, `cookies` become
 * `Set-Cookie` headers.
 *
 * @throws Error when the result is not the structured 2.0 form (the bridge always returns it)
 */
export function toResponse(result: unknown): Response {
  const r = result as HttpResultV2;
  if (typeof r !== "object" || r === null || typeof r.statusCode !== "number") {
    throw new Error(`handler returned ${JSON.stringify(result)}, not a {statusCode, headers, body} result`);
  }
  const headers = new Headers(r.headers ?? {});
  for (const cookie of r.cookies ?? []) headers.append("set-cookie", cookie);
  const body = r.body === undefined ? null : r.isBase64Encoded ? Buffer.from(r.body, "base64") : r.body;
  const nullBody = r.statusCode === 204 || r.statusCode === 304;
  return new Response(nullBody ? null : body, { status: r.statusCode, headers });
}

/** A Lambda handler for HTTP events. */
export type HttpHandler = (event: HttpEventV2, context?: unknown) => Promise<unknown>;

/** A minimal Lambda context object (the fields Lambda always passes). */
export function lambdaContext(requestId: string): Record<string, unknown> {
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: "external-metrics-bridge",
    functionVersion: "$LATEST",
    invokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:external-metrics-bridge",
    memoryLimitInMB: "256",
    awsRequestId: requestId,
    logGroupName: "/aws/lambda/external-metrics-bridge",
    logStreamName: "2026/11/21/[$LATEST]0123456789abcdef",
    getRemainingTimeInMillis: () => 10_000,
  };
}

/** Send one request through `handler` as an event of `shape`. */
export async function invoke(handler: HttpHandler, shape: LambdaEventShape, path: string, init?: RequestInit): Promise<Response> {
  const event = await toEvent(shape, path, init);
  return toResponse(await handler(event, lambdaContext(event.requestContext.requestId)));
}

/** A contract target that invokes `handler` with events of `shape`. */
export function lambdaTarget(handler: HttpHandler, shape: LambdaEventShape): ContractTarget {
  return { request: (path, init) => invoke(handler, shape, path, init), close: async () => {} };
}
