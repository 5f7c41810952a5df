/**
 * The server roles of `npm run bench:custom` (test/bench/custom-pods.ts):
 * a custom.metrics.k8s.io Pods read over a Deployment's pods, each role in
 * its own forked process (test/bench/servers.ts `spawnChild`, which hands
 * every role named `custom-*` to {@link startCustomRole}). Everything listens
 * on 127.0.0.1 only.
 *
 * - `custom-prometheus` {pods}: the Prometheus API fake
 *   (test/fakes/prometheus-api.ts) answering the Pods rule's one query,
 *   `sum by (namespace, pod) (rate(emb_http_requests_total{namespace="…",pod=~"a|b|…"}[2m]))`,
 *   with one sample per pod the matcher names (of the `pods` pod names it
 *   holds, in whichever namespace the query names);
 *   counts those queries (`valueQueries`) and any other request (`otherRequests`).
 * - `custom-bridge` {prometheusUrl, signingKeys, namespaces}: the Node bridge
 *   (functions/node.ts) with {@link customBridgeConfigText}: the Pods rule on
 *   the fake, its cache off, a policy per namespace allowing the read through
 *   `resources: [pods]`; signed reads only.
 * - `custom-proxy` {bridgeUrl, authData, pods, namespaces}: the proxy
 *   (shared/proxy, via test/proxy/proxy.harness.ts) with `customMetrics` on
 *   and its cache off, against the fake Kubernetes API holding, in each
 *   namespace {@link benchNamespace}(0…namespaces-1), {@link deploymentPods}
 *   (metadata served as `PartialObjectMetadataList`,
 *   test/proxy/custom-objects.fake.ts) plus a few pods of another app, and
 *   answering the HPA controller's SubjectAccessReview for
 *   custom.metrics.k8s.io pods as allowed.
 * - `custom-baseline` {certPem, keyPem, caPem, body}: bare Node + Hono over
 *   HTTPS with the proxy's TLS setup (test/bench/trivial.ts `serveHttps`)
 *   answering `body` (a fixed MetricValueList text, the proxied answer's size)
 *   on the custom Pods path.
 */
import { Hono } from "hono";
import { closeServer } from "../helpers/http.ts";
import { HPA_USER, NAMESPACE, type Started } from "./servers.ts";
import { serveHttps } from "./trivial.ts";

/** The Pods metric the benchmark reads. */
export const CUSTOM_METRIC = "http_requests";
/** The label selector of the Deployment's pods (the HPA's `scaleTargetRef` selector). */
export const DEPLOYMENT_SELECTOR = "app=web";
/** Namespace `i` of the benchmark (`team-bench-<i>`): each holds the same Deployment, so reads of different namespaces are distinct reads. */
export function benchNamespace(i: number): string {
  return `${NAMESPACE}-${i}`;
}

/** The HPA controller's path of a Pods read in `namespace` (v1beta2, `pods/%2A`, the Deployment's selector). */
export function podsPath(namespace: string): string {
  return `/apis/custom.metrics.k8s.io/v1beta2/namespaces/${namespace}/pods/%2A/${CUSTOM_METRIC}?labelSelector=${encodeURIComponent(DEPLOYMENT_SELECTOR)}`;
}
/** Pods of another app in each namespace, which the selector must leave out. */
export const OTHER_PODS = 20;

/** Kubernetes' pod-name suffix alphabet (apimachinery `util/rand.String`: no vowels, no 0, 1, 3). */
const ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

/** The name of pod `i` of a ReplicaSet `<deployment>-<hash>`: `<deployment>-<hash>-<5 chars>`, as the ReplicaSet controller makes them. */
export function podName(deployment: string, hash: string, i: number): string {
  let suffix = "";
  for (let n = i, k = 0; k < 5; k++, n = Math.floor(n / ALPHABET.length)) suffix += ALPHABET[n % ALPHABET.length];
  return `${deployment}-${hash}-${suffix}`;
}

