/**
 * Self-registration: create or update APIService
 * `v1beta1.external.metrics.k8s.io` (and, with ProxyConfig
 * `customMetrics.enabled`, `v1beta2.custom.metrics.k8s.io` and
 * `v1beta1.custom.metrics.k8s.io`: {@link apiServicesFor}) so the aggregator sends the group to this
 * proxy's Service and trusts its certificate (`spec.caBundle`, PEM; base64 on
 * the wire as a Go `[]byte`). kube-aggregator `pkg/apis/apiregistration/v1/types.go`.
 *
 * Only one APIService can own the group per cluster; registration takes it
 * over (an existing object is updated, keeping its metadata), which is how
 * the proxy replaces an adapter that registered itself before — that adapter
 * keeps running and is reached as the pass-through backend.
 *
 * Several replicas: with a `--tls-secret` the Lease holder alone writes
 * (server.ts `isLeader`). Without a Lease (mounted files, chart `tls.mode
 * existing`) every replica registers, and while a rotated Secret reaches the
 * pods one by one (the kubelet updates each Secret volume on its own sync,
 * up to about a minute apart) their CA bundles differ: each re-assertion
 * (every 60 s, and on every reload) would put its own bundle back, so the
 * APIService's caBundle — and, during a rollout that changes the Service,
 * its service — flipped between replicas, and the aggregator failed the
 * handshakes of the other half. One replica also raced itself: a
 * registration started before a reload could finish after the reload's and
 * write the old bundle back until the next re-assertion. Hence
 * compare-and-update: the writer records in annotations
 * ({@link REGISTERED_SPEC_ANNOTATION}, {@link MATERIAL_SINCE_ANNOTATION})
 * what it wrote and since when its material was current; a registration
 * whose material is older than the recorded one does not overwrite it
 * (`superseded`), while anything else — a missing annotation, or a spec
 * changed by someone else since (the recorded hash no longer matches) — is
 * re-asserted as before. Writes carry the `resourceVersion` read (a 409 is
 * read again and decided again); nothing is written when the spec is
 * already the desired one. Times are the replicas' clocks, ms; node clocks
 * agree far better than a Secret update takes to reach every pod.
 */
import { createHash } from "node:crypto";
import { GROUP, VERSION } from "../../k8s/types.ts";
import { CUSTOM_GROUP } from "../../k8s/custom-types.ts";
import { apiDeadline, apiStatus, type APIService, type APIServiceSpec, type KubeClient } from "../kube/client.ts";

/** Deadline of each APIService read or write, ms (as the Secret's, rotation.ts). */
export const REGISTRATION_DEADLINE_MS = 5000;

/** The APIService name of the External Metrics API. */
export const API_SERVICE_NAME = `${VERSION}.${GROUP}`;

/** Which APIService: group, version and priorities (kube-aggregator `APIServiceSpec`). */
export interface APIServiceId {
  group: string;
  version: string;
  groupPriorityMinimum: number;
  versionPriority: number;
}

/** `v1beta1.external.metrics.k8s.io` (priorities 100/100, as before). */
export const EXTERNAL_API_SERVICE: APIServiceId = Object.freeze({ group: GROUP, version: VERSION, groupPriorityMinimum: 100, versionPriority: 100 });
/**
 * `v1beta2.custom.metrics.k8s.io` and `v1beta1.custom.metrics.k8s.io`, with
 * the priorities prometheus-adapter's chart gives them (groupPriorityMinimum
 * 100; versionPriority 200 for v1beta2, the preferred one, and 100 for v1beta1).
 */
export const CUSTOM_API_SERVICES: readonly APIServiceId[] = Object.freeze([
  Object.freeze({ group: CUSTOM_GROUP, version: "v1beta2", groupPriorityMinimum: 100, versionPriority: 200 }),
  Object.freeze({ group: CUSTOM_GROUP, version: "v1beta1", groupPriorityMinimum: 100, versionPriority: 100 }),
]);

