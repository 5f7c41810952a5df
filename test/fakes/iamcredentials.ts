/**
 * A fake of the IAM Service Account Credentials API on 127.0.0.1:
 * `POST /v1/projects/-/serviceAccounts/{email}:generateAccessToken` with
 * `{delegates, scope: [...], lifetime: "3600s"}` and `Authorization: Bearer
 * <caller's token>`, answered `{accessToken, expireTime}` (IAM Credentials
 * REST reference, "projects.serviceAccounts.generateAccessToken"), or a
 * Google error (`PERMISSION_DENIED` 403 when the caller may not impersonate
 * the account: it lacks `roles/iam.serviceAccountTokenCreator` on it).
 *
 * The caller's token is checked against a token endpoint fake's issued
 * tokens (`./google-oauth.ts` `issued`: token → caller email); tokens it
 * issues are recorded with the account they belong to, so an API fake
 * can say whose token a read carried.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One generateAccessToken call. */
export interface GenerateAccessTokenCall {
  /** the service account asked for */
  target: string;
  /** the caller's email (from its token), undefined when the token is unknown */
  caller: string | undefined;
  scope: string[];
  lifetime: string | undefined;
}

/** A running IAM Credentials fake. */
export interface IamCredentialsFake {
  /** `http://127.0.0.1:PORT`, for `credentials.impersonate.endpoint` */
  endpoint: string;
  calls: GenerateAccessTokenCall[];
  /** target email → the callers allowed to impersonate it (Token Creator) */
  creators: Map<string, Set<string>>;
  /** access tokens issued, token → target email */
  issued: Map<string, string>;
  /** answer every call with this HTTP status instead */
  failWith: number | undefined;
  close(): Promise<void>;
}

/**
 * Start the fake on 127.0.0.1 (random port).
 * @param callerOf the caller of a bearer token (e.g. the OAuth fake's `issued` map)
 */
export async function startIamCredentialsFake(callerOf: ReadonlyMap<string, string>): Promise<IamCredentialsFake> {
  let serial = 0;
  const fake: IamCredentialsFake = {
    endpoint: "",
    calls: [],
    creators: new Map(),
    issued: new Map(),
    failWith: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      const error = (code: number, status: string, message: string) => answer(code, { error: { code, message, status } });
      const match = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/.exec(req.url ?? "");
      if (req.method !== "POST" || match === null) return error(404, "NOT_FOUND", "expected POST /v1/projects/-/serviceAccounts/EMAIL:generateAccessToken");
      const target = decodeURIComponent(match[1]!);
      const token = /^Bearer (.+)$/.exec(String(req.headers["authorization"] ?? ""))?.[1];
      const caller = token === undefined ? undefined : callerOf.get(token);
      let body: { scope?: string[]; lifetime?: string; delegates?: string[] };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return error(400, "INVALID_ARGUMENT", "body is not JSON");
      }
      fake.calls.push({ target, caller, scope: body.scope ?? [], lifetime: body.lifetime });
      if (fake.failWith !== undefined) return error(fake.failWith, fake.failWith === 429 ? "RESOURCE_EXHAUSTED" : "UNAVAILABLE", "fake failure");
      if (caller === undefined) return error(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.");
      if (!Array.isArray(body.scope) || body.scope.length === 0) return error(400, "INVALID_ARGUMENT", "scope is required");
      if (!fake.creators.get(target)?.has(caller)) {
        return error(403, "PERMISSION_DENIED", `Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).`);
      }
      const accessToken = `ya29.impersonated-${++serial}`;
      fake.issued.set(accessToken, target);
      const seconds = Number(/^(\d+)s$/.exec(body.lifetime ?? "3600s")?.[1] ?? 3600);
      answer(200, { accessToken, expireTime: new Date(Date.now() + seconds * 1000).toISOString() });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
