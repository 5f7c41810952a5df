/**
 * The bridge configuration shared by the Managed Service for Prometheus
 * suites (Node and Worker): one `gmp` provider of project `test-project`
 * and the `queue_ready` rule reading the gauge `emb_queue_ready` by queue,
 * every read allowed (not a policy test); and the stack they read through.
 */
import { startOAuthFake, type OAuthFake } from "../fakes/google-oauth.ts";
import { makeServiceAccount, type TestServiceAccount } from "../fakes/google-key.ts";
import { startStsFake, type StsFake } from "../fakes/google-sts.ts";
import { gmpRoutePrefix, startGmpFront, type GmpFront } from "../fakes/gmp-front.ts";
import { prometheusBinary, startExporter, startPrometheus, type Exporter, type PrometheusServer } from "./prometheus.ts";

/** The project the suites read. */
export const GMP_PROJECT = "test-project";

/**
 * A BridgeConfig YAML with the `gmp` provider at `endpoint` (the front's
 * origin, `test/fakes/gmp-front.ts`); `credentials` is the YAML flow mapping
 * of `credentials:`; `maxAgeSeconds` (default 300) and `cacheTTLSeconds`
 * (default 0) are the defaults.
 */
export function gmpConfig(endpoint: string, options: { credentials: string; maxAgeSeconds?: number; cacheTTLSeconds?: number }): string {
  return `
apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
policy: { defaultAction: Allow }   # not a policy test: every read allowed, explicitly
defaults: { maxAgeSeconds: ${options.maxAgeSeconds ?? 300}, cacheTTLSeconds: ${options.cacheTTLSeconds ?? 0} }
providers:
  gmp:
    type: prometheus
    flavour: gmp
    project: ${GMP_PROJECT}
    endpoint: ${endpoint}
    credentials: ${options.credentials}
    timeoutSeconds: 2
metrics:
  - name: queue_ready
    provider: gmp
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
`;
}

/** Everything a gmp suite reads through: a real Prometheus behind the token-checking front, and the Google token fakes. */
export interface GmpStack {
  exporter: Exporter;
  prom: PrometheusServer;
  oauth: OAuthFake;
  /** a service account the OAuth fake accepts (its `token_uri` is the fake) */
  account: TestServiceAccount;
  /** STS and impersonation fakes; their tokens are valid at the front */
  sts: StsFake;
  front: GmpFront;
  close(): Promise<void>;
}

/**
 * Start an exporter serving `emb_queue_ready{queue="a"} 3` and
 * `{queue="b"} 4`, a real Prometheus scraping it with the GMP route prefix
 * of {@link GMP_PROJECT}, the OAuth and STS fakes (assertions checked
 * against `now`) and the front (`test/fakes/gmp-front.ts`); resolves once
 * Prometheus has both series. Allow `PROMETHEUS_BUILD_TIMEOUT_MS` for
 * a first build of Prometheus.
 */
export async function startGmpStack(now: () => number = Date.now): Promise<GmpStack> {
  const binary = prometheusBinary();
  const exporter = await startExporter([
    { name: "emb_queue_ready", labels: { queue: "a" }, value: 3 },
    { name: "emb_queue_ready", labels: { queue: "b" }, value: 4 },
  ]);
  const prom = await startPrometheus({ binary, targets: [exporter.target], routePrefix: gmpRoutePrefix(GMP_PROJECT) });
  await prom.waitForSeries('emb_queue_ready{queue="a"}');
  await prom.waitForSeries('emb_queue_ready{queue="b"}');
  const oauth = await startOAuthFake(now);
  const account = makeServiceAccount(oauth.tokenUri);
  oauth.allow(account.json.client_email, account.publicKey);
  const sts = await startStsFake(oauth.issued, now);
  const front = await startGmpFront(`http://127.0.0.1:${prom.port}`, gmpRoutePrefix(GMP_PROJECT), oauth.issued);
  return {
    exporter,
    prom,
    oauth,
    account,
    sts,
    front,
    async close() {
      await front.close();
      await sts.close();
      await oauth.close();
      await prom.stop();
      await exporter.close();
    },
  };
}

/**
 * The environment of a Workload Identity Federation read with an AWS
 * identity: the `external_account` configuration (impersonating the STS
 * fake's service account) and the AWS credentials the STS fake accepts, region us-east-2.
 */
export function awsFederationEnv(sts: StsFake): Record<string, string> {
  return {
    GOOGLE_EXTERNAL_ACCOUNT_JSON: JSON.stringify(sts.credentialConfig("aws", { impersonate: true })),
    AWS_ACCESS_KEY_ID: sts.aws.accessKeyId,
    AWS_SECRET_ACCESS_KEY: sts.aws.secretAccessKey,
    AWS_SESSION_TOKEN: sts.aws.sessionToken,
    AWS_REGION: "us-east-2",
  };
}
