/**
 * An AWS STS fake on 127.0.0.1 speaking the real `AssumeRole` Query API
 * (STS API Reference, "AssumeRole"): a form POST (`Action=AssumeRole`,
 * `Version=2011-06-15`, `RoleArn`, `RoleSessionName`, `ExternalId`,
 * `DurationSeconds`) signed with SigV4 for `sts`, answered with the
 * `AssumeRoleResponse` XML document, or an `ErrorResponse` (`Sender`,
 * `AccessDenied`) when a role's trust policy (here: the ExternalId it
 * requires) refuses.
 *
 * It checks every request's SigV4 signature against the caller keys it
 * knows ({@link StsFake.callers}) and issues fresh temporary keys per call;
 * {@link StsFake.verify} checks a request another fake received (SQS,
 * CloudWatch) against the keys issued and says which role signed it, so a
 * test proves which identity a read really ran under.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { SignatureV4 } from "@smithy/signature-v4";
import { WebCryptoSha256 } from "../../shared/providers/aws/sigv4.ts";

/** One AssumeRole call received. */
export interface AssumeRoleCall {
  RoleArn: string;
  ExternalId: string | undefined;
  RoleSessionName: string;
  DurationSeconds: string | undefined;
  /** the access key id that signed the call */
  accessKeyId: string;
}

/** Temporary keys the fake issued, with the role they belong to. */
export interface IssuedKeys {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken: string;
  roleArn: string;
  externalId: string | undefined;
}

/** A running STS fake. */
export interface StsFake {
  /** `http://127.0.0.1:PORT`, for `credentials.assumeRole.stsEndpoint` */
  endpoint: string;
  /** every AssumeRole call, in order */
  calls: AssumeRoleCall[];
  /** long-term keys allowed to call AssumeRole: access key id → secret */
  callers: Map<string, string>;
  /** role ARN → the ExternalId its trust policy requires; a role not listed is refused (AccessDenied) */
  roles: Map<string, string>;
  /** answer every call with this error instead (e.g. `{ status: 503, code: "ServiceUnavailable" }`) */
  failWith: { status: number; code: string } | undefined;
  /** keys issued, by access key id */
  issued: Map<string, IssuedKeys>;
  /**
   * The keys that signed a request another fake received, when its SigV4
   * signature verifies against keys this fake issued (and their session
   * token was sent); undefined otherwise.
   */
  verify(req: IncomingMessage, body: string): Promise<IssuedKeys | undefined>;
  close(): Promise<void>;
}

/**
 * Whether `req` (with `body`) carries a valid SigV4 signature of the secret
 * `secretOf(accessKeyId)`: recomputed over the signed headers with
 * `@smithy/signature-v4`, at the request's own `x-amz-date`.
 *
 * @returns the access key id that signed it, or undefined (unsigned, unknown key, wrong signature)
 */
export async function verifySigV4(req: IncomingMessage, body: string, secretOf: (accessKeyId: string) => { secretAccessKey: string; sessionToken?: string } | undefined): Promise<string | undefined> {
  const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(
    String(req.headers["authorization"] ?? ""),
  );
  if (auth === null) return undefined;
  const [, accessKeyId, , region, service, signedHeaders, signature] = auth as unknown as string[];
  const keys = secretOf(accessKeyId!);
  if (keys === undefined) return undefined;
  if (keys.sessionToken !== undefined && req.headers["x-amz-security-token"] !== keys.sessionToken) return undefined;
  const headers: Record<string, string> = {};
  for (const name of signedHeaders!.split(";")) headers[name] = String(req.headers[name] ?? "");
  const amzDate = headers["x-amz-date"] ?? "";
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
  if (date === null) return undefined;
  const url = new URL(req.url ?? "/", `http://${req.headers.host}`);
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const signer = new SignatureV4({
    service: service!,
    region: region!,
    credentials: { accessKeyId: accessKeyId!, secretAccessKey: keys.secretAccessKey, ...(keys.sessionToken !== undefined ? { sessionToken: keys.sessionToken } : {}) },
    sha256: WebCryptoSha256,
  });
  const signed = await signer.sign(
    { method: req.method ?? "POST", protocol: "http:", hostname: url.hostname, path: url.pathname, query, headers, body },
    { signingDate: new Date(`${date[1]}-${date[2]}-${date[3]}T${date[4]}:${date[5]}:${date[6]}Z`) },
  );
  const expected = /Signature=([0-9a-f]{64})/.exec(String(signed.headers["authorization"]))?.[1];
  return expected === signature ? accessKeyId : undefined;
}

