/**
 * Per-namespace AWS identities through the real thing: the bridge app, the
 * AWS SDK's `fromTemporaryCredentials` calling the STS fake
 * (`test/fakes/sts.ts`, the AssumeRole Query API, SigV4 checked) and
 * backends that check whose temporary keys signed each call — an SQS fake
 * here (AWS JSON 1.0, signatures verified against the keys STS issued, each
 * role allowed only its namespace's queues) and the CloudWatch fake
 * (`test/fakes/cloudwatch.ts`, which records the access key id).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { closeServer } from "../helpers/http.ts";
import { startCloudWatchFake, type CloudWatchFake } from "../fakes/cloudwatch.ts";
import { startStsFake, type StsFake } from "../fakes/sts.ts";
import { ampConfig } from "../helpers/amp.ts";
import { startPrometheusIdentityStandIn, type PrometheusIdentityStandIn } from "../fakes/prometheus-identity.ts";

const CLUSTER = "3f1c9a0e-5b7d-4c2e-9f80-1a2b3c4d5e6f";
const ROLE = (ns: string) => `arn:aws:iam::123456789012:role/emb-${ns}`;
const path = (ns: string, metric: string, selector: string) =>
  `/apis/external.metrics.k8s.io/v1beta1/namespaces/${ns}/${metric}?labelSelector=${encodeURIComponent(selector)}`;

/** SQS calls the fake received: the operation, the role whose keys signed it (undefined: not signed by issued keys). */
interface SqsCall {
  op: string;
  role: string | undefined;
  queue: string;
}

