/**
 * The policy in the request path of the app: evaluated after the selector is
 * parsed and the rule found, before any backend call. Backend calls are
 * counted as SDK commands (as test/providers/sqs.test.ts does) against fauxqs.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge } from "../helpers/bridge.ts";
import type { Caller } from "../../shared/identity.ts";
import { unauthorized } from "../../shared/k8s/status.ts";
import type { SqsProvider } from "../../shared/providers/aws-sqs/index.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";

function configText(endpoint: string, policySection: string): string {
  return `${sqsConfigHead(endpoint, { policy: null })}
metrics:
  - name: queue_messages_ready
    provider: sqs
    cacheTTLSeconds: 0
    query: { queueLabel: queue }
${policySection}
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: team-a }
spec:
  rules:
    - metric: "queue_.*"
      selector: { matchExpressions: [{ key: queue, operator: In, values: [a_jobs, a_mail] }] }
  defaultAction: Deny
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: only-operators }
spec:
  subjects: { groups: [operators] }
  rules:
    - { metric: ".*", selector: "queue=a_mail" }
`;
}

/** A bridge whose SDK commands are recorded. */
function bridge(text: string, options: Parameters<typeof buildBridge>[3] = {}) {
  const built = buildBridge(text, "policy.yaml", { env: {}, now: Date.now }, { log: () => {}, ...options });
  const commands: string[] = [];
  for (const provider of built.providers.values()) {
    (provider as SqsProvider).client.middlewareStack.add(
      (next, context) => async (args) => {
        commands.push(String((context as { commandName?: string }).commandName));
        return next(args);
      },
      { step: "initialize", name: "countCommands" },
    );
  }
  const read = async (namespace: string, selector: string) => {
    const res = await built.app.request(`${V1}/namespaces/${namespace}/queue_messages_ready?labelSelector=${encodeURIComponent(selector)}`);
    return { status: res.status, body: (await res.json()) as any };
  };
  return { built, commands, read };
}

describe("policy in the request path (fauxqs)", () => {
  let sqs: Emulator;
  beforeAll(async () => {
    sqs = await startEmulator();
    await sqs.add("a_jobs", 3);
    await sqs.add("b_jobs", 7);
  });
  afterAll(async () => sqs?.stop());

  it("a denied request is 403 naming policy, rule and reason, and makes zero backend calls", async () => {
    const { commands, read } = bridge(configText(sqs.endpoint, "policy: { defaultAction: Deny }"));
    const denied = await read("team-a", "queue=b_jobs");
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      reason: "Forbidden",
      code: 403,
      message:
        'externalmetrics.external.metrics.k8s.io "queue_messages_ready" is forbidden: user "system:anonymous" may not read it in ' +
        'namespace "team-a": policy team-a/queues rules[0] (metric "queue_.*") allows only selector "queue in (a_jobs,a_mail)", ' +
        'and the request\'s selector "queue=b_jobs" does not imply "queue in (a_jobs,a_mail)"',
      details: { name: "queue_messages_ready", group: "external.metrics.k8s.io", kind: "externalmetrics" },
    });
    // every series of the metric (no selector), and a namespace no policy covers
    expect((await read("team-a", "")).status).toBe(403);
    const uncovered = await read("team-b", "queue=b_jobs");
    expect(uncovered.status).toBe(403);
    expect(uncovered.body.message).toMatch(/no ExternalMetricPolicy applies to user "system:anonymous" in namespace "team-b", and the bridge's policy.defaultAction is Deny$/);
    expect(commands).toEqual([]);
  });

  it("an allowed request reaches the backend and answers its value", async () => {
    const { commands, read } = bridge(configText(sqs.endpoint, "policy: { defaultAction: Deny }"));
    const allowed = await read("team-a", "queue=a_jobs");
    expect(allowed.status).toBe(200);
    expect(allowed.body.items.map((i: any) => [i.metricLabels.queue, i.value])).toEqual([["a_jobs", "3"]]);
    expect(commands).toEqual(["GetQueueUrlCommand", "GetQueueAttributesCommand"]);
  });

  it("the bridge's defaultAction Allow lets uncovered namespaces through, covered ones stay limited", async () => {
    const { commands, read } = bridge(configText(sqs.endpoint, "policy: { defaultAction: Allow }"));
    expect((await read("team-b", "queue=b_jobs")).body.items[0].value).toBe("7");
    expect((await read("team-a", "queue=b_jobs")).status).toBe(403);
    expect(commands.filter((c) => c === "GetQueueAttributesCommand")).toHaveLength(1);
  });

  it("an unknown metric is 404 before any policy; an unparsable selector is 400", async () => {
    const { built, commands } = bridge(configText(sqs.endpoint, "policy: { defaultAction: Deny }"));
    expect((await built.app.request(`${V1}/namespaces/team-a/nope`)).status).toBe(404);
    expect((await built.app.request(`${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%20in%20(`)).status).toBe(400);
    expect(commands).toEqual([]);
  });

  it("without a proxy, the caller is the configured local identity", async () => {
    const section = "policy:\n  defaultAction: Deny\n  localIdentity: { user: ops, groups: [operators] }";
    const { read, commands } = bridge(configText(sqs.endpoint, section));
    // both team-a/queues and only-operators apply to ops: a_jobs is denied by the cluster policy
    const denied = await read("team-a", "queue=a_jobs");
    expect(denied.body.message).toMatch(/user "ops" may not read it in namespace "team-a": policy only-operators rules\[0\]/);
    expect(commands).toEqual([]);
    await sqs.add("a_mail", 2);
    expect((await read("team-a", "queue=a_mail")).body.items[0].value).toBe("2");
  });

  it("an authenticate hook passed in the options (the proxy's verifier) replaces the local identity; the policy stays", async () => {
    const section = "policy:\n  defaultAction: Deny\n  localIdentity: { user: ops, groups: [operators] }";
    const verified: Caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: [], extra: {} };
    const authenticate = (request: Request): Caller => {
      if (request.headers.get("x-test-signed") !== "yes") throw unauthorized("missing signature");
      return verified;
    };
    const { built, commands } = bridge(configText(sqs.endpoint, section), { authenticate });
    const path = `${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Db_jobs`;
    expect((await built.app.request(path)).status).toBe(401);
    const res = await built.app.request(path, { headers: { "x-test-signed": "yes" } });
    expect(res.status).toBe(403);
    expect(((await res.json()) as any).message).toMatch(/user "system:serviceaccount:kube-system:horizontal-pod-autoscaler" may not read it .* team-a\/queues rules\[0\]/);
    expect(commands).toEqual([]);
  });
});
