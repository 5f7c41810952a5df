/**
 * Certificates for the test control plane, made with the proxy's own X.509
 * helpers (`shared/proxy/tls/certs.ts`: @peculiar/x509 over WebCrypto, ECDSA
 * P-256, PEM out with PKCS#8 keys, which k8s.io/client-go/util/keyutil reads).
 *
 * The layout follows kubeadm's (`cmd/kubeadm/app/phases/certs`): a cluster CA
 * for serving and client certificates, a separate front-proxy CA for the
 * aggregator's client certificate, and a service-account signing key pair.
 */
import { createCA as createProxyCA, issueCertificate } from "../../shared/proxy/tls/certs.ts";
import { x509 } from "../../shared/proxy/tls/x509.ts";

/** A certificate and its private key, both PEM. */
export interface KeyPair {
  cert: string;
  key: string;
}

/** A CA that can sign leaf certificates. */
export interface CertificateAuthority extends KeyPair {
  /**
   * Sign a leaf certificate valid for one day.
   *
   * @param commonName  CN: the Kubernetes user name of a client certificate
   * @param usage       `server` (serverAuth), `client` (clientAuth) or both
   * @param options     `groups` (O=, Kubernetes groups); DNS names and IP addresses
   */
  issue(commonName: string, usage: ReadonlyArray<"server" | "client">, options?: { groups?: string[]; dns?: string[]; ip?: string[] }): Promise<KeyPair>;
}

/** Create a self-signed CA named `CN=<name>`, valid for one day. */
export async function createCA(name: string): Promise<CertificateAuthority> {
  const ca = await createProxyCA(name, 1);
  return {
    cert: ca.certPem,
    key: ca.keyPem,
    async issue(commonName, usage, options = {}) {
      const leaf = await issueCertificate(ca, {
        commonName,
        organizations: options.groups ?? [],
        dnsNames: options.dns ?? [],
        ipAddresses: options.ip ?? [],
        usages: usage.map((u) => (u === "server" ? "serverAuth" : "clientAuth")),
        validDays: 1,
      });
      return { cert: leaf.certPem, key: leaf.keyPem };
    },
  };
}

/** A service-account token signing key pair (ECDSA P-256): PKCS#8 private key and SPKI public key, PEM. */
export async function createSigningKeyPair(): Promise<{ privateKey: string; publicKey: string }> {
  const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  const spki = await crypto.subtle.exportKey("spki", keys.publicKey);
  return {
    privateKey: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"),
    publicKey: x509.PemConverter.encode(spki, "PUBLIC KEY"),
  };
}
