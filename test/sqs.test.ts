/**
 * The aws-sqs provider through the real AWS SDK: against fauxqs for values,
 * caching and coalescing; against small fake servers on 127.0.0.1 speaking
 * the SQS JSON protocol for timeouts, throttling and credential errors.
 */
import { DeleteQueueCommand } from "@aws-sdk/client-sqs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildBridge, type Bridge } from "../shared/bridge.ts";
import { SqsProvider } from "../shared/providers/aws-sqs/index.ts";
import { sqsConfigHead, startEmulator, type Emulator } from "./helpers/emulator.ts";
import { closeServer } from "./helpers/http.ts";

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
  let behaviour: "hang" | "throttle" | "denied" | "garbage" = "hang";
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      const target = String(req.headers["x-amz-target"]);
      if (behaviour === "hang") return; // never answers
      if (target.endsWith("GetQueueUrl")) {
        res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify({ QueueUrl: `${endpoint}/000000000000/jobs` }));
        return;
      }
      if (behaviour === "throttle") {
        res.writeHead(400, { "content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "RequestThrottled;Sender" });
        res.end(JSON.stringify({ __type: "com.amazonaws.sqs#RequestThrottled", message: "Rate exceeded" }));
      } else if (behaviour === "denied") {
        res.writeHead(403, { "content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "AccessDenied;Sender" });
        res.end(JSON.stringify({ __type: "com.amazon.coral.service#AccessDeniedException", message: "not authorized to perform sqs:GetQueueAttributes" }));
      } else {
        res.writeHead(200, { "content-type": "application/x-amz-json-1.0" });
        res.end(JSON.stringify({ Attributes: { ApproximateNumberOfMessages: "lots" } }));
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => closeServer(server));

  it("503 with Retry-After when SQS does not answer within timeoutSeconds", async () => {
    behaviour = "hang";
    const { bridge } = bridgeWithClock(config(endpoint));
    const started = Date.now();
    const res = await read(bridge, "queue=jobs");
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ kind: "Status", reason: "ServiceUnavailable" });
    expect(res.body.message).toMatch(/timed out/);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(4500);
  });

  it("503 with Retry-After when SQS throttles", async () => {
    behaviour = "throttle";
    const res = await read(bridgeWithClock(config(endpoint)).bridge, "queue=jobs");
    expect(res.status).toBe(503);
    expect(res.body.message).toMatch(/throttled/);
    expect(res.headers.get("retry-after")).toBe("1"); // capped: MAX_RETRY_AFTER_SECONDS
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
