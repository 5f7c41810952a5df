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
