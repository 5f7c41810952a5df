/**
 * AWS Signature Version 4 outside an AWS SDK client, on Node, Lambda and
 * workerd alike: `@smithy/signature-v4` with SHA-256 and HMAC-SHA256 over
 * WebCrypto (`crypto.subtle`), no hashing package. Used by Google's AWS
 * subject token (`../gcp/external-account.ts`) and the Amazon Managed
 * Service for Prometheus queries (`../prometheus/amp.ts`).
 */
import { SignatureV4 } from "@smithy/signature-v4";

/**
 * SHA-256 and HMAC-SHA256 over WebCrypto for `@smithy/signature-v4` (its
 * `ChecksumConstructor`): updates are buffered, `digest()` hashes them.
 */
export class WebCryptoSha256 {
  private readonly secret: Uint8Array<ArrayBuffer> | undefined;
  private chunks: Uint8Array<ArrayBuffer>[] = [];
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.secret = secret === undefined ? undefined : bytesOf(secret);
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.chunks.push(bytesOf(data));
  }
  async digest(): Promise<Uint8Array> {
    const data = new Uint8Array(this.chunks.reduce((n, c) => n + c.length, 0));
    let at = 0;
    for (const c of this.chunks) {
      data.set(c, at);
      at += c.length;
    }
    if (this.secret === undefined) return new Uint8Array(await crypto.subtle.digest("SHA-256", data));
    const key = await crypto.subtle.importKey("raw", this.secret, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
    return new Uint8Array(await crypto.subtle.sign("HMAC", key, data));
  }
  reset(): void {
    this.chunks = [];
  }
}

function bytesOf(data: string | ArrayBuffer | ArrayBufferView): Uint8Array<ArrayBuffer> {
  if (typeof data === "string") return new TextEncoder().encode(data);
  if (data instanceof ArrayBuffer) return new Uint8Array(data.slice(0));
  return new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength) as ArrayBuffer);
}

/** One request to sign. */
export interface Sigv4Request {
  /** signing name, e.g. `sts`, `aps` */
  service: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  method: string;
  /** the full URL; its query is signed */
  url: URL;
  /** headers sent (besides `host`, which is added from `url`) */
  headers: Readonly<Record<string, string>>;
  /** the body sent, hashed into the signature (absent: empty) */
  body?: string;
}

/**
 * The request's headers after signing: the ones given, `host`,
 * `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (temporary
 * credentials) and `authorization` (AWS docs, "Create a signed AWS API
 * request"; `@smithy/signature-v4` `SignatureV4.sign`).
 */
export async function sigv4Headers(request: Sigv4Request): Promise<Record<string, string>> {
  const { url } = request;
  const query: Record<string, string> = {};
  url.searchParams.forEach((v, k) => (query[k] = v));
  const signer = new SignatureV4({ service: request.service, region: request.region, credentials: request.credentials, sha256: WebCryptoSha256 });
  const signed = await signer.sign({
    method: request.method,
    protocol: url.protocol,
    hostname: url.hostname,
    ...(url.port ? { port: Number(url.port) } : {}),
    path: url.pathname,
    query,
    headers: { ...request.headers, host: url.host },
    ...(request.body !== undefined ? { body: request.body } : {}),
  });
  return signed.headers;
}