/** An SQS fake (AWS JSON 1.0) answering only calls signed with keys the STS fake issued, each role for its own namespace's queues (`NS-…`). */
async function startSignedSqs(sts: StsFake, depths: Record<string, number>) {
  const calls: SqsCall[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const op = String(req.headers["x-amz-target"]).replace(/^.*\./, "");
      const input = JSON.parse(body || "{}") as { QueueName?: string; QueueUrl?: string };
      const queue = input.QueueName ?? String(input.QueueUrl).replace(/^.*\//, "");
      const keys = await sts.verify(req, body);
      calls.push({ op, role: keys?.roleArn, queue });
      const send = (status: number, payload: unknown, queryError?: string) => {
        res.writeHead(status, { "content-type": "application/x-amz-json-1.0", ...(queryError ? { "x-amzn-query-error": queryError } : {}) });
        res.end(JSON.stringify(payload));
      };
      if (keys === undefined) return send(403, { __type: "com.amazon.coral.service#InvalidClientTokenId", message: "The security token included in the request is invalid" }, "InvalidClientTokenId;Sender");
      const namespace = keys.roleArn.replace(/^.*:role\/emb-/, "");
      if (!queue.startsWith(`${namespace}-`)) {
        return send(403, { __type: "com.amazon.coral.service#AccessDeniedException", message: `${keys.roleArn} is not authorized to perform: sqs:${op} on ${queue}` }, "AccessDenied;Sender");
      }
      if (op === "GetQueueUrl") return send(200, { QueueUrl: `${endpoint}/123456789012/${queue}` });
      return send(200, { Attributes: { ApproximateNumberOfMessages: String(depths[queue] ?? 0) } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { endpoint, calls, close: () => closeServer(server) };
}

function sqsConfig(sqsEndpoint: string, stsEndpoint: string, assumeRole = `roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}"`) {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: the identity alone limits what a namespace reads
providers:
  sqs:
    type: aws-sqs
    region: us-east-1
    endpoint: ${sqsEndpoint}
    timeoutSeconds: 1
    maxAttempts: 1
    credentials:
      source: static
      accessKeyId: AKIABRIDGE
      secretAccessKey: bridge-secret
      assumeRole:
        ${assumeRole}
        clusterId: ${CLUSTER}
        stsEndpoint: ${stsEndpoint}
metrics:
  - name: depth
    provider: sqs
    maxAgeSeconds: 60
    cacheTTLSeconds: 30
    query: { queueLabel: queue }
`;
}

async function read(bridge: Bridge, ns: string, selector: string, metric = "depth") {
  const res = await bridge.app.request(path(ns, metric, selector));
  return { status: res.status, body: (await res.json()) as any };
}

describe("aws-sqs with a role per namespace (STS AssumeRole with ExternalId)", () => {
  let sts: StsFake;
  let sqs: Awaited<ReturnType<typeof startSignedSqs>>;
  beforeAll(async () => {
    sts = await startStsFake();
    sts.callers.set("AKIABRIDGE", "bridge-secret");
    sqs = await startSignedSqs(sts, { "team-a-jobs": 4, "team-b-jobs": 9 });
  });
  afterAll(async () => {
    await sqs?.close();
    await sts?.close();
  });
  beforeEach(() => {
    sts.calls.length = 0;
    sqs.calls.length = 0;
    sts.failWith = undefined;
    sts.roles.clear();
    for (const ns of ["team-a", "team-b"]) sts.roles.set(ROLE(ns), `emb:${CLUSTER}:${ns}`);
  });

  const bridge = () => buildBridge(sqsConfig(sqs.endpoint, sts.endpoint), "test.yaml", { env: {}, now: Date.now }, { log: () => {} });

  it("reads a namespace's queue under the namespace's role: AssumeRole with its ExternalId, every SQS call signed with its keys", async () => {
    const b = bridge();
    const a = await read(b, "team-a", "queue=team-a-jobs");
    expect(a.status).toBe(200);
    expect(a.body.items[0].value).toBe("4");
    expect(sts.calls).toEqual([
      { RoleArn: ROLE("team-a"), ExternalId: `emb:${CLUSTER}:team-a`, RoleSessionName: "emb-team-a", DurationSeconds: "3600", accessKeyId: "AKIABRIDGE" },
    ]);
    expect(sqs.calls.map((c) => [c.op, c.role])).toEqual([
      ["GetQueueUrl", ROLE("team-a")],
      ["GetQueueAttributes", ROLE("team-a")],
    ]);
    const bRead = await read(b, "team-b", "queue=team-b-jobs");
    expect(bRead.body.items[0].value).toBe("9");
    expect(sts.calls.map((c) => c.ExternalId)).toEqual([`emb:${CLUSTER}:team-a`, `emb:${CLUSTER}:team-b`]);
    expect(sqs.calls.slice(2).map((c) => c.role)).toEqual([ROLE("team-b"), ROLE("team-b")]);
  });

  it("never answers a namespace from a read made under another namespace's role, cached or in flight", async () => {
    const b = bridge();
    const [a, other] = await Promise.all([read(b, "team-a", "queue=team-a-jobs"), read(b, "team-b", "queue=team-a-jobs")]);
    expect(a.body.items[0].value).toBe("4");
    // team-b's role may not read team-a's queue: AWS refused team-b's identity, nothing was served
    expect(other.status).toBe(500);
    expect(other.body.message).toContain("AccessDenied");
    expect(other.body.items).toBeUndefined();
    // and within the cache TTL, team-a's cached answer still never serves team-b
    const again = await read(b, "team-b", "queue=team-a-jobs");
    expect(again.status).toBe(500);
    expect(again.body.items).toBeUndefined();
    const byRole = (role: string) => sqs.calls.filter((c) => c.role === role && c.op !== "GetQueueUrl").length;
    expect(byRole(ROLE("team-a"))).toBe(1);
    expect(sqs.calls.every((c) => c.role !== undefined)).toBe(true);
  });

  it("assumes a role once and re-uses its credentials for later reads", async () => {
    const b = bridge();
    await read(b, "team-a", "queue=team-a-jobs");
    await read(b, "team-a", "queue in (team-a-jobs,team-a-mail)");
    expect(sts.calls).toHaveLength(1);
    expect(sqs.calls.filter((c) => c.op === "GetQueueAttributes").map((c) => c.role)).toEqual([ROLE("team-a"), ROLE("team-a")]);
  });

  it("an STS refusal is a failed read (500), never a value; nothing is sent to SQS", async () => {
    const b = bridge();
    sts.roles.set(ROLE("team-a"), `emb:another-cluster-0000000000:team-a`); // the trust policy wants another cluster's ExternalId
    const a = await read(b, "team-a", "queue=team-a-jobs");
    expect(a.status).toBe(500);
    expect(a.body.kind).toBe("Status");
    expect(a.body.message).toContain(`STS AssumeRole of ${ROLE("team-a")}`);
    expect(a.body.message).toContain("AccessDenied");
    expect(a.body.items).toBeUndefined();
    expect(sqs.calls).toHaveLength(0);
  });

  it("STS unavailable is a 503 with a back-off, never a value", async () => {
    const b = bridge();
    sts.failWith = { status: 503, code: "ServiceUnavailable" };
    const a = await read(b, "team-a", "queue=team-a-jobs");
    expect(a.status).toBe(503);
    expect(a.body.message).toContain("ServiceUnavailable");
    expect(a.body.items).toBeUndefined();
    expect(sqs.calls).toHaveLength(0);
  });

  it("with roleArns, a namespace not listed is refused (403) before anything is sent", async () => {
    const b = buildBridge(sqsConfig(sqs.endpoint, sts.endpoint, `roleArns: { team-a: "${ROLE("team-a")}" }`), "test.yaml", { env: {}, now: Date.now }, { log: () => {} });
    expect((await read(b, "team-a", "queue=team-a-jobs")).body.items[0].value).toBe("4");
    const c = await read(b, "team-c", "queue=team-c-jobs");
    expect(c.status).toBe(403);
    expect(c.body.message).toContain(`names no AWS role for namespace "team-c"`);
    expect(sts.calls.map((x) => x.RoleArn)).toEqual([ROLE("team-a")]);
  });
});

describe("aws-cloudwatch with a role per namespace", () => {
  let sts: StsFake;
  let cw: CloudWatchFake;
  beforeAll(async () => {
    sts = await startStsFake();
    sts.callers.set("AKIABRIDGE", "bridge-secret");
    for (const ns of ["team-a", "team-b"]) sts.roles.set(ROLE(ns), `emb:${CLUSTER}:${ns}`);
    cw = await startCloudWatchFake();
  });
  afterAll(async () => {
    await cw?.close();
    await sts?.close();
  });

  it("reads arriving together from two namespaces are two GetMetricData calls, each signed with its namespace's keys", async () => {
    const now = Date.now();
    for (const q of ["team-a-jobs", "team-b-jobs"]) {
      cw.put({ namespace: "AWS/SQS", metricName: "ApproximateNumberOfMessagesVisible", dimensions: { QueueName: q } }, [{ at: now - 120_000, value: q === "team-a-jobs" ? 3 : 8 }]);
    }
    const text = sqsConfig(cw.endpoint, sts.endpoint)
      .replace("type: aws-sqs", "type: aws-cloudwatch\n    batchWindowSeconds: 0.05")
      .replace(/  - name: depth[\s\S]*$/, `  - name: visible
    provider: sqs
    maxAgeSeconds: 600
    query: { namespace: AWS/SQS, metricName: ApproximateNumberOfMessagesVisible, stat: Maximum, period: 60, dimensionLabels: { queue: QueueName } }
`);
    const b = buildBridge(text, "test.yaml", { env: {}, now: Date.now }, { log: () => {} });
    const [a, bb] = await Promise.all([read(b, "team-a", "queue=team-a-jobs", "visible"), read(b, "team-b", "queue=team-b-jobs", "visible")]);
    if (a.status !== 200 || bb.status !== 200) throw new Error(JSON.stringify([a.body, bb.body]));
    expect([a.body.items[0].value, bb.body.items[0].value]).toEqual(["3", "8"]);
    const calls = cw.getMetricDataCalls;
    expect(calls).toHaveLength(2);
    const signedBy = calls.map((c) => sts.issued.get(c.accessKeyId ?? "")?.roleArn).sort();
    expect(signedBy).toEqual([ROLE("team-a"), ROLE("team-b")]);
  });
});

describe("prometheus amp flavour with a role per namespace", () => {
  const WS = "ws-6b1f3c2e-0a4d-4e8f-9c1b-2d3e4f5a6b7c";
  let sts: StsFake;
  let amp: PrometheusIdentityStandIn;
  beforeAll(async () => {
    sts = await startStsFake();
    sts.callers.set("AKIABRIDGE", "bridge-secret");
    for (const ns of ["team-a", "team-b"]) sts.roles.set(ROLE(ns), `emb:${CLUSTER}:${ns}`);
    // an AMP stand-in: the Prometheus query API under /workspaces/WS, each role seeing only its own namespace's series
    amp = await startPrometheusIdentityStandIn({
      path: `/workspaces/${WS}/api/v1/query`,
      whoIs: async (req, body) => (await sts.verify(req, body))?.roleArn,
      valueOf: (role) => (role === ROLE("team-a") ? "3" : "8"),
      refusal: { status: 403, headers: { "x-amzn-errortype": "AccessDeniedException" }, body: { message: "signature does not verify" } },
    });
  });
  afterAll(async () => {
    await amp?.close();
    await sts?.close();
  });

  it("signs each namespace's queries with its own role's temporary keys and never shares their answers", async () => {
    const credentials = `{ source: static, accessKeyId: AKIABRIDGE, secretAccessKey: bridge-secret, assumeRole: { roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", clusterId: ${CLUSTER}, stsEndpoint: "${sts.endpoint}" } }`;
    const signers = amp.callers;
    const b = buildBridge(ampConfig({ region: "eu-west-1", workspaceId: WS, endpoint: amp.endpoint }, credentials), "test.yaml", { env: {}, now: Date.now }, { log: () => {} });
    const [a, bb] = await Promise.all([read(b, "team-a", "queue=jobs", "queue_ready"), read(b, "team-b", "queue=jobs", "queue_ready")]);
    expect([a.status, bb.status]).toEqual([200, 200]);
    expect([a.body.items[0].value, bb.body.items[0].value]).toEqual(["3", "8"]);
    expect(signers.filter((r) => r === ROLE("team-a"))).toHaveLength(2); // value and age queries
    expect(signers.filter((r) => r === ROLE("team-b"))).toHaveLength(2);
    expect(signers).toHaveLength(4);
    expect(sts.calls.map((c) => c.ExternalId).sort()).toEqual([`emb:${CLUSTER}:team-a`, `emb:${CLUSTER}:team-b`]);
    sts.roles.delete(ROLE("team-b"));
    const c = await read(b, "team-c", "queue=jobs", "queue_ready");
    expect(c.status).toBe(500);
    expect(c.body.message).toContain(`STS AssumeRole of ${ROLE("team-c")}`);
    expect(signers).toHaveLength(4); // nothing sent for team-c
  });
});

describe("credentials.assumeRole config validation", () => {
  const provider = (assumeRole: string) => `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs:
    type: aws-sqs
    region: us-east-1
    credentials:
      source: default
      assumeRole: ${assumeRole}
metrics:
  - { name: depth, provider: sqs, query: {} }
`;
  const refusal = (assumeRole: string) => {
    try {
      loadConfig(provider(assumeRole), "bridge.yaml");
    } catch (err) {
      return String((err as Error).message);
    }
    return "accepted";
  };

  it("accepts a template with {namespace} and a map, with defaults", () => {
    const { config } = loadConfig(provider(`{ roleArn: "arn:aws:iam::123456789012:role/teams/emb-{namespace}", clusterId: ${CLUSTER} }`), "bridge.yaml");
    expect((config.providers["sqs"]!.config as any).credentials.assumeRole).toEqual({
      roleArn: "arn:aws:iam::123456789012:role/teams/emb-{namespace}",
      clusterId: CLUSTER,
      sessionName: "emb-{namespace}",
      durationSeconds: 3600,
    });
    expect(refusal(`{ roleArns: { team-a: "arn:aws-cn:iam::123456789012:role/a" }, clusterId: ${CLUSTER} }`)).toBe("accepted");
  });

  it.each([
    [`{ roleArn: "arn:aws:iam::123456789012:role/emb-shared", clusterId: ${CLUSTER} }`, "must contain {namespace}"],
    [`{ roleArn: "arn:aws:iam::123456789012:role/emb-{ns}", clusterId: ${CLUSTER} }`, "unknown placeholder {ns}: the only placeholder is {namespace}"],
    [`{ roleArn: "arn:aws:iam::1234:role/emb-{namespace}", clusterId: ${CLUSTER} }`, "must be an IAM role ARN"],
    [`{ roleArns: { team-a: "arn:aws:iam::123456789012:user/a" }, clusterId: ${CLUSTER} }`, "must be an IAM role ARN"],
    [`{ roleArns: { Team_A: "arn:aws:iam::123456789012:role/a" }, clusterId: ${CLUSTER} }`, `keys must be namespace names (RFC 1123 labels); "Team_A" is not`],
    [`{ roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", clusterId: prod }`, "unique to this cluster"],
    [`{ clusterId: ${CLUSTER} }`, "set exactly one of roleArn"],
    [`{ roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", sessionName: "emb-{cluster}", clusterId: ${CLUSTER} }`, "unknown placeholder {cluster}"],
    [`{ roleArn: "arn:aws:iam::123456789012:role/emb-{namespace}", clusterId: ${CLUSTER}, durationSeconds: 60 }`, ">=900"],
  ])("refuses %s", (assumeRole, message) => {
    const text = refusal(assumeRole);
    expect(text).toContain(message);
    expect(text).toContain("assumeRole");
  });
});
