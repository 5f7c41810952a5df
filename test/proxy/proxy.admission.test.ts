/**
 * The admission webhook (shared/proxy/admission/admission.ts) through the real proxy
 * over real TLS, on its own listener (shared/proxy/admission/admission-server.ts),
 * called as kube-apiserver calls it: a POST of an `admission.k8s.io/v1`
 * AdmissionReview with no client certificate.
 */
import https from "node:https";
import net from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseYamlDocuments } from "../../shared/config/yaml.ts";
import { PolicySet } from "../../shared/policy/evaluate.ts";
import { compilePolicies } from "../../shared/policy/load.ts";
import { MAX_ADMISSION_BODY_BYTES, MAX_WARNING_CHARS } from "../../shared/proxy/admission/admission.ts";
import { MAX_HPA_EXTERNAL_METRICS } from "../../shared/policy/check-hpa.ts";
import { startFakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { createPki, eventually, proxyConfigText, startEchoBackend, startHarness, V1, type EchoBackend, type Harness, type Pki } from "./proxy.harness.ts";

const POLICIES = `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: team-a }
spec:
  defaultAction: Deny
  rules:
    - metric: "sqs_.*"
      selector: { matchLabels: { queue: team-a-jobs } }
    - metric: http_requests_per_second
      resources: [pods, ingresses.networking.k8s.io, namespaces]
      selector: { matchLabels: { verb: GET } }
`;

function policySet(): PolicySet {
  const { policies, issues } = compilePolicies(parseYamlDocuments(POLICIES, "policies.yaml"));
  expect(issues).toEqual([]);
  return new PolicySet(policies, "Allow");
}

/**
 * POST a body without a client certificate to the proxy's admission listener
 * (its API listener when it has none); `chunked` sends it without Content-Length.
 */
function post(h: Harness, path: string, body: string | Buffer, chunked = false): Promise<{ status: number; json: any; text: string }> {
  return new Promise((resolve, reject) => {
    const data = typeof body === "string" ? Buffer.from(body) : body;
    const req = https.request(
      `${h.proxy.admission?.url ?? h.proxy.url}${path}`,
      {
        method: "POST",
        ca: h.serving.caPem!,
        agent: false,
        headers: { "Content-Type": "application/json", ...(chunked ? { "Transfer-Encoding": "chunked" } : { "Content-Length": String(data.length) }) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json, text });
        });
      },
    );
    req.on("error", (err) => ((err as NodeJS.ErrnoException).code === "ECONNRESET" || (err as NodeJS.ErrnoException).code === "EPIPE" ? undefined : reject(err)));
    if (chunked) {
      for (let i = 0; i < data.length; i += 64 * 1024) req.write(data.subarray(i, i + 64 * 1024));
    } else req.write(data);
    req.end();
  });
}

function review(uid: string, kind: { group: string; version: string; kind: string }, object: unknown, extra: Record<string, unknown> = {}) {
  const ns = (object as { metadata?: { namespace?: string } }).metadata?.namespace;
  return JSON.stringify({
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: { uid, kind, resource: {}, operation: "CREATE", ...(ns ? { namespace: ns } : {}), name: (object as { metadata?: { name?: string } }).metadata?.name, object, ...extra },
  });
}

