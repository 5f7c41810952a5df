/**
 * The `prometheus` provider's `gmp` flavour inside the real Worker (built
 * by wrangler as a deploy builds it, run in workerd): the Worker signs the
 * JWT bearer grant with WebCrypto from a service-account key held in a
 * Worker secret, gets a `monitoring.read` token from the OAuth fake, and
 * reads a REAL Prometheus (GMP route prefix) through the token-checking
 * front; with Workload Identity Federation (an AWS identity in the
 * Worker's secrets → STS → impersonation); a token endpoint that refuses is
 * a 500 naming the provider, never a value; Application Default Credentials
 * (`source: default`) are a 500 before anything is sent, and
 * google-auth-library is not in the bundle (the build's metafile).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { awsFederationEnv, gmpConfig, startGmpStack, type GmpStack } from "../helpers/gmp.ts";
import { PROMETHEUS_BUILD_TIMEOUT_MS } from "../helpers/prometheus.ts";
import { buildWorker, startWorker, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";
const MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read";

describe("prometheus provider, flavour gmp, inside the Worker (workerd)", () => {
  let stack: GmpStack;
  let build: WorkerBuild;
  beforeAll(async () => {
    [stack, build] = await Promise.all([startGmpStack(), buildWorker()]);
  }, PROMETHEUS_BUILD_TIMEOUT_MS + 180_000);
  afterAll(async () => stack?.close());

  it("reads a value with a token from the JWT bearer grant signed in workerd; the token re-used", async () => {
    const { oauth, account, front } = stack;
    const worker = await startWorker(gmpConfig(front.endpoint, { credentials: "{ source: environment, variable: GMP_KEY }" }), { GMP_KEY: account.text }, { build });
    try {
      const exchanges = oauth.requests.length;
      const sent = front.requests.length;
      for (const [queue, value] of [["a", "3"], ["b", "4"]]) {
        const res = await worker.request(`${NS}/queue_ready?labelSelector=queue%3D${queue}`);
        const body = (await res.json()) as any;
        expect(res.status, JSON.stringify(body)).toBe(200);
        expect(body.items).toEqual([expect.objectContaining({ metricName: "queue_ready", metricLabels: { queue }, value })]);
      }
      expect(oauth.requests.length - exchanges).toBe(1);
      expect(oauth.requests.at(-1)!.claims).toMatchObject({ iss: account.json.client_email, aud: oauth.tokenUri, scope: MONITORING_READ });
      expect(front.requests.slice(sent).map((r) => [r.path, r.status, r.caller])).toEqual(
        Array.from({ length: 4 }, () => ["/v1/projects/test-project/location/global/prometheus/api/v1/query", 200, account.json.client_email]),
      );
    } finally {
      await worker.close();
    }
  });

  it("reads a value with Workload Identity Federation from the Worker's secrets", async () => {
    const { sts, front } = stack;
    const worker = await startWorker(gmpConfig(front.endpoint, { credentials: "{ source: externalAccount }" }), awsFederationEnv(sts), { build });
    try {
      const res = await worker.request(`${NS}/queue_ready?labelSelector=queue%3Da`);
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.items[0]).toMatchObject({ metricLabels: { queue: "a" }, value: "3" });
      expect(sts.impersonations.at(-1)!.body.scope).toEqual([MONITORING_READ]);
      expect(front.requests.at(-1)!.caller).toBe(sts.serviceAccount);
    } finally {
      await worker.close();
    }
  });

  it("a token endpoint that refuses the service account is a 500 naming the provider, never a value", async () => {
    const { oauth, account, front } = stack;
    const worker = await startWorker(gmpConfig(front.endpoint, { credentials: "{ source: environment, variable: GMP_KEY }" }), { GMP_KEY: account.text }, { build });
    oauth.failWith = 400;
    try {
      const res = await worker.request(`${NS}/queue_ready?labelSelector=queue%3Da`);
      const body = (await res.json()) as any;
      expect(res.status).toBe(500);
      expect(body.items).toBeUndefined();
      expect(body.message).toMatch(/^provider gmp: getting an access token for bridge@test-project\.iam\.gserviceaccount\.com .* refused the service account/);
    } finally {
      oauth.failWith = undefined;
      await worker.close();
    }
  });

  it("Application Default Credentials (source default) are a 500 naming the provider before anything is sent; google-auth-library is not bundled", async () => {
    const { front } = stack;
    const worker = await startWorker(gmpConfig(front.endpoint, { credentials: "{ source: default }" }), {}, { build });
    try {
      const sent = front.requests.length;
      const res = await worker.request(`${NS}/queue_ready?labelSelector=queue%3Da`);
      const body = (await res.json()) as any;
      expect(res.status, JSON.stringify(body)).toBe(500);
      expect(body.items).toBeUndefined();
      expect(body.message).toMatch(
        /provider gmp: credentials\.source "default" \(Application Default Credentials\) needs google-auth-library and the metadata server, which the Worker does not have; give a service-account key/,
      );
      expect(front.requests.length).toBe(sent);
    } finally {
      await worker.close();
    }
    const inputs = Object.keys((JSON.parse(readFileSync(join(build.outdir, "bundle-meta.json"), "utf8")) as { inputs: Record<string, unknown> }).inputs);
    expect(inputs).toContain("infra/worker/no-gcp-default-credentials.ts");
    expect(inputs.filter((i) => /google-auth-library|gcp-metadata|gaxios|providers\/gcp\/default-credentials\.ts/.test(i))).toEqual([]);
  });
});
