/**
 * The proxy's serving certificate and the CA bundle published in the
 * APIService (`spec.caBundle`), from one of three sources:
 *
 * - `files`: PEM files mounted from a Secret (e.g. cert-manager's
 *   `tls.crt`/`tls.key`/`ca.crt`), re-read when they change;
 * - `secret`: a Secret the proxy owns (`namespace/name`), the single source
 *   of truth for every replica: followed with a watch and reloaded on change,
 *   renewed (with CA overlap) only by the holder of a Lease — see
 *   `rotation.ts`; {@link loadServingMaterial} is its one-shot read;
 * - `generate`: a fresh CA and certificate in memory (one replica, local runs),
 *   made in a short-lived worker thread (`cert-generation.ts`) so that
 *   @peculiar/x509 never stays in the proxy's memory.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { generateServingPair } from "./cert-generation.ts";
import { apiDeadline, apiStatus, type KubeClient, type Secret } from "../kube/client.ts";
import type { Logger } from "../log.ts";
import { DEFAULT_ROTATION, reconcileSecret, secretPath, servingFromSecret } from "./rotation.ts";
import type { ServiceName, ServingMaterial } from "./serving-material.ts";

/** Where the serving certificate comes from. */
export type ServingSource =
  | { kind: "files"; certFile: string; keyFile: string; caFile?: string }
  | { kind: "secret"; namespace: string; name: string }
  | { kind: "generate" };

/**
 * Obtain serving material.
 *
 * @throws Error when files are unreadable, the Secret cannot be read or
 *   created, or generation fails or passes its deadline (30 s)
 */
export async function loadServingMaterial(
  source: ServingSource,
  service: ServiceName,
  deps: { kc?: KubeClient; log: Logger },
): Promise<ServingMaterial> {
  switch (source.kind) {
    case "files":
      return readServingFiles(source);
    case "generate": {
      const { ca, serving, threadId } = await generateServingPair(service.name, service.namespace);
      const cert = new X509Certificate(serving.certPem);
      deps.log({ level: "info", msg: "generated a serving certificate", subject: cert.subject.trim(), notAfter: cert.validToDate.toISOString(), generatedInWorkerThread: threadId });
      return { certPem: serving.certPem, keyPem: serving.keyPem, caPem: ca.certPem };
    }
    case "secret":
      if (deps.kc === undefined) throw new Error("a Kubernetes client is required for --tls-secret");
      return oneShotFromSecret(deps.kc, source, service, deps.log);
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

/**
 * One-shot read of the shared Secret (for a single start, without a writer
 * elected): a usable Secret is served as it is — never replaced by a
 * replica's own CA; an absent or unusable one is written once (see
 * `rotation.ts` for the layout; a concurrent writer makes it 409 and its
 * Secret is read instead). Running proxies use `startSecretServing`, which
 * also follows and renews it.
 */
async function oneShotFromSecret(kc: KubeClient, source: { namespace: string; name: string }, service: ServiceName, log: Logger): Promise<ServingMaterial> {
  for (let attempt = 0; attempt < 5; attempt++) {
    let existing: Secret | undefined;
    try {
      existing = await kc.get<Secret>(secretPath(source), apiDeadline(5000));
    } catch (err) {
      if (apiStatus(err) !== 404) throw new Error(`reading Secret ${source.namespace}/${source.name}: ${(err as Error).message}`);
    }
    const seen = await servingFromSecret(existing, service);
    if ("material" in seen) {
      log({ level: "info", msg: "serving certificate read from Secret", secret: `${source.namespace}/${source.name}` });
      return seen.material;
    }
    await reconcileSecret(kc, source, service, DEFAULT_ROTATION, log);
  }
  throw new Error(`Secret ${source.namespace}/${source.name} kept changing; could not agree on a serving certificate`);
}