/** The `count` pods of Deployment `web` (labels `app=web`, `pod-template-hash`). */
export function deploymentPods(count: number): { name: string; labels: Record<string, string> }[] {
  return Array.from({ length: count }, (_, i) => ({ name: podName("web", "5d8c7b9f6c", i), labels: { app: "web", "pod-template-hash": "5d8c7b9f6c" } }));
}

/**
 * The bridge's config: one Pods rule (`describes: pods`) on the Prometheus
 * API at `prometheusUrl`, a template rule, so a read is ONE query; the
 * cache off (`cacheTTLSeconds: 0`: every read is a backend query; identical
 * loads in flight at the same moment are still shared); a policy in each
 * of the `namespaces` benchmark namespaces allowing the metric through
 * `resources: [pods]` (contract C1: a custom read needs a rule naming its
 * resource).
 */
export function customBridgeConfigText(prometheusUrl: string, namespaces: number): string {
  const policies = Array.from(
    { length: namespaces },
    (_, i) => `---
apiVersion: external-metrics-bridge.io/v1alpha1
kind: ExternalMetricPolicy
metadata: { name: web-pods, namespace: ${benchNamespace(i)} }
spec:
  rules:
    - { metric: ${CUSTOM_METRIC}, resources: [pods], selector: {} }
    - { metric: ".*", resources: [pods, external], deny: true }
  defaultAction: Deny
`,
  );
  return `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
defaults: { maxAgeSeconds: 300, cacheTTLSeconds: 0 }
providers:
  prom: { type: prometheus, url: ${prometheusUrl}, timeoutSeconds: 3, maxBatchSize: 1000 }
metrics:
  - name: ${CUSTOM_METRIC}
    provider: prom
    describes: { resource: pods, objectLabel: pod, namespaceLabel: namespace }
    query: { template: "rate(emb_http_requests_total{<<.LabelMatchers>>}[2m])", selectorLabels: { namespace: namespace, pod: pod } }
policy:
  defaultAction: Deny
  localIdentity: { user: "${HPA_USER}", groups: [system:serviceaccounts, system:serviceaccounts:kube-system, system:authenticated] }
${policies.join("")}`;
}

/** The query shape the Pods rule sends (see the module doc); groups: by-labels, matchers. */
const POD_QUERY = /^sum by \(([^)]*)\) \(rate\(emb_http_requests_total\{(.*)\}\[2m\]\)\)$/s;

/** The values of matcher `name` in a PromQL matcher list: `name="v"` or `name=~"a|b"` (RE2 escapes removed); undefined when absent. */
function matcherValues(matchers: string, name: string): string[] | undefined {
  const m = new RegExp(`(?:^|,)${name}(=~|=)"((?:[^"\\\\]|\\\\.)*)"`).exec(matchers);
  if (m === null) return undefined;
  const text = JSON.parse(`"${m[2]!}"`) as string;
  return m[1] === "=" ? [text] : text.split("|").map((v) => v.replace(/\\(.)/g, "$1"));
}

/**
 * Start a `custom-*` role in this process (see the module doc for each
 * role's options).
 *
 * @throws Error on an unknown role or when the server cannot start
 */
