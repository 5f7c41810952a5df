/**
 * Hostile tenant, listeners (issue 23, items 3 and 6): what any pod that
 * reaches the proxy's or the bridge's port can do to the listeners
 * themselves, through the real proxy over real TLS (test/proxy/proxy.harness.ts,
 * the fake Kubernetes API) and the real Node bridge server, over real sockets.
 *
 * (a) The API port no longer serves the admission paths: an unauthenticated
 *     POST /admission/hpa there learns nothing of another namespace's policy.
 * (b) Uploads trickling a byte at a time to the webhook's port are cut within
 *     the body deadline, and a real review is answered meanwhile.
 * (c) With `admission.clientCA`, only a client certificate signed by that CA
 *     gets a review (no certificate, or another CA's: the handshake is refused).
 * (d) The bridge's Node server closes silent and idle keep-alive connections
 *     after its timeouts and refuses connections past `maxConnections`.
 * (e) The proxy's API listener likewise (before and after the TLS handshake).
 *
 * Bounds are generous (a loaded CI machine): each wait is the limit under
 * test plus several seconds.
 */
import https from "node:https";
import net from "node:net";
import tls from "node:tls";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { parseYamlDocuments } from "../../shared/config/yaml.ts";
import { PolicySet } from "../../shared/policy/evaluate.ts";
import { compilePolicies } from "../../shared/policy/load.ts";
import { createCA, type IssuedCertificate } from "../../shared/proxy/tls/certs.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, type EchoBackend, type Harness, type Pki, postTls as post } from "./proxy.harness.ts";

/** team-b's policy: only `queue=ci_jobs` — the selector a tenant of another namespace must not learn. */
const POLICIES = `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: team-b }
spec:
  defaultAction: Deny
  rules:
    - metric: "sqs_.*"
      selector: { matchLabels: { queue: ci_jobs_secret_selector } }
`;

function policySet(): PolicySet {
  const { policies, issues } = compilePolicies(parseYamlDocuments(POLICIES, "policies.yaml"));
  expect(issues).toEqual([]);
  return new PolicySet(policies, "Allow");
}

/** An AdmissionReview of an HPA in team-b reading `sqs_messages_visible{queue=payments}`, which team-b's policy denies. */
function review(uid: string): string {
  const object = {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: { name: "worker", namespace: "team-b" },
    spec: {
      scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" },
      minReplicas: 1,
      maxReplicas: 5,
      metrics: [{ type: "External", external: { metric: { name: "sqs_messages_visible", selector: { matchLabels: { queue: "payments" } } }, target: { type: "AverageValue", averageValue: "5" } } }],
    },
  };
  return JSON.stringify({
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: { uid, kind: { group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler" }, resource: {}, operation: "CREATE", namespace: "team-b", name: "worker", object },
  });
}

/** A raw TCP connection to 127.0.0.1:`port` that sends nothing; `closedAt` is set when the server closes it. */
interface Idle {
  socket: net.Socket;
  closedAt?: number;
}

async function openIdle(port: number, count: number): Promise<Idle[]> {
  const all = Array.from({ length: count }, () => {
    const idle: Idle = { socket: net.connect(port, "127.0.0.1") };
    idle.socket.on("error", () => {});
    idle.socket.on("data", () => {}); // a 408 the server may send before closing
    idle.socket.on("close", () => (idle.closedAt ??= Date.now()));
    return idle;
  });
  await Promise.all(all.map((i) => new Promise<void>((r) => (i.socket.connecting ? i.socket.once("connect", () => r()).once("close", () => r()) : r()))));
  return all;
}

function destroyAll(list: Idle[]): void {
  for (const i of list) i.socket.destroy();
}

/**
 * One HTTP/1.1 keep-alive request written by hand on `socket` (so no client
 * agent closes it on its own); resolves once the answer arrived, the
 * connection left open and watched.
 */
function keptAlive(socket: net.Socket): Promise<Idle> {
  const idle: Idle = { socket };
  socket.on("error", () => {});
  socket.on("close", () => (idle.closedAt ??= Date.now()));
  return new Promise((resolve, reject) => {
    let text = "";
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      if (/^HTTP\/1\.1 200/.test(text) && text.includes("\r\n\r\n")) resolve(idle);
    });
    socket.once("close", () => reject(new Error(`closed before an answer: ${text}`)));
    socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
  });
}

