/**
 * The cluster's authentication configuration for aggregated API servers:
 * ConfigMap `kube-system/extension-apiserver-authentication`, published by
 * kube-apiserver, read and then followed with a list+watch (kube/informer.ts
 * {@link Informer}, client-go reflector semantics), as apiserver's
 * `DelegatingAuthenticationOptions` does (`pkg/server/options/authentication.go`,
 * `pkg/authentication/request/headerrequest/requestheader_controller.go`,
 * `dynamiccertificates/configmap_cafile_content.go`).
 *
 * Keys: `client-ca-file` and `requestheader-client-ca-file` (PEM bundles);
 * `requestheader-allowed-names`, `requestheader-username-headers`,
 * `requestheader-uid-headers`, `requestheader-group-headers`,
 * `requestheader-extra-headers-prefix` (JSON arrays of strings; empty or
 * absent = none).
 */
import { certificatesFromPem } from "../tls/pem.ts";
import type { CertPool } from "./client-cert-checks.ts";
import { certPool } from "./client-cert.ts";
import type { ConfigMap, KubeClient } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { Logger } from "../log.ts";

/** Deadline of one list of the ConfigMap, ms; a list that hangs is cancelled and retried with the watch back-off. */
export const CONFIGMAP_LIST_TIMEOUT_MS = 10_000;

/** Namespace and name of the ConfigMap kube-apiserver publishes. */
export const AUTHENTICATION_CONFIGMAP = { namespace: "kube-system", name: "extension-apiserver-authentication" } as const;

/** Front-proxy (request header) authentication settings. */
export interface RequestHeaderConfig {
  /** CAs a front-proxy client certificate must chain to */
  pool: CertPool;
  /** CNs allowed to assert identity headers; empty = any verified certificate */
  allowedNames: string[];
  usernameHeaders: string[];
  uidHeaders: string[];
  groupHeaders: string[];
  extraPrefixes: string[];
}

/** One version of the authentication configuration. */
export interface AuthenticationConfig {
  /** CAs for plain client-certificate authentication; undefined = off */
  clientCA?: CertPool;
  /** front-proxy authentication; undefined = off (no `requestheader-client-ca-file`) */
  requestHeader?: RequestHeaderConfig;
  /** increases with every change (verification results are cached per generation) */
  generation: number;
}

/**
 * Parse the ConfigMap's data.
 *
 * @param data the ConfigMap's `data` (undefined when the ConfigMap does not exist)
 * @throws Error naming the key whose JSON list or PEM bundle is malformed
 */
export async function parseAuthenticationConfig(
  data: Readonly<Record<string, string>> | undefined,
  generation: number,
): Promise<AuthenticationConfig> {
  const config: AuthenticationConfig = { generation };
  if (data === undefined) return config;
  const clientCA = pemPool(data, "client-ca-file");
  if (clientCA !== undefined) config.clientCA = await clientCA;
  const requestHeaderCA = pemPool(data, "requestheader-client-ca-file");
  if (requestHeaderCA !== undefined) {
    config.requestHeader = {
      pool: await requestHeaderCA,
      allowedNames: stringList(data, "requestheader-allowed-names"),
      usernameHeaders: stringList(data, "requestheader-username-headers"),
      uidHeaders: stringList(data, "requestheader-uid-headers"),
      groupHeaders: stringList(data, "requestheader-group-headers"),
      extraPrefixes: stringList(data, "requestheader-extra-headers-prefix"),
    };
  }
  return config;
}

function pemPool(data: Readonly<Record<string, string>>, key: string): Promise<CertPool> | undefined {
  const pem = data[key];
  if (pem === undefined || pem.trim() === "") return undefined;
  let certs;
  try {
    certs = certificatesFromPem(pem);
  } catch (err) {
    throw new Error(`${key}: not a PEM certificate bundle: ${(err as Error).message}`);
  }
  if (certs.length === 0) throw new Error(`${key}: holds no PEM CERTIFICATE block`);
  return certPool(certs);
}

