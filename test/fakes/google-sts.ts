/**
 * Fakes of the Workload Identity Federation endpoints on one 127.0.0.1
 * listener, speaking their wire formats:
 *
 * - Google STS `POST /v1/token` (Security Token Service API `v1.token`;
 *   RFC 8693 token exchange): a form with
 *   `grant_type=urn:ietf:params:oauth:grant-type:token-exchange`,
 *   `audience` (must be the pool provider's), `scope`,
 *   `requested_token_type=urn:ietf:params:oauth:token-type:access_token`,
 *   `subject_token`, `subject_token_type`; answers `{access_token,
 *   issued_token_type, token_type: "Bearer", expires_in}` or an OAuth error
 *   `{error, error_description}`. An AWS subject token
 *   (`urn:ietf:params:aws:token-type:aws4_request`, AIP-4117) is the
 *   URL-encoded JSON of a GetCallerIdentity request: the fake checks its
 *   URL, method, `x-goog-cloud-target-resource` (= audience; signing it is
 *   recommended, not required) and
 *   **verifies its SigV4 signature** with the known AWS secret (as AWS STS
 *   would when Google replays it). An OIDC subject token must equal the one
 *   the fake hands out at `GET /oidc` (JSON `{id_token}`, needing header
 *   `Metadata-Flavor: Google`-style `x-token-header: yes`); `GET /oidc-huge`
 *   answers 1 MiB of text.
 * - IAM Credentials `POST /v1/projects/-/serviceAccounts/{email}:generateAccessToken`:
 *   Bearer = a federated token issued with the `cloud-platform` scope, JSON
 *   `{scope: [...], lifetime: "3600s"}`; answers `{accessToken, expireTime}`
 *   or a Google error `{error: {code, message, status}}`.
 *
 * Tokens usable at the Monitoring fakes are added to `issued` (token →
 * caller: the service account when impersonated, else the federated
 * principal `principal://…/subject/<aws arn or oidc sub>`).
 */
import { createHash, createHmac } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignatureV4 } from "@smithy/signature-v4";

/** node:crypto SHA-256 / HMAC-SHA256 as a `@smithy/signature-v4` checksum. */
class NodeSha256 {
  private readonly hash;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    const key = secret === undefined ? undefined : typeof secret === "string" ? secret : Buffer.from(secret instanceof ArrayBuffer ? secret : secret.buffer.slice(secret.byteOffset, secret.byteOffset + secret.byteLength));
    this.hash = key === undefined ? createHash("sha256") : createHmac("sha256", key);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(typeof data === "string" ? data : Buffer.from(data instanceof ArrayBuffer ? data : data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength)));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {}
}

/** One exchange the STS fake received. */
export interface StsRequest {
  form: Record<string, string>;
  /** the decoded AWS subject token, when it was one */
  aws?: { url: string; method: string; headers: Record<string, string> };
  error?: string;
}

/** The running fakes. */
export interface StsFake {
  /** `http://127.0.0.1:PORT` */
  origin: string;
  /** the pool provider's audience the fake accepts */
  audience: string;
  /** the AWS identity it accepts: key id, secret, session token, and the ARN it maps to */
  aws: { accessKeyId: string; secretAccessKey: string; sessionToken: string; arn: string };
  /** the OIDC token `GET /oidc` hands out and STS accepts */
  oidcToken: string;
  /** the service account impersonation may name */
  serviceAccount: string;
  readonly sts: StsRequest[];
  readonly impersonations: { email: string; bearer: string; body: { scope?: string[]; lifetime?: string }; error?: string }[];
  /** `GET /oidc` calls */
  oidcReads: number;
  /** when set, STS answers this status with an OAuth error */
  stsFailWith: { status: number; error: string; description: string } | undefined;
  /** when set, generateAccessToken answers this `expireTime` text (a malformed or impossible time) */
  expireTimeText: string | undefined;
  /** an `external_account` credential configuration pointing at this fake */
  credentialConfig(kind: "aws" | "oidc-url", options?: { impersonate?: boolean; region?: string }): Record<string, unknown>;
  close(): Promise<void>;
}

const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform";

/**
 * Start the fakes. Tokens they issue are written to `issued` (the map the
 * Monitoring fakes check, `OAuthFake.issued`).
 */