/** The APIServices the proxy registers: External always, the custom ones when ProxyConfig `customMetrics.enabled`. */
export function apiServicesFor(customMetrics: boolean): readonly APIServiceId[] {
  return customMetrics ? [EXTERNAL_API_SERVICE, ...CUSTOM_API_SERVICES] : [EXTERNAL_API_SERVICE];
}

/** Annotation: hash of the spec fields the proxy wrote last (service, caBundle, insecureSkipTLSVerify), to tell a foreign edit from a peer's write. */
export const REGISTERED_SPEC_ANNOTATION = "external-metrics-bridge.io/registered-spec";
/** Annotation: since when (RFC 3339, ms) the material the last writer registered was current in that replica. */
export const MATERIAL_SINCE_ANNOTATION = "external-metrics-bridge.io/material-since";

/**
 * How long a newer peer's write is respected, ms, counted from when that
 * peer's material became current: long enough for a rotated Secret to reach
 * every pod (the kubelet's sync period plus its cache TTL, about a minute or
 * two); past it, a replica whose material still differs is not catching up
 * (e.g. the newer replica is gone) and re-asserts its own.
 */
export const SUPERSEDE_GRACE_MS = 5 * 60_000;

/** What the APIService should say. */
export interface RegistrationTarget {
  service: { namespace: string; name: string; port: number };
  /** PEM bundle the aggregator verifies the proxy's certificate with */
  caPem: string;
  /**
   * since when this replica's `caPem` and service are current, ms since the
   * epoch (its start, or its last serving-certificate reload that changed
   * the CA). Given: an APIService written by a replica with newer material is
   * not overwritten (`superseded`); absent: always re-asserted.
   */
  since?: number;
  groupPriorityMinimum?: number;
  versionPriority?: number;
  /** the APIService's group (default external.metrics.k8s.io) */
  group?: string;
  /** the APIService's version (default v1beta1); the object is named `{version}.{group}` */
  version?: string;
}

/** The desired `spec`. */
export function desiredSpec(target: RegistrationTarget): APIServiceSpec & { service: { namespace: string; name: string; port: number } } {
  return {
    group: target.group ?? GROUP,
    version: target.version ?? VERSION,
    service: { namespace: target.service.namespace, name: target.service.name, port: target.service.port },
    caBundle: Buffer.from(target.caPem).toString("base64"),
    insecureSkipTLSVerify: false,
    groupPriorityMinimum: target.groupPriorityMinimum ?? 100,
    versionPriority: target.versionPriority ?? 100,
  };
}

/** The hash recorded in {@link REGISTERED_SPEC_ANNOTATION}: sha256 of the fields the proxy sets and compares, hex, first 32 digits. */
function specHash(spec: APIServiceSpec | undefined): string {
  const fields = [spec?.service?.namespace, spec?.service?.name, spec?.service?.port ?? 443, spec?.caBundle, spec?.insecureSkipTLSVerify === true];
  return createHash("sha256").update(JSON.stringify(fields)).digest("hex").slice(0, 32);
}

/**
 * Whether an object was written by a replica whose material is newer than
 * `since` (less than {@link SUPERSEDE_GRACE_MS} ago), and is untouched
 * since: its recorded hash (`annotations`) matches `currentHash`, the hash
 * of what it holds now, and its recorded time is later.
 */
function newerPeerWrite(annotations: Record<string, string> | undefined, currentHash: string, since: number | undefined, nowMs: number): boolean {
  if (since === undefined) return false;
  const recorded = Date.parse(annotations?.[MATERIAL_SINCE_ANNOTATION] ?? "");
  return (
    annotations?.[REGISTERED_SPEC_ANNOTATION] === currentHash &&
    Number.isFinite(recorded) &&
    recorded > since &&
    nowMs - recorded < SUPERSEDE_GRACE_MS
  );
}

