/**
 * `queueIdentifier: url` of the aws-sqs provider: an Object metric on an
 * ACK-style `Queue` whose `status.queueURL` names the queue, read through
 * the custom values read (shared/values/custom-read.ts) and the real AWS SDK
 * against fauxqs. The URL is resolved with GetQueueUrl through the
 * provider's own endpoint and served only when SQS returns exactly it: a URL
 * of another host, account or a queue that does not exist is a Status, never
 * a value, and no request goes to the URL's host.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Caller } from "../../shared/identity.ts";
import { customMetricsRead, parseRequestPath } from "../../shared/k8s/request-path.ts";
import { StatusError } from "../../shared/k8s/status.ts";
import { ConfigError } from "../../shared/config/yaml.ts";
import { loadConfig } from "../../shared/config/config.ts";
import { createCustomValuesReader, type ReadObjects } from "../../shared/values/custom-read.ts";
import { buildBridge } from "../helpers/bridge.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { closeServer } from "../helpers/http.ts";

const HPA: Caller = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: [], extra: {} };
const PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/queues.sqs.services.k8s.aws/jobs/queue_backlog";

function config(endpoint: string, query = "{ queueLabel: queue_url, queueIdentifier: url, attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] }"): string {
  return `${sqsConfigHead(endpoint, { timeoutSeconds: 1 })}
metrics:
  - name: queue_backlog
    provider: sqs
    describes:
      resource: queues.sqs.services.k8s.aws
      objectLabel: queue_url
      identifier: { from: status, path: status.queueURL }
    query: ${query}
`;
}

const queue = (queueURL: string): ReadObjects => ({
  object: { kind: "Queue", apiVersion: "sqs.services.k8s.aws/v1alpha1", name: "jobs", namespace: "team-a", status: { queueURL } },
});

async function read(endpoint: string, objects: ReadObjects) {
  const bridge = buildBridge(config(endpoint), "test.yaml", { env: {}, now: () => Date.now() }, { log: () => {} });
  const reader = createCustomValuesReader({ config: bridge.config, providers: bridge.providers, now: () => Date.now(), authorize: () => {} });
  const outcome = await reader({ target: customMetricsRead(parseRequestPath(PATH))!, metricLabelSelector: "", objects, caller: HPA, requestId: "r" });
  if (outcome instanceof StatusError) return { status: outcome.code, message: outcome.message, value: undefined };
  return { status: 200, message: "", value: JSON.parse(outcome.text).items.map((i: { value: string }) => i.value) as string[] };
}

describe("aws-sqs queueIdentifier: url", () => {
  let sqs: Emulator;
  let jobsUrl: string;
  let elsewhere: Server;
  let elsewhereHits = 0;
  beforeAll(async () => {
    sqs = await startEmulator();
    jobsUrl = await sqs.createQueue("team-a-jobs");
    await sqs.add("team-a-jobs", 6);
    elsewhere = createServer((_req, res) => {
      elsewhereHits++;
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => elsewhere.listen(0, "127.0.0.1", resolve));
  });
  afterAll(async () => {
    await sqs?.stop();
    if (elsewhere !== undefined) await closeServer(elsewhere);
  });

  it("reads the queue the object's status.queueURL names (visible + in flight)", async () => {
    expect(jobsUrl).toMatch(/\/\d{12}\/team-a-jobs$/);
    const r = await read(sqs.endpoint, queue(jobsUrl));
    expect(r).toEqual({ status: 200, message: "", value: ["6"] });
  });

  it("refuses a URL of another host: 404 after GetQueueUrl through the provider's endpoint, nothing sent to that host", async () => {
    const port = (elsewhere.address() as AddressInfo).port;
    const foreign = jobsUrl.replace(/^https?:\/\/[^/]+/, `http://127.0.0.1:${port}`);
    expect(foreign).not.toBe(jobsUrl);
    const r = await read(sqs.endpoint, queue(foreign));
    expect(r.status).toBe(404);
    expect(r.message).toContain("is not a queue this provider reads");
    expect(r.value).toBeUndefined();
    expect(elsewhereHits).toBe(0);
  });

  it("a queue that does not exist is 404, a text that is no queue URL is 400: never a value", async () => {
    const missing = await read(sqs.endpoint, queue(jobsUrl.replace(/team-a-jobs$/, "team-a-gone")));
    expect(missing.status).toBe(404);
    for (const bad of ["team-a-jobs", "https://sqs.example.com/123/x", `${jobsUrl}?Action=DeleteQueue`, "https://user:pw@sqs.us-east-1.amazonaws.com/123456789012/q", "ftp://h/123456789012/q"]) {
      const r = await read(sqs.endpoint, queue(bad));
      expect(r.status, bad).toBe(400);
      expect(r.message, bad).toContain("is not an SQS queue URL");
    }
  });

  it("refuses name-only options with queueIdentifier: url at load", () => {
    for (const extra of ["queues: [a]", "queueNameTemplate: 'prod-{queue}'", "queueOwnerAWSAccountId: '123456789012'"]) {
      const text = config("http://127.0.0.1:9", `{ queueLabel: queue_url, queueIdentifier: url, ${extra} }`);
      expect(() => loadConfig(text, "test.yaml"), extra).toThrow(ConfigError);
      try {
        loadConfig(text, "test.yaml");
      } catch (err) {
        expect((err as ConfigError).issues.map((i) => i.message).join("\n"), extra).toContain("does not apply with queueIdentifier: url");
      }
    }
  });
});
