/**
 * `--kubeconfig FILE [--context NAME]`: the policy objects of a live
 * cluster, listed with the proxy's own Kubernetes client
 * (`shared/proxy/kube.ts`, read-only: two paginated lists, {@link listAll})
 * and compiled by
 * `compilePolicyObject` (`shared/policy/objects.ts`), the path the
 * in-cluster proxy uses. Messages name objects as `<kind>/<namespace>/<name>`.
 */
import { ApiError, apiDeadline, KubeClient, kubeConfigFromFile, LIST_PAGE_SIZE, ResponseTooLargeError, type KubeList, type KubeObject } from "../../shared/proxy/kube.ts";
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

/** Times a list starts again from its first page after its `continue` token expired (410), as the proxy's Informer (kube.ts). */
export const LIST_RESTARTS = 3;

/**
 * Every item of a collection, page by page as the proxy's Informer lists
 * (shared/proxy/kube.ts `Informer`; client-go `tools/pager/pager.go`):
 * `limit` items a page (default kube.ts `LIST_PAGE_SIZE`, 500) and the
 * previous page's `metadata.continue`, each page with its own deadline
 * ({@link LIST_DEADLINE_MS}) and at most kube.ts `MAX_RESPONSE_BYTES`. A
 * page over that bound is asked again with half the items; a `continue`
 * token that expired (410 Expired, `k8s.io/apiserver/pkg/storage/errors.go`)
 * starts the list again from its first page, at most {@link LIST_RESTARTS}
 * times, so the items are one consistent snapshot.
 *
 * @param path a collection path, e.g. `/apis/autoscaling/v2/horizontalpodautoscalers`
 * @param pageSize items a page (at least 1)
 * @throws ApiError (the server's answer; 410 after {@link LIST_RESTARTS} restarts),
 *   ResponseTooLargeError when a page of one item is over the bound, or the
 *   deadline's abort error
 */
export async function listAll<T extends KubeObject>(client: KubeClient, path: string, pageSize = LIST_PAGE_SIZE): Promise<T[]> {
  let limit = Math.max(1, Math.floor(pageSize));
  const items: T[] = [];
  let next: string | undefined;
  let restarts = 0;
  for (;;) {
    let page: KubeList<T>;
    try {
      page = await client.list<T>(path, { limit, ...(next !== undefined ? { continue: next } : {}) }, apiDeadline(LIST_DEADLINE_MS));
    } catch (err) {
      if (err instanceof ResponseTooLargeError && limit > 1) {
        limit = Math.max(1, Math.floor(limit / 2));
        continue;
      }
      if (err instanceof ApiError && err.code === 410 && next !== undefined && restarts < LIST_RESTARTS) {
        restarts++;
        items.length = 0;
        next = undefined;
        continue;
      }
      throw err;
    }
    items.push(...(page.items ?? []));
    next = page.metadata?.continue || undefined;
    if (next === undefined) return items;
  }
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
          throw new ClusterReadError(`${client.server.origin} does not serve ${POLICY_API_VERSION} ${kind} (404): install the CRDs (infra/helm/external-metrics-bridge/crds/)`);
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
