/**
 * The SubjectAccessReviewer of the proxy's authorization ({@link Authorizer}):
 * a SubjectAccessReview (`authorization.k8s.io/v1`) created through the
 * proxy's Kubernetes API client.
 */
import { withCallSignal } from "../../deadline.ts";
import type { Authorizer, SubjectAccessReviewer, SubjectAccessReviewSpec } from "./authorize.ts";
import { KUBE_API_TIMEOUT_MS, type ApiError, type KubeClient, type KubeObject, type ReviewOptions } from "../kube/client.ts";

/** `authorization/v1.SubjectAccessReview` status (k8s.io/api/authorization/v1/types.go). */
interface SubjectAccessReviewStatus {
  allowed?: boolean;
  denied?: boolean;
  reason?: string;
  evaluationError?: string;
}

/**
 * SubjectAccessReview (`authorization.k8s.io/v1`).
 *
 * @returns a reviewer; it rejects with a `TimeoutError` DOMException past
 *   `timeoutMs` (the request is aborted), with the caller's `signal.reason`
 *   when that aborts first, or with an {@link ApiError} on an error answer
 */
export function subjectAccessReviewer(kc: KubeClient, options: ReviewOptions = {}): SubjectAccessReviewer {
  const timeoutMs = options.timeoutMs ?? KUBE_API_TIMEOUT_MS;
  return async (spec: SubjectAccessReviewSpec, signal) => {
    const review = await withCallSignal(signal, timeoutMs, (bounded) =>
      kc.create<KubeObject & { spec: SubjectAccessReviewSpec; status?: SubjectAccessReviewStatus }>(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec },
        { signal: bounded },
      ),
    );
    const status = review.status;
    return {
      allowed: status?.allowed === true,
      ...(status?.denied !== undefined ? { denied: status.denied } : {}),
      ...(status?.reason ? { reason: status.reason } : {}),
      ...(status?.evaluationError ? { evaluationError: status.evaluationError } : {}),
    };
  };
}
