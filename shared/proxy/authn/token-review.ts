/**
 * The TokenReviewer of the proxy's authentication ({@link Authenticator}):
 * a TokenReview (`authentication.k8s.io/v1`) created through the proxy's
 * Kubernetes API client.
 */
import { withCallSignal } from "../../deadline.ts";
import type { Authenticator, TokenReviewer, TokenReviewResult } from "./authenticate.ts";
import { KUBE_API_TIMEOUT_MS, type ApiError, type KubeClient, type KubeObject, type ReviewOptions } from "../kube/client.ts";

/** `authentication/v1.TokenReview` status (k8s.io/api/authentication/v1/types.go). */
type TokenReviewStatus = Partial<TokenReviewResult>;

/**
 * TokenReview (`authentication.k8s.io/v1`) with the server's default audiences.
 *
 * @returns a reviewer; it rejects with a `TimeoutError` DOMException past
 *   `timeoutMs` (the request is aborted), with the caller's `signal.reason`
 *   when that aborts first, or with an {@link ApiError} on an error answer
 */
export function tokenReviewer(kc: KubeClient, options: ReviewOptions = {}): TokenReviewer {
  const timeoutMs = options.timeoutMs ?? KUBE_API_TIMEOUT_MS;
  return async (token, signal) => {
    const review = await withCallSignal(signal, timeoutMs, (bounded) =>
      kc.create<KubeObject & { spec: { token: string }; status?: TokenReviewStatus }>(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } },
        { signal: bounded },
      ),
    );
    const status = review.status ?? { authenticated: false };
    return {
      authenticated: status.authenticated === true,
      ...(status.user ? { user: status.user } : {}),
      ...(status.error ? { error: status.error } : {}),
    };
  };
}
