/**
 * Config fields of the `prometheus` provider's `gmp` flavour: Google Cloud
 * Managed Service for Prometheus, read through its Prometheus HTTP API
 * (Google Cloud "Query using the Prometheus API";
 * `https://monitoring.googleapis.com/v1/projects/{project}/location/{location}/prometheus/api/v1/query`),
 * authorized with a Google access token (`./gmp.ts`).
 *
 * Schema only (zod), no token client: every deployment imports it through
 * `./schema.ts` for config validation.
 */
import * as z from "../../config/zod.ts";
import { gcpCredentialsSchema, projectIdSchema } from "../gcp/credentials.ts";

/** The public endpoint of Managed Service for Prometheus (the Cloud Monitoring API host). */
export const GMP_DEFAULT_ENDPOINT = "https://monitoring.googleapis.com";

/** The location of the query API; Google documents only `global` (the API reads every region's data from it). */
export const GMP_DEFAULT_LOCATION = "global";

/**
 * The fields of a `gmp` provider besides `flavour` and the ones every
 * flavour has (`timeoutSeconds`, `batchWindowSeconds`, `maxBatchSize`; `./schema.ts`):
 * - `project`: the Google Cloud project id or number whose metrics scope is read;
 * - `location`: default `global`;
 * - `endpoint`: API origin override (tests, Private Service Connect), default
 *   `https://monitoring.googleapis.com`; the base URL becomes
 *   `{endpoint}/v1/projects/{project}/location/{location}/prometheus`;
 * - `credentials`: the Google credentials `gcp-monitoring` takes
 *   (`../gcp/credentials.ts`), `environment` (a service-account key) or
 *   `externalAccount` (Workload Identity Federation), or `default`
 *   (Application Default Credentials through google-auth-library: the
 *   metadata server's Workload Identity on GKE; Node and Lambda only, the
 *   Worker answers it with a 500, `infra/worker/no-gcp-default-credentials.ts`).
 */
export const gmpFields = {
  project: projectIdSchema,
  location: z._default(z.string().check(z.regex(/^[a-z][a-z0-9-]{0,62}$/, "must be a Google Cloud location such as global or us-central1")), GMP_DEFAULT_LOCATION),
  endpoint: z._default(z.url({ protocol: /^https?$/ }), GMP_DEFAULT_ENDPOINT),
  credentials: gcpCredentialsSchema,
};
