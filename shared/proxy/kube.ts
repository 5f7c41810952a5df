/**
 * The proxy's Kubernetes API access through `@kubernetes/client-node`: the
 * client configuration (in-cluster ServiceAccount, or a kubeconfig file) and
 * the reviews delegated authentication and authorization send.
 */
import { AuthenticationV1Api, AuthorizationV1Api, KubeConfig } from "@kubernetes/client-node";
import type { TokenReviewer } from "./authenticate.ts";
import type { SubjectAccessReviewer, SubjectAccessReviewSpec } from "./authorize.ts";

/**
 * The client configuration: `kubeconfig` when given, else the in-cluster
 * ServiceAccount (`/var/run/secrets/kubernetes.io/serviceaccount`, with
 * `KUBERNETES_SERVICE_HOST`/`_PORT`).
 *
 * @throws Error when neither is available
 */
export function loadKubeConfig(kubeconfig: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (kubeconfig !== undefined && kubeconfig !== "") kc.loadFromFile(kubeconfig);
  else {
    if (process.env["KUBERNETES_SERVICE_HOST"] === undefined) {
      throw new Error("not running in a cluster (KUBERNETES_SERVICE_HOST is unset): pass --kubeconfig FILE");
    }
    kc.loadFromCluster();
  }
  return kc;
}

/** A KubeConfig for one API server URL with a CA and a bearer token (tests, tools). */
export function kubeConfigFor(server: string, caPem: string, token: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "cluster", server, caData: Buffer.from(caPem).toString("base64") }],
    users: [{ name: "proxy", token }],
    contexts: [{ name: "ctx", cluster: "cluster", user: "proxy" }],
    currentContext: "ctx",
  });
  return kc;
}

/** TokenReview (`authentication.k8s.io/v1`) with the server's default audiences. */
export function tokenReviewer(kc: KubeConfig): TokenReviewer {
  const api = kc.makeApiClient(AuthenticationV1Api);
  return async (token) => {
    const review = await api.createTokenReview({
      body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
    });
    const status = review.status ?? { authenticated: false };
    return {
      authenticated: status.authenticated === true,
      ...(status.user ? { user: status.user } : {}),
      ...(status.error ? { error: status.error } : {}),
    };
  };
}

/** SubjectAccessReview (`authorization.k8s.io/v1`). */
export function subjectAccessReviewer(kc: KubeConfig): SubjectAccessReviewer {
  const api = kc.makeApiClient(AuthorizationV1Api);
  return async (spec: SubjectAccessReviewSpec) => {
    const review = await api.createSubjectAccessReview({
      body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec: spec as never },
    });
    const status = review.status;
    return {
      allowed: status?.allowed === true,
      ...(status?.denied !== undefined ? { denied: status.denied } : {}),
      ...(status?.reason ? { reason: status.reason } : {}),
      ...(status?.evaluationError ? { evaluationError: status.evaluationError } : {}),
    };
  };
}

/** The HTTP status of a client-node `ApiException` (undefined for other errors). */
export function apiStatus(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "number" ? code : undefined;
}
