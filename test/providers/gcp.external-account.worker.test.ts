/**
 * Workload Identity Federation inside the real Worker (built by wrangler as
 * a deploy builds it, run in workerd): the AWS identity in the Worker's
 * secrets signs GetCallerIdentity with WebCrypto (`@smithy/signature-v4`),
 * the STS fake verifies that signature and issues a federated token, the
 * service account is impersonated, and Cloud Monitoring (REST fake) is read
 * with the impersonated token — no service-account key anywhere. Then an
 * OIDC token read from a URL (no impersonation).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGoogleFakes, type GoogleFakes } from "../fakes/google.ts";
import { startStsFake, type StsFake } from "../fakes/google-sts.ts";
import { gcpBacklogConfig, ordersBacklogSeries } from "../helpers/gcp.ts";
import { buildWorker, startWorker, type WorkerBuild } from "../helpers/worker.ts";

const NS = "/apis/external.metrics.k8s.io/v1beta1/namespaces/default";

function config(endpoint: string) {
  return gcpBacklogConfig(endpoint, { credentials: "{ source: externalAccount }", cacheTTLSeconds: 0 });
}

describe("gcp-monitoring with Workload Identity Federation inside the Worker (workerd)", () => {
  let fakes: GoogleFakes;
  let sts: StsFake;
  let build: WorkerBuild;
  beforeAll(async () => {
    [fakes, build] = await Promise.all([startGoogleFakes(), buildWorker()]);
    sts = await startStsFake(fakes.oauth.issued);
    fakes.store.series = ordersBacklogSeries();
  });
  afterAll(async () => {
    await sts?.close();
    await fakes?.close();
  });

  it("an AWS identity from Worker secrets: SigV4 GetCallerIdentity → STS → generateAccessToken → Monitoring as the service account; the token re-used", async () => {
    const worker = await startWorker(config(fakes.rest.endpoint), {
      GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws", { impersonate: true })),
      AWS_ACCESS_KEY_ID: sts.aws.accessKeyId,
      AWS_SECRET_ACCESS_KEY: sts.aws.secretAccessKey,
      AWS_SESSION_TOKEN: sts.aws.sessionToken,
      AWS_REGION: "us-east-2",
    }, { build });
    try {
      for (let i = 0; i < 2; i++) {
        const res = await worker.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
        const body = (await res.json()) as any;
        expect(res.status, JSON.stringify(body)).toBe(200);
        expect(body.items[0]).toMatchObject({ value: "42" });
      }
      expect(sts.sts).toHaveLength(1);
      expect(sts.sts[0]!.error).toBeUndefined();
      expect(sts.sts[0]!.aws!.url).toContain("sts.us-east-2.amazonaws.com");
      expect(sts.impersonations).toHaveLength(1);
      expect(fakes.store.requests.map((r) => r.caller)).toEqual([sts.serviceAccount, sts.serviceAccount]);
    } finally {
      await worker.close();
    }
  });

  it("an OIDC token from a URL, exchanged without impersonation", async () => {
    const worker = await startWorker(config(fakes.rest.endpoint), { GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("oidc-url")) }, { build });
    try {
      const res = await worker.request(`${NS}/pubsub_backlog?labelSelector=subscription%3Dorders`);
      expect(res.status, await res.clone().text()).toBe(200);
      expect(sts.sts.at(-1)!.form).toMatchObject({ subject_token: sts.oidcToken, subject_token_type: "urn:ietf:params:oauth:token-type:jwt" });
      expect(fakes.store.requests.at(-1)!.caller).toMatch(/^principal:\/\/iam\.googleapis\.com\//);
    } finally {
      await worker.close();
    }
  });
});
