/**
 * Verification of a TLS client certificate chain against a CA pool, with the
 * checks Go's `(*x509.Certificate).Verify` makes for the apiserver's client
 * certificate authenticators (apiserver
 * `pkg/authentication/request/x509/x509.go`, `DefaultVerifyOptions`:
 * `KeyUsages: [ExtKeyUsageClientAuth]`; Go `crypto/x509/verify.go`).
 *
 * The TLS handshake itself is Node's (`tls.createServer` with
 * `requestCert: true, rejectUnauthorized: false`): it proves the client holds
 * the certificate's key. Chain building and signature checks are
 * @peculiar/x509's `X509ChainBuilder`; this module adds the policy checks:
 *
 * - the chain ends in a certificate of the pool (a trust anchor);
 * - every certificate of the chain is within its validity period;
 * - every intermediate is a CA (basicConstraints CA:true) and path lengths hold;
 * - extended key usage, as Go's `checkChainForKeyUsage`: every certificate
 *   that has an EKU extension must allow clientAuth (or anyExtendedKeyUsage);
 *   a certificate without the extension allows any usage.
 */
import { x509 } from "./x509.ts";

const OID_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const OID_ANY_EKU = "2.5.29.37.0";

/** A set of trust anchors (a PEM bundle such as `client-ca-file`). */
export interface CertPool {
  certs: x509.X509Certificate[];
  /** SHA-256 thumbprints (hex) of `certs` */
  thumbprints: Set<string>;
}

/** Build a pool from parsed certificates. */
export async function certPool(certs: x509.X509Certificate[]): Promise<CertPool> {
  const thumbprints = new Set<string>();
  for (const c of certs) thumbprints.add(await thumbprint(c));
  return { certs, thumbprints };
}

/** Hex SHA-256 of the certificate's DER. */
export async function thumbprint(cert: x509.X509Certificate): Promise<string> {
  return Buffer.from(await cert.getThumbprint("SHA-256")).toString("hex");
}

/** Thrown when a chain does not verify; `message` follows Go's wording where there is one. */
export class CertificateVerifyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CertificateVerifyError";
  }
}

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
  leaf: x509.X509Certificate,
  intermediates: readonly x509.X509Certificate[],
  pool: CertPool,
  now: Date,
): Promise<x509.X509Certificate[]> {
  const builder = new x509.X509ChainBuilder({ certificates: [...pool.certs, ...intermediates] });
  let built: x509.X509Certificate[];
  try {
    built = [...(await builder.build(leaf))];
  } catch (err) {
    throw new CertificateVerifyError(`x509: cannot build a certificate chain: ${(err as Error).message}`);
  }
  // The chain is valid up to the first certificate that is a trust anchor.
  let anchor = -1;
  for (let i = 0; i < built.length; i++) {
    if (pool.thumbprints.has(await thumbprint(built[i]!))) {
      anchor = i;
      break;
    }
  }
  if (anchor < 0) throw new CertificateVerifyError("x509: certificate signed by unknown authority");
  const chain = built.slice(0, anchor + 1);
  for (const cert of chain) {
    if (now < cert.notBefore || now > cert.notAfter) {
      throw new CertificateVerifyError(
        `x509: certificate has expired or is not yet valid: current time ${now.toISOString()} is outside ${cert.notBefore.toISOString()}–${cert.notAfter.toISOString()} (${cert.subject})`,
      );
    }
  }
  for (let i = 1; i < chain.length; i++) {
    const ca = chain[i]!;
    const bc = ca.getExtension(x509.BasicConstraintsExtension);
    // Go checks CA:true on intermediates only; the anchor is trusted as configured.
    if (i < chain.length - 1 && (bc === null || !bc.ca)) {
      throw new CertificateVerifyError(`x509: certificate is not authorized to sign other certificates (${ca.subject})`);
    }
    if (bc !== null && bc.pathLength !== undefined && i - 1 > bc.pathLength) {
      throw new CertificateVerifyError(`x509: too many intermediates for path length constraint (${ca.subject})`);
    }
  }
  if (!allowsClientAuth(chain)) {
    throw new CertificateVerifyError("x509: certificate specifies an incompatible key usage");
  }
  return chain;
}

/** Go's `checkChainForKeyUsage` for the single usage clientAuth. */
function allowsClientAuth(chain: readonly x509.X509Certificate[]): boolean {
  for (const cert of chain) {
    const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
    if (eku === null) continue;
    const usages = eku.usages.map(String);
    if (usages.length === 0) continue;
    if (usages.includes(OID_ANY_EKU)) continue;
    if (!usages.includes(OID_CLIENT_AUTH)) return false;
  }
  return true;
}

/**
 * The subject's CN and O values as the apiserver's x509 authenticator reads
 * them: Go's `pkix.Name.FillFromRDNSequence` keeps the last CN and every O.
 */
export function subjectOf(cert: x509.X509Certificate): { commonName: string; organizations: string[] } {
  const name = cert.subjectName;
  return { commonName: name.getField("CN").at(-1) ?? "", organizations: name.getField("O") };
}
