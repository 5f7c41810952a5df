/**
 * The `prometheus` provider's `amp` flavour through the real bridge app,
 * against a REAL Prometheus v3.16.0 behind a SigV4-verifying front door
 * (`test/sigv4-proxy/`: aws-sdk-go-v2's signer re-signs each received
 * request with the test credentials, service `aps`, and forwards it only
 * when the signatures are equal; Prometheus serves under
 * `/workspaces/<id>` as AMP does). A value is read through it; a wrong
 * secret is the AWS providers' "refused credentials" 500, missing
 * credentials their "no credentials" 500 (nothing sent), never a value; the
 * signature covers the exact body sent, and a stale date is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AmpSigner } from "../../shared/providers/prometheus/amp.ts";
import { prometheusProviderSchema } from "../../shared/providers/prometheus/schema.ts";
import { ampConfig } from "../helpers/amp.ts";
import { buildBridge, type Bridge } from "../helpers/bridge.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS, prometheusBinary, startExporter, startPrometheus, type Exporter, type PrometheusServer } from "../helpers/prometheus.ts";
import { sigv4ProxyBinary, startSigv4Proxy, type Sigv4Proxy } from "../helpers/sigv4-proxy.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const WORKSPACE = "ws-6b1f3c2e-0a4d-4e8f-9c1b-2d3e4f5a6b7c";
const REGION = "eu-west-1";
const KEYS = { AWS_ACCESS_KEY_ID: "AKIDAMPTEST", AWS_SECRET_ACCESS_KEY: "amp-test-secret" };
const iso = (ms: number) => new Date(ms).toISOString().replace(".000Z", "Z");
/** queue a's sample time, exported as the sample's own timestamp. */
// set once the servers are built (a cold build takes minutes): a time taken at import would be minutes old by the first read
let SAMPLE_TS = 0;

function config(endpoint: string, credentials = "{ source: environment }"): string {
  return ampConfig({ region: REGION, workspaceId: WORKSPACE, endpoint }, credentials, "{ job: exporter }");
}

let exporter: Exporter;
let prom: PrometheusServer;
let proxy: Sigv4Proxy;
/** a second front door whose valid credentials are temporary: keys and a session token */
let sessionProxy: Sigv4Proxy;
const SESSION_TOKEN = "amp-test-session-token";

beforeAll(async () => {
  const binary = prometheusBinary();
  sigv4ProxyBinary();
  SAMPLE_TS = Math.floor((Date.now() - 20_000) / 1000) * 1000;
  exporter = await startExporter();
  exporter.set(() => [
    { name: "emb_queue_ready", labels: { queue: "a" }, value: 3, timestampMs: SAMPLE_TS },
    { name: "emb_queue_ready", labels: { queue: "b" }, value: 4 },
  ]);
  prom = await startPrometheus({ binary, targets: [exporter.target], routePrefix: `/workspaces/${WORKSPACE}` });
  proxy = await startSigv4Proxy({ upstream: `http://127.0.0.1:${prom.port}`, accessKeyId: KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: KEYS.AWS_SECRET_ACCESS_KEY, region: REGION });
  sessionProxy = await startSigv4Proxy({
    upstream: `http://127.0.0.1:${prom.port}`,
    accessKeyId: KEYS.AWS_ACCESS_KEY_ID,
    secretAccessKey: KEYS.AWS_SECRET_ACCESS_KEY,
    sessionToken: SESSION_TOKEN,
    region: REGION,
  });
  await prom.waitForSeries('emb_queue_ready{queue="b"}');
}, 2 * PROMETHEUS_BUILD_TIMEOUT_MS + 120_000);

afterAll(async () => {
  await proxy?.close();
  await sessionProxy?.close();
  await prom?.stop();
  await exporter?.close();
});

function bridgeFor(env: Record<string, string>, credentials?: string, endpoint = proxy.endpoint): Bridge {
  return buildBridge(config(endpoint, credentials), "test.yaml", { env, now: () => Date.now() }, { log: () => {} });
}

