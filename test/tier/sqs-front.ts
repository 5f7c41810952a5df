/**
 * A front for the SQS emulator (fauxqs) on 127.0.0.1 that counts the calls
 * of every bridge instance behind it — in this process or in others — by
 * the SQS JSON protocol's `X-Amz-Target` (`AmazonSQS.GetQueueAttributes`),
 * and can hold a call unanswered (a backend call that hangs) or fail it
 * with a 500 (`InternalError`), to test the shared read tier.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/** What the front does with a `GetQueueAttributes` call. */
export type FrontMode = "forward" | "hang" | "fail";

/** A running {@link startSqsFront}. */
export interface SqsFront {
  /** `http://127.0.0.1:PORT`: the `endpoint` of the bridges' SQS provider */
  endpoint: string;
  /** calls received by action (`GetQueueAttributes`, `GetQueueUrl`) */
  readonly calls: Map<string, number>;
  /** `GetQueueAttributes` calls received so far */
  readonly reads: number;
  /** what the next `GetQueueAttributes` calls get */
  mode: FrontMode;
  /** calls held unanswered now */
  readonly held: number;
  stop(): Promise<void>;
}

/** Start a front forwarding to the SQS emulator at `target`. */
export async function startSqsFront(target: string): Promise<SqsFront> {
  const calls = new Map<string, number>();
  const held = new Set<ServerResponse>();
  const front: SqsFront = {
    endpoint: "",
    calls,
    get reads() {
      return calls.get("GetQueueAttributes") ?? 0;
    },
    mode: "forward",
    get held() {
      return held.size;
    },
    stop: async () => {},
  };
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const action = String(req.headers["x-amz-target"] ?? "").replace(/^AmazonSQS\./, "");
      calls.set(action, (calls.get(action) ?? 0) + 1);
      if (action === "GetQueueAttributes" && front.mode === "hang") {
        held.add(res);
        res.on("close", () => held.delete(res));
        return;
      }
      if (action === "GetQueueAttributes" && front.mode === "fail") {
        res.writeHead(500, { "content-type": "application/x-amz-json-1.0", "x-amzn-query-error": "InternalError;Receiver" });
        res.end(JSON.stringify({ __type: "com.amazonaws.sqs#InternalError", message: "planted failure" }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "connection" && k !== "content-length") headers[k] = v;
      fetch(`${target}${req.url ?? "/"}`, { method: req.method ?? "POST", headers, body: Buffer.concat(chunks) })
        .then(async (answer) => {
          const body = Buffer.from(await answer.arrayBuffer());
          const out: Record<string, string> = {};
          answer.headers.forEach((v, k) => {
            if (k !== "content-length" && k !== "transfer-encoding" && k !== "connection" && k !== "content-encoding") out[k] = v;
          });
          res.writeHead(answer.status, out);
          res.end(body);
        })
        .catch((err: unknown) => {
          res.writeHead(502);
          res.end(String(err));
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  front.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  front.stop = async () => {
    for (const res of held) res.destroy();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  };
  return front;
}