const HPA_KIND = { group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler" };
const POLICY_KIND = { group: "external-metrics-bridge.io", version: "v1alpha1", kind: "ExternalMetricPolicy" };

function hpa(metrics: unknown[], namespace = "team-a") {
  return {
    apiVersion: "autoscaling/v2",
    kind: "HorizontalPodAutoscaler",
    metadata: { name: "worker", namespace },
    spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" }, minReplicas: 1, maxReplicas: 5, metrics },
  };
}

function external(name: string, selector: unknown, target: Record<string, unknown> = { type: "AverageValue", averageValue: "5" }) {
  return { type: "External", external: { metric: { name, ...(selector !== undefined ? { selector } : {}) }, target } };
}


let pki: Pki;
let backend: EchoBackend;
let warn: Harness;
let deny: Harness;
let off: Harness;

beforeAll(async () => {
  pki = await createPki();
  backend = await startEchoBackend(["sqs_messages_visible"]);
  const config = (mode: string) => proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]], `admission: { mode: ${mode} }`);
  [warn, deny, off] = await Promise.all([
    startHarness({ pki, proxyConfig: config("Warn"), extra: { admissionPolicies: policySet } }),
    startHarness({ pki, proxyConfig: config("Deny"), extra: { admissionPolicies: policySet, admissionLimits: { maxBufferedBytes: 64 * 1024, maxConnectionsPerAddress: 10, headersTimeoutMs: 20_000, requestTimeoutMs: 30_000 } } }),
    startHarness({ pki, proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]]) }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([warn?.close(), deny?.close(), off?.close()]);
  await backend?.close();
});

describe("/admission/hpa", () => {
  const denied = hpa([external("sqs_messages_visible", { matchLabels: { queue: "team-b-jobs" } })]);

  it("Warn mode: a metric the cluster policy denies for the HPA controller is admitted with a warning naming the policy and rule", async () => {
    const res = await post(warn, "/admission/hpa", review("u-1", HPA_KIND, denied));
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response: { uid: "u-1", allowed: true } });
    const warnings: string[] = res.json.response.warnings;
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('spec.metrics[0] (External "sqs_messages_visible")');
    expect(warnings[0]).toContain("policy team-a/queues rules[0]");
    expect(warnings[0]!.length).toBeLessThanOrEqual(MAX_WARNING_CHARS);
    expect(res.json.response.status).toBeUndefined();
  });

  it("warnings are kept within what kube-apiserver passes on: 256 characters each (most important first), 4096 in all", async () => {
    const long = hpa(Array.from({ length: 40 }, () => external(`sqs_messages_visible_${"x".repeat(200)}`, { matchLabels: Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`label-${i}`, "v".repeat(40)])) })));
    const res = await post(warn, "/admission/hpa", review("u-6", HPA_KIND, long));
    const warnings: string[] = res.json.response.warnings;
    expect(warnings.length).toBeGreaterThan(1);
    expect(warnings.length).toBeLessThan(40);
    for (const w of warnings) {
      expect([...w].length).toBe(MAX_WARNING_CHARS);
      expect(w.endsWith("…")).toBe(true);
      expect(w).toContain('spec.metrics[');
    }
    expect(warnings.reduce((n, w) => n + [...w].length, 0)).toBeLessThanOrEqual(4096);
  });

  it("Deny mode: the same HPA is refused with a Status naming the policy and rule, and (caller not authenticated) nothing the policy allows", async () => {
    const res = await post(deny, "/admission/hpa", review("u-2", HPA_KIND, denied));
    expect(res.status).toBe(200);
    const r = res.json.response;
    expect(r).toMatchObject({ uid: "u-2", allowed: false, status: { kind: "Status", status: "Failure", code: 403, reason: "Forbidden" } });
    expect(r.status.message).toContain("policy team-a/queues rules[0]");
    expect(r.status.message).not.toContain("team-a-jobs");
    expect(r.status.message).not.toContain("sqs_.*");
  });

  it("an allowed metric gets no warning (either mode)", async () => {
    const ok = hpa([external("sqs_messages_visible", { matchLabels: { queue: "team-a-jobs" } })]);
    for (const h of [warn, deny]) {
      const res = await post(h, "/admission/hpa", review("u-3", HPA_KIND, ok));
      expect(res.json.response).toEqual({ uid: "u-3", allowed: true });
    }
  });

  it("flags what check-hpa flags without a bridge config: Utilization on an External metric, an unparsable selector, a metric no route serves", async () => {
    const object = hpa([
      external("sqs_messages_visible", { matchLabels: { queue: "team-a-jobs" } }, { type: "Utilization", averageUtilization: 50 }),
      external("sqs_messages_visible", { matchExpressions: [{ key: "queue", operator: "In" }] }),
      external("pubsub_backlog", { matchLabels: { queue: "team-a-jobs" } }),
      { type: "Resource", resource: { name: "cpu", target: { type: "Utilization", averageUtilization: 50 } } },
    ], "team-b"); // no cluster policy applies in team-b
    const res = await post(deny, "/admission/hpa", review("u-4", HPA_KIND, object));
    const r = res.json.response;
    expect(r.allowed).toBe(true); // check-hpa findings are warnings even in Deny mode
    expect(r.warnings).toHaveLength(3);
    expect(r.warnings[0]).toMatch(/^spec\.metrics\[0\] .*target\.type Utilization does not apply to an External metric/);
    expect(r.warnings[1]).toMatch(/^spec\.metrics\[1\] .*invalid metric\.selector/);
    expect(r.warnings[2]).toMatch(/^spec\.metrics\[2\] .*no backend of the external metrics proxy serves this metric/);
  });

  it("other kinds, versions and operations pass without a warning", async () => {
    const v1 = { ...denied, apiVersion: "autoscaling/v1" };
    for (const [kind, extra] of [
      [{ ...HPA_KIND, version: "v1" }, {}],
      [HPA_KIND, { operation: "DELETE" }],
      [HPA_KIND, { subResource: "status" }],
      [{ group: "apps", version: "v1", kind: "Deployment" }, {}],
    ] as const) {
      const res = await post(deny, "/admission/hpa", review("u-5", kind, v1, extra));
      expect(res.json.response).toEqual({ uid: "u-5", allowed: true });
    }
  });
});

