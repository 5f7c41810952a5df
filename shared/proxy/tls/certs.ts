/**
 * Making X.509 certificates through @peculiar/x509 and WebCrypto: a CA,
 * certificates it issues (serving, client), PEM encoding, and PEM bundle
 * parsing into @peculiar/x509 objects. ECDSA P-256 with SHA-256, which Go's
 * crypto/tls (the kube-aggregator's client) and Node's OpenSSL both accept.
 *
 * The running proxy never imports this module into its main thread (issue 11
 * P5: @peculiar/x509 with reflect-metadata, tsyringe and its ASN.1 schemas
 * is ~9 MB of resident memory): it generates certificates through
 * `cert-generation.ts`, which runs this module in a short-lived worker
 * thread (`x509-worker.ts`), and inspects certificates with `pem.ts`
 * (node:crypto). Tests use it directly to build their PKI.
 */
import { createPrivateKey, createPublicKey } from "node:crypto";
import { serviceDnsNames } from "./pem.ts";
import { x509 } from "./x509.ts";

export { serviceDnsNames };


const KEY_ALGORITHM: EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING_ALGORITHM: EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
const DAY_MS = 24 * 3600 * 1000;
/** anyExtendedKeyUsage (RFC 5280 §4.2.1.12) */
const OID_ANY_EKU = "2.5.29.37.0";

/** A certificate with its key pair and their PEM forms. */
export interface IssuedCertificate {
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
  /** PEM `CERTIFICATE` */
  certPem: string;
  /** PEM `PRIVATE KEY` (PKCS #8) */
  keyPem: string;
}

/** What {@link issueCertificate} puts in a certificate. */
export interface CertificateOptions {
  commonName: string;
  /** subject O= values (Kubernetes groups for client certificates) */
  organizations?: string[];
  dnsNames?: string[];
  ipAddresses?: string[];
  /**
   * extended key usages; `undefined` omits the extension (which Go's
   * crypto/x509 treats as "any usage")
   */
  usages?: ("serverAuth" | "clientAuth" | "anyExtendedKeyUsage")[];
  /** validity from `notBefore` (default now − 1 h), days (default 365) */
  validDays?: number;
  /**
   * validity, seconds, counted from now (overrides `validDays`); `notBefore`
   * is then backdated by min(1 h, validSeconds / 10) for clock skew
   */
  validSeconds?: number;
  /** latest `notAfter` (e.g. the issuing CA's): a later one is cut back to it */
  notAfterLimit?: Date;
  notBefore?: Date;
  /** make it an intermediate CA */
  isCA?: boolean;
  /** basicConstraints pathLenConstraint of an intermediate CA (with `isCA`) */
  pathLength?: number;
  /** "now" for the validity, ms since the epoch (default `Date.now()`) */
  nowMs?: number;
}

/**
 * Create a self-signed CA (basicConstraints CA:true, keyCertSign).
 *
 * @param validDays validity in days (default 3650)
 * @param options.validSeconds validity in seconds counted from now (overrides
 *   `validDays`; `notBefore` is backdated by min(1 h, validSeconds / 10))
 * @param options.nowMs "now", ms since the epoch (default `Date.now()`)
 */
export async function createCA(commonName: string, validDays = 3650, options: { validSeconds?: number; nowMs?: number } = {}): Promise<IssuedCertificate> {
  const keys = (await crypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
  const { notBefore, notAfter } = validity(options.validSeconds, validDays, undefined, options.nowMs ?? Date.now());
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: new x509.Name([{ CN: [commonName] }]),
    notBefore,
    notAfter,
    keys,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return finish(cert, keys);
}

/**
 * Issue a certificate signed by `ca`.
 *
 * @throws Error from WebCrypto when key generation or signing fails
 */
export async function issueCertificate(ca: IssuedCertificate, options: CertificateOptions): Promise<IssuedCertificate> {
  const keys = (await crypto.subtle.generateKey(KEY_ALGORITHM, true, ["sign", "verify"])) as CryptoKeyPair;
  const { notBefore, notAfter: wanted } = validity(options.validSeconds, options.validDays ?? 365, options.notBefore, options.nowMs ?? Date.now());
  const notAfter = options.notAfterLimit !== undefined && options.notAfterLimit < wanted ? options.notAfterLimit : wanted;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(options.isCA === true, options.isCA === true ? options.pathLength : undefined, true),
    new x509.KeyUsagesExtension(
      options.isCA === true
        ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature
        : x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
      true,
    ),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    await x509.AuthorityKeyIdentifierExtension.create(ca.keys.publicKey),
  ];
  if (options.usages !== undefined) {
    extensions.push(new x509.ExtendedKeyUsageExtension(options.usages.map((u) => (u === "anyExtendedKeyUsage" ? OID_ANY_EKU : x509.ExtendedKeyUsage[u]))));
  }
  const names = [
    ...(options.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(options.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names));
  const subject: x509.JsonName = [{ CN: [options.commonName] }];
  if (options.organizations !== undefined && options.organizations.length > 0) subject.push({ O: options.organizations });
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerial(),
    subject: new x509.Name(subject),
    issuer: ca.cert.subjectName,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: SIGNING_ALGORITHM,
    extensions,
  });
  return finish(cert, keys);
}

/**
 * A fresh CA and a serving certificate for a Service (plus `localhost` and
 * 127.0.0.1 for probes and local runs).
 *
 * @param validDays serving certificate validity, days
 */
