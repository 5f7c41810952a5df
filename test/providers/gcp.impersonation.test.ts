/**
 * Per-namespace Google service accounts (`credentials.impersonate`) through
 * the real thing: the bridge app, the `prometheus` provider's `gmp` flavour,
 * the bridge's own service-account key exchanged at the OAuth token fake
 * (`test/fakes/google-oauth.ts`, JWT verified), google-auth-library's
 * `Impersonated` calling the IAM Credentials fake
 * (`test/fakes/iamcredentials.ts`) for each namespace's account, and a
 * Managed Prometheus stand-in that accepts only tokens that fake issued and
 * answers each account with its own data.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../../shared/config/config.ts";
import { buildBridge, OPEN_CONFIG_HEAD, type Bridge } from "../helpers/bridge.ts";
import { makeServiceAccount, type TestServiceAccount } from "../fakes/google-key.ts";
import { startOAuthFake, type OAuthFake } from "../fakes/google-oauth.ts";
import { startIamCredentialsFake, type IamCredentialsFake } from "../fakes/iamcredentials.ts";
import { startPrometheusIdentityStandIn, type PrometheusIdentityStandIn } from "../fakes/prometheus-identity.ts";
import { MonitoringStore } from "../fakes/monitoring-store.ts";
import { startMonitoringGrpcFake, type MonitoringGrpcFake } from "../fakes/monitoring-grpc.ts";
import { startMonitoringRestFake, type MonitoringRestFake } from "../fakes/monitoring-rest.ts";
import { createGrpcTransportFactory } from "../../shared/providers/gcp-monitoring/grpc.ts";

const PROJECT = "test-project";
const SA = (ns: string) => `emb-${ns}@${PROJECT}.iam.gserviceaccount.com`;
const BRIDGE_SA = `bridge@${PROJECT}.iam.gserviceaccount.com`;
const CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform";
const MONITORING_READ = "https://www.googleapis.com/auth/monitoring.read";

function config(endpoint: string, iam: string, impersonate = `serviceAccount: "emb-{namespace}@${PROJECT}.iam.gserviceaccount.com"`) {
  return `${OPEN_CONFIG_HEAD}providers:
  gmp:
    type: prometheus
    flavour: gmp
    project: ${PROJECT}
    endpoint: ${endpoint}
    credentials:
      source: environment
      impersonate: { ${impersonate}, endpoint: "${iam}" }
metrics:
  - name: queue_ready
    provider: gmp
    query: { series: emb_queue_ready, selectorLabels: { queue: queue } }
`;
}

async function read(bridge: Bridge, ns: string) {
  const res = await bridge.app.request(`/apis/external.metrics.k8s.io/v1beta1/namespaces/${ns}/queue_ready?labelSelector=queue%3Djobs`);
  return { status: res.status, body: (await res.json()) as any };
}

describe("gmp with a service account per namespace (IAM Credentials generateAccessToken)", () => {
  let oauth: OAuthFake;
  let iam: IamCredentialsFake;
  let key: TestServiceAccount;
  let gmp: PrometheusIdentityStandIn;
  /** the account whose token each query carried (undefined: a token the IAM fake did not issue) */
  let readers: (string | undefined)[] = [];
  beforeAll(async () => {
    oauth = await startOAuthFake();
    key = makeServiceAccount(oauth.tokenUri, BRIDGE_SA);
    oauth.allow(BRIDGE_SA, key.publicKey);
    iam = await startIamCredentialsFake(oauth.issued);
    // a Managed Prometheus stand-in: only tokens IAM Credentials issued, each account answered with its own data
    gmp = await startPrometheusIdentityStandIn({
      path: `/v1/projects/${PROJECT}/location/global/prometheus/api/v1/query`,
      whoIs: (req) => iam.issued.get(/^Bearer (.+)$/.exec(String(req.headers["authorization"] ?? ""))?.[1] ?? ""),
      valueOf: (account) => (account === SA("team-a") ? "3" : "8"),
      refusal: { status: 401, body: { error: { code: 401, message: "not a token of an impersonated account", status: "UNAUTHENTICATED" } } },
    });
    readers = gmp.callers;
  });
  afterAll(async () => {
    await gmp?.close();
    await iam?.close();
    await oauth?.close();
  });
  beforeEach(() => {
    readers.length = 0;
    iam.calls.length = 0;
    iam.failWith = undefined;
    iam.creators.clear();
    for (const ns of ["team-a", "team-b"]) iam.creators.set(SA(ns), new Set([BRIDGE_SA]));
  });

  const bridge = (text = config(gmp.endpoint, iam.endpoint)) => buildBridge(text, "test.yaml", { env: { GOOGLE_SERVICE_ACCOUNT_JSON: key.text }, now: Date.now }, { log: () => {} });

  it("reads each namespace with its own service account's token, never another's", async () => {
    const b = bridge();
    const [a, bb] = await Promise.all([read(b, "team-a"), read(b, "team-b")]);
    if (a.status !== 200 || bb.status !== 200) throw new Error(JSON.stringify([a.body, bb.body]));
    expect([a.body.items[0].value, bb.body.items[0].value]).toEqual(["3", "8"]);
    expect(iam.calls.map((c) => c.target).sort()).toEqual([SA("team-a"), SA("team-b")]);
    for (const call of iam.calls) expect(call).toMatchObject({ caller: BRIDGE_SA, scope: [MONITORING_READ], lifetime: "3600s" });
    // the bridge's own token carries cloud-platform, which generateAccessToken requires
    expect(oauth.requests.at(-1)?.claims?.["scope"]).toBe(CLOUD_PLATFORM);
    expect(readers.filter((r) => r === SA("team-a"))).toHaveLength(2); // value and age queries
    expect(readers.filter((r) => r === SA("team-b"))).toHaveLength(2);
    expect(readers).toHaveLength(4);
    // the impersonated tokens are re-used
    await read(b, "team-a");
    expect(iam.calls).toHaveLength(2);
  });

  it("an impersonation refused (no Token Creator role) is a 500 naming the account, never a value; nothing is queried", async () => {
    const b = bridge();
    iam.creators.delete(SA("team-b"));
    const r = await read(b, "team-b");
    expect(r.status).toBe(500);
    expect(r.body.message).toContain(`service account ${SA("team-b")} (impersonated)`);
    expect(r.body.message).toContain("PERMISSION_DENIED");
    expect(r.body.items).toBeUndefined();
    expect(readers).toHaveLength(0);
  });

  it("IAM Credentials unavailable is a 503, never a value", async () => {
    const b = bridge();
    iam.failWith = 503;
    const r = await read(b, "team-a");
    expect(r.status).toBe(503);
    expect(r.body.items).toBeUndefined();
    expect(readers).toHaveLength(0);
  });

  it("with serviceAccounts, a namespace not listed is refused (403) before anything is sent", async () => {
    const b = bridge(config(gmp.endpoint, iam.endpoint, `serviceAccounts: { team-a: "${SA("team-a")}" }`));
    expect((await read(b, "team-a")).body.items[0].value).toBe("3");
    const c = await read(b, "team-c");
    expect(c.status).toBe(403);
    expect(c.body.message).toContain(`names no service account for namespace "team-c"`);
    expect(iam.calls.map((x) => x.target)).toEqual([SA("team-a")]);
  });
});