/** Open `limit` silent connections, then `extra` more: the extra ones are closed by the server while the first stay open. */
async function expectConnectionLimit(port: number, limit: number, extra: number): Promise<void> {
  const first = await openIdle(port, limit);
  await new Promise((r) => setTimeout(r, 300)); // accepted by the server
  const more = await openIdle(port, extra);
  try {
    await eventually(() => more.every((i) => i.closedAt !== undefined), 10_000, `the ${extra} connections past ${limit} to be closed`);
    expect(first.filter((i) => i.closedAt !== undefined)).toHaveLength(0);
  } finally {
    destroyAll(first);
    destroyAll(more);
  }
}

const dir = mkdtempSync(join(tmpdir(), "emb-hostile-listeners-"));
let pki: Pki;
let backend: EchoBackend;
let h: Harness;

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["sqs_messages_visible"]);
  h = await startHarness({
    pki,
    proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]], "admission: { mode: Warn }"),
    extra: { admissionPolicies: policySet },
  });
}, 60_000);

afterAll(async () => {
  await h?.close();
  await backend?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("(a) the API port and the webhook", () => {
  it("an unauthenticated POST /admission/hpa on the API port gets no review and no policy content", async () => {
    for (const path of ["/admission/hpa", "/admission/policies"]) {
      const res = await post(`${h.proxy.url}${path}`, h.serving.caPem!, review("a-1"));
      expect(res.status, res.text).not.toBe(200);
      expect(res.text).not.toContain("AdmissionReview");
      expect(res.text).not.toContain("ci_jobs_secret_selector");
    }
  });
});

describe("(b) slow uploads to the webhook", () => {
  it("20 uploads trickling a byte every 500 ms are cut within the body deadline (2 s) and a real review is answered meanwhile", async () => {
    const target = `${h.proxy.admission?.url ?? h.proxy.url}/admission/hpa`;
    const started = Date.now();
    const trickles = Array.from({ length: 20 }, () => {
      const req = https.request(target, { method: "POST", ca: h.serving.caPem!, agent: false, headers: { "Content-Type": "application/json", "Transfer-Encoding": "chunked" } });
      let timer: ReturnType<typeof setInterval> | undefined;
      const cut = new Promise<{ status: number; at: number }>((resolve) => {
        const done = (status: number) => {
          clearInterval(timer);
          resolve({ status, at: Date.now() });
        };
        req.on("response", (res) => {
          res.resume();
          done(res.statusCode ?? 0);
        });
        req.on("error", () => done(-1));
        req.on("close", () => done(-1));
      });
      req.write("{");
      timer = setInterval(() => req.write(" "), 500);
      return { req, cut };
    });
    try {
      await new Promise((r) => setTimeout(r, 500)); // every trickle is in
      const real = await post(target, h.serving.caPem!, review("b-real"));
      expect(real.status, real.text).toBe(200);
      expect(JSON.parse(real.text).response).toMatchObject({ uid: "b-real", allowed: true });
      const outcomes = await Promise.race([
        Promise.all(trickles.map((t) => t.cut)),
        new Promise<"still open">((r) => setTimeout(() => r("still open"), 15_000)),
      ]);
      expect(outcomes, "trickling uploads still open after 15 s").not.toBe("still open");
      // answered 408 (a Status: the body deadline) or, at worst, the connection closed
      expect((outcomes as { status: number }[]).filter((o) => o.status === 408).length, JSON.stringify(outcomes)).toBeGreaterThan(0);
      for (const o of outcomes as { status: number; at: number }[]) {
        expect([408, -1]).toContain(o.status);
        expect(o.at - started).toBeLessThan(12_000); // body deadline 2 s + checks every 1 s, with room for a loaded machine
      }
    } finally {
      for (const t of trickles) t.req.destroy();
    }
  }, 30_000);
});

describe("(c) client-certificate authentication of kube-apiserver", () => {
  it("with admission.clientCA, no certificate or another CA's certificate gets no review; kube-apiserver's certificate from that CA does", async () => {
    const apiserverCA = await createCA("kube-apiserver-webhook-client-ca");
    const caFile = join(dir, "apiserver-client-ca.crt");
    writeFileSync(caFile, apiserverCA.certPem);
    const authed = await startHarness({
      pki,
      fake: h.fake,
      proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]], `admission: { mode: Warn, clientCA: "${caFile}" }`),
      extra: { admissionPolicies: policySet },
    });
    try {
      const url = `${authed.proxy.admission?.url ?? authed.proxy.url}/admission/hpa`;
      const ca = authed.serving.caPem!;
      const refused = async (cert?: IssuedCertificate): Promise<string> => {
        try {
          const res = await post(url, ca, review("c-x"), cert);
          expect(res.status, res.text).toBe(401);
          expect(res.text).not.toContain("ci_jobs_secret_selector");
          return `HTTP ${res.status}`;
        } catch (err) {
          return `TLS: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
        }
      };
      expect(await refused()).toMatch(/^(TLS|HTTP 401)/);
      const stranger = await pki.issue(pki.otherCA, { commonName: "kube-apiserver", usages: ["clientAuth"] });
      expect(await refused(stranger)).toMatch(/^(TLS|HTTP 401)/);
      const apiserver = await pki.issue(apiserverCA, { commonName: "kube-apiserver", usages: ["clientAuth"] });
      const ok = await post(url, ca, review("c-ok"), apiserver);
      expect(ok.status, ok.text).toBe(200);
      expect(JSON.parse(ok.text).response).toMatchObject({ uid: "c-ok", allowed: true });
      expect(authed.proxy.admission?.authenticating).toBe(true);
      expect(authed.logs.some((l) => l.msg === "admission request" && l["authenticated"] === true && l["user"] === "kube-apiserver")).toBe(true);
    } finally {
      await authed.close();
    }
  });
});

describe("(d) the bridge's Node server", () => {
  const CONFIG = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: x, secretAccessKey: y }, maxAttempts: 1 }
metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
policy: { defaultAction: Allow }
`;
  const start = (limits: Record<string, number>) =>
    startNodeServer({ config: loadConfig(CONFIG, "bridge.yaml").config, port: 0, log: () => {}, insecureAllowUnsigned: true, limits });

  it("closes 200 silent connections and an idle keep-alive connection after its timeouts (1 s here)", async () => {
    const server = await start({ headersTimeoutMs: 1000, keepAliveTimeoutMs: 1000 });
    const port = Number(new URL(server.url).port);
    const silent = await openIdle(port, 200);
    const kept = await keptAlive(net.connect(port, "127.0.0.1"));
    try {
      await eventually(() => [...silent, kept].every((i) => i.closedAt !== undefined), 20_000, "every idle connection to be closed");
    } finally {
      destroyAll([...silent, kept]);
      await server.close();
    }
  }, 40_000);

  it("refuses connections past maxConnections (20 here) and serves again once they go", async () => {
    const server = await start({ maxConnections: 20 });
    try {
      await expectConnectionLimit(Number(new URL(server.url).port), 20, 10);
      await eventually(async () => (await fetch(`${server.url}/healthz`).catch(() => undefined))?.status === 200, 10_000, "a request answered again");
    } finally {
      await server.close();
    }
  }, 40_000);
});

describe("(e) the proxy's API listener", () => {
  it("closes 200 connections that never start TLS, silent TLS connections and an idle keep-alive connection after its timeouts (1 s here)", async () => {
    const p = await startHarness({ pki, fake: h.fake, proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]]), extra: { limits: { headersTimeoutMs: 1000, keepAliveTimeoutMs: 1000 } } });
    const silent = await openIdle(p.proxy.port, 200);
    const handshaken = await Promise.all(
      Array.from({ length: 5 }, () => {
        const socket = tls.connect({ port: p.proxy.port, host: "127.0.0.1", ca: p.serving.caPem!, servername: "localhost", rejectUnauthorized: false });
        const idle: Idle = { socket };
        socket.on("error", () => {});
        socket.on("close", () => (idle.closedAt ??= Date.now()));
        return new Promise<Idle>((r) => socket.once("secureConnect", () => r(idle)));
      }),
    );
    const kept = await keptAlive(tls.connect({ port: p.proxy.port, host: "127.0.0.1", rejectUnauthorized: false }));
    try {
      await eventually(() => [...silent, ...handshaken, kept].every((i) => i.closedAt !== undefined), 20_000, "every idle connection to be closed");
    } finally {
      destroyAll([...silent, ...handshaken, kept]);
      await p.close();
    }
  }, 60_000);

  it("refuses connections past maxConnections (20 here) and serves again once they go", async () => {
    const p = await startHarness({ pki, fake: h.fake, proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]]), extra: { limits: { maxConnections: 20 } } });
    try {
      await expectConnectionLimit(p.proxy.port, 20, 10);
      await eventually(async () => (await p.get("/healthz").catch(() => undefined))?.status === 200, 10_000, "a request answered again");
    } finally {
      await p.close();
    }
  }, 60_000);
});
