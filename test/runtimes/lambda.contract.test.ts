/**
 * The HTTP contract against the Lambda handler (functions/lambda.ts), fed
 * Function URL and API Gateway HTTP API v2 events; then the Lambda-only
 * config sources (a file in the artifact, an SSM parameter read through the
 * real SDK from a fake speaking the SSM wire protocol) and their failures,
 * and the request-signing keys read from SSM at cold start (fail closed).
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler, type LambdaEnv } from "../../functions/lambda.ts";
import type { LogRecord } from "../../shared/app.ts";
import { HPA_CONTROLLER } from "../../shared/identity.ts";
import { parseSigningKeys, signRequest } from "../../shared/signing.ts";
import { expectStatus, externalMetricsContract } from "../helpers/contract.ts";
import { invoke, LAMBDA_FIXTURES, lambdaOrigin, lambdaTarget, toEvent, type HttpHandler, type LambdaEventShape } from "../helpers/lambda.ts";
import { fixtureKey } from "../helpers/keys.ts";

const quiet = { log: (_: LogRecord) => {} };
/** A handler for `env`; unsigned on purpose (BRIDGE_INSECURE_ALLOW_UNSIGNED) unless `env` says otherwise. */
const lambda = (env: LambdaEnv) => createLambdaHandler({ BRIDGE_INSECURE_ALLOW_UNSIGNED: "true", ...env }, quiet) as unknown as HttpHandler;
const V1 = "/apis/external.metrics.k8s.io/v1beta1";

for (const shape of Object.keys(LAMBDA_FIXTURES) as LambdaEventShape[]) {
  externalMetricsContract(`AWS Lambda (${shape} events)`, async (text) => lambdaTarget(lambda({ BRIDGE_CONFIG: text }), shape));
}

/** A config whose discovery names prove which source was read (no backend call needed). */
const configNamed = (metric: string) => `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1 }
metrics:
  - name: ${metric}
    provider: sqs
`;

async function discoveryNames(handler: HttpHandler, shape: LambdaEventShape = "Function URL"): Promise<string[]> {
  const res = await invoke(handler, shape, V1);
  expect(res.status, await res.clone().text()).toBe(200);
  return ((await res.json()) as { resources: { name: string }[] }).resources.map((r) => r.name);
}

describe("Lambda event conversion", () => {
  it("hands rawQueryString to the app byte for byte (Go's `+` and %-escapes)", async () => {
    const event = await toEvent("API Gateway HTTP API v2", `${V1}/namespaces/default/x?labelSelector=queue+in+%28a%29`);
    expect(event.rawQueryString).toBe("labelSelector=queue+in+%28a%29");
    expect(event.requestContext.http.method).toBe("GET");
  });

  it("answers a base64-encoded binary body with a Status (405), not a crash", async () => {
    for (const shape of Object.keys(LAMBDA_FIXTURES) as LambdaEventShape[]) {
      const init = { method: "PUT", body: new Uint8Array([0, 159, 146, 150]), headers: { "content-type": "application/octet-stream" } };
      const event = await toEvent(shape, V1, init);
      expect(event.isBase64Encoded).toBe(true);
      await expectStatus(await invoke(lambda({ BRIDGE_CONFIG: configNamed("m") }), shape, V1, init), 405, "MethodNotAllowed");
    }
  });
});

describe("Lambda config sources", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "bridge-lambda-"));
    writeFileSync(join(dir, "bridge.yaml"), configNamed("from_file"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads BRIDGE_CONFIG_FILE relative to LAMBDA_TASK_ROOT", async () => {
    expect(await discoveryNames(lambda({ LAMBDA_TASK_ROOT: dir, BRIDGE_CONFIG_FILE: "bridge.yaml" }))).toEqual(["from_file"]);
  });

  it("prefers inline BRIDGE_CONFIG over the file", async () => {
    const handler = lambda({ BRIDGE_CONFIG: configNamed("inline"), LAMBDA_TASK_ROOT: dir, BRIDGE_CONFIG_FILE: "bridge.yaml" });
    expect(await discoveryNames(handler, "API Gateway HTTP API v2")).toEqual(["inline"]);
  });

  it("answers 500 naming a missing file", async () => {
    const handler = lambda({ LAMBDA_TASK_ROOT: dir, BRIDGE_CONFIG_FILE: "nope.yaml" });
    await expectStatus(await invoke(handler, "Function URL", V1), 500, "InternalError", /BRIDGE_CONFIG_FILE "nope.yaml"/);
  });

  it("answers 500 naming every config problem with its line, on every route", async () => {
    const handler = lambda({ BRIDGE_CONFIG: configNamed("ok").replace("region: us-east-1", "region: mars") + "    query: { attribute: Nope }\n" });
    for (const path of [V1, "/healthz", `${V1}/namespaces/default/ok`]) {
      const body = await expectStatus(await invoke(handler, "Function URL", path), 500, "InternalError");
      expect(body.message).toMatch(/<env:BRIDGE_CONFIG>:5:\d+: providers\.sqs\.region/);
      expect(body.message).toMatch(/<env:BRIDGE_CONFIG>:\d+:\d+: metrics\[0\]\.query\.attribute/);
    }
  });

  it("answers 500 listing the variables when no config is set", async () => {
    await expectStatus(await invoke(lambda({}), "API Gateway HTTP API v2", V1), 500, "InternalError", /BRIDGE_CONFIG_SSM_PARAMETER/);
  });
});

