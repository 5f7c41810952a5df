/**
 * How a `prometheus` provider reaches the HTTP API of its flavour: the
 * contract between the provider (`./index.ts`) and each flavour other than
 * `generic` (`./gmp.ts`, `./amp.ts`), which `./flavours.ts` lists.
 */
import type { StatusError } from "../../k8s/status.ts";
import type { RuntimeEnv } from "../types.ts";
import type { PrometheusProviderConfig } from "./schema.ts";

/** How the provider reaches one flavour's HTTP API (`./index.ts`). */
export interface FlavourAccess {
  /** the HTTP API base URL (the bridge appends `/api/v1/query`) */
  url: string;
  /** request headers besides the authorization `fetch` adds (e.g. `X-Scope-OrgID`); @throws StatusError when a credential is not set */
  headers(): Record<string, string>;
  /**
   * also send the lookback as `max_lookback` (VictoriaMetrics' name for
   * `lookback_delta`, which it ignores: app/vmselect/prometheus/prometheus.go
   * `getMaxLookback`); only the `generic` flavour, which may front it
   */
  maxLookback?: boolean;
  /** the `fetch` of every query (default the global one) */
  fetch?: typeof fetch;
  /**
   * The Status of a failed query when the flavour classifies it, else
   * undefined (then `./api.ts` `prometheusErrorToStatus`); `what` is
   * `query for metric NAME (expr)`, without the provider's name.
   */
  error?(what: string, err: unknown): StatusError | undefined;
  /**
   * headers computed over the exact request sent (a request signature:
   * `./amp.ts` SigV4), merged over {@link headers}; may throw (no
   * credentials), and then nothing is sent
   */
  sign?(request: { url: string; headers: Readonly<Record<string, string>>; body: string }, signal: AbortSignal): Promise<Record<string, string>>;
  /**
   * The identity key of reads for `namespace` when the flavour reads each
   * namespace under its own identity (`amp` with `credentials.assumeRole`:
   * `../aws/clients.ts`); absent: one identity. @throws StatusError when the namespace has none
   */
  identity?(namespace: string): string;
  /** The access of the reads of identity `key` ({@link identity}); absent: this one for every identity. */
  as?(key: string): FlavourAccess;
}

/** Make a flavour's access for one provider instance (`name`, its validated config of that flavour). @throws Error for a config of another flavour */
export type FlavourFactory = (name: string, config: PrometheusProviderConfig, runtime: RuntimeEnv) => FlavourAccess;
