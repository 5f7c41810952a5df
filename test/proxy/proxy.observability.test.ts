/**
 * The proxy's operational metrics: `emb_proxy_build_info`, the serving
 * certificate's expiry and the APIService registration status (1 after a
 * registration against the fake Kubernetes API, 0 while it fails, with the
 * last success's time), and the whole exposition passes promlint (what
 * `promtool check metrics` runs). Backend failures keep the HTTP code and
 * the error kind in separate labels.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type Pki } from "./proxy.harness.ts";
import { promlint, sample } from "../helpers/promlint.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import { startFakeKubeApiServer } from "../fakes/kube-apiserver.ts";

/** package.json's version: what build_info reports. */
const PACKAGE_VERSION = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;

let pki: Pki;
beforeAll(async () => {
  pki = await createPki();
});

describe("proxy operational metrics", () => {
  it("exports build_info, the serving certificate's notAfter and the APIService registration status", async () => {
    const backend = await startEchoBackend(["queue_messages_ready"]);
    const started = Date.now() / 1000;
    const h = await startHarness({ pki, proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]), register: true, extra: { readinessIntervalMs: 100 } });
    try {
      const scrape = () => h.proxy.metrics.registry.metrics();
      await eventually(async () => sample(await scrape(), "emb_proxy_apiservice_registered") === 1, 5000, "registered");
      const text = await scrape();
      expect(sample(text, "emb_proxy_build_info", { version: PACKAGE_VERSION, node: process.version })).toBe(1);
      const notAfter = Date.parse(new X509Certificate(h.serving.certPem!).validTo) / 1000;
      expect(sample(text, "emb_proxy_serving_certificate_expiry_timestamp_seconds")).toBe(notAfter);
      expect(sample(text, "emb_proxy_apiservice_last_registration_success_timestamp_seconds")).toBeGreaterThanOrEqual(Math.floor(started));
      expect(promlint(text)).toEqual([]);
      // no inProcess backend: none of the bridge's families
      expect(text).not.toContain("emb_bridge_");
    } finally {
      await h.close();
      await backend.close();
    }
  });

  it("reports 0 while registration fails, keeping the last success's time", async () => {
    const backend = await startEchoBackend(["queue_messages_ready"]);
    const fake = await startFakeKubeApiServer();
    const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
    const target = { service: { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy", port: 443 } };
    const h = await startHarness({
      pki,
      fake,
      proxyConfig: proxyConfigText({ echo: backend.url }, [[".*", "echo"]]),
      extra: { readinessIntervalMs: 100, registration: { kc, target, intervalMs: 100 } },
    });
    try {
      const scrape = () => h.proxy.metrics.registry.metrics();
      await eventually(async () => sample(await scrape(), "emb_proxy_apiservice_registered") === 1, 5000, "registered");
      const success = sample(await scrape(), "emb_proxy_apiservice_last_registration_success_timestamp_seconds")!;
      fake.failing.add("apiservices");
      await eventually(async () => sample(await scrape(), "emb_proxy_apiservice_registered") === 0, 5000, "a failed re-assertion");
      expect(sample(await scrape(), "emb_proxy_apiservice_last_registration_success_timestamp_seconds")).toBeGreaterThanOrEqual(success);
      expect(h.logs.some((l) => l.msg === "APIService registration failed")).toBe(true);
      fake.failing.delete("apiservices");
      await eventually(async () => sample(await scrape(), "emb_proxy_apiservice_registered") === 1, 5000, "registered again");
    } finally {
      await h.close();
      await fake.close();
      await backend.close();
    }
  });
});

describe("proxy backend failures", () => {
  it("count the failure kind in backend_errors_total{kind} and no kind in backend_requests_total{code}", async () => {
    const h = await startHarness({ pki, proxyConfig: proxyConfigText({ gone: "http://127.0.0.1:9" }, [[".*", "gone"]]) });
    try {
      await h.get(`${V1}`, { headers: { Authorization: "Bearer alice" } });
      const text = await h.proxy.metrics.registry.metrics();
      const errors = text.split("\n").filter((l) => l.startsWith("emb_proxy_backend_errors_total{"));
      expect(errors.length).toBeGreaterThan(0);
      for (const line of text.split("\n").filter((l) => l.startsWith("emb_proxy_backend_requests_total{"))) {
        expect(line).toMatch(/code="(\d{3}|none)"/);
      }
    } finally {
      await h.close();
    }
  });
});
