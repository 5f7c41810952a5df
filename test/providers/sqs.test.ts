/**
 * The aws-sqs provider through the real AWS SDK: against fauxqs for values,
 * caching and coalescing; against small fake servers on 127.0.0.1 speaking
 * the SQS JSON protocol for timeouts, throttling and credential errors.
 */
import { DeleteMessageBatchCommand, DeleteQueueCommand, ReceiveMessageCommand } from "@aws-sdk/client-sqs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { SqsProvider } from "../../shared/providers/aws-sqs/index.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "../helpers/emulator.ts";
import { closeServer } from "../helpers/http.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

function config(endpoint: string, extra = "", provider = "") {
  return `
${sqsConfigHead(endpoint, { timeoutSeconds: 0.5 })}
${provider}
metrics:
  - name: depth
    provider: sqs
    maxAgeSeconds: 30
    cacheTTLSeconds: 10
    query: { queueLabel: queue }
${extra}
`;
}

/** A bridge with a controllable clock and a log of SDK commands sent. */
function bridgeWithClock(text: string, env: Record<string, string> = {}) {
  const clock = { now: 1_800_000_000_000 };
  const bridge = buildBridge(text, "test.yaml", { env, now: () => clock.now }, { log: () => {} });
  const commands: string[] = [];
  for (const provider of bridge.providers.values()) {
    (provider as SqsProvider).client.middlewareStack.add(
      (next, context) => async (args) => {
        commands.push(String((context as { commandName?: string }).commandName));
        return next(args);
      },
      { step: "initialize", name: "countCommands" },
    );
  }
  return { bridge, clock, commands };
}

async function read(bridge: Bridge, selector: string, metric = "depth") {
  const res = await bridge.app.request(`${NS}/${metric}?labelSelector=${encodeURIComponent(selector)}`);
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

describe("aws-sqs provider against fauxqs", () => {
  let sqs: Emulator;
  beforeAll(async () => {
    sqs = await startEmulator();
    await sqs.add("jobs", 4);
    await sqs.add("mail", 9);
  });
  afterAll(async () => sqs?.stop());

  it("coalesces identical concurrent reads into one GetQueueAttributes call", async () => {
    const { bridge, commands } = bridgeWithClock(config(sqs.endpoint));
    const answers = await Promise.all(Array.from({ length: 20 }, () => read(bridge, "queue=jobs")));
    for (const a of answers) expect(a.body.items[0].value).toBe("4");
    expect(commands.filter((c) => c === "GetQueueAttributesCommand")).toHaveLength(1);
    expect(commands.filter((c) => c === "GetQueueUrlCommand")).toHaveLength(1);
  });

  it("reads the queues of one request concurrently, one call each", async () => {
    const { bridge, commands } = bridgeWithClock(config(sqs.endpoint));
    const a = await read(bridge, "queue in (jobs,mail)");
    expect(a.body.items.map((i: any) => i.value)).toEqual(["4", "9"]);
    expect(commands.filter((c) => c === "GetQueueAttributesCommand")).toHaveLength(2);
  });

  it("re-uses a read for cacheTTLSeconds, then reads again; the timestamp shows the read's age", async () => {
    const { bridge, clock, commands } = bridgeWithClock(config(sqs.endpoint));
    const first = await read(bridge, "queue=jobs");
    expect(first.body.items[0].value).toBe("4");
    expect(first.body.items[0].timestamp).toBe(new Date(clock.now).toISOString().replace(".000Z", "Z"));
    await sqs.add("jobs", 2);
    clock.now += 9_000;
    const cached = await read(bridge, "queue=jobs");
    expect(cached.body.items[0].value).toBe("4");
    expect(cached.body.items[0].timestamp).toBe(first.body.items[0].timestamp);
    clock.now += 2_000; // 11 s > cacheTTLSeconds
    const fresh = await read(bridge, "queue=jobs");
    expect(fresh.body.items[0].value).toBe("6");
    expect(commands.filter((c) => c === "GetQueueAttributesCommand")).toHaveLength(2);
    await sqs.drain("jobs", 2);
  });

  it("a backlog rule (visible + in flight, KEDA's default) keeps counting received messages until they are deleted; ApproximateNumberOfMessages alone does not", async () => {
    const rules = `
  - name: backlog
    provider: sqs
    cacheTTLSeconds: 0
    query: { queueLabel: queue, attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] }
  - name: ready
    provider: sqs
    cacheTTLSeconds: 0
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }`;
    const { bridge, commands } = bridgeWithClock(config(sqs.endpoint, rules));
    await sqs.add("backlog_q", 5);
    const values = async () => [(await read(bridge, "queue=backlog_q", "backlog")).body.items[0].value, (await read(bridge, "queue=backlog_q", "ready")).body.items[0].value];
    expect(await values()).toEqual(["5", "5"]);
    // a worker receives 3 and is still working on them: in flight, not visible
    const url = await sqs.createQueue("backlog_q");
    const received = await sqs.client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 3, VisibilityTimeout: 300, WaitTimeSeconds: 0 }));
    expect(received.Messages).toHaveLength(3);
    expect(await values()).toEqual(["5", "2"]);
    // done with them: deleted, gone from both
    await sqs.client.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: received.Messages!.map((m, i) => ({ Id: `d${i}`, ReceiptHandle: m.ReceiptHandle! })) }));
    expect(await values()).toEqual(["2", "2"]);
    // one GetQueueAttributes per read: the two attributes of the backlog are asked together
    expect(commands.filter((c) => c === "GetQueueAttributesCommand")).toHaveLength(6);
  });

  it("answers 404 for a deleted queue and forgets its URL", async () => {
    await sqs.add("short_lived", 1);
    const { bridge } = bridgeWithClock(config(sqs.endpoint).replace("cacheTTLSeconds: 10", "cacheTTLSeconds: 0"));
    expect((await read(bridge, "queue=short_lived")).body.items[0].value).toBe("1");
    await sqs.client.send(new DeleteQueueCommand({ QueueUrl: await sqs.createQueue("short_lived") }));
    const gone = await read(bridge, "queue=short_lived");
    expect(gone.status).toBe(404);
    expect(gone.body).toMatchObject({ kind: "Status", reason: "NotFound" });
  });

  it("never caches a failure: the next read after a failure reaches the backend", async () => {
    const { bridge, commands } = bridgeWithClock(config(sqs.endpoint));
    expect((await read(bridge, "queue=not_yet")).status).toBe(404);
    await sqs.add("not_yet", 3);
    const later = await read(bridge, "queue=not_yet");
    expect(later.status).toBe(200);
    expect(later.body.items[0].value).toBe("3");
    expect(commands.filter((c) => c === "GetQueueUrlCommand")).toHaveLength(2);
  });

  it("500 naming the provider when environment credentials are missing", async () => {
    const text = config(sqs.endpoint).replace("{ source: static, accessKeyId: test, secretAccessKey: test }", "{ source: environment }");
    const missing = await read(bridgeWithClock(text, {}).bridge, "queue=jobs");
    expect(missing.status).toBe(500);
    expect(missing.body.message).toMatch(/provider sqs.*AWS_ACCESS_KEY_ID/);
    const present = await read(bridgeWithClock(text, { AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "b" }).bridge, "queue=jobs");
    expect(present.body.items[0].value).toBe("4");
  });
});

