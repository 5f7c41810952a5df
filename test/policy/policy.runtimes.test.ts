/**
 * The same policy decisions on every runtime — the Node server over real
 * HTTP, the Worker in workerd (built by wrangler), the Lambda handler — with
 * the policies in the config source. Backend calls are counted on the wire:
 * the SDK inside each runtime talks to fauxqs through a recording hop, so a
 * denied request is seen to send nothing.
 */
import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import type { ContractTarget } from "../helpers/contract.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { lambdaTarget, type HttpHandler } from "../helpers/lambda.ts";
import { startWorker } from "../helpers/worker.ts";

const V1 = "/apis/external.metrics.k8s.io/v1beta1";

function configText(endpoint: string): string {
  return `${sqsConfigHead(endpoint, { timeoutSeconds: 2, policy: null })}
metrics:
  - name: queue_messages_ready
    provider: sqs
    cacheTTLSeconds: 0
    query: { queueLabel: queue }
policy:
  defaultAction: Deny
  localIdentity: { user: system:serviceaccount:kube-system:horizontal-pod-autoscaler, groups: [system:serviceaccounts] }
---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: queues, namespace: team-a }
spec:
  rules:
    - metric: "QUEUE_MESSAGES_(READY|DELAYED)"
      selector: "queue in (rt_a_jobs,rt_a_mail)"
    - { metric: ".*", deny: true }
`;
}

/** An HTTP hop in front of fauxqs that counts the SQS calls passing through. */
async function recordingHop(upstream: string): Promise<{ endpoint: string; calls: string[]; server: Server }> {
  const target = new URL(upstream);
  const calls: string[] = [];
  const server = createServer((req, res) => {
    calls.push(String(req.headers["x-amz-target"]));
    const out = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    out.on("error", () => res.destroy());
    req.pipe(out);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, calls, server };
}

const runtimes: [string, (text: string) => Promise<ContractTarget>][] = [
  [
    "Node server",
    async (text) => {
      const server = await startNodeServer({ config: loadConfig(text, "policy.yaml").config, port: 0, log: () => {}, insecureAllowUnsigned: true });
      return { request: (path, init) => fetch(`${server.url}${path}`, init), close: () => server.close() };
    },
  ],
  ["Cloudflare Worker (workerd)", async (text) => startWorker(text)],
  [
    "AWS Lambda",
    async (text) => lambdaTarget(createLambdaHandler({ BRIDGE_CONFIG: text, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" }, { log: () => {} }) as unknown as HttpHandler, "Function URL"),
  ],
];

describe("policy decisions on every runtime", () => {
  let sqs: Emulator;
  let hop: Awaited<ReturnType<typeof recordingHop>>;
  beforeAll(async () => {
    sqs = await startEmulator();
    await sqs.add("rt_a_jobs", 5);
    await sqs.add("rt_b_jobs", 8);
    hop = await recordingHop(sqs.endpoint);
  });
  afterAll(async () => {
    hop?.server.close();
    await sqs?.stop();
  });

  for (const [name, start] of runtimes) {
    it(name, async () => {
      const target = await start(configText(hop.endpoint));
      try {
        hop.calls.length = 0;
        const get = async (ns: string, metric: string, selector: string) => {
          const res = await target.request(`${V1}/namespaces/${ns}/${metric}?labelSelector=${encodeURIComponent(selector)}`);
          return { status: res.status, body: (await res.json()) as any };
        };
        for (const [ns, metric, selector, why] of [
          ["team-a", "queue_messages_ready", "queue=rt_b_jobs", /policy team-a\/queues rules\[0\] .* does not imply "queue in \(rt_a_jobs,rt_a_mail\)"/],
          ["team-a", "queue_messages_ready", "queue notin (rt_a_mail)", /does not imply "queue in \(rt_a_jobs,rt_a_mail\)"/],
          ["team-b", "queue_messages_ready", "queue=rt_b_jobs", /no ExternalMetricPolicy applies .* policy\.defaultAction is Deny/],
        ] as const) {
          const denied = await get(ns, metric, selector);
          expect(denied.status, `${ns} ${selector}`).toBe(403);
          expect(denied.body).toMatchObject({ kind: "Status", reason: "Forbidden", code: 403 });
          expect(denied.body.message).toMatch(why);
          expect(denied.body.message).toMatch(/user "system:serviceaccount:kube-system:horizontal-pod-autoscaler"/);
        }
        expect(hop.calls).toEqual([]);
        const allowed = await get("team-a", "Queue_Messages_Ready", "queue in (rt_a_jobs)");
        expect(allowed.status).toBe(200);
        expect(allowed.body.items.map((i: any) => i.value)).toEqual(["5"]);
        expect(hop.calls.filter((c) => c.endsWith("GetQueueAttributes"))).toHaveLength(1);
      } finally {
        await target.close();
      }
    });
  }
});
