/**
 * Fixed signing-key secrets for tests: 32 bytes that look random (SHA-256
 * of a label), so they pass `parseSigningKeys`'s low-entropy rules, yet are
 * the same on every run. Never use `Buffer.alloc(32, n)` as a key: a
 * constant key is refused (shared/signing.ts `keyWeakness`).
 */
import { createHash } from "node:crypto";

/** 32 random-looking bytes determined by `seed`. */
export function fixtureKey(seed: string | number): Buffer {
  return createHash("sha256").update(`external-metrics-bridge test key ${seed}`).digest();
}