describe("/admission/hpa: Pods and Object metrics (custom.metrics.k8s.io reads)", () => {
  const pods = (selector: unknown) => ({ type: "Pods", pods: { metric: { name: "http_requests_per_second", selector }, target: { type: "AverageValue", averageValue: "10" } } });
  const object = (apiVersion: string, kind: string, selector: unknown) => ({
    type: "Object",
    object: { describedObject: { apiVersion, kind, name: "web" }, metric: { name: "http_requests_per_second", selector }, target: { type: "Value", value: "100" } },
  });
  const GET = { matchLabels: { verb: "GET" } };

  it("checks them against the policies with their resource (pods; the described object's group resource; namespaces) and the metric's selector as the metricLabelSelector", async () => {
    const ok = hpa([pods(GET), object("networking.k8s.io/v1", "Ingress", GET), object("v1", "Namespace", GET)]);
    for (const h of [warn, deny]) {
      const res = await post(h, "/admission/hpa", review("c-1", HPA_KIND, ok));
      expect(res.json.response).toEqual({ uid: "c-1", allowed: true });
    }
  });

  it("Deny mode refuses a Pods metric outside the rule's selector and an Object metric of a resource no rule names (fail closed), naming each", async () => {
    const bad = hpa([pods({ matchLabels: { verb: "POST" } }), object("v1", "Service", GET), object("networking.k8s.io/v1", "Ingress", undefined)]);
    const res = await post(deny, "/admission/hpa", review("c-2", HPA_KIND, bad));
    const r = res.json.response;
    expect(r).toMatchObject({ uid: "c-2", allowed: false, status: { code: 403, reason: "Forbidden" } });
    const parts = r.status.message.split("; ");
    expect(parts).toEqual([
      expect.stringMatching(/^spec\.metrics\[0\] \(Pods "http_requests_per_second" on pods\): the HPA controller's read would be denied by cluster policy: policy team-a\/queues rules\[1\]/),
      expect.stringMatching(/^spec\.metrics\[1\] \(Object "http_requests_per_second" on services\): .*policy team-a\/queues \(no rule for services\)/),
      expect.stringMatching(/^spec\.metrics\[2\] \(Object "http_requests_per_second" on ingresses\.networking\.k8s\.io\): .*policy team-a\/queues rules\[1\]/),
    ]);
    expect(r.status.message).not.toContain("verb");
    // Warn mode: the same, as warnings; no "no backend serves" warning for custom metrics (the proxy's routes know those)
    const warned = await post(warn, "/admission/hpa", review("c-3", HPA_KIND, bad));
    expect(warned.json.response.allowed).toBe(true);
    expect(warned.json.response.warnings).toHaveLength(3);
  });

  it("counts Pods and Object metrics toward the per-HPA bound", async () => {
    const many = hpa(Array.from({ length: MAX_HPA_EXTERNAL_METRICS + 1 }, (_, i) => (i % 2 === 0 ? pods(GET) : object("v1", "Service", GET))));
    const res = await post(warn, "/admission/hpa", review("c-4", HPA_KIND, many));
    expect(res.json.response).toMatchObject({ allowed: false, status: { code: 422, message: expect.stringContaining(`${MAX_HPA_EXTERNAL_METRICS + 1} External, Pods and Object metrics`) } });
  });
});

describe("/admission/policies", () => {
  const policy = (rules: unknown[], name = "p") => ({
    apiVersion: "external-metrics-bridge.io/v1alpha1",
    kind: "ExternalMetricPolicy",
    metadata: { name, namespace: "team-a", uid: "abc", resourceVersion: "1", generation: 1 },
    spec: { defaultAction: "Deny", rules },
  });

  it("accepts a valid policy with no warning", async () => {
    const res = await post(warn, "/admission/policies", review("p-1", POLICY_KIND, policy([{ metric: "sqs_.*", selector: { matchLabels: { queue: "a" } } }])));
    expect(res.json.response).toEqual({ uid: "p-1", allowed: true });
  });

  it("refuses a pattern that does not compile in RE2, naming the rule index, with no file in the message", async () => {
    const res = await post(warn, "/admission/policies", review("p-2", POLICY_KIND, policy([{ metric: "sqs_.*", deny: true }, { metric: "(?<=a)b", deny: true }])));
    const r = res.json.response;
    expect(r).toMatchObject({ uid: "p-2", allowed: false, status: { kind: "Status", code: 422, reason: "Invalid" } });
    expect(r.status.message).toContain("ExternalMetricPolicy/team-a/p is invalid");
    expect(r.status.message).toContain("spec.rules[1].metric");
    expect(r.status.message).not.toMatch(/\.ya?ml|:\d+:\d+/);
    expect(r.status.details.causes[0]).toMatchObject({ field: "spec.rules[1].metric" });
  });

  it("refuses a selector that does not parse, naming the rule index", async () => {
    const res = await post(warn, "/admission/policies", review("p-3", POLICY_KIND, policy([{ metric: "sqs_.*", selector: { matchExpressions: [{ key: "queue", operator: "In" }] } }])));
    const r = res.json.response;
    expect(r.allowed).toBe(false);
    expect(r.status.message).toContain("spec.rules[0].selector");
  });

  it("warns about a shadowed rule", async () => {
    const res = await post(warn, "/admission/policies", review("p-4", POLICY_KIND, policy([{ metric: ".*", deny: true }, { metric: "sqs_.*", selector: {} }])));
    const r = res.json.response;
    expect(r.allowed).toBe(true);
    expect(r.warnings).toEqual([expect.stringMatching(/^spec\.rules\[1\]: rule never decides: rules\[0\]/)]);
  });

  it("checks a ClusterExternalMetricPolicy too", async () => {
    const object = { ...policy([{ metric: "(", deny: true }], "guardrail"), kind: "ClusterExternalMetricPolicy", metadata: { name: "guardrail" } };
    const res = await post(warn, "/admission/policies", review("p-5", { ...POLICY_KIND, kind: "ClusterExternalMetricPolicy" }, object));
    expect(res.json.response.allowed).toBe(false);
    expect(res.json.response.status.message).toContain("ClusterExternalMetricPolicy/guardrail is invalid");
  });
});

describe("requests the webhook refuses", () => {
  it("a body over the limit is a 413 Status, with or without Content-Length", async () => {
    const big = Buffer.alloc(MAX_ADMISSION_BODY_BYTES + 1, 0x20);
    for (const chunked of [false, true]) {
      const res = await post(warn, "/admission/hpa", big, chunked);
      expect(res.status).toBe(413);
      expect(res.json).toMatchObject({ kind: "Status", code: 413, reason: "RequestEntityTooLarge" });
    }
  });

  it("a body that is not an AdmissionReview v1 is a 400 Status", async () => {
    for (const body of ["{", JSON.stringify({ apiVersion: "admission.k8s.io/v1beta1", kind: "AdmissionReview", request: { uid: "x" } }), JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: {} })]) {
      const res = await post(warn, "/admission/policies", body);
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({ kind: "Status", code: 400, reason: "BadRequest" });
    }
  });
});

