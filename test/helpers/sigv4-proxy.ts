/**
 * A stand-in for Amazon Managed Service for Prometheus' front door: the Go
 * program `test/sigv4-proxy/` (aws-sdk-go-v2 v1.48.0 `aws/signer/v4`), built
 * once and cached by content (`infra/tools/go.ts` `goBinary`), listening on
 * 127.0.0.1. It verifies each request's SigV4 signature (service `aps`, the
 * given region) by signing the received request again with the known test
 * credentials, refuses like AWS (403 with `x-amzn-ErrorType`:
 * `MissingAuthenticationTokenException`, `InvalidSignatureException`,
 * also for an `X-Amz-Date` more than 5 minutes off), and forwards a
 * verified request to `upstream` (a Prometheus started with
 * `--web.route-prefix=/workspaces/<id>`).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { goBinary } from "../../infra/tools/go.ts";
import { startProcess, waitFor } from "../k8s/cluster.ts";
import { freePort } from "./ports.ts";
import { killWithThisProcess, PROMETHEUS_BUILD_TIMEOUT_MS } from "./prometheus.ts";

/** The bound on a cold build of the proxy (module download + compile), ms. */
export const SIGV4_PROXY_BUILD_TIMEOUT_MS = PROMETHEUS_BUILD_TIMEOUT_MS;

/** A running proxy. */
export interface Sigv4Proxy {
  /** `http://127.0.0.1:<port>`: the `endpoint` of an `amp` provider */
  endpoint: string;
  /** the requests it forwarded, `METHOD path` each, in order */
  forwarded(): string[];
  /** the `x-amzn-ErrorType` of each request it refused, in order */
  refused(): string[];
  /** stop it and delete its log; idempotent */
  close(): Promise<void>;
}

/** Options of {@link startSigv4Proxy}: where to forward and which credentials and region a valid signature uses. */
export interface Sigv4ProxyOptions {
  upstream: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
}

/** The proxy binary, built now when the cache lacks it. */
export function sigv4ProxyBinary(): string {
  return goBinary(join(import.meta.dirname, "../sigv4-proxy"), "sigv4-proxy", { timeoutMs: SIGV4_PROXY_BUILD_TIMEOUT_MS });
}

/**
 * Start the proxy on a free port and wait until it listens.
 * @throws Error with its log when it exits or does not listen within 30 s
 */
export async function startSigv4Proxy(options: Sigv4ProxyOptions): Promise<Sigv4Proxy> {
  const binary = sigv4ProxyBinary();
  const dir = mkdtempSync(join(tmpdir(), "emb-sigv4-proxy-"));
  const logFile = join(dir, "proxy.log");
  const port = await freePort();
  const args = [
    `-listen=127.0.0.1:${port}`,
    `-upstream=${options.upstream}`,
    `-access-key=${options.accessKeyId}`,
    `-secret-key=${options.secretAccessKey}`,
    `-region=${options.region}`,
    ...(options.sessionToken !== undefined ? [`-session-token=${options.sessionToken}`] : []),
  ];
  const proc = startProcess("sigv4-proxy", binary, args, { logFile });
  killWithThisProcess(proc);
  const log = () => readFileSync(logFile, "utf8");
  try {
    await waitFor("the sigv4 proxy to listen", async () => proc.exitCode === undefined && log().includes("listening "), { timeoutMs: 30_000, context: log });
  } catch (err) {
    await proc.stop(1000);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    endpoint: `http://127.0.0.1:${port}`,
    forwarded: () => [...log().matchAll(/ ok (\S+ \S+)/g)].map((m) => m[1]!),
    refused: () => [...log().matchAll(/ refused (\S+):/g)].map((m) => m[1]!),
    async close() {
      await proc.stop(2000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