export async function generateServingCertificate(
  service: string,
  namespace: string,
  validDays = 365,
  nowMs = Date.now(),
): Promise<{ ca: IssuedCertificate; serving: IssuedCertificate }> {
  const ca = await createCA(`${service}.${namespace}.svc-ca@${Math.floor(nowMs / 1000)}`, 3650, { nowMs });
  const serving = await issueCertificate(ca, {
    nowMs,
    commonName: `${service}.${namespace}.svc`,
    dnsNames: [...serviceDnsNames(service, namespace), "localhost"],
    ipAddresses: ["127.0.0.1"],
    usages: ["serverAuth"],
    validDays,
  });
  return { ca, serving };
}

/**
 * A new CA for a Service's serving certificates. The common name carries the
 * creation time (Unix seconds) so successive CAs are told apart in logs.
 *
 * @param validSeconds CA validity, seconds from now
 * @param nowMs "now", ms since the epoch (default `Date.now()`)
 */
export function createServingCA(service: string, namespace: string, validSeconds: number, nowMs = Date.now()): Promise<IssuedCertificate> {
  return createCA(`${service}.${namespace}.svc-ca@${Math.floor(nowMs / 1000)}`, 0, { validSeconds, nowMs });
}

/**
 * A serving certificate for a Service (plus `localhost` and 127.0.0.1)
 * signed by `ca`, never outliving it.
 *
 * @param validSeconds validity, seconds from now (cut back to the CA's notAfter)
 * @param nowMs "now", ms since the epoch (default `Date.now()`)
 */
export function issueServingCertificate(ca: IssuedCertificate, service: string, namespace: string, validSeconds: number, nowMs = Date.now()): Promise<IssuedCertificate> {
  return issueCertificate(ca, {
    nowMs,
    commonName: `${service}.${namespace}.svc`,
    dnsNames: [...serviceDnsNames(service, namespace), "localhost"],
    ipAddresses: ["127.0.0.1"],
    usages: ["serverAuth"],
    validSeconds,
    notAfterLimit: ca.cert.notAfter,
  });
}

/**
 * A CA from its PEM certificate and PEM PKCS #8 private key, ready to sign.
 *
 * @throws Error when the certificate or key does not parse, or the key is not the certificate's
 */
export async function caFromPem(certPem: string, keyPem: string): Promise<IssuedCertificate> {
  const cert = certificatesFromPem(certPem)[0];
  if (cert === undefined) throw new Error("no CA certificate");
  if (!keyMatchesCertificate(cert, keyPem)) throw new Error("the CA key does not belong to the CA certificate");
  const der = x509.PemConverter.decodeFirst(keyPem);
  const privateKey = await crypto.subtle.importKey("pkcs8", der, KEY_ALGORITHM, true, ["sign"]);
  const publicKey = await cert.publicKey.export(KEY_ALGORITHM, ["verify"]);
  return { cert, keys: { privateKey, publicKey }, certPem: cert.toString("pem"), keyPem };
}

/**
 * Whether a PEM private key (any type Node's OpenSSL reads) is the key of
 * `cert`: their SubjectPublicKeyInfo DER encodings are equal.
 */
export function keyMatchesCertificate(cert: x509.X509Certificate, keyPem: string): boolean {
  try {
    const spki = createPublicKey(createPrivateKey(keyPem)).export({ type: "spki", format: "der" });
    return Buffer.from(cert.publicKey.rawData).equals(spki);
  } catch {
    return false;
  }
}

/** Whether `leaf`'s signature verifies with `ca`'s public key (signature only, no validity check). */
export async function signedBy(leaf: x509.X509Certificate, ca: x509.X509Certificate): Promise<boolean> {
  try {
    return await leaf.verify({ publicKey: ca.publicKey, signatureOnly: true });
  } catch {
    return false;
  }
}

/** notBefore/notAfter from a validity in seconds (from now) or days (from notBefore). */
function validity(validSeconds: number | undefined, validDays: number, notBefore: Date | undefined, now: number): { notBefore: Date; notAfter: Date } {
  if (validSeconds !== undefined) {
    const backdate = Math.min(3600_000, validSeconds * 100);
    return { notBefore: notBefore ?? new Date(now - backdate), notAfter: new Date(now + validSeconds * 1000) };
  }
  const from = notBefore ?? new Date(now - 3600_000);
  return { notBefore: from, notAfter: new Date(from.getTime() + validDays * DAY_MS) };
}

/**
 * Parse every `CERTIFICATE` block of a PEM bundle (other blocks are skipped).
 *
 * @throws Error when a certificate block does not parse
 */
export function certificatesFromPem(pem: string): x509.X509Certificate[] {
  return x509.PemConverter.decodeWithHeaders(pem)
    .filter((block) => block.type === x509.PemConverter.CertificateTag)
    .map((block) => new x509.X509Certificate(block.rawData));
}

async function finish(cert: x509.X509Certificate, keys: CryptoKeyPair): Promise<IssuedCertificate> {
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return {
    cert,
    keys,
    certPem: cert.toString("pem"),
    keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY"),
  };
}

/** A positive random 16-byte serial number in hex (RFC 5280 §4.1.2.2). */
function randomSerial(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[0] = bytes[0]! & 0x7f;
  return Buffer.from(bytes).toString("hex");
}
