/**
 * Certificate generation in a short-lived worker thread
 * (shared/proxy/tls/cert-generation.ts + x509-worker.ts, run here from sources
 * through Node's type stripping): what it makes verifies with node:crypto,
 * validity counts from the `now` it is given (not the worker's clock), a
 * failure surfaces with the generation's own message, a generation past its
 * deadline is stopped, and the worker threads are gone afterwards.
 */
import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { createServingCAPem, createServingPair, generateInWorker, generateServingPair, generationStats, issueServingPem } from "../../shared/proxy/tls/cert-generation.ts";
import { caFromPem, createServingCA } from "../../shared/proxy/tls/certs.ts";
import { dnsNames, keyMatchesCertificate, notAfter, notBefore, signedBy } from "../../shared/proxy/tls/pem.ts";
import { eventually } from "./proxy.harness.ts";

const SVC = { name: "external-metrics-bridge-proxy", namespace: "external-metrics-bridge" };
const T0 = Date.parse("2031-06-01T00:00:00Z");

describe("certificate generation in a worker thread", () => {
  it("generate mode: a CA and a serving certificate for the Service, made in a worker thread (not the main thread), which then exits", async () => {
    const before = generationStats.workers;
    const { ca, serving, threadId } = await generateServingPair(SVC.name, SVC.namespace);
    expect(threadId).toBeGreaterThan(0);
    expect(generationStats.workers).toBe(before + 1);
    const [caCert, leaf] = [new X509Certificate(ca.certPem), new X509Certificate(serving.certPem)];
    expect(caCert.ca).toBe(true);
    expect(signedBy(leaf, caCert) && leaf.checkIssued(caCert)).toBe(true);
    expect(keyMatchesCertificate(leaf, serving.keyPem) && keyMatchesCertificate(caCert, ca.keyPem)).toBe(true);
    expect(dnsNames(leaf)).toEqual(expect.arrayContaining([`${SVC.name}.${SVC.namespace}.svc`, "localhost"]));
    expect(leaf.keyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    await eventually(() => generationStats.running === 0, 5000, "the worker thread exited");
  });

  it("counts validity from the given now (the Secret writer's clock), not the worker's", async () => {
    const { ca, serving } = await createServingPair(SVC.name, SVC.namespace, 90, 30, T0);
    const [caCert, leaf] = [new X509Certificate(ca.certPem), new X509Certificate(serving.certPem)];
    expect(notAfter(caCert).getTime()).toBe(T0 + 90_000);
    expect(notAfter(leaf).getTime()).toBe(T0 + 30_000);
    expect(notBefore(leaf).getTime()).toBe(T0 - 3_000);
    expect(caCert.subject).toContain(`svc-ca@${T0 / 1000}`);

    const next = await createServingCAPem(SVC.name, SVC.namespace, 90, T0 + 60_000);
    const renewed = await issueServingPem(ca, SVC.name, SVC.namespace, 30, T0 + 80_000);
    const renewedLeaf = new X509Certificate(renewed.certPem);
    // cut back to the CA's notAfter, signed by the same CA, a new key
    expect(notAfter(renewedLeaf).getTime()).toBe(T0 + 90_000);
    expect(signedBy(renewedLeaf, caCert)).toBe(true);
    expect(signedBy(renewedLeaf, new X509Certificate(next.certPem))).toBe(false);
    expect(renewed.keyPem).not.toBe(serving.keyPem);
  });

  it("fails with the message generation fails with in the main thread (a CA key that is not the CA's)", async () => {
    const [a, b] = await Promise.all([createServingCA(SVC.name, SVC.namespace, 3600), createServingCA(SVC.name, SVC.namespace, 3600)]);
    const inMain = await caFromPem(a.certPem, b.keyPem).then(
      () => "",
      (err: Error) => err.message,
    );
    expect(inMain).toBe("the CA key does not belong to the CA certificate");
    const failures = generationStats.failures;
    await expect(issueServingPem({ certPem: a.certPem, keyPem: b.keyPem }, SVC.name, SVC.namespace, 60, Date.now())).rejects.toThrow(new Error(inMain));
    expect(generationStats.failures).toBe(failures + 1);
  });

  it("stops a generation that passes its deadline: the promise rejects and the worker thread is terminated", async () => {
    const timeouts = generationStats.timeouts;
    await expect(generateInWorker({ op: "generate", service: SVC.name, namespace: SVC.namespace, validDays: 1, nowMs: Date.now() }, 1)).rejects.toThrow(
      "certificate generation did not finish within 0.001 s; its worker thread was stopped",
    );
    expect(generationStats.timeouts).toBe(timeouts + 1);
    await eventually(() => generationStats.running === 0, 5000, "the worker thread was terminated");
  });
});
