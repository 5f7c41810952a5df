/**
 * The shipped plain manifests (infra/manifests/external-metrics-bridge.yaml)
 * as end-to-end tests apply them to the local control plane, and the proxy
 * Deployment's arguments for a local proxy process; used by
 * test/k8s.e2e.test.ts and test/k8s.rotation.e2e.test.ts.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
/** The shipped plain manifests, relative to the repository root. */
export const MANIFESTS = "infra/manifests/external-metrics-bridge.yaml";
/** The proxy's namespace, Deployment and Service in the shipped manifests. */
export const PROXY_NS = "external-metrics-bridge";
export const PROXY_SERVICE = "external-metrics-bridge-proxy";

interface ManifestObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template?: { spec?: { containers?: { name: string; args?: string[] }[] } } };
}

/**
 * The shipped manifests, as a cluster admin would apply them, minus what
 * cannot run here: the Deployment (its `proxy` container's arguments are
 * returned for local proxy processes), the PodDisruptionBudget, the ConfigMap
 * and the APIService (the proxy registers it itself). The ClusterIP Service
 * becomes an ExternalName Service of the same name resolving to 127.0.0.1,
 * since Endpoints may not be loopback: the aggregator then dials
 * `127.0.0.1:<APIService spec.service.port>`.
 *
 * @throws Error when the Deployment (with a `proxy` container and args) or the Service is missing
 */
export function shippedManifests(): { install: object[]; proxyArgs: string[] } {
  const docs = parseAllDocuments(readFileSync(join(ROOT, MANIFESTS), "utf8"))
    .map((d) => d.toJS() as ManifestObject | null)
    .filter((d): d is ManifestObject => d !== null);
  const deployment = docs.find((d) => d.kind === "Deployment" && d.metadata.name === PROXY_SERVICE);
  const args = deployment?.spec?.template?.spec?.containers?.find((c) => c.name === "proxy")?.args;
  if (args === undefined) throw new Error(`${MANIFESTS}: no Deployment ${PROXY_SERVICE} with a "proxy" container and args`);
  const install: object[] = [];
  for (const d of docs) {
    if (["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"].includes(d.kind)) install.push(d);
    else if (d.kind === "Service" && d.metadata.name === PROXY_SERVICE) {
      install.push({ apiVersion: "v1", kind: "Service", metadata: d.metadata, spec: { type: "ExternalName", externalName: "127.0.0.1" } });
    }
  }
  if (!install.some((d) => (d as ManifestObject).kind === "Service")) throw new Error(`${MANIFESTS}: no Service ${PROXY_SERVICE}`);
  return { install, proxyArgs: args };
}

/**
 * `--flag=value` / `--flag value` arguments with `overrides` replacing
 * (or adding, at the end as `--flag=value`) flags.
 */
export function withFlags(args: readonly string[], overrides: Record<string, string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const flag = arg.split("=")[0]!;
    if (flag in overrides) {
      if (!arg.includes("=") && !(args[i + 1] ?? "--").startsWith("--")) i++;
      continue;
    }
    out.push(arg);
  }
  for (const [flag, value] of Object.entries(overrides)) out.push(`${flag}=${value}`);
  return out;
}
