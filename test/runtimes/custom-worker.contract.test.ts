/**
 * The custom.metrics.k8s.io routes (test/runtimes/custom-contract.ts)
 * against the Cloudflare Worker: built by wrangler as a deploy builds it,
 * running in workerd (Miniflare), over real HTTP on 127.0.0.1.
 */
import { customMetricsContract } from "./custom-contract.ts";
import { startWorker } from "../helpers/worker.ts";

customMetricsContract("Cloudflare Worker (workerd)", async (text, env) => {
  const worker = await startWorker(text, env);
  return { origin: worker.url, request: worker.request, logs: worker.logs, close: worker.close };
});