describe("gcp-monitoring with a service account per namespace, over gRPC and REST", () => {
  const BACKLOG = "pubsub.googleapis.com/subscription/num_undelivered_messages";
  let oauth: OAuthFake;
  let iam: IamCredentialsFake;
  let key: TestServiceAccount;
  let grpc: MonitoringGrpcFake;
  let rest: MonitoringRestFake;
  beforeAll(async () => {
    oauth = await startOAuthFake();
    key = makeServiceAccount(oauth.tokenUri, BRIDGE_SA);
    oauth.allow(BRIDGE_SA, key.publicKey);
    iam = await startIamCredentialsFake(oauth.issued);
    for (const ns of ["team-a", "team-b"]) iam.creators.set(SA(ns), new Set([BRIDGE_SA]));
    const store = new MonitoringStore();
    const now = Date.now();
    for (const sub of ["team-a-jobs", "team-b-jobs"]) {
      store.series.push({ metricType: BACKLOG, resourceType: "pubsub_subscription", resourceLabels: { project_id: PROJECT, subscription_id: sub }, points: [{ end: now - 30_000, value: { int64Value: sub === "team-a-jobs" ? "5" : "7" } }] });
    }
    // both API fakes accept only the tokens IAM Credentials issued: the bridge's own key opens nothing
    grpc = await startMonitoringGrpcFake(store, new Map(), iam.issued);
    rest = await startMonitoringRestFake(store, { issued: iam.issued } as unknown as OAuthFake);
  });
  afterAll(async () => {
    await grpc?.close();
    await rest?.close();
    await iam?.close();
    await oauth?.close();
  });

  const text = (endpoint: string) => `${OPEN_CONFIG_HEAD}providers:
  gcp:
    type: gcp-monitoring
    project: ${PROJECT}
    endpoint: ${endpoint}
    credentials: { source: environment, impersonate: { serviceAccount: "emb-{namespace}@${PROJECT}.iam.gserviceaccount.com", endpoint: "${iam.endpoint}" } }
metrics:
  - name: backlog
    provider: gcp
    query: { metricType: ${BACKLOG}, resourceType: pubsub_subscription, selectorLabels: { subscription: resource.labels.subscription_id } }
`;
  const get = async (b: Bridge, ns: string) => {
    const res = await b.app.request(`/apis/external.metrics.k8s.io/v1beta1/namespaces/${ns}/backlog?labelSelector=subscription%3D${ns}-jobs`);
    return { status: res.status, body: (await res.json()) as any };
  };

  it("over gRPC (the official client): each namespace's call carries its own service account's token", async () => {
    const env = { GOOGLE_SERVICE_ACCOUNT_JSON: key.text };
    const b = buildBridge(text(grpc.endpoint), "grpc.yaml", { env, now: Date.now, transports: { "gcp-monitoring": createGrpcTransportFactory({ rootCertificates: grpc.caCert }) } }, { log: () => {} });
    const before = grpc.callers.length;
    const [a, bb] = await Promise.all([get(b, "team-a"), get(b, "team-b")]);
    if (a.status !== 200 || bb.status !== 200) throw new Error(JSON.stringify([a.body, bb.body]));
    expect([a.body.items[0].value, bb.body.items[0].value]).toEqual(["5", "7"]);
    expect(grpc.callers.slice(before).map((c) => c["iss"]).sort()).toEqual([SA("team-a"), SA("team-b")]);
  });

  it("over REST: each namespace's call carries its own service account's token", async () => {
    const b = buildBridge(text(rest.endpoint), "rest.yaml", { env: { GOOGLE_SERVICE_ACCOUNT_JSON: key.text }, now: Date.now }, { log: () => {} });
    const before = iam.calls.length;
    const [a, bb] = await Promise.all([get(b, "team-a"), get(b, "team-b")]);
    if (a.status !== 200 || bb.status !== 200) throw new Error(JSON.stringify([a.body, bb.body]));
    expect([a.body.items[0].value, bb.body.items[0].value]).toEqual(["5", "7"]);
    expect(iam.calls.slice(before).map((c) => c.target).sort()).toEqual([SA("team-a"), SA("team-b")]);
  });
});

