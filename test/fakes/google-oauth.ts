/**
 * A fake of Google's OAuth 2.0 token endpoint for the service-account flow
 * (RFC 7523 JWT bearer grant, "Using OAuth 2.0 for Server to Server
 * Applications"): `POST /token` with
 * `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT`.
 * It verifies the assertion's RS256 signature with the service account's
 * public key, its `iss`, `aud` (= this endpoint), `scope`, `iat`/`exp` (at
 * most one hour, checked against the injected clock), and issues opaque
 * access tokens the REST fake accepts.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { KeyObject } from "node:crypto";
import { jwtVerify } from "jose";

/** A running token endpoint. */
export interface OAuthFake {
  /** `http://127.0.0.1:PORT/token` — the key's `token_uri` */
  tokenUri: string;
  /** access tokens issued and still valid, token → service-account email */
  readonly issued: Map<string, string>;
  /** exchanges received (valid or not) */
  readonly requests: { grantType: string | null; claims?: Record<string, unknown>; error?: string }[];
  /** register a service account the endpoint accepts */
  allow(email: string, publicKey: KeyObject): void;
  /** forget every issued token (as if they expired) */
  revokeAll(): void;
  /** when set, every exchange fails with this HTTP status */
  failWith: number | undefined;
  close(): Promise<void>;
}

/** Start a token endpoint on 127.0.0.1. `now` is the clock assertions are checked against. */
export async function startOAuthFake(now: () => number = Date.now): Promise<OAuthFake> {
  const accounts = new Map<string, KeyObject>();
  const issued = new Map<string, string>();
  const requests: OAuthFake["requests"] = [];
  let counter = 0;
  const fake: OAuthFake = {
    tokenUri: "",
    issued,
    requests,
    allow: (email, key) => void accounts.set(email, key),
    revokeAll: () => issued.clear(),
    failWith: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const answer = (status: number, body: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(body));
      };
      if (req.method !== "POST" || req.url !== "/token" || !String(req.headers["content-type"]).startsWith("application/x-www-form-urlencoded")) {
        return answer(400, { error: "invalid_request", error_description: "expected a form POST to /token" });
      }
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      const record: OAuthFake["requests"][number] = { grantType: form.get("grant_type") };
      requests.push(record);
      if (fake.failWith !== undefined) return answer(fake.failWith, { error: "internal_failure", error_description: "fake outage" });
      if (record.grantType !== "urn:ietf:params:oauth:grant-type:jwt-bearer") {
        record.error = "unsupported_grant_type";
        return answer(400, { error: "unsupported_grant_type", error_description: "Invalid grant_type" });
      }
      const assertion = form.get("assertion") ?? "";
      try {
        const [, payloadPart] = assertion.split(".");
        const unverified = JSON.parse(Buffer.from(payloadPart ?? "", "base64url").toString("utf8")) as { iss?: string };
        const key = accounts.get(unverified.iss ?? "");
        if (key === undefined) throw new Error(`unknown service account ${unverified.iss}`);
        const { payload, protectedHeader } = await jwtVerify(assertion, key, {
          issuer: unverified.iss!,
          audience: fake.tokenUri,
          algorithms: ["RS256"],
          currentDate: new Date(now()),
        });
        record.claims = { ...payload, kid: protectedHeader.kid };
        if (typeof payload.scope !== "string" || payload.scope === "") throw new Error("no scope");
        if (typeof payload.iat !== "number" || typeof payload.exp !== "number" || payload.exp - payload.iat > 3600) {
          throw new Error("iat/exp must span at most one hour");
        }
        const token = `ya29.fake-${++counter}`;
        issued.set(token, unverified.iss!);
        return answer(200, { access_token: token, expires_in: 3599, token_type: "Bearer" });
      } catch (err) {
        record.error = (err as Error).message;
        return answer(400, { error: "invalid_grant", error_description: (err as Error).message });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  fake.tokenUri = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  return fake;
}