describe("slow uploads", () => {
  it("uploads that wait hold no review slot: while 20 wait, a review is answered; an upload finished within the body deadline is answered", async () => {
    // Uploads that send their headers and part of the body, then wait.
    const held = Array.from({ length: 20 }, () => {
      const req = https.request(`${warn.proxy.admission!.url}/admission/hpa`, { method: "POST", ca: warn.serving.caPem!, agent: false, headers: { "Content-Type": "application/json", "Transfer-Encoding": "chunked" } });
      const answered = new Promise<number>((resolve) => {
        req.on("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", () => resolve(-1));
      });
      req.write('{"apiVersion":"admission.k8s.io/v1",');
      return { req, answered };
    });
    expect((await post(warn, "/admission/hpa", review("x", HPA_KIND, hpa([])))).json.response).toEqual({ uid: "x", allowed: true });
    for (const { req } of held) req.end('"kind":"AdmissionReview","request":{"uid":"h"}}');
    expect(await Promise.all(held.map((h) => h.answered))).toEqual(held.map(() => 200));
  });

  it("bodies being read at once are bounded in bytes (here 64 KiB): a read past the bound is a 429 Status; once the first is answered, reviews are read again", async () => {
    const req = https.request(`${deny.proxy.admission!.url}/admission/hpa`, { method: "POST", ca: deny.serving.caPem!, agent: false, headers: { "Content-Type": "application/json", "Transfer-Encoding": "chunked" } });
    const answered = new Promise<number>((resolve) => {
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", () => resolve(-1));
    });
    const object = hpa([external("sqs_messages_visible", { matchLabels: { queue: "x".repeat(40 * 1024) } })]);
    const text = review("big", HPA_KIND, object);
    req.write(text.slice(0, 48 * 1024));
    await new Promise((r) => setTimeout(r, 300)); // the first 48 KiB are read and held
    const refused = await post(deny, "/admission/hpa", review("x", HPA_KIND, object));
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ kind: "Status", code: 429, reason: "TooManyRequests" });
    req.end(text.slice(48 * 1024));
    expect(await answered).toBe(200);
    expect((await post(deny, "/admission/hpa", review("y", HPA_KIND, hpa([])))).json.response).toEqual({ uid: "y", allowed: true });
  });
});

