/**
 * The attacking side of test/bench/hostile.ts, run in its own worker thread
 * (as a real attacker is another process: its TLS and JSON work is not the
 * proxy's): 8 connections posting hostile AdmissionReviews without
 * credentials, back to back, until told to stop; posts the count answered.
 *
 * workerData: `{ url, caPem }` of the proxy.
 */
import https from "node:https";
import { parentPort, workerData } from "node:worker_threads";

const { url, caPem } = workerData as { url: string; caPem: string };
const CLASSES = (
  "L Lu Ll Lt Lm Lo M Mn Mc Me N Nd Nl No P Pc Pd Ps Pe Pi Pf Po S Sm Sc Sk So Z Zs Zl Zp C Cc Cf Co Cs " +
  "Greek Latin Cyrillic Han Arabic Hebrew Armenian Georgian Hangul Hiragana Katakana Thai Devanagari Bengali Tamil Ethiopic Cherokee Mongolian Tibetan Khmer Lao Myanmar Sinhala Runic"
).split(" ");
const pattern = (i: number) => `(?:${CLASSES.map((_, k) => `\\p{${CLASSES[(k + i) % CLASSES.length]}}`).join("|")}){1000}`;
const policy = (name: string, namespace: string) => ({
  apiVersion: "external-metrics-bridge.io/v1alpha1",
  kind: "ExternalMetricPolicy" as const,
  metadata: { name, namespace },
  spec: { defaultAction: "Deny", rules: Array.from({ length: 96 }, (_, i) => ({ metric: pattern(i), deny: true })) },
});
const hpa = {
  apiVersion: "autoscaling/v2",
  kind: "HorizontalPodAutoscaler",
  metadata: { name: "huge", namespace: "team-h" },
  spec: {
    scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "w" },
    maxReplicas: 5,
    metrics: Array.from({ length: 18_000 }, (_, i) => ({ type: "External", external: { metric: { name: `queue_${i}`, selector: { matchLabels: { q: `${i}` } } }, target: { type: "Value", value: "5" } } })),
  },
};
const review = (uid: string, kind: object, object: { metadata: { name: string; namespace: string } }) =>
  JSON.stringify({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request: { uid, kind, resource: {}, operation: "CREATE", namespace: object.metadata.namespace, name: object.metadata.name, object } });
const POLICY_REVIEW = review("p", { group: "external-metrics-bridge.io", version: "v1alpha1", kind: "ExternalMetricPolicy" }, policy("hostile", "team-h"));
const HPA_REVIEW = review("h", { group: "autoscaling", version: "v2", kind: "HorizontalPodAutoscaler" }, hpa);

function post(path: string, body: string): Promise<number> {
  return new Promise((resolve) => {
    const req = https.request(`${url}${path}`, { method: "POST", ca: caPem, agent: false, headers: { "Content-Type": "application/json" } }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", () => resolve(0));
    req.end(body);
  });
}

let attacking = true;
let reviews = 0;
parentPort!.on("message", () => (attacking = false));
await Promise.all(
  Array.from({ length: 8 }, async (_, k) => {
    while (attacking) {
      await post(k % 2 === 0 ? "/admission/policies" : "/admission/hpa", k % 2 === 0 ? POLICY_REVIEW : HPA_REVIEW);
      reviews++;
    }
  }),
);
parentPort!.postMessage(reviews);
