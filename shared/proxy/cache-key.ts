/**
 * Keys of the proxy's caches made from request data (a review spec, a
 * bearer token, a caller and URL).
 */
import { hash } from "node:crypto";

/**
 * A cache key for `text`: its SHA-256 digest as a 32-character string, one
 * character a byte (`latin1`: V8 keeps it in one byte a character, 48 bytes
 * with its header against 80 for the 64-character hex digest; issue 11 P5).
 * `crypto.hash` is Node's one-shot digest: no Hash object per call. Keys are
 * only compared, never shown.
 */
export function digestKey(text: string): string {
  return hash("sha256", text, "latin1");
}
