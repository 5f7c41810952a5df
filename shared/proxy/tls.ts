/**
 * The proxy's serving certificate and the CA bundle published in the
 * APIService (`spec.caBundle`), from one of three sources:
 *
 * - `files`: PEM files mounted from a Secret (e.g. cert-manager's
 *   `tls.crt`/`tls.key`/`ca.crt`), re-read when they change;
 * - `secret`: a Secret the proxy owns (`namespace/name`): read when it
 *   exists, else a CA and serving certificate are generated and the Secret is
 *   created — the first replica creates it, the others (losing the create
 *   race with 409) read it — so every replica serves the same certificate and
 *   one `caBundle` is right for all. Regenerated when it expires within 30
 *   days or does not cover the Service's names;
 * - `generate`: a fresh CA and certificate in memory (one replica, local runs).
 */
import { readFileSync, statSync } from "node:fs";
import { CoreV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { x509 } from "./x509.ts";
import { certificatesFromPem, generateServingCertificate, serviceDnsNames } from "./certs.ts";
import { apiStatus } from "./kube.ts";
import type { Logger } from "./log.ts";

/** Renew a stored certificate this long before it expires, ms. */
const RENEW_BEFORE_MS = 30 * 24 * 3600 * 1000;

/** Serving certificate, key and the CA bundle clients verify it with. */
export interface ServingMaterial {
  certPem: string;
  keyPem: string;
  /** PEM CA bundle for `caBundle`; undefined when unknown (files without a CA file) */
  caPem?: string;
}

/** Where the serving certificate comes from. */
export type ServingSource =
  | { kind: "files"; certFile: string; keyFile: string; caFile?: string }
  | { kind: "secret"; namespace: string; name: string }
  | { kind: "generate" };

/** The Service the certificate must cover. */
export interface ServiceName {
  namespace: string;
  name: string;
}

/**
 * Obtain serving material.
 *
 * @throws Error when files are unreadable, or the Secret cannot be read or created
 */
export async function loadServingMaterial(
  source: ServingSource,
  service: ServiceName,
  deps: { kc?: KubeConfig; log: Logger },
): Promise<ServingMaterial> {
  switch (source.kind) {
    case "files":
      return readServingFiles(source);
    case "generate": {
      const { ca, serving } = await generateServingCertificate(service.name, service.namespace);
      deps.log({ level: "info", msg: "generated a serving certificate", subject: serving.cert.subject, notAfter: serving.cert.notAfter.toISOString() });
      return { certPem: serving.certPem, keyPem: serving.keyPem, caPem: ca.certPem };
    }
    case "secret":
      if (deps.kc === undefined) throw new Error("a Kubernetes client is required for --tls-secret");
      return servingFromSecret(deps.kc.makeApiClient(CoreV1Api), source, service, deps.log);
  }
}

/** Read PEM files. @throws Error when a file cannot be read */
export function readServingFiles(source: { certFile: string; keyFile: string; caFile?: string }): ServingMaterial {
  return {
    certPem: readFileSync(source.certFile, "utf8"),
    keyPem: readFileSync(source.keyFile, "utf8"),
    ...(source.caFile ? { caPem: readFileSync(source.caFile, "utf8") } : {}),
  };
}

/** The modification times of the files, to notice rotation. */
export function filesVersion(source: { certFile: string; keyFile: string; caFile?: string }): string {
  return [source.certFile, source.keyFile, source.caFile]
    .filter((f): f is string => f !== undefined)
    .map((f) => {
      try {
        return String(statSync(f).mtimeMs);
      } catch {
        return "missing";
      }
    })
    .join(",");
}

async function servingFromSecret(core: CoreV1Api, source: { namespace: string; name: string }, service: ServiceName, log: Logger): Promise<ServingMaterial> {
  for (let attempt = 0; attempt < 5; attempt++) {
    let existing: V1Secret | undefined;
    try {
      existing = await core.readNamespacedSecret({ namespace: source.namespace, name: source.name });
    } catch (err) {
      if (apiStatus(err) !== 404) throw new Error(`reading Secret ${source.namespace}/${source.name}: ${(err as Error).message}`);
    }
    const material = existing !== undefined ? materialOf(existing) : undefined;
    const problem = material === undefined ? "absent" : unusable(material, service);
    if (problem === undefined) {
      log({ level: "info", msg: "serving certificate read from Secret", secret: `${source.namespace}/${source.name}` });
      return material!;
    }
    const { ca, serving } = await generateServingCertificate(service.name, service.namespace);
    const generated: ServingMaterial = { certPem: serving.certPem, keyPem: serving.keyPem, caPem: ca.certPem };
    const body: V1Secret = {
      apiVersion: "v1",
      kind: "Secret",
      type: "kubernetes.io/tls",
      metadata: {
        name: source.name,
        namespace: source.namespace,
        labels: { "app.kubernetes.io/name": "external-metrics-bridge-proxy", "app.kubernetes.io/component": "serving-certificate" },
        ...(existing?.metadata?.resourceVersion ? { resourceVersion: existing.metadata.resourceVersion } : {}),
      },
      data: {
        "tls.crt": Buffer.from(generated.certPem).toString("base64"),
        "tls.key": Buffer.from(generated.keyPem).toString("base64"),
        "ca.crt": Buffer.from(generated.caPem!).toString("base64"),
      },
    };
    try {
      if (existing === undefined) await core.createNamespacedSecret({ namespace: source.namespace, body });
      else await core.replaceNamespacedSecret({ namespace: source.namespace, name: source.name, body });
      log({ level: "info", msg: "serving certificate generated and stored", secret: `${source.namespace}/${source.name}`, reason: problem });
      return generated;
    } catch (err) {
      // 409: another replica wrote it first — read theirs.
      if (apiStatus(err) !== 409) throw new Error(`writing Secret ${source.namespace}/${source.name}: ${(err as Error).message}`);
    }
  }
  throw new Error(`Secret ${source.namespace}/${source.name} kept changing; could not agree on a serving certificate`);
}

function materialOf(secret: V1Secret): ServingMaterial | undefined {
  const data = secret.data ?? {};
  const get = (k: string) => (data[k] !== undefined ? Buffer.from(data[k]!, "base64").toString("utf8") : undefined);
  const certPem = get("tls.crt");
  const keyPem = get("tls.key");
  if (certPem === undefined || keyPem === undefined) return undefined;
  const caPem = get("ca.crt");
  return { certPem, keyPem, ...(caPem !== undefined ? { caPem } : {}) };
}

/** Why stored material cannot be used (undefined when it can). */
function unusable(material: ServingMaterial, service: ServiceName): string | undefined {
  let leaf: x509.X509Certificate | undefined;
  try {
    leaf = certificatesFromPem(material.certPem)[0];
  } catch {
    return "tls.crt does not parse";
  }
  if (leaf === undefined) return "tls.crt holds no certificate";
  if (material.caPem === undefined) return "ca.crt is missing";
  if (leaf.notAfter.getTime() - Date.now() < RENEW_BEFORE_MS) return "the certificate expires within 30 days";
  const san = leaf.getExtension(x509.SubjectAlternativeNameExtension);
  const dns = new Set((san?.names.items ?? []).filter((n) => n.type === "dns").map((n) => n.value));
  const wanted = serviceDnsNames(service.name, service.namespace)[2]!;
  if (!dns.has(wanted)) return `the certificate does not cover ${wanted}`;
  return undefined;
}
