/**
 * The bridge remembers the policy's Allow decisions (shared/bridge.ts
 * `rememberAllowed`): an Allow of (caller, namespace, metric, selector) is
 * remembered; a Deny is never remembered; a different caller, namespace,
 * metric or selector is decided on its own. Through the real app and
 * ExternalMetricPolicy evaluator, with callers from verified signatures (a
 * fresh caller object per request) and from the local identity: the answers
 * and audit records are those of the policies; then `rememberAllowed`
 * itself, around a decision that can change.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthorizationRequest, LogRecord } from "../../shared/app.ts";
import { MAX_REMEMBERED_ALLOWS, rememberAllowed } from "../../shared/bridge.ts";
import { buildBridge } from "../helpers/bridge.ts";
import { forbidden } from "../../shared/k8s/status.ts";
import { parseSelector } from "../../shared/k8s/selector.ts";
import { parseSigningKeys, signRequest, type SigningKey } from "../../shared/signing.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { fixtureKey } from "../helpers/keys.ts";

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
  it("an allowed read stays allowed, a denied read stays denied, every read's audit record carries its decision (local identity)", async () => {
    const logs: LogRecord[] = [];
    const { app } = buildBridge(text, "bridge.yaml", { env: { BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, now: Date.now }, { log: (r) => logs.push(r) });
    for (let i = 0; i < 3; i++) expect((await app.request(path("queue=a"))).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await app.request(path("queue=b"))).status).toBe(403);
    // another namespace is decided on its own (and denied: the policy is namespaced)
    expect((await app.request(path("queue=a", "other"))).status).toBe(403);
    expect((await app.request(path("queue=a"))).status).toBe(200);
    expect(logs.filter((r) => r.msg === "request").map((r) => [r.selector, r.code, r.decision])).toEqual([
      ["queue=a", 200, "allow"],
      ["queue=a", 200, "allow"],
      ["queue=a", 200, "allow"],
      ["queue=b", 403, "deny"],
      ["queue=b", 403, "deny"],
      ["queue=b", 403, "deny"],
      ["queue=a", 403, "deny"],
      ["queue=a", 200, "allow"],
    ]);
  });

  it("decides each signed caller on its own: one caller's Allow never allows another", async () => {
    const { app } = buildBridge(text, "bridge.yaml", { env: { BRIDGE_SIGNING_KEYS: KEYS }, now: Date.now }, { log: () => {} });
    const as = async (user: string, groups: string[], extra: Record<string, string[]> = {}) => {
      const url = `http://bridge.test${path("queue=a")}`;
      const headers = await signRequest({ method: "GET", url, caller: { user, groups, extra } }, KEY, Date.now());
      return (await app.request(url, { headers })).status;
    };
    expect(await as(HPA, ["system:serviceaccounts"])).toBe(200);
    expect(await as(HPA, ["system:serviceaccounts"])).toBe(200);
    expect(await as("jane", ["system:serviceaccounts"])).toBe(403);
    expect(await as("jane", ["system:serviceaccounts"])).toBe(403);
    // same user, other groups or extra: another identity, decided again (and allowed: the policy names the service account)
    expect(await as(HPA, ["system:serviceaccounts", "x"])).toBe(200);
    expect(await as(HPA, ["system:serviceaccounts"], { scopes: ["s"] })).toBe(200);
    // the service account's name as a user in another namespace's form: not the same identity
    expect(await as("system:serviceaccount:other:horizontal-pod-autoscaler", ["system:serviceaccounts"])).toBe(403);
  });
});

/**
 * `rememberAllowed` around a decision that can change (a stand-in for the
 * policies): what was remembered still passes after the decision turned to
 * Deny, what was not is decided again and denied. The policies the bridge
 * loads never change, so this is the only way to see which requests were
 * remembered; what remembering saves is measured by the benchmarks
 * (test/bench/http-overhead.ts, "bridge, cached", with 42 policies).
 */
describe("rememberAllowed", () => {
  const caller = { user: "u", groups: ["g"], extra: {} };
  const request = (selector: string, over: Partial<AuthorizationRequest> = {}) =>
    ({ caller, namespace: "ns", metric: "m", rule: {} as AuthorizationRequest["rule"], selector: parseSelector(selector), ...over }) as AuthorizationRequest;
  /** A decision that denies when `deny` is set: `no for <user>/<namespace>/<metric>`. */
  const switchable = () => {
    const decision = { deny: false };
    const authorize = rememberAllowed((r: AuthorizationRequest) => {
      if (decision.deny) throw forbidden(`no for ${r.caller.user}/${r.namespace}/${r.metric}`);
    });
    return { decision, authorize };
  };

  it("keys on the selector object, namespace, metric and the caller's whole identity", () => {
    const { decision, authorize } = switchable();
    const r = request("a=1");
    authorize(r);
    decision.deny = true; // from now on only a remembered Allow passes
    expect(() => authorize(r)).not.toThrow();
    expect(() => authorize({ ...r })).not.toThrow();
    expect(() => authorize({ ...r, caller: { ...caller } })).not.toThrow(); // the same identity in a new object
    for (const other of [
      { ...r, namespace: "ns2" },
      { ...r, metric: "m2" },
      { ...r, caller: { ...caller, uid: "1" } },
      { ...r, caller: { ...caller, groups: ["g", "h"] } },
      { ...r, caller: { ...caller, extra: { k: ["v"] } } },
      { ...r, selector: parseSelector("a=1") }, // another object: decided again
    ]) {
      expect(() => authorize(other)).toThrow(/^no for /);
    }
  });

  it("never remembers a Deny, and stays bounded per selector", () => {
    const { decision, authorize } = switchable();
    const r = request("a=1");
    decision.deny = true;
    expect(() => authorize(r)).toThrow("no for u/ns/m");
    expect(() => authorize(r)).toThrow("no for u/ns/m");
    decision.deny = false;
    authorize(r); // the Deny was not remembered: allowed as soon as the decision allows
    decision.deny = true;
    authorize(r); // the Allow was
    decision.deny = false;
    for (let i = 0; i < MAX_REMEMBERED_ALLOWS + 10; i++) authorize({ ...r, namespace: `ns-${i}` });
    decision.deny = true;
    expect(() => authorize(r)).toThrow("no for u/ns/m"); // forgotten when the selector's set was cleared
    expect(() => authorize({ ...r, namespace: `ns-${MAX_REMEMBERED_ALLOWS + 9}` })).not.toThrow(); // remembered since
  });

  it("answers the last Allow by identity, and never lets it stand for another caller, namespace or metric", () => {
    const decide = (r: AuthorizationRequest) => {
      if (r.caller.user !== "u" || r.namespace !== "ns" || r.metric !== "m") throw forbidden(`no for ${r.caller.user}/${r.namespace}/${r.metric}`);
    };
    const authorize = rememberAllowed(decide);
    const r = request("a=1");
    authorize(r);
    authorize(r); // the same objects: the last Allow
    const intruder = { user: "mallory", groups: ["g"], extra: {} };
    // After the Allow of `u`, each of these differs in one part and is decided (and denied), every time.
    for (let round = 0; round < 2; round++) {
      expect(() => authorize({ ...r, caller: intruder })).toThrow("no for mallory/ns/m");
      expect(() => authorize({ ...r, namespace: "other" })).toThrow("no for u/other/m");
      expect(() => authorize({ ...r, metric: "other" })).toThrow("no for u/ns/other");
      authorize(r); // and `u` stays allowed between them
    }
    authorize({ ...r, caller: { ...caller } });
  });
});
