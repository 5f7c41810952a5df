/**
 * Shared setup for the proxy suites (`test/proxy/proxy.*.test.ts`): generated PKI
 * (front-proxy CA, client CA, an unrelated CA), the ConfigMap data
 * kube-apiserver publishes, the fake Kubernetes API, a running proxy wired to
 * it through the proxy's own Kubernetes client (shared/proxy/kube/client.ts), and an HTTPS client that
 * presents client certificates and repeats headers exactly as given.
 */
import { writeFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import { stringify } from "yaml";
import { watchAuthenticationConfig } from "../../shared/proxy/authn/authn-config.ts";
import { createCA, issueCertificate, type CertificateOptions, type IssuedCertificate } from "../../shared/proxy/tls/certs.ts";
import { loadProxyConfig } from "../../shared/proxy/config.ts";
import { kubeConfigFor } from "../../shared/proxy/kube/client.ts";
import type { LogRecord } from "../../shared/proxy/log.ts";
import { startProxy, type ProxyOptions, type RunningProxy } from "../../shared/proxy/server.ts";
import { subjectAccessReviewer } from "../../shared/proxy/authz/subject-access-review.ts";
import { tokenReviewer } from "../../shared/proxy/authn/token-review.ts";
import type { ServingMaterial } from "../../shared/proxy/tls/serving-material.ts";
import { loadServingMaterial } from "../../shared/proxy/tls/tls.ts";
import type { Caller } from "../../shared/identity.ts";
import { parseSigningKeys, verifyRequest } from "../../shared/signing.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { closeServer } from "../helpers/http.ts";
import { fixtureKey } from "../helpers/keys.ts";

/** Keys shared by the proxy and the bridges in tests: `id:secret,id:secret`. */
export const KEYS = `k1:${fixtureKey(11).toString("base64")},k2:${fixtureKey(22).toString("base64")}`;
export const V1 = "/apis/external.metrics.k8s.io/v1beta1";
/**
 * POST `body` (JSON) to `url` over TLS trusting `caPem`, optionally with a
 * client certificate (e.g. kube-apiserver's, to the admission webhook's
 * listener); resolves with any status and the body text, rejects on a TLS
 * or socket error.
 */
export function postTls(url: string, caPem: string, body: string, cert?: IssuedCertificate): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method: "POST",
        ca: caPem,
        agent: false,
        headers: { "Content-Type": "application/json", "Content-Length": String(Buffer.byteLength(body)) },
        ...(cert ? { cert: cert.certPem, key: cert.keyPem } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * Front-proxy headers of the HPA controller's reads as the aggregator sends
 * them (its ServiceAccount and the groups a ServiceAccount token
 * authenticates with); send with the front-proxy client certificate.
 */
export const HPA_FRONT_PROXY = {
  "X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
  "X-Remote-Group": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
};

/** Generated certificate authorities and certificates. */
export interface Pki {
  frontProxyCA: IssuedCertificate;
  clientCA: IssuedCertificate;
  otherCA: IssuedCertificate;
  /** CN front-proxy-client, clientAuth, from the front-proxy CA (what kube-apiserver presents) */
  frontProxy: IssuedCertificate;
  issue(ca: IssuedCertificate, options: CertificateOptions): Promise<IssuedCertificate>;
}

export async function createPki(): Promise<Pki> {
  const [frontProxyCA, clientCA, otherCA] = await Promise.all([createCA("front-proxy-ca"), createCA("kubernetes-client-ca"), createCA("somebody-else")]);
  const frontProxy = await issueCertificate(frontProxyCA, { commonName: "front-proxy-client", usages: ["clientAuth"] });
  return { frontProxyCA, clientCA, otherCA, frontProxy, issue: issueCertificate };
}

/** The ConfigMap data kube-apiserver publishes (cmd/kube-apiserver with the usual kubeadm flags). */
export function authenticationData(pki: Pki, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    "client-ca-file": pki.clientCA.certPem,
    "requestheader-client-ca-file": pki.frontProxyCA.certPem,
    "requestheader-allowed-names": JSON.stringify(["front-proxy-client"]),
    "requestheader-username-headers": JSON.stringify(["X-Remote-User"]),
    "requestheader-uid-headers": JSON.stringify(["X-Remote-Uid"]),
    "requestheader-group-headers": JSON.stringify(["X-Remote-Group"]),
    "requestheader-extra-headers-prefix": JSON.stringify(["X-Remote-Extra-"]),
    ...overrides,
  };
}

/** A response read to the end. */
export interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  json(): any;
}