describe("aws-sqs provider against misbehaving backends", () => {
  let server: Server;
  let endpoint: string;
  let behaviour: "hang" | "hang-attributes" | "throttle" | "denied" | "garbage" | "negative" = "hang";
  /** `Retry-After` sent with a throttled answer (none when undefined) */
  let throttleRetryAfter: string | undefined;
  /** requests left unanswered, and whether the client closed the connection since */
  const hung: { target: string; closed: boolean }[] = [];
  const calls: string[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      const target = String(req.headers["x-amz-target"]);
      calls.push(target.replace(/^.*\./, ""));
      if (behaviour === "hang" || (behaviour === "hang-attributes" && !target.endsWith("GetQueueUrl"))) {
        const entry = { target: target.replace(/^.*\./, ""), closed: false };
        hung.push(entry);
        res.on("close", () => (entry.closed = true));
        return; // never answers
      }
      if (target.endsWith("GetQueueUrl")) {
        res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify({ QueueUrl: `${endpoint}/000000000000/jobs` }));
        return;
      }
      if (behaviour === "throttle") {
        if (throttleRetryAfter !== undefined) res.setHeader("retry-after", throttleRetryAfter);
        res.writeHead(400, { "content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "RequestThrottled;Sender" });
        res.end(JSON.stringify({ __type: "com.amazonaws.sqs#RequestThrottled", message: "Rate exceeded" }));
      } else if (behaviour === "denied") {
        res.writeHead(403, { "content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "AccessDenied;Sender" });
        res.end(JSON.stringify({ __type: "com.amazon.coral.service#AccessDeniedException", message: "not authorized to perform sqs:GetQueueAttributes" }));
      } else if (behaviour === "negative") {
        res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify({ Attributes: { ApproximateNumberOfMessages: "7", ApproximateNumberOfMessagesNotVisible: "-3" } }));
      } else {
        res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify({ Attributes: { ApproximateNumberOfMessages: "lots" } }));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => closeServer(server));

  /** Poll `condition` every 10 ms until it holds or `ms` pass. */
  async function waitFor(condition: () => boolean, ms: number): Promise<void> {
    for (let waited = 0; !condition() && waited < ms; waited += 10) await new Promise((r) => setTimeout(r, 10));
  }

  it("503 with Retry-After when SQS does not answer within timeoutSeconds; the request is aborted, not left open", async () => {
    behaviour = "hang";
    hung.length = 0;
    const { bridge } = bridgeWithClock(config(endpoint));
    const res = await read(bridge, "queue=jobs");
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
    expect(res.body.message).toMatch(/timed out/);
    expect(res.headers.get("retry-after")).toBe("1");
    expect(res.headers.get("cache-control")).toBe("no-store");
    await waitFor(() => hung.every((h) => h.closed), 1_000);
    expect(hung.map((h) => h.closed)).toEqual([true]); // one GetQueueUrl attempt (maxAttempts 1), connection closed
  });

  it("GetQueueUrl and GetQueueAttributes together never outlive the bridge deadline (timeoutSeconds 4 each)", async () => {
    for (const mode of ["hang", "hang-attributes"] as const) {
      behaviour = mode;
      hung.length = 0;
      const clock = { now: 1_800_000_000_000 };
      const text = config(endpoint).replace("timeoutSeconds: 0.5", "timeoutSeconds: 4");
      const bridge = buildBridge(text, "test.yaml", { env: {}, now: () => clock.now }, { log: () => {}, deadlineMs: 300 });
      const res = await read(bridge, "queue=jobs");
      expect(res.status).toBe(503);
      expect(res.body.message).toMatch(/did not answer within 300 ms/);
      // the hung call is aborted at the deadline, long before its own 4 s limit
      await waitFor(() => hung.length > 0 && hung.every((h) => h.closed), 1_000);
      expect(hung).toEqual([{ target: mode === "hang" ? "GetQueueUrl" : "GetQueueAttributes", closed: true }]);
    }
  });

  it("a throttled queue is backed off for SQS's own Retry-After (clamped to [1, 30] s), else 5 s, and not asked again meanwhile", async () => {
    behaviour = "throttle";
    for (const [hint, expected] of [[undefined, "5"], ["12", "12"], ["600", "30"]] as const) {
      throttleRetryAfter = hint;
      const { bridge, clock } = bridgeWithClock(config(endpoint));
      calls.length = 0;
      const answers = [];
      for (let i = 0; i < 4; i++) {
        const res = await read(bridge, "queue=jobs");
        answers.push([res.status, res.headers.get("retry-after"), /throttled/.test(res.body.message)]);
      }
      expect(answers).toEqual(Array(4).fill([503, expected, true]));
      expect(calls.filter((c) => c === "GetQueueAttributes")).toHaveLength(1);
      clock.now += Number(expected) * 1000;
      await read(bridge, "queue=jobs");
      expect(calls.filter((c) => c === "GetQueueAttributes")).toHaveLength(2);
    }
    throttleRetryAfter = undefined;
  });

  it("503 naming the attribute when SQS reports a negative depth — never a value", async () => {
    behaviour = "negative";
    const text = config(endpoint).replace(
      "query: { queueLabel: queue }",
      "query: { queueLabel: queue, attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible] }",
    );
    const res = await read(bridgeWithClock(text).bridge, "queue=jobs");
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/ApproximateNumberOfMessagesNotVisible=-3 .*never negative/);
    expect(res.body.items).toBeUndefined();
  });

  it("500 naming the provider when IAM denies the read — never a 0", async () => {
    behaviour = "denied";
    const res = await read(bridgeWithClock(config(endpoint)).bridge, "queue=jobs");
    expect(res.status).toBe(500);
    expect(res.body).toMatchObject({ kind: "Status", reason: "InternalError" });
    expect(res.body.message).toMatch(/provider sqs.*credentials/);
    expect(res.body).not.toHaveProperty("items");
  });

  it("503 when SQS answers something that is not a number", async () => {
    behaviour = "garbage";
    const res = await read(bridgeWithClock(config(endpoint)).bridge, "queue=jobs");
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/not a number/);
  });
});
