/**
 * Client certificate verification (shared/proxy/authn/client-cert.ts) on a
 * controlled clock, with Go `crypto/x509` Verify semantics for
 * `ExtKeyUsageClientAuth`: the direct path (leaf issued by a pool
 * certificate, node:crypto only — what kube-apiserver's front-proxy client
 * certificate takes) and the path through intermediates (@peculiar/x509
 * loaded lazily). Certificates are made with shared/proxy/tls/certs.ts.
 */
import { X509Certificate } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { createCA, issueCertificate, type CertificateOptions, type IssuedCertificate } from "../../shared/proxy/tls/certs.ts";
import { CertificateVerifyError, type CertPool } from "../../shared/proxy/authn/client-cert-checks.ts";
import { certPool, subjectOf, thumbprint, verificationStats, verifyClientCertificate } from "../../shared/proxy/authn/client-cert.ts";
import { certificatesFromPem, dnsNames, keyMatchesCertificate, signedBy } from "../../shared/proxy/tls/pem.ts";

const node = (c: IssuedCertificate) => new X509Certificate(c.certPem);
const NOW = new Date();
const DAY = 86400_000;

let ca: IssuedCertificate;
let pool: CertPool;
beforeAll(async () => {
  ca = await createCA("front-proxy-ca");
  pool = await certPool([node(ca)]);
});

const issue = (options: Partial<CertificateOptions>, by: IssuedCertificate = ca) => issueCertificate(by, { commonName: "front-proxy-client", usages: ["clientAuth"], ...options });

async function verify(leaf: IssuedCertificate, intermediates: IssuedCertificate[] = [], p = pool, now = NOW) {
  return verifyClientCertificate(node(leaf), intermediates.map(node), p, now);
}

/** The rejection's message (fails the test when it verifies). */
async function refusal(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected a CertificateVerifyError").toBeInstanceOf(CertificateVerifyError);
  return (err as Error).message;
}

describe("direct chain (leaf issued by a pool certificate): node:crypto only", () => {
  it("accepts the front-proxy client certificate, leaf first and anchor last, without the intermediate path", async () => {
    const leaf = await issue({});
    const before = { ...verificationStats };
    const chain = await verify(leaf);
    expect(chain.map((c) => c.fingerprint256)).toEqual([node(leaf).fingerprint256, node(ca).fingerprint256]);
    expect(chain[0]).toBeInstanceOf(X509Certificate);
    expect(verificationStats.direct).toBe(before.direct + 1);
    expect(verificationStats.withIntermediates).toBe(before.withIntermediates);
  });

  it("refuses a leaf signed by another key under the same issuer name and authority key id (the signature is checked, not only the names)", async () => {
    const impostor = await createCA("front-proxy-ca");
    // issuer name and authority key id of the real CA, signature by the impostor's key
    const forged = await issue({}, { ...ca, keys: { publicKey: ca.keys.publicKey, privateKey: impostor.keys.privateKey } });
    expect(node(forged).checkIssued(node(ca))).toBe(true);
    expect(await refusal(verify(forged))).toBe("x509: certificate signed by unknown authority");
    // and one of another CA of the same name (its own key id)
    expect(await refusal(verify(await issue({}, impostor)))).toBe("x509: certificate signed by unknown authority");
  });

  it("refuses an expired anchor, and a leaf that is expired or not yet valid", async () => {
    const shortCA = await createCA("front-proxy-ca", 0, { validSeconds: 60, nowMs: NOW.getTime() - 120_000 });
    const leaf = await issue({ notBefore: new Date(NOW.getTime() - DAY), validDays: 30 }, shortCA);
    const shortPool = await certPool([node(shortCA)]);
    expect(await refusal(verify(leaf, [], shortPool))).toMatch(/^x509: certificate has expired or is not yet valid: .*CN=front-proxy-ca/);
    // the same leaf verifies while its anchor was valid
    expect(await verify(leaf, [], shortPool, new Date(NOW.getTime() - 90_000))).toHaveLength(2);

    const expired = await issue({ notBefore: new Date(NOW.getTime() - 10 * DAY), validDays: 2 });
    expect(await refusal(verify(expired))).toMatch(/expired or is not yet valid.*CN=front-proxy-client/);
    const future = await issue({ notBefore: new Date(NOW.getTime() + DAY) });
    expect(await refusal(verify(future))).toMatch(/expired or is not yet valid/);
  });

  it("takes another anchor of the same name (a rotated CA) when one has expired", async () => {
    const old = await createCA("front-proxy-ca", 0, { validSeconds: 60, nowMs: NOW.getTime() - 120_000 });
    const both = await certPool([node(old), node(ca)]);
    expect(await verify(await issue({}), [], both)).toHaveLength(2);
    const fromOld = await issue({ notBefore: new Date(NOW.getTime() - DAY) }, old);
    expect(await refusal(verify(fromOld, [], both))).toMatch(/expired or is not yet valid/);
  });

  it("applies Go's extended key usage rule: serverAuth alone is refused; anyExtendedKeyUsage and no extension are accepted", async () => {
    expect(await refusal(verify(await issue({ usages: ["serverAuth"] })))).toBe("x509: certificate specifies an incompatible key usage");
    expect(await verify(await issue({ usages: ["anyExtendedKeyUsage"] }))).toHaveLength(2);
    expect(await verify(await issue({ usages: ["serverAuth", "clientAuth"] }))).toHaveLength(2);
    expect(await verify(await issueCertificate(ca, { commonName: "any" }))).toHaveLength(2);
  });

  it("refuses a certificate of no pool CA without intermediates; accepts a certificate that is itself in the pool", async () => {
    const other = await createCA("somebody-else");
    expect(await refusal(verify(await issue({}, other)))).toBe("x509: certificate signed by unknown authority");
    const leaf = await issue({});
    expect(await verify(leaf, [], await certPool([node(leaf)]))).toHaveLength(1);
  });
});