/** A fake SSM endpoint speaking AWS JSON 1.1 (`X-Amz-Target: AmazonSSM.GetParameter`). */
interface FakeSsm {
  url: string;
  calls: { target: string; authorization: string; contentType: string; body: { Name?: string; WithDecryption?: boolean } }[];
  /** answers to give, in order, before the parameters' values (status + AWS JSON error type) */
  failures: { status: number; type: string; message: string }[];
  parameters: Map<string, string>;
  server: Server;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

async function startFakeSsm(): Promise<FakeSsm> {
  const fake: FakeSsm = { url: "", calls: [], failures: [], parameters: new Map(), server: undefined as never };
  fake.server = createServer(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    fake.calls.push({
      target: String(req.headers["x-amz-target"]),
      authorization: String(req.headers["authorization"]),
      contentType: String(req.headers["content-type"]),
      body,
    });
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { "content-type": "application/x-amz-json-1.1", "x-amzn-requestid": "fake-request" });
      res.end(JSON.stringify(payload));
    };
    const failure = fake.failures.shift();
    if (failure) return send(failure.status, { __type: failure.type, message: failure.message });
    if (req.headers["x-amz-target"] !== "AmazonSSM.GetParameter") return send(400, { __type: "InvalidAction", message: "unknown target" });
    const value = fake.parameters.get(body.Name);
    if (value === undefined) return send(400, { __type: "ParameterNotFound", message: "" });
    send(200, {
      Parameter: {
        Name: body.Name,
        Type: "SecureString",
        Value: value,
        Version: 3,
        LastModifiedDate: Date.now() / 1000,
        ARN: `arn:aws:ssm:us-east-1:123456789012:parameter${body.Name}`,
        DataType: "text",
      },
    });
  });
  await new Promise<void>((resolve) => fake.server.listen(0, "127.0.0.1", resolve));
  fake.url = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`;
  return fake;
}

describe("Lambda config from an SSM parameter (real SDK, fake SSM endpoint)", () => {
  let ssm: FakeSsm;
  const saved: Record<string, string | undefined> = {};
  const sdkEnv = (url: string) => ({
    AWS_REGION: "us-east-1",
    AWS_ACCESS_KEY_ID: "AKIDLAMBDAROLE",
    AWS_SECRET_ACCESS_KEY: "secret",
    AWS_SESSION_TOKEN: "session-token",
    AWS_ENDPOINT_URL_SSM: url,
  });

  beforeAll(async () => {
    ssm = await startFakeSsm();
    // The SDK reads region, credentials and the endpoint from the process
    // environment, as in Lambda where `process.env` is the function's env.
    for (const [k, v] of Object.entries(sdkEnv(ssm.url))) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(async () => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    await new Promise((resolve) => ssm.server.close(resolve));
  });
  afterEach(() => {
    ssm.calls.length = 0;
    ssm.failures.length = 0;
    ssm.parameters.clear();
  });

  it("reads the parameter once per execution environment with GetParameter WithDecryption, signed by the role", async () => {
    ssm.parameters.set("/bridge/config", configNamed("from_ssm"));
    const handler = lambda({ BRIDGE_CONFIG_SSM_PARAMETER: "/bridge/config" });
    expect(await discoveryNames(handler)).toEqual(["from_ssm"]);
    expect(await discoveryNames(handler, "API Gateway HTTP API v2")).toEqual(["from_ssm"]);
    expect(ssm.calls).toHaveLength(1);
    const [call] = ssm.calls;
    expect(call!.target).toBe("AmazonSSM.GetParameter");
    expect(call!.contentType).toBe("application/x-amz-json-1.1");
    expect(call!.body).toEqual({ Name: "/bridge/config", WithDecryption: true });
    expect(call!.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=AKIDLAMBDAROLE\/\d{8}\/us-east-1\/ssm\/aws4_request/);
  });

  it("answers 500 naming a parameter that does not exist", async () => {
    const handler = lambda({ BRIDGE_CONFIG_SSM_PARAMETER: "/bridge/missing" });
    await expectStatus(await invoke(handler, "Function URL", V1), 500, "InternalError", /\/bridge\/missing.*ParameterNotFound/);
  });

  it("answers 503 with Retry-After when SSM fails, and reads it again on the next event", async () => {
    ssm.parameters.set("/bridge/config", configNamed("after_retry"));
    ssm.failures.push(
      { status: 500, type: "InternalServerError", message: "try later" },
      { status: 500, type: "InternalServerError", message: "try later" },
    );
    const handler = lambda({ BRIDGE_CONFIG_SSM_PARAMETER: "/bridge/config" });
    const res = await invoke(handler, "Function URL", V1);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
    await expectStatus(res, 503, "ServiceUnavailable", /\/bridge\/config/);
    expect(ssm.calls).toHaveLength(2); // the SDK's two attempts
    expect(await discoveryNames(handler)).toEqual(["after_retry"]);
    expect(ssm.calls).toHaveLength(3);
  });

  it("answers 500 naming the config problem when the parameter holds invalid YAML", async () => {
    ssm.parameters.set("/bridge/bad", "kind: BridgeConfig\napiVersion: [");
    const handler = lambda({ BRIDGE_CONFIG_SSM_PARAMETER: "/bridge/bad" });
    await expectStatus(await invoke(handler, "Function URL", V1), 500, "InternalError", /ssm:\/bridge\/bad:\d+:\d+/);
  });

  describe("signing keys from BRIDGE_SIGNING_KEYS_SSM_PARAMETER", () => {
    const KEYS = `k1:${fixtureKey(3).toString("base64")}`;
    const signed = async (path: string, shape: LambdaEventShape = "Function URL") => ({
      headers: await signRequest({ method: "GET", url: `${lambdaOrigin(shape)}${path}`, caller: HPA_CONTROLLER }, parseSigningKeys(KEYS)[0]!, Date.now()),
    });

    it("reads the keys beside the config at cold start; then only signed requests are answered", async () => {
      ssm.parameters.set("/bridge/config", configNamed("signed_only"));
      ssm.parameters.set("/bridge/signing-keys", KEYS);
      const handler = lambda({ BRIDGE_CONFIG_SSM_PARAMETER: "/bridge/config", BRIDGE_SIGNING_KEYS_SSM_PARAMETER: "/bridge/signing-keys" });
      await expectStatus(await invoke(handler, "Function URL", V1), 401, "Unauthorized");
      const res = await invoke(handler, "API Gateway HTTP API v2", V1, await signed(V1, "API Gateway HTTP API v2"));
      expect(res.status, await res.clone().text()).toBe(200);
      expect(((await res.json()) as { resources: { name: string }[] }).resources.map((r) => r.name)).toEqual(["signed_only"]);
      expect(ssm.calls.map((c) => c.body).sort((a, b) => String(a.Name).localeCompare(String(b.Name)))).toEqual([
        { Name: "/bridge/config", WithDecryption: true },
        { Name: "/bridge/signing-keys", WithDecryption: true },
      ]);
      expect((await invoke(handler, "Function URL", "/healthz")).status).toBe(200); // probes need no signature
      expect(ssm.calls).toHaveLength(2); // once per execution environment
    });

    it("prefers BRIDGE_SIGNING_KEYS set inline and then reads nothing from SSM", async () => {
      const handler = lambda({ BRIDGE_CONFIG: configNamed("inline_keys"), BRIDGE_SIGNING_KEYS: KEYS, BRIDGE_SIGNING_KEYS_SSM_PARAMETER: "/bridge/absent" });
      await expectStatus(await invoke(handler, "Function URL", V1), 401, "Unauthorized");
      expect((await invoke(handler, "Function URL", V1, await signed(V1))).status).toBe(200);
      expect(ssm.calls).toHaveLength(0);
    });

    it("fails closed when the keys parameter is missing or empty: 500 on every route, unsigned or not", async () => {
      ssm.parameters.set("/bridge/empty", "  ");
      for (const [name, message] of [
        ["/bridge/absent", /\/bridge\/absent \(BRIDGE_SIGNING_KEYS_SSM_PARAMETER\).*ParameterNotFound/],
        ["/bridge/empty", /\/bridge\/empty \(BRIDGE_SIGNING_KEYS_SSM_PARAMETER\) is empty/],
      ] as const) {
        const handler = lambda({ BRIDGE_CONFIG: configNamed("never_open"), BRIDGE_SIGNING_KEYS_SSM_PARAMETER: name });
        await expectStatus(await invoke(handler, "Function URL", V1), 500, "InternalError", message);
        await expectStatus(await invoke(handler, "Function URL", V1, await signed(V1)), 500, "InternalError", message);
      }
    });

    it("answers 503 while SSM cannot give the keys, and reads them again on the next event", async () => {
      ssm.parameters.set("/bridge/signing-keys", KEYS);
      ssm.failures.push(
        { status: 503, type: "ServiceUnavailable", message: "try later" },
        { status: 503, type: "ServiceUnavailable", message: "try later" },
      );
      const handler = lambda({ BRIDGE_CONFIG: configNamed("after_keys"), BRIDGE_SIGNING_KEYS_SSM_PARAMETER: "/bridge/signing-keys" });
      await expectStatus(await invoke(handler, "Function URL", V1, await signed(V1)), 503, "ServiceUnavailable", /\/bridge\/signing-keys/);
      await expectStatus(await invoke(handler, "Function URL", V1), 401, "Unauthorized");
      expect((await invoke(handler, "Function URL", V1, await signed(V1))).status).toBe(200);
      expect(ssm.calls).toHaveLength(3);
    });
  });
});