describe("connections", () => {
  it("one address holds at most maxConnectionsPerAddress (here 10) connections: the rest are closed at once, and another address is served", async () => {
    const port = deny.proxy.admission!.port;
    // 30 silent connections from 127.0.0.2 (a pod flooding the port)
    const sockets = Array.from({ length: 30 }, () => {
      const socket = net.connect({ port, host: "127.0.0.1", localAddress: "127.0.0.2" });
      const state = { socket, closed: false };
      socket.on("error", () => {});
      socket.on("close", () => (state.closed = true));
      return state;
    });
    try {
      await eventually(() => sockets.filter((s) => s.closed).length >= 20, 10_000, "20 of the 30 connections closed");
      await new Promise((r) => setTimeout(r, 200));
      expect(sockets.filter((s) => !s.closed)).toHaveLength(10);
      // kube-apiserver, from another address (127.0.0.1), is answered meanwhile
      expect((await post(deny, "/admission/hpa", review("c-1", HPA_KIND, hpa([])))).json.response).toEqual({ uid: "c-1", allowed: true });
    } finally {
      for (const s of sockets) s.socket.destroy();
    }
  });
});

describe("admission.clientCA", () => {
  it("a file that is missing, holds no certificate or no CA certificate stops the start with a message naming it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-client-ca-"));
    try {
      const leaf = await pki.issue(pki.clientCA, { commonName: "not-a-ca", usages: ["clientAuth"] });
      const cases: [string, string | undefined, string][] = [
        ["missing.crt", undefined, "cannot be read"],
        ["empty.crt", "no certificate here\n", "holds no PEM certificate"],
        ["leaf.crt", leaf.certPem, "holds no CA certificate"],
      ];
      for (const [name, content, message] of cases) {
        const file = join(dir, name);
        if (content !== undefined) writeFileSync(file, content);
        const config = proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]], `admission: { mode: Warn, clientCA: "${file}" }`);
        await expect(startHarness({ pki, fake: warn.fake, proxyConfig: config })).rejects.toThrow(`admission.clientCA ${file} ${message}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the API listener does not serve the webhook", () => {
  it("the webhook paths and every other path without credentials go through authentication and authorization on the API port (anonymous, refused)", async () => {
    const before = warn.fake.reviews.subjectAccessReviews.length;
    for (const path of [`${V1}/namespaces/team-a/sqs_messages_visible`, "/admission/hpa", "/metrics"]) {
      const res = await warn.get(path);
      expect(res.status).toBe(403);
    }
    expect(warn.fake.reviews.subjectAccessReviews.length).toBe(before + 3);
    expect(warn.fake.reviews.subjectAccessReviews.at(-1)).toMatchObject({ user: "system:anonymous" });
  });

  it("without an admission section in the ProxyConfig, there is no admission listener (and the API port authenticates the paths like any path)", async () => {
    expect(off.proxy.admission).toBeUndefined();
    const res = await post(off, "/admission/hpa", review("u-9", HPA_KIND, hpa([])));
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ kind: "Status", code: 403 });
  });
});


describe("caBundle of the webhook configuration", () => {
  it("the registering proxy writes its CA bundle into its own webhooks (the same as the APIService's), again when the CA changes, and leaves other webhooks alone", async () => {
    const fake = await startFakeKubeApiServer();
    const webhook = (name: string, service: string) => ({
      name,
      admissionReviewVersions: ["v1"],
      sideEffects: "None",
      failurePolicy: "Ignore",
      clientConfig: { service: { namespace: "external-metrics-bridge", name: service, path: "/admission/hpa", port: 443 } },
    });
    fake.webhookConfigurations.set("external-metrics-bridge", {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "external-metrics-bridge", resourceVersion: "1" },
      webhooks: [webhook("hpa.external-metrics-bridge.io", "external-metrics-bridge-proxy"), webhook("someone-else.example.com", "someone-else")],
    } as never);
    const h = await startHarness({ pki, fake, register: true, proxyConfig: proxyConfigText({ echo: backend.url }, [["sqs_.*", "echo"]], "admission: { mode: Warn }") });
    try {
      const stored = () => (fake.webhookConfigurations.get("external-metrics-bridge") as unknown as { webhooks: { clientConfig: { caBundle?: string } }[] }).webhooks;
      const b64 = (pem: string) => Buffer.from(pem).toString("base64");
      await eventually(() => stored()[0]!.clientConfig.caBundle === b64(h.serving.caPem!), 5000, "the webhook caBundle");
      expect((fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } }).spec.caBundle).toBe(stored()[0]!.clientConfig.caBundle);
      expect(stored()[1]!.clientConfig.caBundle).toBeUndefined();
      const rotated = `${h.serving.caPem!}${pki.otherCA.certPem}`;
      h.proxy.setServing({ ...h.serving, caPem: rotated });
      await eventually(() => stored()[0]!.clientConfig.caBundle === b64(rotated), 5000, "the rotated webhook caBundle");
      expect(stored()[1]!.clientConfig.caBundle).toBeUndefined();
    } finally {
      await h.close();
      await fake.close();
    }
  });
});
