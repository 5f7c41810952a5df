/**
 * Workload Identity Federation for gcp-monitoring (`credentials.source:
 * externalAccount`), through the real bridge app and provider against fakes
 * speaking the wire formats on 127.0.0.1 (`test/fakes/google-sts.ts`: Google
 * STS token exchange, IAM Credentials generateAccessToken, an OIDC token
 * URL; the Cloud Monitoring REST and gRPC fakes accept only the tokens
 * those issued):
 *
 * - REST over fetch (the Worker's path, `shared/providers/gcp/external-account.ts`):
 *   an AWS identity from the environment signs GetCallerIdentity (the STS
 *   fake verifies the SigV4 signature), exchanged and impersonated; an OIDC
 *   token from a URL exchanged without impersonation; tokens re-used;
 *   refusals and outages as Status answers;
 * - gRPC through the official client (Node and Lambda: google-auth-library's
 *   `AwsClient` with the AWS credentials Lambda puts in the environment).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { createGrpcTransportFactory } from "../../shared/providers/gcp-monitoring/grpc.ts";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { startStsFake, type StsFake } from "../fakes/google-sts.ts";
import { gcpBacklogConfig, ordersBacklogSeries } from "../helpers/gcp.ts";
import { invoke, type HttpHandler } from "../helpers/lambda.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read";
const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform";

function config(endpoint: string, variable = "GOOGLE_EXTERNAL_ACCOUNT_JSON") {
  const credentials = `{ source: externalAccount${variable === "GOOGLE_EXTERNAL_ACCOUNT_JSON" ? "" : `, variable: ${variable}`} }`;
  return gcpBacklogConfig(endpoint, { credentials, cacheTTLSeconds: 0, providerLines: ["timeoutSeconds: 1"] });
}

let fakes: GoogleFakes;
let sts: StsFake;
beforeAll(async () => {
  fakes = await startGoogleFakes();
  sts = await startStsFake(fakes.oauth.issued);
  fakes.store.series = ordersBacklogSeries();
});
afterAll(async () => {
  await sts?.close();
  await fakes?.close();
});
afterEach(() => {
  sts.sts.length = 0;
  sts.impersonations.length = 0;
  sts.stsFailWith = undefined;
  fakes.store.requests.length = 0;
  vi.unstubAllEnvs();
});

async function read(bridge: Bridge) {
  const res = await bridge.app.request(`${NS}/pubsub_backlog?labelSelector=${encodeURIComponent("subscription=orders")}`);
  return { status: res.status, body: (await res.json()) as any };
}

const awsEnv = () => ({
  AWS_ACCESS_KEY_ID: sts.aws.accessKeyId,
  AWS_SECRET_ACCESS_KEY: sts.aws.secretAccessKey,
  AWS_SESSION_TOKEN: sts.aws.sessionToken,
  AWS_REGION: "eu-west-1",
});

describe("Workload Identity Federation over REST (the Worker's path)", () => {
  const restBridge = (env: Record<string, string>) => buildBridge(config(fakes.rest.endpoint), "test.yaml", { env, now: () => Date.now() }, { log: () => {} });

  it("an AWS identity: a SigV4-signed GetCallerIdentity exchanged at STS, then the service account impersonated; Monitoring sees the service account", async () => {
    const bridge = restBridge({ ...awsEnv(), GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws", { impersonate: true })) });
    const a = await read(bridge);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.items[0]).toMatchObject({ metricName: "pubsub_backlog", value: "42" });

    expect(sts.sts).toHaveLength(1);
    const [exchange] = sts.sts;
    expect(exchange!.error).toBeUndefined();
    expect(exchange!.form).toMatchObject({
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      audience: sts.audience,
      scope: CLOUD_PLATFORM,
      requested_token_type: "urn:ietf:params:oauth:token-type:access_token",
      subject_token_type: "urn:ietf:params:aws:token-type:aws4_request",
    });
    // the signed request names the runtime's region and carries the audience as a signed header
    expect(exchange!.aws!.url).toBe("https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15");
    expect(exchange!.aws!.headers["authorization"]).toMatch(/\/eu-west-1\/sts\/aws4_request, SignedHeaders=[^,]*x-goog-cloud-target-resource/);
    expect(sts.impersonations).toEqual([
      expect.objectContaining({ email: sts.serviceAccount, bearer: expect.stringMatching(/^ya29\.federated-/), body: { scope: [MONITORING_READ], lifetime: "3600s" } }),
    ]);
    expect(fakes.store.requests.at(-1)).toMatchObject({ transport: "rest", caller: sts.serviceAccount });

    // the impersonated token is re-used: a second read exchanges nothing
    expect((await read(bridge)).status).toBe(200);
    expect(fakes.store.requests).toHaveLength(2);
    expect(sts.sts).toHaveLength(1);
    expect(sts.impersonations).toHaveLength(1);
  });

  it("an OIDC token from a URL, exchanged without impersonation: Monitoring sees the federated principal", async () => {
    // a variable of the user's choosing
    const b = buildBridge(config(fakes.rest.endpoint, "WIF"), "test.yaml", { env: { WIF: JSON.stringify(sts.credentialConfig("oidc-url")) }, now: () => Date.now() }, { log: () => {} });
    const reads = sts.oidcReads;
    const a = await read(b);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(sts.oidcReads).toBe(reads + 1);
    expect(sts.sts[0]!.form).toMatchObject({ subject_token_type: "urn:ietf:params:oauth:token-type:jwt", subject_token: sts.oidcToken, scope: MONITORING_READ });
    expect(sts.impersonations).toEqual([]);
    expect(fakes.store.requests.at(-1)!.caller).toMatch(/^principal:\/\/iam\.googleapis\.com\/.*\/subject\/system:serviceaccount:emb:bridge$/);
  });

  it("STS refusing the identity is a 500 carrying STS's reason; STS down is a 503; a wrong AWS secret fails the signature check", async () => {
    const configText = JSON.stringify(sts.credentialConfig("aws", { impersonate: true }));
    sts.stsFailWith = { status: 400, error: "invalid_grant", description: "The audience in the subject token does not match" };
    const refused = await read(restBridge({ ...awsEnv(), GOOGLE_EXTERNAL_ACCOUNT_JSON: configText }));
    expect(refused.status).toBe(500);
    expect(refused.body.message).toMatch(/Workload Identity Federation .*Google STS .*refused the identity: HTTP 400 \(invalid_grant: The audience in the subject token does not match\)/);

    sts.stsFailWith = { status: 503, error: "unavailable", description: "try later" };
    const down = await read(restBridge({ ...awsEnv(), GOOGLE_EXTERNAL_ACCOUNT_JSON: configText }));
    expect(down.status).toBe(503);
    sts.stsFailWith = undefined;

    const wrong = await read(restBridge({ ...awsEnv(), AWS_SECRET_ACCESS_KEY: "not-the-secret", GOOGLE_EXTERNAL_ACCOUNT_JSON: configText }));
    expect(wrong.status).toBe(500);
    expect(wrong.body.message).toContain("invalid_grant: SignatureDoesNotMatch");
    expect(fakes.store.requests).toEqual([]); // no value read without a token
  });

  it("an impersonated token whose expireTime is not a real RFC 3339 time (2026-02-30) is a 503, never a read with it", async () => {
    const configText = JSON.stringify(sts.credentialConfig("aws", { impersonate: true }));
    try {
      for (const text of ["2026-02-30T00:00:00Z", "2099-02-29T00:00:00Z", "tomorrow"]) {
        sts.expireTimeText = text;
        const res = await read(restBridge({ ...awsEnv(), GOOGLE_EXTERNAL_ACCOUNT_JSON: configText }));
        expect(res.status, `${text}: ${JSON.stringify(res.body)}`).toBe(503);
        expect(res.body.message).toMatch(/generateAccessToken's answer has no accessToken or no RFC 3339 expireTime/);
      }
      expect(fakes.store.requests).toEqual([]);
    } finally {
      sts.expireTimeText = undefined;
    }
  });

  it("configuration faults are 500s naming the variable or the missing environment, never a value", async () => {
    const unset = await read(restBridge({}));
    expect(unset.status).toBe(500);
    expect(unset.body.message).toContain(`credentials.source is "externalAccount" but GOOGLE_EXTERNAL_ACCOUNT_JSON is not set`);

    const key = await read(restBridge({ GOOGLE_EXTERNAL_ACCOUNT_JSON: fakes.account.text }));
    expect(key.status).toBe(500);
    expect(key.body.message).toMatch(/is not an external_account credential configuration \(type: /);
    expect(key.body.message).not.toContain("PRIVATE KEY");

    const noAws = await read(restBridge({ GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws")) }));
    expect(noAws.status).toBe(500);
    expect(noAws.body.message).toContain("missing: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION");

    const huge = { ...sts.credentialConfig("oidc-url"), credential_source: { url: `${sts.origin}/oidc-huge` } };
    const hugeRead = await read(restBridge({ GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(huge) }));
    expect(hugeRead.status).toBe(500);
    expect(hugeRead.body.message).toContain("answered more than 65536 bytes");

    const file = { ...sts.credentialConfig("oidc-url"), credential_source: { file: "/var/run/secrets/tokens/gcp" } };
    const fileRead = await read(restBridge({ GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(file) }));
    expect(fileRead.status).toBe(500);
    expect(fileRead.body.message).toContain("needs a file system or a process");
    expect(sts.sts).toEqual([]);
  });
});

describe("Workload Identity Federation through the official client (Node and Lambda: google-auth-library AwsClient)", () => {
  it("the AWS credentials Lambda puts in the environment are exchanged and the service account impersonated; the gRPC call carries the impersonated token", async () => {
    // google-auth-library reads the AWS identity from process.env, as Lambda sets it for the function's role
    for (const [k, v] of Object.entries(awsEnv())) vi.stubEnv(k, v);
    const bridge = buildBridge(
      config(fakes.grpc.endpoint),
      "test.yaml",
      {
        env: { GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws", { impersonate: true })) },
        now: () => Date.now(),
        transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) },
      },
      { log: () => {} },
    );
    const a = await read(bridge);
    expect(a.status, JSON.stringify(a.body)).toBe(200);
    expect(a.body.items[0]).toMatchObject({ value: "42" });
    expect(sts.sts).toHaveLength(1);
    expect(sts.sts[0]!.error).toBeUndefined();
    expect(sts.sts[0]!.form).toMatchObject({ audience: sts.audience, scope: CLOUD_PLATFORM, subject_token_type: "urn:ietf:params:aws:token-type:aws4_request" });
    expect(sts.sts[0]!.aws!.url).toContain("sts.eu-west-1.amazonaws.com");
    expect(sts.impersonations).toEqual([expect.objectContaining({ email: sts.serviceAccount, body: expect.objectContaining({ scope: expect.arrayContaining([CLOUD_PLATFORM]) }) })]);
    expect(fakes.store.requests.at(-1)).toMatchObject({ transport: "grpc", caller: sts.serviceAccount });
    expect(fakes.grpc.callers.at(-1)).toMatchObject({ iss: sts.serviceAccount, opaque: true });
  });

  it("an OIDC token from a file (a projected ServiceAccount token, as on EKS or any cluster) through IdentityPoolClient", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-wif-"));
    try {
      writeFileSync(join(dir, "token"), sts.oidcToken);
      const fileConfig = { ...sts.credentialConfig("oidc-url"), credential_source: { file: join(dir, "token") } };
      const bridge = buildBridge(
        config(fakes.grpc.endpoint),
        "test.yaml",
        {
          env: { GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(fileConfig) },
          now: () => Date.now(),
          transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) },
        },
        { log: () => {} },
      );
      const a = await read(bridge);
      expect(a.status, JSON.stringify(a.body)).toBe(200);
      expect(sts.sts[0]!.form).toMatchObject({ subject_token: sts.oidcToken, subject_token_type: "urn:ietf:params:oauth:token-type:jwt" });
      expect(fakes.store.requests.at(-1)!.caller).toMatch(/^principal:\/\/iam\.googleapis\.com\/.*\/subject\/system:serviceaccount:emb:bridge$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a refused identity is a 500 carrying the reason (STS invalid_grant, IAM Credentials PERMISSION_DENIED), never a value; STS down is a 503", async () => {
    for (const [k, v] of Object.entries(awsEnv())) vi.stubEnv(k, v);
    const grpcBridge = (credentialConfig: Record<string, unknown>) =>
      buildBridge(
        config(fakes.grpc.endpoint),
        "test.yaml",
        {
          env: { GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(credentialConfig) },
          now: () => Date.now(),
          transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) },
        },
        { log: () => {} },
      );
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", "not-the-secret");
    const badSignature = await read(grpcBridge(sts.credentialConfig("aws", { impersonate: true })));
    expect(badSignature.status, JSON.stringify(badSignature.body)).toBe(500);
    expect(badSignature.body.message).toContain("invalid_grant: SignatureDoesNotMatch");
    vi.stubEnv("AWS_SECRET_ACCESS_KEY", sts.aws.secretAccessKey);

    const stranger = sts.credentialConfig("aws", { impersonate: true });
    stranger["service_account_impersonation_url"] = String(stranger["service_account_impersonation_url"]).replace(sts.serviceAccount, "stranger@test-project.iam.gserviceaccount.com");
    const denied = await read(grpcBridge(stranger));
    expect(denied.status, JSON.stringify(denied.body)).toBe(500);
    expect(denied.body.message).toContain("iam.serviceAccounts.getAccessToken");

    sts.stsFailWith = { status: 503, error: "unavailable", description: "try later" };
    const down = await read(grpcBridge(sts.credentialConfig("aws")));
    expect(down.status, JSON.stringify(down.body)).toBe(503);
    expect(fakes.store.requests).toEqual([]);
  });
});

describe("Workload Identity Federation in the Lambda handler (Function URL events; the execution role's AWS identity)", () => {
  it("reads Cloud Monitoring as the impersonated service account", async () => {
    // Lambda puts the execution role's temporary credentials and region in the process environment
    for (const [k, v] of Object.entries(awsEnv())) vi.stubEnv(k, v);
    const handler = createLambdaHandler(
      {
        BRIDGE_INSECURE_ALLOW_UNSIGNED: "true",
        BRIDGE_CONFIG: config(fakes.grpc.endpoint),
        GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws", { impersonate: true })),
      },
      { log: () => {}, transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: fakes.grpc.caCert }) } },
    ) as unknown as HttpHandler;
    const res = await invoke(handler, "Function URL", `${NS}/pubsub_backlog?labelSelector=${encodeURIComponent("subscription=orders")}`);
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.items[0]).toMatchObject({ value: "42" });
    expect(sts.sts[0]!.aws!.headers["x-amz-security-token"]).toBe(sts.aws.sessionToken);
    expect(fakes.store.requests.at(-1)).toMatchObject({ transport: "grpc", caller: sts.serviceAccount });
  });
});
