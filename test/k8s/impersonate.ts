/**
 * Reads through kube-apiserver as another identity, without a kubectl process
 * per read: an HTTPS client (keep-alive) holding a `system:masters` client
 * certificate of the test cluster's CA, sending `Impersonate-User` and
 * `Impersonate-Group` headers (kube-apiserver's impersonation filter,
 * k8s.io/apiserver `pkg/endpoints/filters/impersonation.go`). Through the
 * aggregation layer the impersonated identity is what the backend (the
 * proxy) receives in the front-proxy headers, as for the HPA controller's own
 * reads. Used by test/e2e/k8s.policy.e2e.test.ts to poll a read every ~100 ms;
 * without impersonation, it writes objects' status subresources
 * (test/k8s/kubelet.ts, test/e2e/k8s.custom-metrics.e2e.test.ts).
 */
import { Agent, request } from "node:https";
import type { ControlPlane } from "./cluster.ts";

/** An identity to impersonate: a user name and its groups. */
export interface Identity {
  user: string;
  groups: readonly string[];
}

/**
 * The HPA controller's identity under `--use-service-account-credentials`
 * (kube-controller-manager gives each controller its ServiceAccount's token;
 * kubernetes `cmd/kube-controller-manager/app/controllermanager.go`,
 * k8s.io/controller-manager `pkg/clientbuilder/client_builder.go`), with the groups a service-account
 * token authenticates with (k8s.io/apiserver `pkg/authentication/serviceaccount/util.go`
 * MakeGroupNames, plus `system:authenticated`).
 */
export const HPA_CONTROLLER: Identity = {
  user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
};

/** A status code and the parsed JSON body (or the text when it is not JSON). */
export interface RawAnswer {
  status: number;
  body: unknown;
}

/** A reader of raw API paths as impersonated identities. */
export interface ImpersonatingClient {
  /**
   * GET `path` (e.g. `/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/metric?labelSelector=…`)
   * as `as`; resolves with any HTTP status.
   *
   * @throws Error on a connection failure or after `timeoutMs` (default 10 000 ms)
   */
  get(path: string, as: Identity, timeoutMs?: number): Promise<RawAnswer>;
  /**
   * `method` `path` with an optional JSON `body` (sent with `contentType`,
   * default `application/json`; a status write takes
   * `application/merge-patch+json`), as `as` or, without it, as the client's
   * own `system:masters` identity; resolves with any HTTP status.
   *
   * @throws Error on a connection failure or after `timeoutMs` (default 10 000 ms)
   */
  request(method: string, path: string, options?: { as?: Identity; body?: unknown; contentType?: string; timeoutMs?: number }): Promise<RawAnswer>;
  /** close the keep-alive connections */
  close(): void;
}

/**
 * An {@link ImpersonatingClient} for `cp`, with a fresh client certificate
 * `CN=<name>, O=system:masters`.
 */
export async function impersonatingClient(cp: Pick<ControlPlane, "server" | "ca">, name = "e2e-impersonator"): Promise<ImpersonatingClient> {
  const cert = await cp.ca.issue(name, ["client"], { groups: ["system:masters"] });
  const agent = new Agent({ keepAlive: true, maxSockets: 4, ca: cp.ca.cert, cert: cert.cert, key: cert.key });
  const base = new URL(cp.server);
  const send: ImpersonatingClient["request"] = (method, path, options = {}) =>
    new Promise<RawAnswer>((resolve, reject) => {
      const timeoutMs = options.timeoutMs ?? 10_000;
      const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
      const headers: Record<string, string | string[]> = { accept: "application/json" };
      if (options.as !== undefined) {
        headers["impersonate-user"] = options.as.user;
        headers["impersonate-group"] = [...options.as.groups];
      }
      if (payload !== undefined) {
        headers["content-type"] = options.contentType ?? "application/json";
        headers["content-length"] = String(payload.length);
      }
      const req = request({ agent, host: base.hostname, port: base.port, path, method, headers, timeout: timeoutMs }, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON: keep the text
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on("timeout", () => req.destroy(new Error(`${method} ${path} timed out after ${timeoutMs} ms`)));
      req.on("error", reject);
      req.end(payload);
    });
  return {
    get: (path, as, timeoutMs = 10_000) => send("GET", path, { as, timeoutMs }),
    request: send,
    close: () => agent.destroy(),
  };
}