describe("chains through intermediates (@peculiar/x509 loaded on demand)", () => {
  it("verifies a chain through an intermediate CA, on the intermediate path", async () => {
    const intermediate = await issueCertificate(ca, { commonName: "team-intermediate", isCA: true });
    const leaf = await issue({}, intermediate);
    const before = verificationStats.withIntermediates;
    const chain = await verify(leaf, [intermediate]);
    expect(chain.map((c) => c.subject.trim())).toEqual(["CN=front-proxy-client", "CN=team-intermediate", "CN=front-proxy-ca"]);
    expect(verificationStats.withIntermediates).toBe(before + 1);
    // without the intermediate the chain does not reach the pool
    expect(await refusal(verify(leaf))).toBe("x509: certificate signed by unknown authority");
  });

  it("refuses an intermediate that is not a CA, an exceeded path length, an expired intermediate, and an intermediate without clientAuth", async () => {
    const notCA = await issue({ commonName: "leafy" });
    expect(await refusal(verify(await issue({}, notCA), [notCA]))).toMatch(/not authorized to sign other certificates/);

    const zero = await issueCertificate(ca, { commonName: "path-len-0", isCA: true, pathLength: 0 });
    const below = await issueCertificate(zero, { commonName: "below-zero", isCA: true });
    expect(await refusal(verify(await issue({}, below), [below, zero]))).toMatch(/too many intermediates for path length constraint/);
    // one intermediate under pathLength 0 is fine
    expect(await verify(await issue({}, zero), [zero])).toHaveLength(3);

    const old = await issueCertificate(ca, { commonName: "old-intermediate", isCA: true, notBefore: new Date(NOW.getTime() - 10 * DAY), validDays: 2 });
    expect(await refusal(verify(await issue({ notBefore: new Date(NOW.getTime() - 9 * DAY) }, old), [old]))).toMatch(/expired or is not yet valid.*old-intermediate/);

    const serverOnly = await issueCertificate(ca, { commonName: "server-only-intermediate", isCA: true, usages: ["serverAuth"] });
    expect(await refusal(verify(await issue({}, serverOnly), [serverOnly]))).toBe("x509: certificate specifies an incompatible key usage");
  });
});

describe("node:crypto certificate helpers (shared/proxy/tls/pem.ts)", () => {
  it("reads CN (the last one) and every O as raw UTF-8, the SHA-256 thumbprint, DNS names, key match and signature", async () => {
    const leaf = await issueCertificate(ca, { commonName: "jöhn, doe+x", organizations: ["team-a", "dévs+x"], dnsNames: ["a.b.svc", "x,y"], ipAddresses: ["127.0.0.1"] });
    expect(subjectOf(node(leaf))).toEqual({ commonName: "jöhn, doe+x", organizations: ["team-a", "dévs+x"] });
    expect(thumbprint(node(leaf))).toBe(Buffer.from(await leaf.cert.getThumbprint("SHA-256")).toString("hex"));
    expect(dnsNames(node(leaf))).toContain("a.b.svc");
    expect(dnsNames(node(leaf))).not.toContain("x");
    expect(keyMatchesCertificate(node(leaf), leaf.keyPem)).toBe(true);
    expect(keyMatchesCertificate(node(leaf), ca.keyPem)).toBe(false);
    expect(keyMatchesCertificate(node(leaf), "not a key")).toBe(false);
    expect(signedBy(node(leaf), node(ca))).toBe(true);
    expect(signedBy(node(ca), node(leaf))).toBe(false);
    const bundle = `junk\n${ca.certPem}\n${leaf.keyPem}\n${leaf.certPem}`;
    expect(certificatesFromPem(bundle).map((c) => c.subject.trim())).toEqual(["CN=front-proxy-ca", node(leaf).subject.trim()]);
    expect(certificatesFromPem("no PEM here")).toEqual([]);
    expect(() => certificatesFromPem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----")).toThrow();
  });

  it("keeps the last CN of a subject with several, as Go's FillFromRDNSequence", async () => {
    // two CN attributes: peculiar's JsonName puts both in one RDN set, in order
    const { x509 } = await import("../../shared/proxy/tls/x509.ts");
    const keys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-256" }, true, ["sign", "verify"])) as CryptoKeyPair;
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: "01",
      name: new x509.Name([{ CN: ["first"] }, { CN: ["second"] }, { O: ["o1"] }, { O: ["o2"] }]),
      notBefore: new Date(NOW.getTime() - DAY),
      notAfter: new Date(NOW.getTime() + DAY),
      keys,
      signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
    });
    expect(subjectOf(new X509Certificate(Buffer.from(cert.rawData)))).toEqual({ commonName: "second", organizations: ["o1", "o2"] });
  });
});