async function read(bridge: Bridge, selector: string) {
  const res = await bridge.app.fetch(new Request(`http://bridge${NS}/queue_ready?labelSelector=${encodeURIComponent(selector)}`));
  return { status: res.status, body: (await res.json()) as any };
}

describe("prometheus provider, amp flavour, through a SigV4-verifying front door to a real Prometheus", () => {
  it("reads a value with signed queries to /workspaces/<id>/api/v1/query", async () => {
    const before = proxy.forwarded().length;
    const a = await read(bridgeFor(KEYS), "queue in (a, b)");
    expect(a.status).toBe(200);
    expect(a.body.items).toEqual([
      { metricName: "queue_ready", metricLabels: { queue: "a" }, timestamp: iso(SAMPLE_TS), value: "3" },
      expect.objectContaining({ metricName: "queue_ready", metricLabels: { queue: "b" }, value: "4" }),
    ]);
    // the value query and the age query, both verified and forwarded
    expect(proxy.forwarded().slice(before)).toEqual([`POST /workspaces/${WORKSPACE}/api/v1/query`, `POST /workspaces/${WORKSPACE}/api/v1/query`]);
  });

  it("temporary credentials: the session token is sent (x-amz-security-token) and signed; another token is refused", async () => {
    const ok = await read(bridgeFor({ ...KEYS, AWS_SESSION_TOKEN: SESSION_TOKEN }, undefined, sessionProxy.endpoint), "queue=a");
    expect(ok.status).toBe(200);
    expect(ok.body.items.map((i: any) => i.value)).toEqual(["3"]);
    const res = await read(bridgeFor({ ...KEYS, AWS_SESSION_TOKEN: "expired-token" }, undefined, sessionProxy.endpoint), "queue=a");
    expect(res.status).toBe(500);
    expect(res.body.items).toBeUndefined();
    expect(res.body.message).toMatch(/AWS refused the bridge's credentials \(UnrecognizedClientException\)/);
  });

  it("a wrong secret: the AWS providers' 'refused credentials' 500, never a value", async () => {
    const before = proxy.refused().length;
    const res = await read(bridgeFor({ ...KEYS, AWS_SECRET_ACCESS_KEY: "wrong" }), "queue=a");
    expect(res.status).toBe(500);
    expect(res.body.items).toBeUndefined();
    expect(res.body.message).toMatch(/^provider amp: query for metric queue_ready .* failed: AWS refused the bridge's credentials \(InvalidSignatureException\): HTTP 403/);
    expect(proxy.refused().slice(before)).toContain("InvalidSignatureException");
  });

  it("no credentials in the environment: the 'no credentials' 500 and nothing sent", async () => {
    const before = proxy.forwarded().length + proxy.refused().length;
    const res = await read(bridgeFor({}), "queue=a");
    expect(res.status).toBe(500);
    expect(res.body.items).toBeUndefined();
    expect(res.body.message).toMatch(/failed: no AWS credentials were found, so nothing was sent to AWS \(CredentialsMissingError\): provider amp: credentials.source is "environment"/);
    expect(proxy.forwarded().length + proxy.refused().length).toBe(before);
  });

  it("source default: the AWS SDK's default chain (its environment step here) signs; a chain that finds nothing is the 'no credentials' 500 naming where it looked", async () => {
    const saved = { ...process.env };
    try {
      // the chain reads process.env, not the bridge's env bag; no files, no metadata endpoint
      Object.assign(process.env, { AWS_CONFIG_FILE: "/nonexistent", AWS_SHARED_CREDENTIALS_FILE: "/nonexistent", AWS_EC2_METADATA_DISABLED: "true" });
      for (const k of ["AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SESSION_TOKEN"]) delete process.env[k];
      Object.assign(process.env, KEYS);
      const ok = await read(bridgeFor({}, "{ source: default }"), "queue=a");
      expect(ok.status).toBe(200);
      expect(ok.body.items.map((i: any) => i.value)).toEqual(["3"]);
      delete process.env["AWS_ACCESS_KEY_ID"];
      delete process.env["AWS_SECRET_ACCESS_KEY"];
      const before = proxy.forwarded().length + proxy.refused().length;
      const none = await read(bridgeFor({}, "{ source: default }"), "queue=a");
      expect(none.status).toBe(500);
      expect(none.body.items).toBeUndefined();
      expect(none.body.message).toMatch(/no AWS credentials were found, so nothing was sent to AWS \(CredentialsProviderError\): .*The SDK's default chain \(credentials.source: default\) looked in/);
      expect(proxy.forwarded().length + proxy.refused().length).toBe(before);
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });

  it("static keys from the config sign as well", async () => {
    const res = await read(bridgeFor({}, `{ source: static, accessKeyId: ${KEYS.AWS_ACCESS_KEY_ID}, secretAccessKey: ${KEYS.AWS_SECRET_ACCESS_KEY} }`), "queue=a");
    expect(res.status).toBe(200);
    expect(res.body.items.map((i: any) => i.value)).toEqual(["3"]);
  });

  it("the signature covers the exact body sent: another body with the same headers is refused, the signed one answered", async () => {
    const cfg = prometheusProviderSchema.parse({ flavour: "amp", region: REGION, workspaceId: WORKSPACE, endpoint: proxy.endpoint, credentials: { source: "environment" } });
    if (cfg.flavour !== "amp") throw new Error("not amp");
    const signer = new AmpSigner("amp", cfg, { env: KEYS, now: () => Date.now() });
    const url = `${signer.url}/api/v1/query`;
    const headers = { "content-type": "application/x-www-form-urlencoded", accept: "application/json" };
    const body = "query=emb_queue_ready%7Bqueue%3D%22a%22%7D";
    const signed = { ...headers, ...(await signer.sign({ url, headers, body }, AbortSignal.timeout(5000))) };
    expect(Object.keys(signed).sort()).toEqual(["accept", "authorization", "content-type", "x-amz-content-sha256", "x-amz-date"]);
    const other = await fetch(url, { method: "POST", headers: signed, body: "query=emb_queue_ready%7Bqueue%3D%22b%22%7D" });
    expect(other.status).toBe(403);
    expect(other.headers.get("x-amzn-errortype")).toBe("InvalidSignatureException");
    const same = await fetch(url, { method: "POST", headers: signed, body });
    expect(same.status).toBe(200);
    expect(((await same.json()) as any).data.result[0].value[1]).toBe("3");
  });

  it("the front door refuses an unsigned request and a stale X-Amz-Date, as AWS does", async () => {
    const url = `${proxy.endpoint}/workspaces/${WORKSPACE}/api/v1/query`;
    const unsigned = await fetch(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: "query=up" });
    expect(unsigned.status).toBe(403);
    expect(unsigned.headers.get("x-amzn-errortype")).toBe("MissingAuthenticationTokenException");
    const { SignatureV4 } = await import("@smithy/signature-v4");
    const { WebCryptoSha256 } = await import("../../shared/providers/aws/sigv4.ts");
    const signer = new SignatureV4({ service: "aps", region: REGION, credentials: { accessKeyId: KEYS.AWS_ACCESS_KEY_ID, secretAccessKey: KEYS.AWS_SECRET_ACCESS_KEY }, sha256: WebCryptoSha256 });
    const u = new URL(url);
    const request = (signingDate: Date) =>
      signer.sign({ method: "POST", protocol: "http:", hostname: u.hostname, port: Number(u.port), path: u.pathname, headers: { host: u.host, "content-type": "application/x-www-form-urlencoded" }, body: "query=up" }, { signingDate });
    const send = async (signingDate: Date) => {
      const { host: _host, ...h } = (await request(signingDate)).headers;
      return fetch(url, { method: "POST", headers: h, body: "query=up" });
    };
    const stale = await send(new Date(Date.now() - 10 * 60_000));
    expect(stale.status).toBe(403);
    expect(await stale.text()).toMatch(/Signature expired/);
    expect((await send(new Date())).status).toBe(200);
  });
});