describe("credentials.impersonate config validation", () => {
  const refusal = (provider: string) => {
    try {
      loadConfig(`${OPEN_CONFIG_HEAD}providers:\n  p:\n${provider}\nmetrics:\n  - { name: m, provider: p, query: ${provider.includes("gmp") ? "{ series: m }" : "{ metricType: custom.googleapis.com/m }"} }\n`, "bridge.yaml");
    } catch (err) {
      return String((err as Error).message);
    }
    return "accepted";
  };
  const gmp = (impersonate: string) => `    type: prometheus\n    flavour: gmp\n    project: ${PROJECT}\n    credentials: { source: default, impersonate: ${impersonate} }`;

  it.each([
    [`{ serviceAccount: "emb-{namespace}@${PROJECT}.iam.gserviceaccount.com" }`, "accepted"],
    [`{ serviceAccount: "metrics@${PROJECT}.iam.gserviceaccount.com" }`, "must contain {namespace}"],
    [`{ serviceAccount: "emb-{ns}@${PROJECT}.iam.gserviceaccount.com" }`, "unknown placeholder {ns}: the only placeholder is {namespace}"],
    [`{ serviceAccount: "emb-{namespace}@example.com" }`, "must be a service account email"],
    [`{ serviceAccounts: { team-a: "not-an-email" } }`, "must be a service account email"],
    [`{ serviceAccounts: { Team: "${SA("team-a")}" } }`, `"Team" is not`],
    [`{ lifetimeSeconds: 600 }`, "set exactly one of serviceAccount"],
  ])("gmp: %s", (impersonate, message) => {
    expect(refusal(gmp(impersonate))).toContain(message);
  });

  it("gcp-monitoring takes the same impersonate", () => {
    expect(refusal(`    type: gcp-monitoring\n    project: ${PROJECT}\n    credentials: { source: default, impersonate: { serviceAccount: "emb-{namespace}@${PROJECT}.iam.gserviceaccount.com" } }`)).toBe("accepted");
  });
});
