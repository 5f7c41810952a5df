/**
 * The `gmp` flavour of the `prometheus` provider: Google Cloud Managed
 * Service for Prometheus, whose query API is the Prometheus HTTP API at
 * `{endpoint}/v1/projects/{project}/location/{location}/prometheus`
 * (Google Cloud "Query using the Prometheus API": the base URL
 * `https://monitoring.googleapis.com/v1/projects/PROJECT_ID/location/global/prometheus`,
 * called with an OAuth 2.0 access token). Every query carries
 * `Authorization: Bearer <token>` for the scope `monitoring.read`
 * (`MONITORING_READ_SCOPE`; the principal needs `roles/monitoring.viewer`).
 *
 * Tokens come from the credential sources `gcp-monitoring` uses on its
 * REST transport (`../gcp/bearer.ts`: a service-account key, the JWT bearer
 * grant; or Workload Identity Federation, an `external_account`
 * configuration), over `fetch`, so the flavour runs the same on Node,
 * Lambda and the Worker; and, on Node and Lambda only, Application Default
 * Credentials (`source: default`: google-auth-library, loaded on first use,
 * `../gcp/default-credentials.ts`; Workload Identity on GKE through the
 * metadata server). On the Worker `default` is a 500 before anything is
 * sent (its build replaces that module, `infra/worker/no-gcp-default-credentials.ts`). A token failure is the Status the token source
 * raises (the same as `gcp-monitoring`'s: 500 when Google refuses the
 * credentials or they are missing or broken, 503 when the token endpoint is
 * unreachable or fails); an API answer 401/403 is classified as
 * `gcp-monitoring` classifies it (`../gcp/errors.ts` `googleErrorToStatus`:
 * 500 "Google refused the bridge's credentials").
 *
 * With `credentials.impersonate` each namespace's queries carry the token
 * of its own service account (`../gcp/impersonation.ts`: IAM Credentials
 * `generateAccessToken` through google-auth-library's `Impersonated`; Node
 * and Lambda, refused by the Worker at load).
 */
import type { StatusError } from "../../k8s/status.ts";
import { GoogleBearer } from "../gcp/bearer.ts";
import { adcTokenSource } from "../gcp/default-credentials.ts";
import { codeForHttpStatus, GoogleApiError, googleErrorToStatus } from "../gcp/errors.ts";
import type { RuntimeEnv } from "../types.ts";
import { PrometheusApiError } from "./api.ts";
import type { PrometheusProviderConfig } from "./schema.ts";
import type { FlavourAccess, FlavourFactory } from "./flavour.ts";

/** The config of a `gmp` provider instance. */
export type GmpProviderConfig = Extract<PrometheusProviderConfig, { flavour: "gmp" }>;


/**
 * The base URL of the query API:
 * `{endpoint}/v1/projects/{project}/location/{location}/prometheus`
 * (`endpoint` without a trailing slash; project and location are
 * URL-path-safe by their schemas, `./gmp-schema.ts`).
 */
export function gmpBaseUrl(config: Pick<GmpProviderConfig, "endpoint" | "project" | "location">): string {
  return `${config.endpoint.replace(/\/+$/, "")}/v1/projects/${encodeURIComponent(config.project)}/location/${encodeURIComponent(config.location)}/prometheus`;
}

/**
 * The access of a `gmp` provider: its base URL and a `fetch` that adds a
 * Google access token (cached, renewed before expiry, exchanged again once
 * after a 401; `../gcp/bearer.ts`). Builds no token and does no I/O.
 *
 * @param name the provider's name, for messages
 */
export function gmpAccess(name: string, config: GmpProviderConfig, runtime: RuntimeEnv): FlavourAccess {
  const bearer = new GoogleBearer({
    providerName: name,
    credentials: config.credentials,
    runtime,
    defaultSource: (scope) => adcTokenSource(name, scope),
  });
  const access = (identity: string | undefined): FlavourAccess => ({
    url: gmpBaseUrl(config),
    headers: () => ({}),
    fetch: (input, init) => bearer.fetch(String(input), init ?? {}, identity),
    error(what, err) {
      if (err instanceof PrometheusApiError && (err.httpStatus === 401 || err.httpStatus === 403)) {
        return googleErrorToStatus(name, what, new GoogleApiError(codeForHttpStatus(err.httpStatus), err.message, err.httpStatus));
      }
      return undefined;
    },
  });
  const own = access(undefined);
  if (config.credentials.impersonate === undefined) return own;
  // `credentials.impersonate`: each namespace's queries carry its own service account's token (`../gcp/impersonation.ts`)
  return { ...own, identity: (namespace) => bearer.identity(namespace)!, as: access };
}

/** The `gmp` entry of the flavour table (`./flavours.ts`). */
export const flavour: FlavourFactory = (name, config, runtime) => gmpAccess(name, config as GmpProviderConfig, runtime);
