/**
 * Refresh-ahead for batching providers (`aws-cloudwatch`, `prometheus`):
 * whether a provider instance turns on the cache's refresh-ahead
 * (`shared/cache/refresh-ahead.ts` `RefreshAheadOptions`), and with which
 * bounds.
 *
 * Why: the HPA controller syncs autoscalers with 5 workers
 * (kube-controller-manager `--concurrent-horizontal-pod-autoscaler-syncs`,
 * default 5; k8s.io/kubernetes `pkg/controller/podautoscaler/horizontal.go`)
 * and each metric read blocks its worker until answered, so reads reach the
 * bridge one at a time. With only a TTL cache, every series whose value has
 * expired is its own backend call. Refresh-ahead remembers the series
 * read recently and, shortly before their values expire, reloads all of them
 * together: the batcher (`shared/batch.ts`) sends them as few calls
 * (CloudWatch: ⌈queries/500⌉ `GetMetricData` calls, at most 500
 * `MetricDataQueries` per call, Amazon CloudWatch API Reference,
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html;
 * Prometheus: one value and one timestamp query per `maxBatchSize` series
 * of one rule shape).
 *
 * Guarantees (from the cache): a series not read since its last refresh is
 * dropped, so nothing is polled forever and no call is made when nothing
 * was read; each refresh has the load deadline (`BACKEND_LOAD_TIMEOUT_MS`)
 * and the provider's `timeoutSeconds`; a failed refresh is never a value —
 * the old one is served only until its own TTL (≤ `maxAgeSeconds`), then
 * reads fail with a Status as without refresh-ahead; values keep the
 * timestamps the backend gave them (their real age).
 *
 * Billing: CloudWatch bills `GetMetricData` per metric requested; a series
 * read at least once per 0.9 × TTL is requested once per 0.9 × TTL (instead
 * of once per TTL, at the first read after expiry).
 */
import type { RefreshAheadOptions } from "../cache/refresh-ahead.ts";
import type { RuntimeEnv } from "./types.ts";

/** Most series remembered for refresh-ahead per provider instance. */
export const REFRESH_AHEAD_MAX_SERIES = 10_000;

/** Most bytes of remembered series per provider instance (keys ≈ 200–2,000 B each). */
export const REFRESH_AHEAD_MAX_BYTES = 8 * 1024 * 1024;

/**
 * A guess, used only when the runtime did not say (`RuntimeEnv.longLived`,
 * which the entry points pass: `functions/node.ts` and the proxy's in-process
 * bridge true, `functions/worker.ts` and `shared/lambda/handler.ts` false),
 * whether this process may keep work running between requests: false on
 * Cloudflare Workers (`navigator.userAgent` is `Cloudflare-Workers`,
 * https://developers.cloudflare.com/workers/runtime-apis/web-standards/;
 * I/O outlives no request) and on AWS Lambda (`AWS_LAMBDA_FUNCTION_NAME` is
 * set, "Defined runtime environment variables"; the environment is frozen
 * between invocations).
 */
export function longLivedProcess(runtime: RuntimeEnv): boolean {
  const agent = (globalThis as { navigator?: { userAgent?: string } }).navigator?.userAgent;
  if (agent === "Cloudflare-Workers") return false;
  const lambda = runtime.env["AWS_LAMBDA_FUNCTION_NAME"] ?? (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.["AWS_LAMBDA_FUNCTION_NAME"];
  return !lambda;
}

/**
 * The cache's refresh-ahead options of a provider instance, or `undefined`
 * for none: the config's `refreshAhead` when written, else the runtime's
 * `longLived` (what the entry point passes), else on only in a
 * {@link longLivedProcess} (the guess from `navigator.userAgent` and
 * `AWS_LAMBDA_FUNCTION_NAME`).
 *
 * @param config the instance's validated config (`refreshAhead?: boolean`)
 */
export function providerRefreshAhead(config: { refreshAhead?: boolean | undefined }, runtime: RuntimeEnv): RefreshAheadOptions | undefined {
  const on = config.refreshAhead ?? runtime.longLived ?? longLivedProcess(runtime);
  return on ? { maxKeys: REFRESH_AHEAD_MAX_SERIES, maxBytes: REFRESH_AHEAD_MAX_BYTES } : undefined;
}