/** What {@link call} sends. */
export interface CallOptions {
  method?: string;
  /** repeated headers as arrays: each value is its own header line */
  headers?: Record<string, string | string[]>;
  /** client certificate (and its chain, leaf first) */
  cert?: IssuedCertificate;
  chain?: IssuedCertificate[];
}

/** One HTTPS request on a fresh connection (so each request can present its own certificate). */
export function call(url: string, caPem: string, options: CallOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const certPem = options.cert ? [options.cert, ...(options.chain ?? [])].map((c) => c.certPem.trim()).join("\n") : undefined;
    const req = https.request(
      url,
      {
        method: options.method ?? "GET",
        ca: caPem,
        agent: false,
        headers: options.headers ?? {},
        ...(certPem ? { cert: certPem, key: options.cert!.keyPem } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** A recording bridge-shaped backend: verifies signatures with shared/signing, answers a fixed value naming the caller. */
export interface EchoBackend {
  url: string;
  /** callers of verified requests, in order */
  callers: Caller[];
  /** requests received (path + query, request id), in order */
  requests: { path: string; requestId: string | undefined; verified: boolean }[];
  /** metric names listed in discovery */
  metrics: string[];
  /** delay each answer, ms */
  delayMs: number;
  /** override the answer: return [status, body] */
  answer?: (path: string) => [number, string] | undefined;
  close(): Promise<void>;
}

/** Start an {@link EchoBackend} on 127.0.0.1 (plain HTTP, like an in-cluster Node service). */
export async function startEchoBackend(metrics: string[], keys = KEYS): Promise<EchoBackend> {
  const parsed = parseSigningKeys(keys);
  const backend: EchoBackend = {
    url: "",
    callers: [],
    requests: [],
    metrics,
    delayMs: 0,
    close: () => closeServer(server),
  };
  const server = http.createServer(async (req, res) => {
    const url = `http://${req.headers.host}${req.url}`;
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
    let caller: Caller | undefined;
    let error = "";
    try {
      caller = await verifyRequest(new Request(url, { method: req.method ?? "GET", headers }), parsed, { nowMs: Date.now() });
    } catch (err) {
      error = (err as Error).message;
    }
    const path = new URL(url).pathname;
    backend.requests.push({ path: req.url ?? "", requestId: req.headers["x-request-id"] as string | undefined, verified: caller !== undefined });
    if (backend.delayMs > 0) await new Promise((r) => setTimeout(r, backend.delayMs));
    const write = (code: number, body: unknown) => {
      res.writeHead(code, { "Content-Type": "application/json" });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    if (caller === undefined) {
      return write(401, { kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message: error, reason: "Unauthorized", code: 401 });
    }
    backend.callers.push(caller);
    const custom = backend.answer?.(path);
    if (custom) return write(custom[0], custom[1]);
    if (path === V1) {
      return write(200, {
        kind: "APIResourceList",
        apiVersion: "v1",
        groupVersion: "external.metrics.k8s.io/v1beta1",
        resources: backend.metrics.map((name) => ({ name, singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] })),
      });
    }
    const metric = path.split("/")[6] ?? "";
    return write(200, {
      kind: "ExternalMetricValueList",
      apiVersion: "external.metrics.k8s.io/v1beta1",
      metadata: {},
      items: [{ metricName: metric, metricLabels: { caller: caller.user }, timestamp: new Date().toISOString().replace(/\.\d+Z$/, "Z"), value: "42" }],
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  backend.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return backend;
}

/** A running proxy wired to a fake Kubernetes API. */
export interface Harness {
  fake: FakeKubeApiServer;
  proxy: RunningProxy;
  serving: ServingMaterial;
  logs: LogRecord[];
  /** HTTPS request to the proxy (trusting its CA) */
  get(path: string, options?: CallOptions): Promise<Reply>;
  close(): Promise<void>;
}

/** Options of {@link startHarness}. */
export interface HarnessOptions {
  proxyConfig: string;
  pki?: Pki;
  /** ConfigMap data; null = no ConfigMap */
  authData?: Record<string, string> | null;
  keys?: string;
  fake?: FakeKubeApiServer;
  register?: boolean;
  extra?: Partial<ProxyOptions>;
}

/** Start a fake Kubernetes API (unless given) and a proxy on 127.0.0.1. */
export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const fake = options.fake ?? (await startFakeKubeApiServer());
  if (options.authData !== null) {
    const data = options.authData ?? (options.pki ? authenticationData(options.pki) : undefined);
    if (data) fake.setConfigMap("kube-system", "extension-apiserver-authentication", data);
  }
  const kc = kubeConfigFor(fake.url, fake.caPem, fake.token);
  const logs: LogRecord[] = [];
  const log = (r: LogRecord) => void logs.push(r);
  const authentication = watchAuthenticationConfig(kc, log);
  for (let i = 0; i < 200 && authentication.current() === undefined; i++) await new Promise((r) => setTimeout(r, 25));
  if (authentication.current() === undefined) throw new Error("the proxy did not load the authentication ConfigMap");
  const serving = await loadServingMaterial({ kind: "generate" }, { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy" }, { log });
  const proxy = await startProxy({
    config: loadProxyConfig(options.proxyConfig, "proxy.yaml"),
    serving,
    authentication,
    tokenReview: tokenReviewer(kc),
    subjectAccessReview: subjectAccessReviewer(kc),
    signingKeys: parseSigningKeys(options.keys ?? KEYS),
    ...(options.register ? { registration: { kc, target: { service: { namespace: "external-metrics-bridge", name: "external-metrics-bridge-proxy", port: 443 } } } } : {}),
    host: "127.0.0.1",
    port: 0,
    admissionPort: 0,
    log,
    processMetrics: false,
    ...options.extra,
  });
  return {
    fake,
    proxy,
    serving,
    logs,
    get: (path, callOptions) => call(`${proxy.url}${path}`, serving.caPem!, callOptions),
    close: async () => {
      await proxy.close();
      if (options.fake === undefined) await fake.close();
    },
  };
}

/** Serve a Hono-style fetch function on 127.0.0.1 (a free port). */
export async function serveFetch(fetch: (request: Request) => Response | Promise<Response>): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ServerType>((resolve) => {
    const s = serve({ fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((r) => {
        (server as http.Server).closeAllConnections?.();
        server.close(() => r());
      }),
  };
}

/** Write a kubeconfig file that reaches the fake Kubernetes API with its token (for proxy processes started with `--kubeconfig`). */
export function writeFakeKubeconfig(path: string, fake: Pick<FakeKubeApiServer, "url" | "caPem" | "token">): string {
  writeFileSync(
    path,
    stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "fake", cluster: { server: fake.url, "certificate-authority-data": Buffer.from(fake.caPem).toString("base64") } }],
      users: [{ name: "proxy", user: { token: fake.token } }],
      contexts: [{ name: "fake", context: { cluster: "fake", user: "proxy" } }],
      "current-context": "fake",
    }),
  );
  return path;
}

/** A ProxyConfig with bridge backends at `urls` and the given routes. */
export function proxyConfigText(backends: Record<string, string>, routes: [string, string][], extra = ""): string {
  return [
    "apiVersion: external-metrics-bridge.io/v1alpha1",
    "kind: ProxyConfig",
    "backends:",
    ...Object.entries(backends).map(([name, url]) => `  ${name}: { url: "${url}", timeoutSeconds: 2 }`),
    "routes:",
    ...routes.map(([metric, backend]) => `  - { metric: "${metric}", backend: ${backend} }`),
    extra,
  ].join("\n");
}

/** Poll `check` until it is true (or fail after `ms`). */
export async function eventually(check: () => boolean | Promise<boolean>, ms = 5000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}
