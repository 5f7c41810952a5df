/**
 * `--kubeconfig FILE [--context NAME]`: the policy objects of a live
 * cluster, listed with the proxy's own Kubernetes client
 * (`shared/proxy/kube/`, read-only: two paginated lists, {@link listAll})
 * and compiled by
 * `compilePolicyObject` (`shared/policy/objects.ts`), the path the
 * in-cluster proxy uses. Messages name objects as `<kind>/<namespace>/<name>`.
 */
import { ApiError, apiDeadline, KubeClient, kubeConfigFromFile, type KubeObject } from "../../shared/proxy/kube/client.ts";
import { LIST_PAGE_SIZE, listAllPages } from "../../shared/proxy/kube/informer.ts";
import type { ConfigIssue } from "../../shared/config/yaml.ts";
import type { CompiledPolicy } from "../../shared/policy/evaluate.ts";
import { POLICY_API_VERSION } from "../../shared/policy/schema.ts";
import type { ExtraPolicies } from "./workspace.ts";

/** The two kinds and their collection paths (all namespaces), `/apis/external-metrics-bridge.io/v1alpha1/…`. */
export const POLICY_COLLECTIONS = [
  { kind: "ClusterExternalMetricPolicy", path: `/apis/${POLICY_API_VERSION}/clusterexternalmetricpolicies` },
  { kind: "ExternalMetricPolicy", path: `/apis/${POLICY_API_VERSION}/externalmetricpolicies` },
] as const;

/** Deadline of each list call (one page), ms. */
export const LIST_DEADLINE_MS = 10_000;

/**
 * Every item of a collection, page by page as the proxy's Informer lists
 * (shared/proxy/kube/informer.ts {@link listAllPages}: `limit` items a page, default
 * `LIST_PAGE_SIZE` 500, halved for a page over the response bound; an
 * expired `continue` token starts again from the first page, at most
 * `MAX_LIST_RESTARTS` times), each page with its own deadline
 * ({@link LIST_DEADLINE_MS}).
 *
 * @param path a collection path, e.g. `/apis/autoscaling/v2/horizontalpodautoscalers`
 * @param pageSize items a page (at least 1)
 * @throws as listAllPages: ApiError, ResponseTooLargeError, or a page's deadline error
 */
export async function listAll<T extends KubeObject>(client: KubeClient, path: string, pageSize = LIST_PAGE_SIZE): Promise<T[]> {
  return (await listAllPages<T>(client, path, { pageSize, pageOptions: () => apiDeadline(LIST_DEADLINE_MS) })).items;
}

/** Raised when the cluster cannot be read (kubeconfig, TLS, RBAC, CRDs not installed). */
export class ClusterReadError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClusterReadError";
  }
}

/** A client for the kubeconfig's context, or ClusterReadError. */
function clientFor(kubeconfig: string, context: string | undefined): KubeClient {
  try {
    return new KubeClient(kubeConfigFromFile(kubeconfig, context));
  } catch (err) {
    throw new ClusterReadError((err as Error).message);
  }
}

/**
 * The cluster's `autoscaling/v2` HorizontalPodAutoscalers (all namespaces,
 * or `namespace`), as objects with `apiVersion` and `kind` set (list items
 * of a built-in kind carry neither).
 *
 * @throws ClusterReadError naming the kubeconfig problem or the API server's answer
 */
export async function readClusterHpas(kubeconfig: string, context: string | undefined, namespace?: string): Promise<KubeObject[]> {
  const client = clientFor(kubeconfig, context);
  const path = `/apis/autoscaling/v2/${namespace !== undefined ? `namespaces/${encodeURIComponent(namespace)}/` : ""}horizontalpodautoscalers`;
  try {
    const items = await listAll<KubeObject>(client, path);
    return items.map((item) => ({ ...item, apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler" }));
  } catch (err) {
    throw new ClusterReadError(`listing HorizontalPodAutoscalers from ${client.server.origin}: ${(err as Error).message}`);
  } finally {
    await client.close();
  }
}

/**
 * List both kinds and compile every object.
 *
 * @returns the compiled policies (cluster-scoped first, then namespaced, in
 *   the API server's order; `line` 0 on policies and rules: objects have no
 *   file lines) and the problems of those that do not compile
 * @throws ClusterReadError naming the kubeconfig problem, or the API
 *   server's answer (404: the CRDs are not installed; 403: RBAC)
 */
export async function readClusterPolicies(kubeconfig: string, context?: string): Promise<ExtraPolicies> {
  const client = clientFor(kubeconfig, context);
  const { compilePolicyObject } = await import("../../shared/policy/objects.ts");
  const policies: CompiledPolicy[] = [];
  const issues: ConfigIssue[] = [];
  try {
    for (const { kind, path } of POLICY_COLLECTIONS) {
      let items: KubeObject[];
      try {
        items = await listAll<KubeObject>(client, path);
      } catch (err) {
        if (err instanceof ApiError && err.code === 404) {
          throw new ClusterReadError(`${client.server.origin} does not serve ${POLICY_API_VERSION} ${kind} (404): install the CRDs (infra/helm/external-metrics-bridge/files/crds/)`);
        }
        throw new ClusterReadError(`listing ${kind} from ${client.server.origin}: ${(err as Error).message}`);
      }
      for (const item of items) {
        // list items of a custom resource carry apiVersion and kind; set them when a server leaves them out
        const obj = { apiVersion: POLICY_API_VERSION, kind, ...item };
        const compiled = compilePolicyObject(obj);
        issues.push(...compiled.issues);
        // an API object has no file lines: line 0 (printed as the object's name alone)
        if (compiled.policy !== undefined) policies.push({ ...compiled.policy, line: 0, rules: compiled.policy.rules.map((r) => ({ ...r, line: 0 })) });
      }
    }
  } finally {
    await client.close();
  }
  return { policies, issues };
}