export async function startCustomRole(role: string, options: Record<string, unknown>): Promise<Started> {
  switch (role) {
    case "custom-prometheus": {
      const { startFakePrometheus, vector } = await import("../fakes/prometheus-api.ts");
      const pods = new Map(deploymentPods(options["pods"] as number).map((p, i) => [p.name, i]));
      const prom = await startFakePrometheus(() => Date.now());
      const counts = { valueQueries: 0, otherRequests: 0, samplesAnswered: 0 };
      prom.respond = (q) => {
        prom.requests.length = 0; // the fake records every request; this one runs for minutes
        const m = POD_QUERY.exec(q.query);
        const names = m ? matcherValues(m[2]!, "pod") : undefined;
        const namespace = m ? matcherValues(m[2]!, "namespace") : undefined;
        if (!m || m[1] !== "namespace, pod" || names === undefined || namespace?.length !== 1) {
          counts.otherRequests++;
          return { status: 400, body: { status: "error", errorType: "bad_data", error: `bench fake: unexpected query ${q.query.slice(0, 200)}` } };
        }
        counts.valueQueries++;
        const now = Date.now() / 1000;
        const result = names.filter((n) => pods.has(n)).map((pod) => ({ metric: { namespace: namespace[0]!, pod }, value: [now, String(1 + (pods.get(pod)! % 10) / 4)] as [number, string] }));
        counts.samplesAnswered += result.length;
        return { body: vector(result) };
      };
      return { url: prom.url, stats: () => ({ ...counts }), close: () => prom.close() };
    }
    case "custom-bridge": {
      const { startNodeServer } = await import("../../functions/node.ts");
      const { loadConfig } = await import("../../shared/config/config.ts");
      const env: Record<string, string | undefined> = { ...process.env, BRIDGE_SIGNING_KEYS: options["signingKeys"] as string };
      const text = customBridgeConfigText(options["prometheusUrl"] as string, options["namespaces"] as number);
      const server = await startNodeServer({ config: loadConfig(text, "bench-custom.yaml").config, port: 0, env });
      return { url: server.url, close: () => server.close() };
    }
    case "custom-proxy": {
      const { startHarness, KEYS } = await import("../proxy/proxy.harness.ts");
      const { startFakeKubeApiServer } = await import("../fakes/kube-apiserver.ts");
      const { customObjectsFake } = await import("../proxy/custom-objects.fake.ts");
      const { kubeConfigFor } = await import("../../shared/proxy/kube/client.ts");
      const { jsonLogger } = await import("../../shared/proxy/log.ts");
      const fake = await startFakeKubeApiServer();
      const objects = customObjectsFake();
      for (let n = 0; n < (options["namespaces"] as number); n++) {
        const namespace = benchNamespace(n);
        for (const p of deploymentPods(options["pods"] as number)) objects.pods.set(`${namespace}/${p.name}`, p.labels);
        for (let i = 0; i < OTHER_PODS; i++) objects.pods.set(`${namespace}/${podName("db", "6f4b8c9d7e", i)}`, { app: "db" });
      }
      fake.extraRoutes = objects.route;
      // RBAC as a cluster would have it: the HPA controller may get custom.metrics.k8s.io pods metrics.
      fake.authorize = (spec) => ({
        allowed: spec.user === HPA_USER && spec.resourceAttributes?.group === "custom.metrics.k8s.io" && spec.resourceAttributes.resource === "pods" && spec.resourceAttributes.verb === "get",
      });
      const proxyConfig = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: ProxyConfig
backends:
  bridge: { url: "${options["bridgeUrl"] as string}", timeoutSeconds: 3 }
routes:
  - { metric: "${CUSTOM_METRIC}", backend: bridge }
cache: { ttlSeconds: 0 }
discovery: { ttlSeconds: 10 }
customMetrics: { enabled: true }
`;
      const h = await startHarness({
        fake,
        proxyConfig,
        authData: options["authData"] as Record<string, string>,
        keys: KEYS,
        extra: { log: jsonLogger(), kube: kubeConfigFor(fake.url, fake.caPem, fake.token) },
      });
      return {
        url: h.proxy.url,
        info: { caPem: h.serving.caPem ?? "" },
        stats: () => ({
          subjectAccessReviews: h.fake.reviews.subjectAccessReviews.length,
          sarCacheHits: h.proxy.authorizer.stats.cacheHits,
          podLists: objects.podRequests.filter((r) => !r.watch).length,
          podWatches: objects.podRequests.filter((r) => r.watch).length,
        }),
        close: async () => {
          await h.close();
          await fake.close();
        },
      };
    }
    case "custom-baseline": {
      const body = options["body"] as string;
      const app = new Hono();
      app.get(`/apis/custom.metrics.k8s.io/v1beta2/namespaces/:namespace/pods/:name/:metric`, (c) => c.body(body, 200, { "Content-Type": "application/json", "Cache-Control": "no-store" }));
      const { server, url } = await serveHttps(app, options["certPem"] as string, options["keyPem"] as string);
      return { url, info: { caPem: options["caPem"] as string }, close: () => closeServer(server) };
    }
    default:
      throw new Error(`unknown role ${role}`);
  }
}
