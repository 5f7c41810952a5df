/**
 * The HTTP contract of the External Metrics API surface, written once and
 * run against every runtime (Node server, Worker in workerd, Lambda
 * handler). Each runtime supplies a `start` that serves a config text and
 * returns a `request` function speaking plain `Request`/`Response`.
 *
 * The suite owns a real fauxqs emulator; every value asserted is read from it
 * through the real AWS SDK inside the runtime under test.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sqsConfigHead, startEmulator, type Emulator } from "./emulator.ts";

/** A runtime under test. */
export interface ContractTarget {
  /** send `path` (with query) to the bridge; GET unless `init.method` says otherwise */
  request(path: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

/** Starts the runtime under test with a config text. */
export type StartTarget = (configText: string) => Promise<ContractTarget>;

const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const NS = `${V1}/namespaces/default`;

/**
 * The config the contract runs with. `cacheTTLSeconds: 0` so values move as
 * soon as the queue does; the allow-listed `backlog` rule reads three
 * attributes; `team/queue_depth` exercises `|` and `\|` names.
 */
export function contractConfig(endpoint: string): string {
  return `
${sqsConfigHead(endpoint, { defaults: "{ maxAgeSeconds: 30, cacheTTLSeconds: 0 }" })}
metrics:
  - name: queue_messages_ready
    provider: sqs
    query: { queueLabel: queue, attribute: ApproximateNumberOfMessages }
  - name: queue_messages_backlog
    provider: sqs
    query:
      queueLabel: queue
      queues: [contract_a, contract_b]
      attribute: [ApproximateNumberOfMessages, ApproximateNumberOfMessagesNotVisible, ApproximateNumberOfMessagesDelayed]
  - name: Team/Queue_Depth
    provider: sqs
    query: { queueLabel: app, queueNameTemplate: "contract_{queue}" }
`;
}

/** Assert `res` is a `metav1.Status` failure with `code` and return it. */
export async function expectStatus(res: Response, code: number, reason: string, messageIncludes?: string | RegExp) {
  const text = await res.text();
  expect(res.status, text).toBe(code);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const body = JSON.parse(text);
  expect(body).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason });
  expect(typeof body.message).toBe("string");
  expect(body).not.toHaveProperty("items");
  if (messageIncludes !== undefined) expect(body.message).toMatch(messageIncludes);
  return body;
}

