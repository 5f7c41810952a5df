/**
 * Verification of a TLS client certificate chain against a CA pool, with the
 * checks Go's `(*x509.Certificate).Verify` makes for the apiserver's client
 * certificate authenticators (apiserver
 * `pkg/authentication/request/x509/x509.go`, `DefaultVerifyOptions`:
 * `KeyUsages: [ExtKeyUsageClientAuth]`; Go `crypto/x509/verify.go`).
 *
 * The TLS handshake itself is Node's (`tls.createServer` with
 * `requestCert: true, rejectUnauthorized: false`): it proves the client holds
 * the certificate's key. This module adds the chain and policy checks:
 *
 * - the chain ends in a certificate of the pool (a trust anchor);
 * - every certificate of the chain is within its validity period;
 * - every intermediate is a CA (basicConstraints CA:true) and path lengths hold;
 * - extended key usage, as Go's `checkChainForKeyUsage`: every certificate
 *   that has an EKU extension must allow clientAuth (or anyExtendedKeyUsage);
 *   a certificate without the extension allows any usage.
 *
 * Two paths (issue 11 P5: @peculiar/x509 is ~9 MB of resident memory, kept
 * out of the proxy's steady state):
 *
 * - **direct** (the normal case: kube-apiserver's front-proxy client
 *   certificate is signed by the front-proxy CA, no intermediates; a client
 *   certificate signed by the cluster CA): node:crypto's `X509Certificate`
 *   (Node's OpenSSL binding) — the leaf is in the pool, or a pool
 *   certificate is its issuer (`checkIssued`: issuer name, authority key id,
 *   keyCertSign) and its signature verifies with that certificate's key
 *   (`verify`); then validity of leaf and anchor and the EKU rule. A
 *   two-certificate chain has no intermediate, so the CA and path-length
 *   rules cannot fail there;
 * - **with intermediates** (a rare configuration: a client CA that signs
 *   through intermediates the client sends): node:crypto exposes no
 *   basicConstraints `pathLenConstraint`, so `client-cert-chain.ts` loads
 *   @peculiar/x509 lazily in the main thread and builds the chain with its
 *   `X509ChainBuilder`, with the same checks.
 */
import type { X509Certificate } from "node:crypto";
import { CertificateVerifyError, checkValidity, validityProblem, type CertPool } from "./client-cert-checks.ts";
import { fingerprintHex, signedBy, subjectNames } from "../tls/pem.ts";

const OID_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const OID_ANY_EKU = "2.5.29.37.0";

/** Build a pool from parsed certificates (async for the callers written when hashing was WebCrypto's). */
export async function certPool(certs: X509Certificate[]): Promise<CertPool> {
  return { certs, thumbprints: new Set(certs.map(fingerprintHex)) };
}

/** Lowercase hex SHA-256 of the certificate's DER. */
export function thumbprint(cert: X509Certificate): string {
  return fingerprintHex(cert);
}

/** Which path verified how many chains (for tests and metrics). */
export const verificationStats = { direct: 0, withIntermediates: 0 };

/**
 * Verify `leaf` (with the intermediates the client sent) against `pool` for
 * client authentication at time `now`.
 *
 * @returns the verified chain, leaf first, trust anchor last
 * @throws CertificateVerifyError when no chain reaches the pool, a
 *   certificate is expired or not yet valid, an intermediate is not a CA, a
 *   path length is exceeded, or the chain does not allow clientAuth
 */
export async function verifyClientCertificate(
  leaf: X509Certificate,
  intermediates: readonly X509Certificate[],
  pool: CertPool,
  now: Date,
): Promise<X509Certificate[]> {
  let chain: X509Certificate[] | undefined;
  let anchorProblem: CertificateVerifyError | undefined;
  if (pool.thumbprints.has(fingerprintHex(leaf))) chain = [leaf];
  else {
    for (const ca of pool.certs) {
      if (!leaf.checkIssued(ca) || !signedBy(leaf, ca)) continue;
      const problem = validityProblem(ca, now);
      if (problem !== undefined) {
        // Another anchor of the same name (a rotated CA) may still be valid.
        anchorProblem ??= problem;
        continue;
      }
      chain = [leaf, ca];
      break;
    }
  }
  if (chain === undefined) {
    if (intermediates.length > 0) {
      verificationStats.withIntermediates++;
      const { buildChainWithIntermediates } = await import("./client-cert-chain.ts");
      chain = await buildChainWithIntermediates(leaf, intermediates, pool, now);
    } else throw anchorProblem ?? new CertificateVerifyError("x509: certificate signed by unknown authority");
  } else {
    verificationStats.direct++;
    checkValidity(chain, now);
  }
  if (!allowsClientAuth(chain)) {
    throw new CertificateVerifyError("x509: certificate specifies an incompatible key usage");
  }
  return chain;
}

/** Go's `checkChainForKeyUsage` for the single usage clientAuth (`keyUsage` is Node's list of extended key usage OIDs; undefined without the extension). */
function allowsClientAuth(chain: readonly X509Certificate[]): boolean {
  for (const cert of chain) {
    const usages = cert.keyUsage;
    if (usages === undefined || usages.length === 0) continue;
    if (usages.includes(OID_ANY_EKU)) continue;
    if (!usages.includes(OID_CLIENT_AUTH)) return false;
  }
  return true;
}

/**
 * The subject's CN and O values as the apiserver's x509 authenticator reads
 * them: Go's `pkix.Name.FillFromRDNSequence` keeps the last CN and every O.
 */
export function subjectOf(cert: X509Certificate): { commonName: string; organizations: string[] } {
  return subjectNames(cert);
}
