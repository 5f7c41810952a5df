/**
 * APIService self-registration with several replicas and no Lease (mounted
 * certificate files, chart `tls.mode existing`): while a rotated CA reaches
 * the replicas one by one, the one still holding the old CA must not put it
 * back over the newer one's write (the caBundle used to flip at every
 * re-assertion); a foreign edit is still re-asserted; and past
 * SUPERSEDE_GRACE_MS a replica that never catches up writes its own again.
 * Two real proxies against the fake Kubernetes API server, every write
 * counted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import {
  API_SERVICE_NAME,
  MATERIAL_SINCE_ANNOTATION,
  registerAPIService,
  registerWebhookCABundle,
  REGISTERED_SPEC_ANNOTATION,
  SUPERSEDE_GRACE_MS,
  WEBHOOK_CONFIGURATION_NAME,
} from "../../shared/proxy/tls/registration.ts";
import type { ServingMaterial } from "../../shared/proxy/tls/serving-material.ts";
import { loadServingMaterial } from "../../shared/proxy/tls/tls.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

const SERVICE = { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy" };
const TARGET = { service: { ...SERVICE, port: 443 } };
const INTERVAL_MS = 40;

let pki: Pki;
let backend: EchoBackend;
let oldMaterial: ServingMaterial;
let newMaterial: ServingMaterial;

beforeAll(async () => {
  [pki, backend, oldMaterial, newMaterial] = await Promise.all([
    createPki(),
    startEchoBackend(["queue_messages_ready"]),
    loadServingMaterial({ kind: "generate" }, SERVICE, { log: () => {} }),
    loadServingMaterial({ kind: "generate" }, SERVICE, { log: () => {} }),
  ]);
}, 60_000);

afterAll(async () => {
  await backend?.close();
});

const b64 = (pem: string) => Buffer.from(pem).toString("base64");
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A replica registering every INTERVAL_MS with `serving`, no Lease (every replica writes). */
function replica(fake: FakeKubeApiServer, serving: ServingMaterial, now?: () => number): Promise<Harness> {
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  return startHarness({
    pki,
    fake,
    proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]),
    extra: { serving, readinessIntervalMs: INTERVAL_MS, registration: { kc, target: TARGET, intervalMs: INTERVAL_MS }, ...(now ? { now } : {}) },
  });
}

