/**
 * What both paths of client certificate verification share — the direct
 * one (`client-cert.ts`, node:crypto) and the one through intermediates
 * (`client-cert-chain.ts`, @peculiar/x509, loaded lazily): the pool of
 * trust anchors, the error a chain that does not verify throws, and the
 * validity-period check. Both import it, so the lazily loaded chain module
 * does not import the module that loads it.
 */
import type { X509Certificate } from "node:crypto";
import { notAfter, notBefore } from "../tls/pem.ts";

/** A set of trust anchors (a PEM bundle such as `client-ca-file`). */
export interface CertPool {
  certs: X509Certificate[];
  /** SHA-256 thumbprints (lowercase hex of the DER) of `certs` */
  thumbprints: Set<string>;
}

/** Thrown when a chain does not verify; `message` follows Go's wording where there is one. */
export class CertificateVerifyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CertificateVerifyError";
  }
}

/**
 * Every certificate of `chain` within its validity period at `now` (Go's `isValid`).
 *
 * @throws CertificateVerifyError naming the first that is not
 */
export function checkValidity(chain: readonly X509Certificate[], now: Date): void {
  for (const cert of chain) {
    const problem = validityProblem(cert, now);
    if (problem !== undefined) throw problem;
  }
}

/** The error for `cert` when `now` is outside its validity period (Go's `isValid`), else undefined. */
export function validityProblem(cert: X509Certificate, now: Date): CertificateVerifyError | undefined {
  const from = notBefore(cert);
  const to = notAfter(cert);
  if (now >= from && now <= to) return undefined;
  return new CertificateVerifyError(
    `x509: certificate has expired or is not yet valid: current time ${now.toISOString()} is outside ${from.toISOString()}–${to.toISOString()} (${cert.subject.trim().replaceAll("\n", ", ")})`,
  );
}