const xml = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** Start an STS fake on 127.0.0.1 (random port). */
export async function startStsFake(): Promise<StsFake> {
  let serial = 0;
  const fake: StsFake = {
    endpoint: "",
    calls: [],
    callers: new Map(),
    roles: new Map(),
    failWith: undefined,
    issued: new Map(),
    async verify(req, body) {
      const id = await verifySigV4(req, body, (key) => fake.issued.get(key));
      return id === undefined ? undefined : fake.issued.get(id);
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const error = (res: import("node:http").ServerResponse, status: number, code: string, message: string) => {
    res.writeHead(status, { "content-type": "text/xml" });
    res.end(
      `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>${status >= 500 ? "Receiver" : "Sender"}</Type>` +
        `<Code>${code}</Code><Message>${xml(message)}</Message></Error><RequestId>fake-${serial}</RequestId></ErrorResponse>`,
    );
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const form = new URLSearchParams(body);
      if (req.method !== "POST" || !String(req.headers["content-type"]).startsWith("application/x-www-form-urlencoded") || form.get("Action") !== "AssumeRole" || form.get("Version") !== "2011-06-15") {
        return error(res, 400, "InvalidAction", "expected a form POST of Action=AssumeRole&Version=2011-06-15");
      }
      const accessKeyId = await verifySigV4(req, body, (key) => {
        const secretAccessKey = fake.callers.get(key);
        return secretAccessKey === undefined ? undefined : { secretAccessKey };
      });
      if (accessKeyId === undefined) return error(res, 403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided");
      const call: AssumeRoleCall = {
        RoleArn: form.get("RoleArn") ?? "",
        ExternalId: form.get("ExternalId") ?? undefined,
        RoleSessionName: form.get("RoleSessionName") ?? "",
        DurationSeconds: form.get("DurationSeconds") ?? undefined,
        accessKeyId,
      };
      fake.calls.push(call);
      if (fake.failWith !== undefined) return error(res, fake.failWith.status, fake.failWith.code, "fake STS failure");
      const required = fake.roles.get(call.RoleArn);
      if (required === undefined || required !== call.ExternalId) {
        return error(res, 403, "AccessDenied", `User: arn:aws:iam::123456789012:user/bridge is not authorized to perform: sts:AssumeRole on resource: ${call.RoleArn}`);
      }
      serial++;
      const keys: IssuedKeys = {
        accessKeyId: `ASIAFAKE${String(serial).padStart(12, "0")}`,
        secretAccessKey: `secret-${serial}-${Math.random().toString(36).slice(2)}`,
        sessionToken: `token-${serial}`,
        roleArn: call.RoleArn,
        externalId: call.ExternalId,
      };
      fake.issued.set(keys.accessKeyId, keys);
      const expiration = new Date(Date.now() + Number(call.DurationSeconds ?? 3600) * 1000).toISOString().replace(/\.\d+Z$/, "Z");
      const roleName = call.RoleArn.replace(/^.*:role\//, "");
      res.writeHead(200, { "content-type": "text/xml" });
      res.end(
        `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleResult>` +
          `<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/${xml(roleName)}/${xml(call.RoleSessionName)}</Arn>` +
          `<AssumedRoleId>AROAFAKE${serial}:${xml(call.RoleSessionName)}</AssumedRoleId></AssumedRoleUser>` +
          `<Credentials><SessionToken>${keys.sessionToken}</SessionToken><SecretAccessKey>${keys.secretAccessKey}</SecretAccessKey>` +
          `<Expiration>${expiration}</Expiration><AccessKeyId>${keys.accessKeyId}</AccessKeyId></Credentials>` +
          `</AssumeRoleResult><ResponseMetadata><RequestId>fake-${serial}</RequestId></ResponseMetadata></AssumeRoleResponse>`,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
