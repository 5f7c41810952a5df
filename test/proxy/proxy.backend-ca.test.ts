/**
 * A network backend's `caFile` rotates (cert-manager, a Secret volume): the
 * proxy notices the change (at most every CA_RECHECK_MS, before a call; the
 * clock is the backend's `now`, so no test sleeps) and verifies new
 * connections with the new CA, without a restart. A changed file that cannot
 * be read or holds no valid certificate keeps the CA in use, logged once.
 * Real TLS: an HTTPS backend whose serving certificate is replaced by one
 * from another CA (`setSecureContext`), its old connections closed as a
 * restarted backend's are; and the real proxy in front of it.
 */
import { mkdtempSync, renameSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BackendResponse } from "../../shared/proxy/forward/backend-contract.ts";
import { BackendClient, CA_RECHECK_MS } from "../../shared/proxy/forward/backends.ts";
import { createCA, issueCertificate, type IssuedCertificate } from "../../shared/proxy/tls/certs.ts";
import type { LogRecord } from "../../shared/proxy/log.ts";
import { closeServer } from "../helpers/http.ts";
import { createPki, startHarness, V1, type Pki } from "./proxy.harness.ts";

const NS = `${V1}/namespaces/default`;
const LIST = { kind: "ExternalMetricValueList", apiVersion: "external.metrics.k8s.io/v1beta1", metadata: {} };

interface Backend {
  url: string;
  server: https.Server;
  /** serve a certificate from `ca` from now on, and close the connections made before (a restarted backend) */
  rotate(ca: IssuedCertificate): Promise<void>;
}

/** An adapter-like HTTPS backend on 127.0.0.1 answering discovery and one metric. */
async function startBackend(ca: IssuedCertificate): Promise<Backend> {
  const leaf = (c: IssuedCertificate) => issueCertificate(c, { commonName: "adapter", ipAddresses: ["127.0.0.1"], usages: ["serverAuth"] });
  const first = await leaf(ca);
  const server = https.createServer({ cert: first.certPem, key: first.keyPem }, (req, res) => {
    res.writeHead(200, { "Content-Type": "application/json" });
    const path = new URL(req.url ?? "/", "https://x").pathname;
    if (path === V1) {
      res.end(JSON.stringify({ kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1", resources: [{ name: "depth", singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] }] }));
      return;
    }
    res.end(JSON.stringify({ ...LIST, items: [{ metricName: "depth", metricLabels: {}, timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"), value: "4" }] }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    rotate: async (next) => {
      const cert = await leaf(next);
      server.setSecureContext({ cert: cert.certPem, key: cert.keyPem });
      server.closeAllConnections();
    },
  };
}

/** Replace `path` as a Secret volume update does: a new file renamed over the old one (a new inode). */
function replaceFile(path: string, text: string): void {
  const next = `${path}.${crypto.randomUUID()}`;
  writeFileSync(next, text);
  renameSync(next, path);
}

let dir: string;
let caA: IssuedCertificate;
let caB: IssuedCertificate;
let pki: Pki;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-backend-ca-"));
  [caA, caB, pki] = await Promise.all([createCA("backend-ca-a"), createCA("backend-ca-b"), createPki()]);
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a network backend's caFile rotation", () => {
  it("verifies with the new CA once caFile changes, without a restart; an unreadable or invalid caFile keeps the old CA, logged once", async () => {
    const backend = await startBackend(caA);
    const caFile = join(dir, "client-ca.crt");
    writeFileSync(caFile, caA.certPem);
    let clock = 1_000_000;
    const logs: LogRecord[] = [];
    const client = new BackendClient(
      { name: "adapter", type: "passthrough", url: backend.url, caFile, timeoutSeconds: 2, insecureSkipTLSVerify: false },
      { signingKeys: () => undefined, now: () => clock, log: (r) => void logs.push(r) },
    );
    const read = (): Promise<BackendResponse> => client.get({ pathAndQuery: `${NS}/depth`, caller: { user: "u", groups: [], extra: {} }, requestId: "r" });
    try {
      expect((await read()).status).toBe(200);

      // The backend now serves a certificate from CA B: with CA A, new connections fail verification.
      await backend.rotate(caB);
      await expect(read()).rejects.toMatchObject({ name: "BackendError", kind: "connect" });

      // caFile replaced by something unusable: the CA in use stays (A), logged once however often it is looked at.
      replaceFile(caFile, "not a certificate\n");
      for (let i = 0; i < 3; i++) {
        clock += CA_RECHECK_MS;
        await expect(read()).rejects.toMatchObject({ kind: "connect" });
      }
      expect(logs.filter((l) => l.msg.startsWith("backend caFile changed but cannot be used"))).toHaveLength(1);
      unlinkSync(caFile);
      clock += CA_RECHECK_MS;
      await expect(read()).rejects.toMatchObject({ kind: "connect" });
      expect(logs.filter((l) => l.msg.startsWith("backend caFile changed but cannot be used"))).toHaveLength(2);

      // caFile now holds CA B: not before the recheck period has passed, then at the next call.
      replaceFile(caFile, caB.certPem);
      clock += CA_RECHECK_MS - 1;
      await expect(read()).rejects.toMatchObject({ kind: "connect" });
      clock += 1;
      const after = await read();
      expect(after.status).toBe(200);
      expect(JSON.parse(after.body.toString()).items[0].value).toBe("4");
      expect(logs.filter((l) => l.msg === "backend caFile reloaded")).toHaveLength(1);

      // A bad file after a good reload keeps the new CA (B) in use.
      replaceFile(caFile, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
      clock += CA_RECHECK_MS;
      expect((await read()).status).toBe(200);
      expect(logs.filter((l) => l.msg.startsWith("backend caFile changed but cannot be used"))).toHaveLength(3);
    } finally {
      client.close();
      await closeServer(backend.server);
    }
  });

  it("through the real proxy: reads fail while caFile lags the backend's new CA and succeed once it is replaced, same proxy process", async () => {
    const backend = await startBackend(caA);
    const caFile = join(dir, "proxy-ca.crt");
    writeFileSync(caFile, caA.certPem);
    let offset = 0;
    const h = await startHarness({
      pki,
      proxyConfig: `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  adapter: { url: "${backend.url}", type: passthrough, caFile: "${caFile}", timeoutSeconds: 2 }
passthrough: adapter
cache: { ttlSeconds: 0 }
`,
      extra: { now: () => Date.now() + offset },
    });
    const masters = { cert: pki.frontProxy, headers: { "X-Remote-User": "system:kube-aggregator", "X-Remote-Group": "system:masters" } };
    try {
      expect((await h.get(`${NS}/depth`, masters)).status).toBe(200);
      await backend.rotate(caB);
      const failing = await h.get(`${NS}/depth`, masters);
      expect(failing.status, failing.text).toBe(503);
      replaceFile(caFile, caB.certPem);
      offset += CA_RECHECK_MS + 2_000; // past the recheck period and the failure's brief back-off
      const res = await h.get(`${NS}/depth`, masters);
      expect(res.status, res.text).toBe(200);
      expect(res.json().items[0].value).toBe("4");
      expect(h.logs.some((l) => l.msg === "backend caFile reloaded" && l["backend"] === "adapter")).toBe(true);
    } finally {
      await h.close();
      await closeServer(backend.server);
    }
  });
});
