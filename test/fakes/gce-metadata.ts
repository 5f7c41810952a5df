/**
 * A stand-in for the GCE / GKE metadata server as google-auth-library and
 * gcp-metadata call it when `GCE_METADATA_HOST` names it (gcp-metadata
 * `getBaseUrl`, `isAvailable`; google-auth-library `ComputeClient`): every
 * request must carry `Metadata-Flavor: Google` and every answer carries it
 * back (the library refuses an answer without it). Paths under
 * `/computeMetadata/v1/`:
 * - `instance` (the detection request): 200;
 * - `instance/service-accounts/default/token?scopes=…`: a new access token
 *   (`{ access_token, expires_in, token_type }`), registered in `issued` as
 *   {@link GceMetadata.serviceAccount}'s, or the status {@link GceMetadata.failWith} while it is set;
 * - `universe/universe-domain`: `googleapis.com`;
 * - anything else: 404.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One request the fake received. */
export interface GceMetadataRequest {
  /** path and query */
  path: string;
  /** the `Metadata-Flavor` header sent */
  flavor: string | undefined;
  status: number;
}

/** A running fake. */
export interface GceMetadata {
  /** `127.0.0.1:PORT`: the value of `GCE_METADATA_HOST` */
  host: string;
  /** the email tokens are issued to */
  serviceAccount: string;
  readonly requests: GceMetadataRequest[];
  /** when set, token requests are answered with this status (403: the node's service account lacks the scope; 503: an outage) */
  failWith: number | undefined;
  close(): Promise<void>;
}

/** Start the fake on 127.0.0.1; tokens it issues are added to `issued` (token → service-account email). */
export async function startGceMetadata(issued: Map<string, string>, serviceAccount = "gke-node@test-project.iam.gserviceaccount.com"): Promise<GceMetadata> {
  const requests: GceMetadataRequest[] = [];
  const server: Server = createServer((req, res) => {
    const path = req.url ?? "";
    const flavor = req.headers["metadata-flavor"] as string | undefined;
    const record: GceMetadataRequest = { path, flavor, status: 0 };
    requests.push(record);
    const answer = (status: number, body: string, type = "application/text") => {
      record.status = status;
      res.writeHead(status, { "metadata-flavor": "Google", "content-type": type });
      res.end(body);
    };
    const route = path.split("?")[0];
    if (flavor !== "Google") return answer(403, "Missing Metadata-Flavor: Google header");
    if (route === "/computeMetadata/v1/instance" || route === "/computeMetadata/v1/instance/") return answer(200, "attributes/\nservice-accounts/\n");
    if (route === "/computeMetadata/v1/universe/universe-domain") return answer(200, "googleapis.com");
    if (route === "/computeMetadata/v1/instance/service-accounts/default/token") {
      if (fake.failWith === 403) return answer(403, "The service account does not have the requested scope");
      if (fake.failWith !== undefined) return answer(fake.failWith, "metadata server unavailable");
      const token = `metadata-${randomBytes(12).toString("hex")}`;
      issued.set(token, serviceAccount);
      return answer(200, JSON.stringify({ access_token: token, expires_in: 3599, token_type: "Bearer" }), "application/json");
    }
    answer(404, "not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const fake: GceMetadata = {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    serviceAccount,
    requests,
    failWith: undefined,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return fake;
}
