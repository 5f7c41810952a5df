/**
 * Reading a web stream body (a `Request`'s or a `Response`'s) without
 * trusting its length: shared by the proxy's admission webhook, its in-process
 * bridge and the GCP Workload Identity Federation subject-token reader. Runs
 * on Node and in Workers (no `Buffer`).
 */

/**
 * The bytes of `body`, read chunk by chunk up to `limit` bytes.
 *
 * - `null` (no body) reads as zero bytes.
 * - As soon as the bytes read pass `limit`, reading stops, the stream is
 *   cancelled (a failure to cancel is ignored) and `tooLarge(read)`'s error
 *   is thrown, `read` being the chunks read so far, the one that crossed the
 *   limit included (e.g. for the admission webhook, which answers a refusal
 *   naming the uid in the first bytes of a review too large to check);
 *   nothing past that chunk is read.
 * - An error of the stream itself (a reset connection, an aborted fetch)
 *   propagates as is.
 *
 * The caller decodes the bytes (so each keeps its own decoding, e.g.
 * `TextDecoder`, which drops a leading BOM, or `Buffer#toString`, which
 * keeps it).
 *
 * @param limit the most bytes accepted
 * @param tooLarge builds the error thrown when the body is longer than
 *   `limit`, given the chunks read
 * @throws the error of `tooLarge(read)`, or the stream's own error
 */
export async function readBounded(body: ReadableStream<Uint8Array> | null, limit: number, tooLarge: (read: readonly Uint8Array[]) => Error): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    chunks.push(value);
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(chunks);
    }
  }
  if (chunks.length === 1) return chunks[0]!;
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return all;
}