/** apiserver's `deserializeStrings`: "" → none, else a JSON array of strings. */
function stringList(data: Readonly<Record<string, string>>, key: string): string[] {
  const text = data[key];
  if (text === undefined || text === "") return [];
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${key}: not a JSON array of strings`);
  }
  if (value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) throw new Error(`${key}: not a JSON array of strings`);
  return value;
}

/** Where the proxy gets the authentication configuration from. */
export interface AuthenticationConfigSource {
  /** the newest valid configuration; undefined until the first load */
  current(): AuthenticationConfig | undefined;
  stop(): Promise<void>;
}

/**
 * Follow the ConfigMap through the Kubernetes API.
 *
 * The first list decides readiness: {@link AuthenticationConfigSource.current}
 * stays undefined until it answered. A ConfigMap that does not exist (or is
 * deleted) turns certificate authentication off — fail closed — until it
 * appears. A malformed update is logged and the previous configuration kept.
 * A failed list or watch is retried with a backoff (1 s doubling to 30 s; a
 * 410 Gone re-lists at once, a watch the server ended is reopened);
 * each list has a deadline ({@link CONFIGMAP_LIST_TIMEOUT_MS}), so a list that
 * kube-apiserver never answers is cancelled and retried instead of leaving the
 * proxy unready for good. State is bounded: the informer holds only the one
 * ConfigMap its field selector names, and at most one restart is pending.
 *
 * @param options.onChange called after every change that was applied
 * @param options.listTimeoutMs deadline of a list, ms (tests)
 */
export function watchAuthenticationConfig(
  kc: KubeClient,
  log: Logger,
  options: { onChange?: (config: AuthenticationConfig) => void; namespace?: string; name?: string; listTimeoutMs?: number } = {},
): AuthenticationConfigSource {
  const namespace = options.namespace ?? AUTHENTICATION_CONFIGMAP.namespace;
  const name = options.name ?? AUTHENTICATION_CONFIGMAP.name;
  const fieldSelector = `metadata.name=${name}`;
  let current: AuthenticationConfig | undefined;
  let generation = 0;
  let stopped = false;
  // Parses are serialized so an older object never overwrites a newer one.
  let chain = Promise.resolve();

  const apply = (object: ConfigMap | undefined) => {
    chain = chain.then(async () => {
      try {
        const next = await parseAuthenticationConfig(object?.data, ++generation);
        current = next;
        log({
          level: "info",
          msg: "authentication configuration loaded",
          configMap: `${namespace}/${name}`,
          exists: object !== undefined,
          frontProxy: next.requestHeader !== undefined,
          clientCA: next.clientCA !== undefined,
          resourceVersion: object?.metadata?.resourceVersion,
        });
        options.onChange?.(next);
      } catch (err) {
        log({ level: "error", msg: "authentication configuration rejected; keeping the previous one", configMap: `${namespace}/${name}`, error: (err as Error).message });
        // A first load that fails still counts as loaded: certificate authentication stays off.
        current ??= { generation };
      }
    });
  };

  const informer = new Informer<ConfigMap>(kc, {
    path: `/api/v1/namespaces/${namespace}/configmaps`,
    fieldSelector,
    listTimeoutMs: options.listTimeoutMs ?? CONFIGMAP_LIST_TIMEOUT_MS,
    onListed: (items) => {
      if (!items.some((c) => c.metadata?.name === name)) apply(undefined);
    },
    onAdd: (obj) => apply(obj),
    onUpdate: (obj) => apply(obj),
    onDelete: () => apply(undefined),
    onError: (err, retryMs) => {
      if (stopped) return;
      log({ level: "warn", msg: "watch of the authentication ConfigMap failed; retrying", error: err.message, retryMs });
    },
  });
  informer.start();

  return {
    current: () => current,
    stop: async () => {
      stopped = true;
      await informer.stop();
      await chain;
    },
  };
}