/** `current` annotations with `ours` recorded; without a time of ours, a recorded time is dropped (it no longer describes what is written). */
function recorded(current: Record<string, string> | undefined, ours: Record<string, string>): Record<string, string> {
  const { [MATERIAL_SINCE_ANNOTATION]: _, ...kept } = current ?? {};
  return { ...kept, ...ours };
}

/** The annotations a write records: `hash` and, when known, since when the writer's material is current. */
function annotationsFor(hash: string, since: number | undefined): Record<string, string> {
  return { [REGISTERED_SPEC_ANNOTATION]: hash, ...(since !== undefined ? { [MATERIAL_SINCE_ANNOTATION]: new Date(since).toISOString() } : {}) };
}

/**
 * Create the APIService, or update it when its service, caBundle or
 * verification setting differ — unless a replica with newer material wrote
 * it (`target.since`) less than {@link SUPERSEDE_GRACE_MS} ago (see the
 * module's comment). Writes record the written
 * spec's hash and `target.since` in annotations. Retries a write conflict up
 * to 3 times, deciding again on what it reads. Each call has a deadline of
 * {@link REGISTRATION_DEADLINE_MS}.
 *
 * @param options.now clock, ms since the epoch (default `Date.now`; the clock of `target.since`)
 * @returns what was done: `superseded` = left as a newer replica wrote it
 * @throws ApiError (kube/client.ts) when the API refuses (e.g. RBAC);
 *   a `TimeoutError` DOMException when a call passes its deadline
 */
export async function registerAPIService(
  kc: KubeClient,
  target: RegistrationTarget,
  options: { now?: () => number } = {},
): Promise<"created" | "updated" | "unchanged" | "superseded"> {
  const collection = "/apis/apiregistration.k8s.io/v1/apiservices";
  const spec = desiredSpec(target);
  const name = `${spec.version}.${spec.group}`;
  const path = `${collection}/${name}`;
  const annotations = annotationsFor(specHash(spec), target.since);
  for (let attempt = 0; ; attempt++) {
    let current: APIService | undefined;
    try {
      current = await kc.get<APIService>(path, apiDeadline(REGISTRATION_DEADLINE_MS));
    } catch (err) {
      if (apiStatus(err) !== 404) throw err;
    }
    try {
      if (current === undefined) {
        await kc.create<APIService>(
          collection,
          {
            apiVersion: "apiregistration.k8s.io/v1",
            kind: "APIService",
            metadata: { name, labels: { "app.kubernetes.io/name": "external-metrics-bridge-proxy" }, annotations },
            spec,
          },
          apiDeadline(REGISTRATION_DEADLINE_MS),
        );
        return "created";
      }
      const s = current.spec;
      const same =
        s?.service?.namespace === spec.service.namespace &&
        s?.service?.name === spec.service.name &&
        (s?.service?.port ?? 443) === spec.service.port &&
        s?.caBundle === spec.caBundle &&
        s?.insecureSkipTLSVerify !== true &&
        s?.group === spec.group &&
        s?.version === spec.version;
      if (same) return "unchanged";
      if (newerPeerWrite(current.metadata?.annotations, specHash(current.spec), target.since, (options.now ?? Date.now)())) return "superseded";
      // Without a time of ours, the recorded one is dropped: it no longer describes what is written.
      await kc.replace<APIService>(
        path,
        {
          ...current,
          metadata: { ...current.metadata, name, annotations: recorded(current.metadata?.annotations, annotations) },
          spec: { ...s, ...spec, groupPriorityMinimum: s?.groupPriorityMinimum ?? spec.groupPriorityMinimum, versionPriority: s?.versionPriority ?? spec.versionPriority },
        },
        apiDeadline(REGISTRATION_DEADLINE_MS),
      );
      return "updated";
    } catch (err) {
      if ((apiStatus(err) === 409 || apiStatus(err) === 404) && attempt < 3) continue;
      throw err;
    }
  }
}

