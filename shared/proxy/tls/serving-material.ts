/**
 * What the proxy serves TLS with and for which Service: the types shared by
 * the sources of the serving certificate (`tls.ts`), the Secret it is kept
 * in and renewed through (`rotation.ts`), and the servers that use it.
 */

/** Serving certificate, key and the CA bundle clients verify it with. */
export interface ServingMaterial {
  certPem: string;
  keyPem: string;
  /** PEM CA bundle for `caBundle`; undefined when unknown (files without a CA file) */
  caPem?: string;
}

/** The Service the certificate must cover. */
export interface ServiceName {
  namespace: string;
  name: string;
}
