/**
 * The bridge remembers the policy's Allow decisions (shared/bridge.ts
 * `rememberAllowed`): the same (caller, namespace, metric, selector) is
 * evaluated once; a Deny is evaluated every time and never remembered; a
 * different caller, namespace, metric or selector is decided on its own.
 * Through the real app and ExternalMetricPolicy evaluator, with callers from
 * verified signatures (a fresh caller object per request) and from the
 * local identity.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { AuthorizationRequest } from "../shared/app.ts";
import { MAX_REMEMBERED_ALLOWS, rememberAllowed } from "../shared/bridge.ts";
import { buildBridge } from "./helpers/bridge.ts";
import { forbidden } from "../shared/k8s/status.ts";
import { parseSelector } from "../shared/k8s/selector.ts";
import { PolicySet } from "../shared/policy/evaluate.ts";
import { parseSigningKeys, signRequest, type SigningKey } from "../shared/signing.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "./helpers/emulator.ts";
import { fixtureKey } from "./helpers/keys.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";
const KEYS = `k1:${fixtureKey(3).toString("base64url")}`;
const [KEY] = parseSigningKeys(KEYS) as [SigningKey];

let sqs: Emulator;
let text: string;

beforeAll(async () => {
  sqs = await startEmulator();
  for (const q of ["a", "b"]) {
    await sqs.createQueue(q);
    await sqs.add(q, 2);
  }
  text = `${sqsConfigHead(sqs.endpoint, { defaults: "{ maxAgeSeconds: 60, cacheTTLSeconds: 30 }", policy: null })}
metrics:
  - { name: depth, provider: sqs, query: { queueLabel: queue } }
policy:
  defaultAction: Deny
  localIdentity: { user: "${HPA}", groups: [system:serviceaccounts] }
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: hpa-reads-a, namespace: default }
spec:
  subjects: { serviceAccounts: [kube-system/horizontal-pod-autoscaler] }
  rules:
    - metric: ".*"
      selector: { matchLabels: { queue: a } }
  defaultAction: Deny
`;
}, 60_000);

afterAll(async () => {
  await sqs?.stop();
});

const path = (selector: string, ns = "default") => `${V1}/namespaces/${ns}/depth?labelSelector=${encodeURIComponent(selector)}`;

describe("policy decisions remembered by the bridge", () => {
  it("evaluates an allowed read once, a denied read every time (local identity)", async () => {
    const evaluate = vi.spyOn(PolicySet.prototype, "evaluate");
    try {
      const { app } = buildBridge(text, "bridge.yaml", { env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, now: Date.now }, { log: () => {} });
      for (let i = 0; i < 3; i++) expect((await app.request(path("queue=a"))).status).toBe(200);
      expect(evaluate).toHaveBeenCalledTimes(1);
      for (let i = 0; i < 3; i++) expect((await app.request(path("queue=b"))).status).toBe(403);
      expect(evaluate).toHaveBeenCalledTimes(4);
      // another namespace is decided on its own (and denied: the policy is namespaced)
      expect((await app.request(path("queue=a", "other"))).status).toBe(403);
      expect(evaluate).toHaveBeenCalledTimes(5);
    } finally {
      evaluate.mockRestore();
    }
  });

  it("decides each signed caller on its own: one caller's Allow never allows another", async () => {
    const evaluate = vi.spyOn(PolicySet.prototype, "evaluate");
    try {
      const { app } = buildBridge(text, "bridge.yaml", { env: { BRIDGE_SIGNING_KEYS: KEYS }, now: Date.now }, { log: () => {} });
      const as = async (user: string, groups: string[], extra: Record<string, string[]> = {}) => {
        const url = `http://bridge.test${path("queue=a")}`;
        const headers = await signRequest({ method: "GET", url, caller: { user, groups, extra } }, KEY, Date.now());
        return (await app.request(url, { headers })).status;
      };
      expect(await as(HPA, ["system:serviceaccounts"])).toBe(200);
      expect(await as(HPA, ["system:serviceaccounts"])).toBe(200);
      expect(evaluate).toHaveBeenCalledTimes(1);
      expect(await as("jane", ["system:serviceaccounts"])).toBe(403);
      expect(await as("jane", ["system:serviceaccounts"])).toBe(403);
      expect(evaluate).toHaveBeenCalledTimes(3);
      // same user, other groups or extra: another identity, decided again
      expect(await as(HPA, ["system:serviceaccounts", "x"])).toBe(200);
      expect(await as(HPA, ["system:serviceaccounts"], { scopes: ["s"] })).toBe(200);
      expect(evaluate).toHaveBeenCalledTimes(5);
    } finally {
      evaluate.mockRestore();
    }
  });
});

describe("rememberAllowed", () => {
  const caller = { user: "u", groups: ["g"], extra: {} };
  const request = (selector: string, over: Partial<AuthorizationRequest> = {}) =>
    ({ caller, namespace: "ns", metric: "m", rule: {} as AuthorizationRequest["rule"], selector: parseSelector(selector), ...over }) as AuthorizationRequest;

  it("keys on the selector object, namespace, metric and the caller's whole identity", () => {
    const decide = vi.fn((_r: AuthorizationRequest) => {});
    const authorize = rememberAllowed(decide);
    const r = request("a=1");
    authorize(r);
    authorize({ ...r });
    expect(decide).toHaveBeenCalledTimes(1);
    authorize({ ...r, namespace: "ns2" });
    authorize({ ...r, metric: "m2" });
    authorize({ ...r, caller: { ...caller, uid: "1" } });
    authorize({ ...r, caller: { ...caller, extra: { k: ["v"] } } });
    authorize({ ...r, selector: parseSelector("a=1") }); // another object: decided again
    expect(decide).toHaveBeenCalledTimes(6);
  });

  it("never remembers a Deny, and stays bounded per selector", () => {
    let deny = true;
    const decide = vi.fn((_r: AuthorizationRequest) => {
      if (deny) throw forbidden("no");
    });
    const authorize = rememberAllowed(decide);
    const r = request("a=1");
    expect(() => authorize(r)).toThrow("no");
    expect(() => authorize(r)).toThrow("no");
    deny = false;
    authorize(r);
    authorize(r);
    expect(decide).toHaveBeenCalledTimes(3);
    for (let i = 0; i < MAX_REMEMBERED_ALLOWS + 10; i++) authorize({ ...r, namespace: `ns-${i}` });
    authorize(r); // forgotten when the selector's set was cleared
    expect(decide).toHaveBeenCalledTimes(3 + MAX_REMEMBERED_ALLOWS + 10 + 1);
  });

  it("answers the last Allow by identity, and never lets it stand for another caller, namespace or metric", () => {
    const decide = vi.fn((r: AuthorizationRequest) => {
      if (r.caller.user !== "u" || r.namespace !== "ns" || r.metric !== "m") throw forbidden(`no for ${r.caller.user}/${r.namespace}/${r.metric}`);
    });
    const authorize = rememberAllowed(decide);
    const r = request("a=1");
    authorize(r);
    authorize(r); // the same objects: the last Allow, no decision
    expect(decide).toHaveBeenCalledTimes(1);
    const intruder = { user: "mallory", groups: ["g"], extra: {} };
    // After the Allow of `u`, each of these differs in one part and is decided (and denied), every time.
    for (let round = 0; round < 2; round++) {
      expect(() => authorize({ ...r, caller: intruder })).toThrow("no for mallory/ns/m");
      expect(() => authorize({ ...r, namespace: "other" })).toThrow("no for u/other/m");
      expect(() => authorize({ ...r, metric: "other" })).toThrow("no for u/ns/other");
      authorize(r); // and `u` stays allowed between them
    }
    expect(decide).toHaveBeenCalledTimes(1 + 2 * 3);
    // A caller with the same identity in a new object (a signed request's) is remembered by its key.
    authorize({ ...r, caller: { ...caller } });
    expect(decide).toHaveBeenCalledTimes(7);
  });
});
