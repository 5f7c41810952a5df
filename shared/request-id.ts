/**
 * The `X-Request-Id` rule the bridge (`shared/app.ts`) and the in-cluster
 * proxy (`shared/proxy/app.ts`) share: an offered id is kept only when it is
 * 1–128 of `[A-Za-z0-9._:-]` (a UUID, a kube-apiserver `Audit-ID`, a
 * tracing id); anything else is replaced by a fresh UUID, so a caller cannot
 * make either program echo or log arbitrary bytes (issue 10, item 7).
 *
 * Runtime-agnostic: `crypto.randomUUID` exists on Node ≥ 19, workerd and
 * Lambda's Node runtimes.
 */

/** What an offered request id must look like to be kept. */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The request id to use for a request: `offered` when it matches
 * {@link REQUEST_ID_PATTERN}, else a fresh UUID (`crypto.randomUUID`).
 *
 * @param offered the header value as sent (undefined when absent)
 */
export function requestIdFrom(offered: string | undefined): string {
  return offered !== undefined && REQUEST_ID_PATTERN.test(offered) ? offered : crypto.randomUUID();
}