export async function startStsFake(issued: Map<string, string>, now: () => number = Date.now): Promise<StsFake> {
  let counter = 0;
  /** federated tokens: token → { scope, principal } */
  const federated = new Map<string, { scope: string; principal: string }>();
  const fake: StsFake = {
    origin: "",
    audience: "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/bridge-pool/providers/aws",
    aws: { accessKeyId: "ASIAFAKEFEDERATION01", secretAccessKey: "fake/secret+key", sessionToken: "FwoGZXIvYXdzEfake//session==", arn: "arn:aws:sts::123456789012:assumed-role/bridge-lambda/bridge" },
    oidcToken: "eyJhbGciOiJub25lIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6ZW1iOmJyaWRnZSJ9.",
    serviceAccount: "metrics-reader@test-project.iam.gserviceaccount.com",
    sts: [],
    impersonations: [],
    oidcReads: 0,
    stsFailWith: undefined,
    expireTimeText: undefined,
    credentialConfig(kind, options = {}) {
      const impersonation = options.impersonate
        ? { service_account_impersonation_url: `${fake.origin}/v1/projects/-/serviceAccounts/${fake.serviceAccount}:generateAccessToken` }
        : {};
      if (kind === "aws") {
        return {
          type: "external_account",
          audience: fake.audience,
          subject_token_type: "urn:ietf:params:aws:token-type:aws4_request",
          token_url: `${fake.origin}/v1/token`,
          ...impersonation,
          credential_source: {
            environment_id: "aws1",
            region_url: "http://169.254.169.254/latest/meta-data/placement/availability-zone",
            url: "http://169.254.169.254/latest/meta-data/iam/security-credentials",
            regional_cred_verification_url: "https://sts.{region}.amazonaws.com?Action=GetCallerIdentity&Version=2011-06-15",
          },
        };
      }
      return {
        type: "external_account",
        audience: fake.audience,
        subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
        token_url: `${fake.origin}/v1/token`,
        ...impersonation,
        credential_source: { url: `${fake.origin}/oidc`, headers: { "x-token-header": "yes" }, format: { type: "json", subject_token_field_name: "id_token" } },
      };
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };

  async function verifyAws(subjectToken: string): Promise<{ principal: string; decoded: NonNullable<StsRequest["aws"]> }> {
    const parsed = JSON.parse(decodeURIComponent(subjectToken)) as { url: string; method: string; headers: { key: string; value: string }[] };
    const headers: Record<string, string> = {};
    for (const h of parsed.headers) headers[h.key.toLowerCase()] = h.value;
    const decoded = { url: parsed.url, method: parsed.method, headers };
    const url = new URL(parsed.url);
    if (parsed.method !== "POST") throw new Error(`method ${parsed.method}, expected POST`);
    if (!/^sts\.[a-z0-9-]+\.amazonaws\.com$/.test(url.hostname) || url.searchParams.get("Action") !== "GetCallerIdentity") throw new Error(`not a GetCallerIdentity URL: ${parsed.url}`);
    if (headers["x-goog-cloud-target-resource"] !== fake.audience) throw new Error("x-goog-cloud-target-resource is not the audience");
    const auth = headers["authorization"] ?? "";
    const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([a-z0-9-]+)\/sts\/aws4_request, SignedHeaders=([^,]+), Signature=[0-9a-f]{64}$/.exec(auth);
    if (m === null) throw new Error(`not a SigV4 Authorization: ${auth}`);
    if (m[1] !== fake.aws.accessKeyId) throw new Error(`unknown access key ${m[1]}`);
    if (headers["x-amz-security-token"] !== fake.aws.sessionToken) throw new Error("x-amz-security-token missing or wrong");
    // Re-sign what was signed, with the secret, at the request's own x-amz-date: the signatures must match.
    const amzDate = headers["x-amz-date"] ?? "";
    const signingDate = new Date(`${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`);
    if (Math.abs(signingDate.getTime() - now()) > 15 * 60_000) throw new Error(`x-amz-date ${amzDate} is more than 15 minutes off`);
    const signer = new SignatureV4({
      service: "sts",
      region: m[3]!,
      credentials: { accessKeyId: fake.aws.accessKeyId, secretAccessKey: fake.aws.secretAccessKey, sessionToken: fake.aws.sessionToken },
      sha256: NodeSha256,
      // only what the client signed: no x-amz-content-sha256 of its own
      applyChecksum: false,
    });
    const signedNames = m[4]!.split(";");
    const query: Record<string, string> = {};
    url.searchParams.forEach((v, k) => (query[k] = v));
    const resigned = await signer.sign(
      {
        method: "POST",
        protocol: url.protocol,
        hostname: url.hostname,
        path: url.pathname,
        query,
        headers: Object.fromEntries(signedNames.filter((n) => n !== "x-amz-security-token" && n !== "x-amz-date").map((n) => [n, headers[n] ?? ""])),
      },
      { signingDate },
    );
    if (resigned.headers["authorization"] !== auth) throw new Error("SignatureDoesNotMatch");
    return { principal: fake.aws.arn, decoded };
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      const url = new URL(req.url ?? "/", "http://fake");
      if (req.method === "GET" && url.pathname === "/oidc-huge") {
        // a token URL answering far more than any token (1 MiB)
        res.writeHead(200, { "content-type": "text/plain" });
        return res.end("x".repeat(1 << 20));
      }
      if (req.method === "GET" && url.pathname === "/oidc") {
        fake.oidcReads++;
        if (req.headers["x-token-header"] !== "yes") return json(403, { error: "missing x-token-header" });
        return json(200, { id_token: fake.oidcToken });
      }
      if (req.method === "POST" && url.pathname === "/v1/token") {
        const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
        const record: StsRequest = { form };
        fake.sts.push(record);
        const refuse = (error: string, description: string) => {
          record.error = `${error}: ${description}`;
          json(400, { error, error_description: description });
        };
        if (fake.stsFailWith) return json(fake.stsFailWith.status, { error: fake.stsFailWith.error, error_description: fake.stsFailWith.description });
        if (!String(req.headers["content-type"]).startsWith("application/x-www-form-urlencoded")) return refuse("invalid_request", "expected a form");
        if (form["grant_type"] !== "urn:ietf:params:oauth:grant-type:token-exchange") return refuse("unsupported_grant_type", String(form["grant_type"]));
        if (form["requested_token_type"] !== "urn:ietf:params:oauth:token-type:access_token") return refuse("invalid_request", "requested_token_type");
        if (form["audience"] !== fake.audience) return refuse("invalid_target", `The target service indicated by the "audience" parameter is invalid`);
        if (!form["scope"]) return refuse("invalid_scope", "scope is required");
        let principal: string;
        try {
          if (form["subject_token_type"] === "urn:ietf:params:aws:token-type:aws4_request") {
            const v = await verifyAws(form["subject_token"] ?? "");
            record.aws = v.decoded;
            principal = v.principal;
          } else if (form["subject_token_type"] === "urn:ietf:params:oauth:token-type:jwt") {
            if (form["subject_token"] !== fake.oidcToken) throw new Error("the OIDC token is not trusted by the pool provider");
            principal = "system:serviceaccount:emb:bridge";
          } else throw new Error(`unsupported subject_token_type ${form["subject_token_type"]}`);
        } catch (err) {
          return refuse("invalid_grant", (err as Error).message);
        }
        const token = `ya29.federated-${++counter}`;
        const principalUri = `principal://iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/bridge-pool/subject/${principal}`;
        federated.set(token, { scope: form["scope"]!, principal: principalUri });
        issued.set(token, principalUri);
        return json(200, { access_token: token, issued_token_type: "urn:ietf:params:oauth:token-type:access_token", token_type: "Bearer", expires_in: 3599 });
      }
      const m = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/.exec(decodeURIComponent(url.pathname));
      if (req.method === "POST" && m !== null) {
        const bearer = /^Bearer (.+)$/.exec(String(req.headers["authorization"] ?? ""))?.[1] ?? "";
        let body: { scope?: string[]; lifetime?: string } = {};
        try {
          body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as typeof body;
        } catch {
          /* answered below */
        }
        const record: StsFake["impersonations"][number] = { email: m[1]!, bearer, body };
        fake.impersonations.push(record);
        const fail = (code: number, status: string, message: string) => {
          record.error = message;
          json(code, { error: { code, message, status } });
        };
        const caller = federated.get(bearer);
        if (caller === undefined) return fail(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.");
        if (caller.scope !== CLOUD_PLATFORM) return fail(403, "PERMISSION_DENIED", "Request had insufficient authentication scopes.");
        if (m[1] !== fake.serviceAccount) return fail(403, "PERMISSION_DENIED", `Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).`);
        if (!Array.isArray(body.scope) || body.scope.length === 0) return fail(400, "INVALID_ARGUMENT", "Scope required.");
        const lifetime = Number(/^(\d+)s$/.exec(body.lifetime ?? "3600s")?.[1] ?? Number.NaN);
        if (!(lifetime > 0 && lifetime <= 3600)) return fail(400, "INVALID_ARGUMENT", "lifetime");
        const token = `ya29.impersonated-${++counter}`;
        issued.set(token, m[1]!);
        return json(200, { accessToken: token, expireTime: fake.expireTimeText ?? new Date(now() + lifetime * 1000).toISOString().replace(/\.\d{3}Z$/, "Z") });
      }
      json(404, { error: { code: 404, message: `no route ${req.method} ${url.pathname}`, status: "NOT_FOUND" } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
