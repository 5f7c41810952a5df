/**
 * SHA-256 and HMAC-SHA256 over WebCrypto (`crypto.subtle`), the hash
 * `@smithy/signature-v4` takes as its `sha256` option: runs on Node, Lambda
 * and workerd alike, without a hashing package. Used by every AWS Signature
 * Version 4 this project computes outside an AWS SDK client (Google's AWS
 * subject token, the Amazon Managed Service for Prometheus queries).
 */
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
