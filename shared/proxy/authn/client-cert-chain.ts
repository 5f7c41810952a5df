/**
 * Client certificate chains that need intermediates (`client-cert.ts`): a
 * rare configuration, so this module — and @peculiar/x509 with it (~9 MB of
 * resident memory, issue 11 P5) — is loaded only by the dynamic `import()`
 * of the first such chain. node:crypto exposes no basicConstraints
 * `pathLenConstraint`; @peculiar/x509 builds the chain (`X509ChainBuilder`)
 * and reads the extension. Go `crypto/x509/verify.go` semantics, as
 * documented in `client-cert.ts`.
 */
import { X509Certificate } from "node:crypto";
import { CertificateVerifyError, checkValidity, type CertPool } from "./client-cert-checks.ts";
import { fingerprintHex } from "../tls/pem.ts";
import { x509 } from "../tls/x509.ts";

/**
 * Build and check the chain from `leaf` through `intermediates` to a
 * certificate of `pool`: it reaches the pool, every certificate is within
 * its validity at `now`, every intermediate is a CA, and path lengths hold.
 * (The extended key usage is checked by the caller.)
 *
 * @returns the chain, leaf first, trust anchor last (node:crypto certificates)
 * @throws CertificateVerifyError when any of those does not hold
 */
export async function buildChainWithIntermediates(
  leaf: X509Certificate,
  intermediates: readonly X509Certificate[],
  pool: CertPool,
  now: Date,
): Promise<X509Certificate[]> {
  const parsed = (c: X509Certificate) => new x509.X509Certificate(c.raw);
  const builder = new x509.X509ChainBuilder({ certificates: [...pool.certs.map(parsed), ...intermediates.map(parsed)] });
  let built: X509Certificate[];
  let peculiar: x509.X509Certificate[];
  try {
    peculiar = [...(await builder.build(parsed(leaf)))];
    built = peculiar.map((c) => new X509Certificate(Buffer.from(c.rawData)));
  } catch (err) {
    throw new CertificateVerifyError(`x509: cannot build a certificate chain: ${(err as Error).message}`);
  }
  // The chain is valid up to the first certificate that is a trust anchor.
  const anchor = built.findIndex((c) => pool.thumbprints.has(fingerprintHex(c)));
  if (anchor < 0) throw new CertificateVerifyError("x509: certificate signed by unknown authority");
  const chain = built.slice(0, anchor + 1);
  checkValidity(chain, now);
  for (let i = 1; i < chain.length; i++) {
    const ca = peculiar[i]!;
    const bc = ca.getExtension(x509.BasicConstraintsExtension);
    // Go checks CA:true on intermediates only; the anchor is trusted as configured.
    if (i < chain.length - 1 && (bc === null || !bc.ca)) {
      throw new CertificateVerifyError(`x509: certificate is not authorized to sign other certificates (${ca.subject})`);
    }
    if (bc !== null && bc.pathLength !== undefined && i - 1 > bc.pathLength) {
      throw new CertificateVerifyError(`x509: too many intermediates for path length constraint (${ca.subject})`);
    }
  }
  return chain;
}
