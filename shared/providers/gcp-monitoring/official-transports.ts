/**
 * The official-client transports for Node and Lambda, loaded only when a
 * config needs them. Never imported by the Worker: a dynamic import is still
 * bundled by wrangler/esbuild, and the official client cannot run in
 * workerd (DESIGN.md), so this module is reached only from
 * `functions/node.ts` and `functions/lambda.ts`.
 */
import type { BridgeConfig } from "../../config/config.ts";
import type { RuntimeEnv } from "../types.ts";

/**
 * The `RuntimeEnv.transports` for `config`: the official Cloud Monitoring
 * client (`grpc.ts`, `nodeTransports`) when a `gcp-monitoring` provider is
 * configured — imported then, so other configs never load google-gax
 * (≈ 20 MB of resident memory) — else none.
 */
export async function officialTransports(config: BridgeConfig): Promise<RuntimeEnv["transports"]> {
  if (!Object.values(config.providers).some((p) => p.type === "gcp-monitoring")) return undefined;
  return (await import("./grpc.ts")).nodeTransports;
}