describe("APIService registration by several replicas", () => {
  it("a replica still holding the old CA does not write it back over the newer one's; it follows once it has the new CA", async () => {
    const fake = await startFakeKubeApiServer();
    const a = await replica(fake, oldMaterial);
    const b = await replica(fake, oldMaterial);
    try {
      const caBundle = () => (fake.apiServices.get(API_SERVICE_NAME) as { spec?: { caBundle?: string } } | undefined)?.spec?.caBundle;
      await eventually(() => caBundle() === b64(oldMaterial.caPem!), 5000, "registered");
      await pause(10 * INTERVAL_MS);
      expect(fake.apiServiceWrites).toHaveLength(1); // one create; equal specs are never written again

      // B sees the rotated files first: it writes the new CA...
      b.proxy.setServing(newMaterial);
      await eventually(() => caBundle() === b64(newMaterial.caPem!), 5000, "the new CA registered");
      const written = fake.apiServiceWrites.length;
      // ...and A, a dozen re-assertions later still on the old CA, leaves it.
      const seen = new Set<string | undefined>();
      for (let i = 0; i < 12; i++) {
        await pause(INTERVAL_MS);
        seen.add(caBundle());
      }
      expect([...seen]).toEqual([b64(newMaterial.caPem!)]);
      expect(fake.apiServiceWrites).toHaveLength(written);
      expect(a.logs.some((l) => l.msg === "APIService registration" && l["outcome"] === "superseded")).toBe(true);

      // A catches up: nothing to write.
      a.proxy.setServing(newMaterial);
      await pause(6 * INTERVAL_MS);
      expect(fake.apiServiceWrites).toHaveLength(written);

      // Someone else edits the APIService: re-asserted (the recorded hash no longer matches), once.
      const current = fake.apiServices.get(API_SERVICE_NAME) as unknown as { spec: Record<string, unknown>; metadata: Record<string, unknown> };
      fake.apiServices.set(API_SERVICE_NAME, { ...current, spec: { ...current.spec, caBundle: b64("foreign") } } as never);
      await eventually(() => caBundle() === b64(newMaterial.caPem!), 5000, "re-asserted after a foreign edit");
      await pause(6 * INTERVAL_MS);
      expect(fake.apiServiceWrites).toHaveLength(written + 1);
    } finally {
      await a.close();
      await b.close();
      await fake.close();
    }
  });

  it("a newer replica's write is respected only for SUPERSEDE_GRACE_MS: past it, a replica that never caught up writes its own", async () => {
    const fake = await startFakeKubeApiServer();
    const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
    try {
      const t0 = Date.parse("2026-11-23T10:00:00Z");
      expect(await registerAPIService(kc, { ...TARGET, caPem: newMaterial.caPem!, since: t0 }, { now: () => t0 })).toBe("created");
      const stored = fake.apiServices.get(API_SERVICE_NAME) as unknown as { metadata: { annotations: Record<string, string> } };
      expect(stored.metadata.annotations[MATERIAL_SINCE_ANNOTATION]).toBe("2026-11-23T10:00:00.000Z");
      expect(stored.metadata.annotations[REGISTERED_SPEC_ANNOTATION]).toMatch(/^[0-9a-f]{32}$/);
      const older = { ...TARGET, caPem: oldMaterial.caPem!, since: t0 - 60_000 };
      expect(await registerAPIService(kc, older, { now: () => t0 + SUPERSEDE_GRACE_MS - 1 })).toBe("superseded");
      expect(await registerAPIService(kc, older, { now: () => t0 + SUPERSEDE_GRACE_MS })).toBe("updated");
      expect((fake.apiServices.get(API_SERVICE_NAME) as unknown as { spec: { caBundle: string } }).spec.caBundle).toBe(b64(oldMaterial.caPem!));
      // a caller without a time (no since) re-asserts as before
      expect(await registerAPIService(kc, { ...TARGET, caPem: newMaterial.caPem! })).toBe("updated");
      expect(await registerAPIService(kc, { ...TARGET, caPem: newMaterial.caPem! })).toBe("unchanged");
    } finally {
      await fake.close();
    }
  });

  it("the webhook caBundle follows the same rule: a newer replica's bundle is left within the grace, other webhooks untouched, foreign edits re-asserted", async () => {
    const fake = await startFakeKubeApiServer();
    const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
    const webhook = (name: string, service: string) => ({
      name,
      admissionReviewVersions: ["v1"],
      sideEffects: "None",
      clientConfig: { service: { namespace: SERVICE.namespace, name: service, path: "/admission/hpa", port: 443 } },
    });
    fake.webhookConfigurations.set(WEBHOOK_CONFIGURATION_NAME, {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: WEBHOOK_CONFIGURATION_NAME, resourceVersion: "1" },
      webhooks: [webhook("hpa.external-metrics-bridge.io", SERVICE.name), webhook("someone-else.example.com", "someone-else")],
    } as never);
    const stored = () => (fake.webhookConfigurations.get(WEBHOOK_CONFIGURATION_NAME) as unknown as { webhooks: { clientConfig: { caBundle?: string } }[] }).webhooks;
    try {
      const t0 = Date.parse("2026-11-23T10:00:00Z");
      const newer = { service: TARGET.service, caPem: newMaterial.caPem!, since: t0 };
      const older = { service: TARGET.service, caPem: oldMaterial.caPem!, since: t0 - 60_000 };
      expect(await registerWebhookCABundle(kc, newer, undefined, { now: () => t0 })).toBe("updated");
      expect(await registerWebhookCABundle(kc, older, undefined, { now: () => t0 + 1000 })).toBe("superseded");
      expect(stored()[0]!.clientConfig.caBundle).toBe(b64(newMaterial.caPem!));
      // a foreign edit of our webhook's bundle is re-asserted even by the older replica
      const current = fake.webhookConfigurations.get(WEBHOOK_CONFIGURATION_NAME) as unknown as { webhooks: { clientConfig: Record<string, unknown> }[] };
      current.webhooks[0]!.clientConfig = { ...current.webhooks[0]!.clientConfig, caBundle: b64("foreign") };
      expect(await registerWebhookCABundle(kc, newer, undefined, { now: () => t0 + 2000 })).toBe("updated");
      expect(await registerWebhookCABundle(kc, older, undefined, { now: () => t0 + SUPERSEDE_GRACE_MS - 1 })).toBe("superseded");
      expect(await registerWebhookCABundle(kc, older, undefined, { now: () => t0 + SUPERSEDE_GRACE_MS })).toBe("updated");
      expect(stored()[0]!.clientConfig.caBundle).toBe(b64(oldMaterial.caPem!));
      expect(stored()[1]!.clientConfig.caBundle).toBeUndefined();
    } finally {
      await fake.close();
    }
  });
});
