/**
 * The proxy's serving certificate over its life, whichever the source
 * (`tls.ts` {@link ServingSource}):
 *
 * - `secret`: every replica follows the Secret (`rotation.ts`); a
 *   `coordination.k8s.io` Lease (`lease.ts`) elects the one replica that
 *   renews and rotates it and writes the APIService;
 * - `files`: PEM files (e.g. mounted by cert-manager), re-read every 30 s
 *   when their modification times change;
 * - `generate`: a fresh CA and certificate in memory (one replica, local runs).
 *
 * What the command line (`functions/proxy/main.ts`) hands over is the
 * source and the settings; it gets back the first material, a change
 * listener, whether this replica may write the APIService, and `stop()`.
 */
import { hostname } from "node:os";
import type { KubeClient } from "../kube/client.ts";
import { LeaderElector } from "./lease.ts";
import type { Logger } from "../log.ts";
import { startSecretServing, validateRotation, type RotationSettings, type SecretServing } from "./rotation.ts";
import type { ServiceName, ServingMaterial } from "./serving-material.ts";
import { filesVersion, loadServingMaterial, readServingFiles, type ServingSource } from "./tls.ts";

/** How often mounted certificate files are checked for a change, ms. */
export const FILES_RECHECK_MS = 30_000;
/** Longest wait for a usable Secret at start, ms. */
const SECRET_READY_TIMEOUT_MS = 120_000;

/** Leader election of the Secret's writer (client-go `leaderelection` names; seconds). */
export interface LeaderElectionSettings {
  /** the Lease (default: the Secret's namespace/name) */
  lease?: { namespace: string; name: string };
  /** this replica's `holderIdentity` (default `<hostname>_<uuid>`) */
  identity?: string;
  leaseDurationSeconds: number;
  renewDeadlineSeconds: number;
  retryPeriodSeconds: number;
}

/** What {@link startServing} needs. */
export interface ServingOptions {
  source: ServingSource;
  service: ServiceName;
  kc: KubeClient;
  log: Logger;
  /** `secret` source: certificate lifetimes and rotation overlap */
  rotation: RotationSettings;
  /** `secret` source: who writes */
  leaderElection: LeaderElectionSettings;
}

/** The serving certificate as the proxy uses it. */
export interface Serving {
  /** the material to start serving with */
  material: ServingMaterial;
  /** call `listener` with every later material (a renewed or rotated certificate, changed files) */
  onChange(listener: (material: ServingMaterial) => void): void;
  /** whether this replica may write the APIService (undefined: no election, it may) */
  isLeader?: () => boolean;
  /** hand the Lease over and stop following the Secret or the files */
  stop(): Promise<void>;
}

/**
 * Obtain the first serving material and keep it current.
 *
 * @throws Error when the rotation or election settings are invalid, files
 *   are unreadable, or no usable Secret appears within 120 s
 */
export async function startServing(options: ServingOptions): Promise<Serving> {
  const { source, service, kc, log } = options;
  if (source.kind === "secret") {
    const rotation = validateRotation(options.rotation);
    const le = options.leaderElection;
    const elector = new LeaderElector({
      kc,
      ...(le.lease ?? { namespace: source.namespace, name: source.name }),
      identity: le.identity || `${hostname()}_${crypto.randomUUID()}`,
      leaseDurationSeconds: le.leaseDurationSeconds,
      renewDeadlineMs: le.renewDeadlineSeconds * 1000,
      retryPeriodMs: le.retryPeriodSeconds * 1000,
      log,
    });
    const secret: SecretServing = startSecretServing({ kc, secret: { namespace: source.namespace, name: source.name }, service, elector, rotation, log });
    elector.start();
    const material = await secret.ready(SECRET_READY_TIMEOUT_MS);
    return {
      material,
      onChange: (listener) => secret.onChange(listener),
      isLeader: () => elector.isLeader(),
      stop: async () => {
        await Promise.all([elector.stop(), secret.stop()]);
      },
    };
  }
  const material = await loadServingMaterial(source, service, { kc, log });
  if (source.kind !== "files") return { material, onChange: () => {}, stop: async () => {} };

  const listeners: ((m: ServingMaterial) => void)[] = [];
  let version = filesVersion(source);
  const timer = setInterval(() => {
    const next = filesVersion(source);
    if (next === version) return;
    version = next;
    let changed: ServingMaterial;
    try {
      changed = readServingFiles(source);
    } catch (err) {
      log({ level: "error", msg: "could not reload the serving certificate", error: (err as Error).message });
      return;
    }
    for (const listener of listeners) listener(changed);
  }, FILES_RECHECK_MS);
  timer.unref();
  return {
    material,
    onChange: (listener) => void listeners.push(listener),
    stop: async () => clearInterval(timer),
  };
}
