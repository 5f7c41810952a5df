/**
 * Self-registration: create or update APIService
 * `v1beta1.external.metrics.k8s.io` so the aggregator sends the group to this
 * proxy's Service and trusts its certificate (`spec.caBundle`, PEM; base64 on
 * the wire as a Go `[]byte`). kube-aggregator `pkg/apis/apiregistration/v1/types.go`.
 *
 * Only one APIService can own the group per cluster; registration takes it
 * over (an existing object is updated, keeping its metadata), which is how
 * the proxy replaces an adapter that registered itself before — that adapter
 * keeps running and is reached as the pass-through backend.
 */
import { GROUP, VERSION } from "../k8s/types.ts";
import { apiDeadline, apiStatus, type APIService, type APIServiceSpec, type KubeClient } from "./kube.ts";

/** Deadline of each APIService read or write, ms (as the Secret's, rotation.ts). */
export const REGISTRATION_DEADLINE_MS = 5000;

/** The APIService name. */
export const API_SERVICE_NAME = `${VERSION}.${GROUP}`;

/** What the APIService should say. */
export interface RegistrationTarget {
  service: { namespace: string; name: string; port: number };
  /** PEM bundle the aggregator verifies the proxy's certificate with */
  caPem: string;
  groupPriorityMinimum?: number;
  versionPriority?: number;
}

/** The desired `spec`. */
export function desiredSpec(target: RegistrationTarget): APIServiceSpec & { service: { namespace: string; name: string; port: number } } {
  return {
    group: GROUP,
    version: VERSION,
    service: { namespace: target.service.namespace, name: target.service.name, port: target.service.port },
    caBundle: Buffer.from(target.caPem).toString("base64"),
    insecureSkipTLSVerify: false,
    groupPriorityMinimum: target.groupPriorityMinimum ?? 100,
    versionPriority: target.versionPriority ?? 100,
  };
}

/**
 * Create the APIService, or update it when its service, caBundle or
 * verification setting differ. Retries a write conflict up to 3 times. Each
 * call has a deadline of {@link REGISTRATION_DEADLINE_MS}.
 *
 * @returns what was done
 * @throws ApiError (kube.ts) when the API refuses (e.g. RBAC);
 *   a `TimeoutError` DOMException when a call passes its deadline
 */
export async function registerAPIService(kc: KubeClient, target: RegistrationTarget): Promise<"created" | "updated" | "unchanged"> {
  const collection = "/apis/apiregistration.k8s.io/v1/apiservices";
  const path = `${collection}/${API_SERVICE_NAME}`;
  const spec = desiredSpec(target);
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
            metadata: { name: API_SERVICE_NAME, labels: { "app.kubernetes.io/name": "external-metrics-bridge-proxy" } },
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
        s?.group === GROUP &&
        s?.version === VERSION;
      if (same) return "unchanged";
      await kc.replace<APIService>(
        path,
        { ...current, spec: { ...s, ...spec, groupPriorityMinimum: s?.groupPriorityMinimum ?? spec.groupPriorityMinimum, versionPriority: s?.versionPriority ?? spec.versionPriority } },
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
  metadata: { name: string; resourceVersion?: string; [k: string]: unknown };
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
 * absent. Retries a write conflict up to 3 times; each call has a deadline of
 * {@link REGISTRATION_DEADLINE_MS}.
 *
 * @returns what was done
 * @throws ApiError (kube.ts) when the API refuses (e.g. RBAC); a
 *   `TimeoutError` DOMException when a call passes its deadline
 */
export async function registerWebhookCABundle(
  kc: KubeClient,
  target: Pick<RegistrationTarget, "service" | "caPem">,
  name = WEBHOOK_CONFIGURATION_NAME,
): Promise<"updated" | "unchanged" | "absent"> {
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
    const next = { ...current, webhooks: webhooks.map((w) => (ours(w) ? { ...w, clientConfig: { ...w.clientConfig, caBundle } } : w)) };
    try {
      await kc.replace(path, next as WebhookConfiguration & { metadata: { name: string } }, apiDeadline(REGISTRATION_DEADLINE_MS));
      return "updated";
    } catch (err) {
      if (apiStatus(err) === 409 && attempt < 3) continue;
      throw err;
    }
  }
}