/** Read an ExternalMetricValueList and check the wire shape of every item. */
export async function expectValues(res: Response) {
  const text = await res.text();
  expect(res.status, text).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  const body = JSON.parse(text);
  expect(body).toMatchObject({ kind: "ExternalMetricValueList", apiVersion: "external.metrics.k8s.io/v1beta1", metadata: {} });
  expect(body.items.length).toBeGreaterThan(0);
  for (const item of body.items) {
    expect(typeof item.metricName).toBe("string");
    expect(typeof item.metricLabels).toBe("object");
    expect(item.timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(Math.abs(Date.parse(item.timestamp) - Date.now())).toBeLessThan(60_000);
    expect(typeof item.value).toBe("string");
    expect(item.value).toMatch(/^-?\d+[numkMGTPE]?$/);
  }
  return body as { items: { metricName: string; metricLabels: Record<string, string>; value: string; timestamp: string; window?: number }[] };
}

/** Register the contract suite for one runtime. */
export function externalMetricsContract(runtime: string, start: StartTarget): void {
  describe(`External Metrics API contract on ${runtime}`, () => {
    let sqs: Emulator;
    let target: ContractTarget;
    const get = (path: string, init?: RequestInit) => target.request(path, init);

    beforeAll(async () => {
      sqs = await startEmulator();
      await sqs.createQueue("worker_tasks");
      await sqs.createQueue("other_tasks");
      await sqs.createQueue("contract_a");
      await sqs.createQueue("contract_b");
      await sqs.createQueue("contract_web");
      await sqs.add("worker_tasks", 7);
      await sqs.add("other_tasks", 1500);
      await sqs.add("contract_a", 3);
      await sqs.add("contract_b", 4);
      await sqs.add("contract_web", 2);
      target = await start(contractConfig(sqs.endpoint));
    }, 120_000);

    afterAll(async () => {
      await target?.close();
      await sqs?.stop();
    });

    describe("discovery", () => {
      it("lists every metric rule in an APIResourceList", async () => {
        const res = await get(V1);
        expect(res.status).toBe(200);
        const body = await res.json();
        expect(body).toMatchObject({ kind: "APIResourceList", apiVersion: "v1", groupVersion: "external.metrics.k8s.io/v1beta1" });
        expect(body.resources.map((r: { name: string }) => r.name).sort()).toEqual([
          "queue_messages_backlog",
          "queue_messages_ready",
          "team|queue_depth",
        ]);
        for (const r of body.resources) {
          expect(r).toEqual({ name: r.name, singularName: "", namespaced: true, kind: "ExternalMetricValueList", verbs: ["get"] });
        }
      });

      it("answers /apis with an APIGroupList, also to an aggregated-discovery Accept", async () => {
        for (const accept of ["application/json", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"]) {
          const res = await get("/apis", { headers: { accept } });
          expect(res.status).toBe(200);
          expect(res.headers.get("content-type")).toMatch(/^application\/json/);
          const body = await res.json();
          expect(body.kind).toBe("APIGroupList");
          expect(body.groups[0].name).toBe("external.metrics.k8s.io");
        }
      });

      it("answers the OpenAPI paths with a 404 Status (skipped gracefully by the aggregator)", async () => {
        await expectStatus(await get("/openapi/v2"), 404, "NotFound");
        await expectStatus(await get("/openapi/v3"), 404, "NotFound");
      });

      it("answers health probes", async () => {
        for (const path of ["/healthz", "/livez", "/readyz"]) {
          const res = await get(path);
          expect(res.status).toBe(200);
          expect(await res.text()).toBe("ok");
        }
      });
    });

    describe("values", () => {
      it("reports the real depth of the queue the selector names", async () => {
        const body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`));
        expect(body.items).toHaveLength(1);
        expect(body.items[0]).toMatchObject({ metricName: "queue_messages_ready", metricLabels: { queue: "worker_tasks" }, value: "7" });
        expect(body.items[0]).not.toHaveProperty("window");
      });

      it("follows the queue as messages are added and removed", async () => {
        await sqs.add("worker_tasks", 5);
        let body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`));
        expect(body.items[0]!.value).toBe("12");
        await sqs.drain("worker_tasks", 5);
        body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`));
        expect(body.items[0]!.value).toBe("7");
      });

      it("formats values as canonical Quantities", async () => {
        const body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dother_tasks`));
        expect(body.items[0]!.value).toBe("1500");
      });

      it("matches metric names case-insensitively (client-go lowercases them)", async () => {
        const body = await expectValues(await get(`${NS}/QUEUE_Messages_Ready?labelSelector=queue%3Dworker_tasks`));
        expect(body.items[0]!.value).toBe("7");
      });

      it("answers one item per queue for `in`, sorted by queue", async () => {
        const sel = encodeURIComponent("queue in (worker_tasks, other_tasks)");
        const body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=${sel}`));
        expect(body.items.map((i) => [i.metricLabels["queue"], i.value])).toEqual([
          ["other_tasks", "1500"],
          ["worker_tasks", "7"],
        ]);
      });

      it("decodes `+` as a space, as Go's url.Values.Encode sends it", async () => {
        const body = await expectValues(await get(`${NS}/queue_messages_ready?labelSelector=queue+in+%28worker_tasks%29`));
        expect(body.items[0]!.metricLabels).toEqual({ queue: "worker_tasks" });
      });

      it("accepts == and reads the allow-list when no queue is named, summing the attributes", async () => {
        let body = await expectValues(await get(`${NS}/queue_messages_backlog?labelSelector=queue%3D%3Dcontract_a`));
        expect(body.items).toEqual([expect.objectContaining({ metricLabels: { queue: "contract_a" }, value: "3" })]);
        body = await expectValues(await get(`${NS}/queue_messages_backlog`));
        expect(body.items.map((i) => [i.metricLabels["queue"], i.value])).toEqual([
          ["contract_a", "3"],
          ["contract_b", "4"],
        ]);
        body = await expectValues(await get(`${NS}/queue_messages_backlog?labelSelector=queue%21%3Dcontract_a`));
        expect(body.items.map((i) => i.metricLabels["queue"])).toEqual(["contract_b"]);
      });

      it("maps `|` and `\\|` in metric names to `/`, and applies the queue name template", async () => {
        for (const name of ["team%7Cqueue_depth", "team%5C%7Cqueue_depth", "TEAM%7CQUEUE_DEPTH"]) {
          const body = await expectValues(await get(`${NS}/${name}?labelSelector=app%3Dweb`));
          expect(body.items[0]).toMatchObject({ metricLabels: { app: "web" }, value: "2" });
        }
      });
    });

    describe("errors are metav1.Status with the right code", () => {
      it("404 for an unknown metric", async () => {
        const body = await expectStatus(await get(`${NS}/no_such_metric?labelSelector=queue%3Dworker_tasks`), 404, "NotFound", /no_such_metric/);
        expect(body.details).toMatchObject({ name: "no_such_metric", group: "external.metrics.k8s.io" });
      });

      it("404 for a queue that does not exist", async () => {
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dmissing_queue`), 404, "NotFound", /missing_queue/);
      });

      it("404 for a queue outside the rule's allow-list, without reading it", async () => {
        await expectStatus(await get(`${NS}/queue_messages_backlog?labelSelector=queue%3Dworker_tasks`), 404, "NotFound", /not served/);
      });

      it("404 for paths outside the API", async () => {
        await expectStatus(await get("/nothing/here"), 404, "NotFound");
        await expectStatus(await get(`${V1}/namespaces/default`), 404, "NotFound");
        await expectStatus(await get(`${V1}/queue_messages_ready`), 404, "NotFound");
      });

      it("400 for a malformed selector", async () => {
        for (const sel of ["queue%3D%28", "queue+in+%28", "%3Dvalue", "queue%3Da%2C%2C", "queue%3E1.5", "queue+notin+a"]) {
          await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${sel}`), 400, "BadRequest", /labelSelector/);
        }
      });

      it("400 naming a requirement the rule cannot map", async () => {
        const sel = encodeURIComponent("queue=worker_tasks,env=prod");
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${sel}`), 400, "BadRequest", /"env=prod"/);
      });

      it("400 when the selector does not name a finite set of queues", async () => {
        await expectStatus(await get(`${NS}/queue_messages_ready`), 400, "BadRequest", /queue=NAME/);
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=queue%21%3Dx`), 400, "BadRequest", /queue=NAME/);
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=queue`), 400, "BadRequest", /queue=NAME/);
      });

      it("400 for a selector that matches no queue", async () => {
        const sel = encodeURIComponent("queue=worker_tasks,queue=other_tasks");
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${sel}`), 400, "BadRequest", /matches no queue/);
      });

      it("400 for metric names with `/`, `%`, `.` or `..`, and for bad encodings", async () => {
        for (const name of ["a%2Fb", "a%25b", "%ZZ", "%C3%28", "a%00b"]) {
          await expectStatus(await get(`${NS}/${name}?labelSelector=queue%3Dworker_tasks`), 400, "BadRequest", /metric name/);
        }
        // `%2E` (`.`): the client's or the runtime's URL parser resolves the dot
        // segment before the bridge sees it, and `…/namespaces/default/` names
        // no metric: 404, as apiserver answers it; sent as is it is a 400
        // (shared/k8s/request-path.ts). Never a value either way.
        const dot = await get(`${NS}/%2E?labelSelector=queue%3Dworker_tasks`);
        const status = dot.status === 404 ? "NotFound" : "BadRequest";
        await expectStatus(dot, dot.status === 404 ? 404 : 400, status);
      });

      it("400 for an invalid namespace", async () => {
        await expectStatus(await get(`${V1}/namespaces/Default/queue_messages_ready?labelSelector=queue%3Dworker_tasks`), 400, "BadRequest", /namespace/);
      });

      it("400 for hostile selectors: huge, unicode, control characters, repeated", async () => {
        const huge = encodeURIComponent(`queue in (${Array.from({ length: 2000 }, (_, i) => `q${i}`).join(",")})`);
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${huge}`), 400, "BadRequest", /longer than/);
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${encodeURIComponent("queue=wörker")}`), 400, "BadRequest");
        for (const control of ["\u0000", "\u0001", "\u007f", "\u001b[31m"]) {
          await expectStatus(
            await get(`${NS}/queue_messages_ready?labelSelector=${encodeURIComponent(`queue=a${control}`)}`),
            400,
            "BadRequest",
            /control character/,
          );
        }
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=${encodeURIComponent("🦆=🦆")}`), 400, "BadRequest");
        await expectStatus(
          await get(`${NS}/queue_messages_ready?labelSelector=queue%3Da&labelSelector=queue%3Db`),
          400,
          "BadRequest",
          /only once/,
        );
      });

      it("400 for a queue name the template cannot make valid", async () => {
        await expectStatus(await get(`${NS}/queue_messages_ready?labelSelector=queue%3Da.b`), 400, "BadRequest", /not a valid SQS queue name/);
      });

      it("405 Status for methods other than GET", async () => {
        await expectStatus(await get(`${NS}/queue_messages_ready`, { method: "POST", body: "{}" }), 405, "MethodNotAllowed");
        await expectStatus(await get(V1, { method: "DELETE" }), 405, "MethodNotAllowed");
      });

      it("503 with Retry-After, never a value, when the backend stops", async () => {
        await sqs.stop();
        const res = await get(`${NS}/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
        expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
        await expectStatus(res, 503, "ServiceUnavailable", /provider sqs/);
        // discovery does not depend on the backend
        expect((await get(V1)).status).toBe(200);
      });
    });
  });
}