/** The ValidatingWebhookConfiguration of the proxy's admission webhook (the chart's and the plain manifests' name). */
export const WEBHOOK_CONFIGURATION_NAME = "external-metrics-bridge";

/** A ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1), the fields read here. */
interface WebhookConfiguration {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string>; [k: string]: unknown };
  webhooks?: { name: string; clientConfig?: { caBundle?: string; service?: { namespace?: string; name?: string } }; [k: string]: unknown }[];
}

/**
 * Write the proxy's CA bundle into the webhooks of ValidatingWebhookConfiguration
 * {@link WEBHOOK_CONFIGURATION_NAME} whose `clientConfig.service` is the
 * proxy's Service — the same bundle as the APIService's, so kube-apiserver
 * verifies the webhook's serving certificate as the aggregator does
 * (`clientConfig.caBundle`, PEM, base64 on the wire:
 * k8s.io/api `admissionregistration/v1/types.go` WebhookClientConfig).
 * Only the caBundle of matching webhooks changes; everything else is kept.
 * An absent configuration (the chart's admission.enabled false) is left
 * absent. As the APIService's, compare-and-update: a configuration a replica
 * with newer material (`target.since`) wrote less than
 * {@link SUPERSEDE_GRACE_MS} ago is left (`superseded`), a foreign edit is
 * re-asserted; writes record the hash of our webhooks' bundles and
 * `target.since` in annotations. Retries a write conflict up to 3 times;
 * each call has a deadline of {@link REGISTRATION_DEADLINE_MS}.
 *
 * @param options.now clock, ms since the epoch (default `Date.now`; the clock of `target.since`)
 * @returns what was done
 * @throws ApiError (kube/client.ts) when the API refuses (e.g. RBAC); a
 *   `TimeoutError` DOMException when a call passes its deadline
 */
export async function registerWebhookCABundle(
  kc: KubeClient,
  target: Pick<RegistrationTarget, "service" | "caPem" | "since">,
  name = WEBHOOK_CONFIGURATION_NAME,
  options: { now?: () => number } = {},
): Promise<"updated" | "unchanged" | "absent" | "superseded"> {
  const path = `/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${name}`;
  const caBundle = Buffer.from(target.caPem).toString("base64");
  for (let attempt = 0; ; attempt++) {
    let current: WebhookConfiguration;
    try {
      current = await kc.get<WebhookConfiguration & { metadata: { name: string } }>(path, apiDeadline(REGISTRATION_DEADLINE_MS));
    } catch (err) {
      if (apiStatus(err) === 404) return "absent";
      throw err;
    }
    const ours = (w: NonNullable<WebhookConfiguration["webhooks"]>[number]) =>
      w.clientConfig?.service?.namespace === target.service.namespace && w.clientConfig?.service?.name === target.service.name;
    const webhooks = current.webhooks ?? [];
    if (webhooks.every((w) => !ours(w) || w.clientConfig?.caBundle === caBundle)) return "unchanged";
    const bundlesHash = (list: typeof webhooks) =>
      createHash("sha256").update(JSON.stringify(list.filter(ours).map((w) => w.clientConfig?.caBundle ?? null))).digest("hex").slice(0, 32);
    if (newerPeerWrite(current.metadata.annotations, bundlesHash(webhooks), target.since, (options.now ?? Date.now)())) return "superseded";
    const nextWebhooks = webhooks.map((w) => (ours(w) ? { ...w, clientConfig: { ...w.clientConfig, caBundle } } : w));
    const next = {
      ...current,
      metadata: { ...current.metadata, annotations: recorded(current.metadata.annotations, annotationsFor(bundlesHash(nextWebhooks), target.since)) },
      webhooks: nextWebhooks,
    };
    try {
      await kc.replace(path, next as WebhookConfiguration & { metadata: { name: string } }, apiDeadline(REGISTRATION_DEADLINE_MS));
      return "updated";
    } catch (err) {
      if (apiStatus(err) === 409 && attempt < 3) continue;
      throw err;
    }
  }
}
