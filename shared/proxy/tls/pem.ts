/**
 * Reading X.509 certificates in the proxy's steady state through
 * `node:crypto`'s `X509Certificate` (Node's own OpenSSL binding): PEM
 * bundles, validity, names, fingerprints, key match and issuer signature.
 *
 * Nothing here loads @peculiar/x509: the proxy parses and inspects
 * certificates on every new TLS connection (client certificates) and every
 * read of its serving Secret or files, and that library costs ~9 MB of
 * resident memory (issue 11 P5). Certificates are only *made* with it,
 * in a short-lived worker thread (`cert-generation.ts`).
 */
import { createPrivateKey, X509Certificate } from "node:crypto";

/** One `CERTIFICATE` block of a PEM bundle (RFC 7468 §5; other block types are skipped). */
const CERTIFICATE_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/**
 * Parse every `CERTIFICATE` block of a PEM bundle, in order (blocks of other
 * types, e.g. `PRIVATE KEY`, and text between blocks are skipped).
 *
 * @returns the certificates; empty when the text holds no certificate block
 * @throws Error when a certificate block does not parse (Node's OpenSSL error text)
 */
export function certificatesFromPem(pem: string): X509Certificate[] {
  return (pem.match(CERTIFICATE_BLOCK) ?? []).map((block) => new X509Certificate(block));
}

/** A certificate's PEM text without a trailing newline. */
export function certificatePem(cert: X509Certificate): string {
  return cert.toString().trim();
}

/** Start of the validity period (`notBefore`). */
export function notBefore(cert: X509Certificate): Date {
  return cert.validFromDate;
}

/** End of the validity period (`notAfter`). */
export function notAfter(cert: X509Certificate): Date {
  return cert.validToDate;
}

/**
 * The `dNSName` entries of the subjectAltName extension. Node prints the
 * extension as `DNS:a, IP Address:…`, and quotes (JSON) any entry that holds
 * a comma or other special characters, so an exact `DNS:<name>` element is
 * an exact DNS name.
 */
export function dnsNames(cert: X509Certificate): string[] {
  const san = cert.subjectAltName;
  if (san === undefined) return [];
  return san
    .split(", ")
    .filter((entry) => entry.startsWith("DNS:"))
    .map((entry) => entry.slice(4));
}

/**
 * The subject's CN and O values as the apiserver's x509 authenticator reads
 * them (raw UTF-8 values, not escaped): Go's `pkix.Name.FillFromRDNSequence`
 * (`crypto/x509/pkix/pkix.go`) keeps the LAST CN and every O.
 */
export function subjectNames(cert: X509Certificate): { commonName: string; organizations: string[] } {
  const subject = cert.toLegacyObject().subject as unknown as Record<string, string | string[] | undefined>;
  const all = (key: string): string[] => {
    const v = subject[key];
    return v === undefined ? [] : Array.isArray(v) ? v : [v];
  };
  return { commonName: all("CN").at(-1) ?? "", organizations: all("O") };
}

/** Lowercase hex SHA-256 of the certificate's DER (no separators), as apiserver's `X509SHA256=` credential id. */
export function fingerprintHex(cert: X509Certificate): string {
  return cert.fingerprint256.replaceAll(":", "").toLowerCase();
}

/**
 * Whether a PEM private key (any type Node's OpenSSL reads) is the key of
 * `cert` (OpenSSL `X509_check_private_key`). A key that does not parse is
 * not.
 */
export function keyMatchesCertificate(cert: X509Certificate, keyPem: string): boolean {
  try {
    return cert.checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    return false;
  }
}

/** Whether `leaf`'s signature verifies with `ca`'s public key (signature only, no validity or name check). */
export function signedBy(leaf: X509Certificate, ca: X509Certificate): boolean {
  try {
    return leaf.verify(ca.publicKey);
  } catch {
    return false;
  }
}

/**
 * The DNS names the kube-aggregator may dial a Service by: it verifies
 * `<service>.<namespace>.svc` (kube-aggregator `pkg/apiserver/handler_proxy.go`,
 * `ServerName`); the shorter and longer forms serve other in-cluster clients.
 */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [service, `${service}.${namespace}`, `${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`];
}
