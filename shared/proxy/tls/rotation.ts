/**
 * The serving certificate kept in one Secret, shared by every replica, renewed
 * by one of them.
 *
 * The Secret (`type: kubernetes.io/tls`) is the single source of truth:
 *
 * | key | content |
 * |---|---|
 * | `tls.crt`, `tls.key` | the serving certificate and its key (PEM) |
 * | `ca.crt` | the CA bundle the APIService publishes as `caBundle`: every CA clients must trust now, oldest first; the last one signs |
 * | `ca.key` | the private key (PKCS #8 PEM) of the signing CA (the last of `ca.crt`) |
 *
 * and two annotations, {@link CA_BUNDLE_CHANGED_AT} and
 * {@link SERVING_CHANGED_AT} (RFC 3339), so a new leader continues a rotation
 * where the previous one stopped.
 *
 * Every replica follows the Secret with a list+watch (kube/informer.ts `Informer` on
 * `metadata.name=<name>`, client-go reflector semantics: re-listed after an
 * error with a back-off of 1 s doubling to 30 s, at once after a 410 Gone)
 * plus a periodic GET, and
 * serves the newest usable certificate (parses, key matches, not expired,
 * names the Service, signed by a CA of the bundle). A replica never makes a
 * certificate of its own while a usable Secret exists.
 *
 * Only the holder of a `coordination.k8s.io/v1` Lease ({@link LeaderElector})
 * writes the Secret (and the APIService, see `server.ts`). It re-reads the
 * Secret right after each write and serves it at once, so the APIService gets
 * the new `caBundle` when it is written, not when the writer's own watch
 * catches up (the overlap counts from the write). It renews:
 *
 * 1. a serving certificate with less than 1/3 of its lifetime left: a new one
 *    from the SAME CA — `ca.crt`, hence `caBundle`, does not change;
 * 2. a CA with less than max(1/3 of its lifetime, 2 × overlap) left (or
 *    without its key in the Secret): in three steps, each at least `overlap`
 *    apart so every reader has caught up before the next —
 *    (a) a new CA is appended to `ca.crt` (caBundle = old + new), the
 *    serving certificate is unchanged; (b) a serving certificate from the new
 *    CA; (c) the old CA is dropped from `ca.crt` (caBundle = new).
 *    Certificates are what the aggregator verifies against `caBundle`, so at
 *    every moment the certificate any replica serves chains to a CA that
 *    `caBundle` holds: through (a)–(b) both CAs are trusted, and the old one
 *    goes only after every replica had `overlap` to load the new certificate.
 *    Step (a) replaces `ca.key` with the new CA's, so a certificate with less
 *    than 2 × overlap left is first renewed from the old CA: it must last
 *    until step (b) without forcing (b) early.
 *
 * A Secret that is deleted, or whose certificate is unusable while no CA key
 * in it can repair it (corrupted, overwritten), must not cut off clients that
 * trust the `caBundle` published before. Every replica therefore holds in
 * memory the last usable Secret it saw (what it serves, with `ca.key`), and
 * the writer plans from THAT content instead:
 *
 * - held certificate and CA still good: the Secret is re-created with them
 *   as they were (step "restore"; `caBundle` and the served certificate do
 *   not change at all);
 * - held certificate due but its CA good: a new certificate from the held CA
 *   (`caBundle` does not change);
 * - held CA without its key or about to expire, held certificate still valid:
 *   the CA rotation above from step (a) — the new CA is published beside the
 *   old one and the served certificate changes only an overlap later.
 *
 * Only when nothing usable is held (a replica started after the Secret was
 * lost, or the held certificate has expired) is a fresh CA and certificate
 * made at once: nothing chains to the old caBundle anyway. To replace a CA on
 * purpose (e.g. its key leaked) remove `ca.key` from the Secret: that starts
 * the overlapped rotation; deleting the Secret no longer does.
 *
 * Certificates are inspected with node:crypto (`pem.ts`) and made in a
 * short-lived worker thread (`cert-generation.ts`): a replica following the
 * Secret never loads @peculiar/x509, and the writer loads it only inside that
 * worker (issue 11 P5).
 *
 * Sources: client-go `tools/leaderelection` (one writer), cert-manager's CA
 * issuer and trust-manager's bundle overlap (rotation by bundle), kube-aggregator
 * `pkg/apiserver/handler_proxy.go` (verifies the Service name against `caBundle`).
 */
import type { X509Certificate } from "node:crypto";
import { createServingCAPem, createServingPair, issueServingPem } from "./cert-generation.ts";
import { certificatePem, certificatesFromPem, dnsNames, keyMatchesCertificate, notAfter, notBefore, serviceDnsNames, signedBy } from "./pem.ts";
import type { LeaderElector } from "./lease.ts";
import { parseRfc3339 } from "../../k8s/time.ts";
import { apiDeadline, apiStatus, type KubeClient, type Secret } from "../kube/client.ts";
import { Informer } from "../kube/informer.ts";
import type { Logger } from "../log.ts";
import type { ServiceName, ServingMaterial } from "./serving-material.ts";

/** When `ca.crt` last changed (RFC 3339). */
export const CA_BUNDLE_CHANGED_AT = "external-metrics-bridge.io/ca-bundle-changed-at";
/** When `tls.crt` last changed issuer (RFC 3339). */
export const SERVING_CHANGED_AT = "external-metrics-bridge.io/serving-changed-at";

const DAY_S = 24 * 3600;
/** Deadline of each Secret read or write, ms. */
const API_DEADLINE_MS = 5000;

/** Lifetimes and pacing of renewal. */
export interface RotationSettings {
  /** serving certificate validity, seconds (default 365 days) */
  certValiditySeconds: number;
  /** CA validity, seconds (default 3650 days); at least 3 × certValiditySeconds */
  caValiditySeconds: number;
  /** minimum time between the steps of a CA rotation, seconds (default 600) */
  overlapSeconds: number;
}

/** The defaults: 1-year certificates, 10-year CAs, 10 minutes between rotation steps. */
export const DEFAULT_ROTATION: RotationSettings = { certValiditySeconds: 365 * DAY_S, caValiditySeconds: 3650 * DAY_S, overlapSeconds: 600 };

/**
 * Check settings.
 *
 * @throws Error when a value is not positive, the CA cannot cover three
 *   certificate lifetimes, or the overlap is not shorter than a third of a certificate's life
 */
export function validateRotation(s: RotationSettings): RotationSettings {
  for (const [k, v] of Object.entries(s)) if (!Number.isFinite(v) || v <= 0) throw new Error(`${k} must be a positive number of seconds`);
  if (s.caValiditySeconds < 3 * s.certValiditySeconds) throw new Error("the CA validity must be at least 3 times the certificate validity");
  if (s.overlapSeconds * 3 > s.certValiditySeconds) throw new Error("the rotation overlap must be at most a third of the certificate validity");
  return s;
}

/** API path of a Secret (`/api/v1/namespaces/NS/secrets[/NAME]`). */
export function secretPath(target: { namespace: string; name?: string }): string {
  const base = `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/secrets`;
  return target.name === undefined ? base : `${base}/${encodeURIComponent(target.name)}`;
}

/** The Secret's content, decoded. */
interface Stored {
  certPem?: string;
  keyPem?: string;
  caBundlePem?: string;
  caKeyPem?: string;
  caBundleChangedAt?: number;
  servingChangedAt?: number;
  resourceVersion?: string;
}

function decode(secret: Secret | undefined): Stored | undefined {
  if (secret === undefined) return undefined;
  const data = secret.data ?? {};
  const get = (k: string) => (data[k] !== undefined ? Buffer.from(data[k]!, "base64").toString("utf8") : undefined);
  const time = (k: string) => {
    return parseRfc3339(secret.metadata?.annotations?.[k]);
  };
  const out: Stored = {};
  const set = <K extends keyof Stored>(k: K, v: Stored[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set("certPem", get("tls.crt"));
  set("keyPem", get("tls.key"));
  set("caBundlePem", get("ca.crt"));
  set("caKeyPem", get("ca.key"));
  set("caBundleChangedAt", time(CA_BUNDLE_CHANGED_AT));
  set("servingChangedAt", time(SERVING_CHANGED_AT));
  set("resourceVersion", secret.metadata?.resourceVersion);
  return out;
}

/** The parsed certificates of a stored Secret. */
interface Parsed {
  leaf?: X509Certificate;
  cas: X509Certificate[];
  /** the CA of `cas` that signed `leaf` */
  leafIssuer?: X509Certificate;
  /** the last CA, when `ca.key` is its key */
  signer?: X509Certificate;
}

function parse(s: Stored): Parsed {
  const certs = (pem: string | undefined) => {
    try {
      return pem === undefined ? [] : certificatesFromPem(pem);
    } catch {
      return [];
    }
  };
  const leaf = certs(s.certPem)[0];
  const cas = certs(s.caBundlePem);
  const last = cas.at(-1);
  const out: Parsed = { cas };
  if (leaf !== undefined) out.leaf = leaf;
  if (last !== undefined && s.caKeyPem !== undefined && keyMatchesCertificate(last, s.caKeyPem)) out.signer = last;
  if (leaf !== undefined) {
    for (const ca of cas) {
      if (signedBy(leaf, ca)) {
        out.leafIssuer = ca;
        break;
      }
    }
  }
  return out;
}

/**
 * Why the stored serving certificate cannot be served (undefined when it can):
 * it must parse, match its key, be within its validity, name
 * `<service>.<namespace>.svc`, and be signed by a CA of `ca.crt`.
 */
function servingProblem(s: Stored, p: Parsed, service: ServiceName, now: number): string | undefined {
  if (s.certPem === undefined || s.keyPem === undefined) return "tls.crt or tls.key is missing";
  if (p.leaf === undefined) return "tls.crt holds no certificate";
  if (!keyMatchesCertificate(p.leaf, s.keyPem)) return "tls.key is not the key of tls.crt";
  if (notAfter(p.leaf).getTime() <= now) return `the certificate expired at ${notAfter(p.leaf).toISOString()}`;
  if (notBefore(p.leaf).getTime() > now) return "the certificate is not valid yet";
  const wanted = serviceDnsNames(service.name, service.namespace)[2]!;
  if (!dnsNames(p.leaf).includes(wanted)) return `the certificate does not cover ${wanted}`;
  if (p.cas.length === 0) return "ca.crt holds no certificate";
  if (p.leafIssuer === undefined) return "the certificate is not signed by a CA of ca.crt";
  return undefined;
}

/**
 * What the Secret's content means for a replica: the material to serve, or why not.
 */
export async function servingFromSecret(secret: Secret | undefined, service: ServiceName, now = Date.now()): Promise<{ material: ServingMaterial } | { problem: string }> {
  const s = decode(secret);
  if (s === undefined) return { problem: "the Secret does not exist" };
  const problem = servingProblem(s, parse(s), service, now);
  if (problem !== undefined) return { problem };
  return { material: { certPem: s.certPem!, keyPem: s.keyPem!, caPem: s.caBundlePem! } };
}

/** One step the writer takes. */
export type RotationStep =
  | { kind: "none" }
  | { kind: "create"; reason: string }
  | { kind: "restore"; reason: string }
  | { kind: "reissue"; reason: string }
  | { kind: "add-ca"; reason: string }
  | { kind: "switch"; reason: string }
  | { kind: "drop-old-ca"; reason: string };

/**
 * Decide the writer's next step for the stored Secret (pure but for
 * signature checks). See the module comment for the rules.
 */
export async function planRotation(secret: Secret | undefined, service: ServiceName, settings: RotationSettings, now = Date.now()): Promise<RotationStep> {
  const s = decode(secret);
  if (s === undefined) return { kind: "create", reason: "the Secret does not exist" };
  const p = parse(s);
  const overlapMs = settings.overlapSeconds * 1000;
  const signerUsable = p.signer !== undefined && notAfter(p.signer).getTime() - now > 2 * overlapMs;
  const problem = servingProblem(s, p, service, now);
  if (problem !== undefined) {
    // Nothing works with it now: repair from the signing CA when it still has time, else start over.
    return signerUsable ? { kind: "reissue", reason: problem } : { kind: "create", reason: problem };
  }
  const leaf = p.leaf!;
  const remaining = (c: X509Certificate) => notAfter(c).getTime() - now;
  const lifetime = (c: X509Certificate) => notAfter(c).getTime() - notBefore(c).getTime();
  const leafDue = remaining(leaf) < lifetime(leaf) / 3;
  const rotating = p.signer !== undefined && p.leafIssuer !== p.signer;

  if (rotating) {
    // Step (b): serve from the new CA once caBundle has carried it for the overlap.
    const since = now - (s.caBundleChangedAt ?? 0);
    if (since >= overlapMs) return { kind: "switch", reason: "the new CA has been in caBundle for the overlap" };
    if (remaining(leaf) < overlapMs) return { kind: "switch", reason: "the certificate expires before the overlap ends" };
    return { kind: "none" };
  }
  const signer = p.signer;
  const caDue =
    signer === undefined
      ? "ca.key is missing or is not the key of the last CA of ca.crt"
      : remaining(signer) < Math.max(lifetime(signer) / 3, 2 * overlapMs)
        ? `the CA expires at ${notAfter(signer).toISOString()}`
        : undefined;
  if (caDue !== undefined) {
    // Step (a) drops the old CA's key, so the certificate served now must last
    // until step (b), an overlap later. One that would not is renewed from the
    // old CA first (while it still has more than 2 × overlap, the renewed one
    // does), instead of forcing step (b) before every reader has the new caBundle.
    if (signerUsable && remaining(leaf) < 2 * overlapMs) {
      return { kind: "reissue", reason: `the certificate would expire during the CA rotation's overlap (expires ${notAfter(leaf).toISOString()})` };
    }
    return { kind: "add-ca", reason: caDue };
  }
  if (p.cas.length > 1) {
    // Step (c): the old CA goes once every replica had the overlap to load the new certificate.
    const since = now - (s.servingChangedAt ?? 0);
    if (since >= overlapMs) return { kind: "drop-old-ca", reason: "every replica had the overlap to load the certificate of the new CA" };
  }
  if (leafDue) return { kind: "reissue", reason: `less than a third of the certificate's lifetime is left (expires ${notAfter(leaf).toISOString()})` };
  return { kind: "none" };
}

/**
 * The Secret body after a step (undefined for "none"). The certificates and
 * keys come from `base` (the stored Secret, or the held one when the stored
 * one was lost), the object's metadata (resourceVersion for the replace) from
 * `existing` (the stored Secret). New certificates are
 * made in a worker thread (`cert-generation.ts`) with validity counted from
 * `now`; `workerThreadId` is that thread's id (undefined when nothing was made).
 *
 * @throws Error when generation fails or passes its deadline
 */
async function applyStep(
  step: RotationStep,
  base: Secret | undefined,
  existing: Secret | undefined,
  target: { namespace: string; name: string },
  service: ServiceName,
  settings: RotationSettings,
  now: number,
): Promise<{ body: Secret; workerThreadId: number | undefined } | undefined> {
  const s = decode(base) ?? {};
  const p = parse(s);
  const stamp = new Date(now).toISOString();
  let certPem = s.certPem;
  let keyPem = s.keyPem;
  let caKeyPem = s.caKeyPem;
  const annotations: Record<string, string> = { ...(existing?.metadata?.annotations ?? {}), ...(base?.metadata?.annotations ?? {}) };
  let workerThreadId: number | undefined;
  const issueFrom = async (caCert: X509Certificate, caKey: string) => {
    const serving = await issueServingPem({ certPem: certificatePem(caCert), keyPem: caKey }, service.name, service.namespace, settings.certValiditySeconds, now);
    certPem = serving.certPem;
    keyPem = serving.keyPem;
    workerThreadId = serving.threadId;
  };
  /** CA certificates to keep, as PEM; a new CA is appended as the PEM the worker made */
  let caPems: string[] = p.cas.map(certificatePem);
  switch (step.kind) {
    case "none":
      return undefined;
    case "restore":
      break;
    case "create": {
      const { ca, serving, threadId } = await createServingPair(service.name, service.namespace, settings.caValiditySeconds, settings.certValiditySeconds, now);
      workerThreadId = threadId;
      certPem = serving.certPem;
      keyPem = serving.keyPem;
      caPems = [ca.certPem.trim()];
      caKeyPem = ca.keyPem;
      annotations[CA_BUNDLE_CHANGED_AT] = stamp;
      annotations[SERVING_CHANGED_AT] = stamp;
      break;
    }
    case "reissue":
    case "switch":
      await issueFrom(p.signer!, s.caKeyPem!);
      annotations[SERVING_CHANGED_AT] = stamp;
      break;
    case "add-ca": {
      const ca = await createServingCAPem(service.name, service.namespace, settings.caValiditySeconds, now);
      // Keep the CA that signed the certificate being served; drop expired ones.
      caPems = [...p.cas.filter((c) => c === p.leafIssuer || notAfter(c).getTime() > now).map(certificatePem), ca.certPem.trim()];
      caKeyPem = ca.keyPem;
      workerThreadId = ca.threadId;
      annotations[CA_BUNDLE_CHANGED_AT] = stamp;
      break;
    }
    case "drop-old-ca":
      caPems = [certificatePem(p.signer!)];
      annotations[CA_BUNDLE_CHANGED_AT] = stamp;
      break;
  }
  const b64 = (text: string) => Buffer.from(text).toString("base64");
  const body: Secret = {
    apiVersion: "v1",
    kind: "Secret",
    type: "kubernetes.io/tls",
    metadata: {
      ...(existing?.metadata ?? {}),
      name: target.name,
      namespace: target.namespace,
      labels: { ...(existing?.metadata?.labels ?? {}), "app.kubernetes.io/name": "external-metrics-bridge-proxy", "app.kubernetes.io/component": "serving-certificate" },
      annotations,
    },
    data: {
      ...(existing?.data ?? {}),
      "tls.crt": b64(certPem!),
      "tls.key": b64(keyPem!),
      "ca.crt": b64(caPems.join("\n") + "\n"),
      "ca.key": b64(caKeyPem!),
    },
  };
  return { body, workerThreadId };
}

/**
 * The step and the content it starts from: the stored Secret's plan, unless
 * that plan is "create" (absent, or unusable beyond repair) and the held
 * Secret (the last usable one this replica saw) still has something usable —
 * then the held Secret's plan, with "none" meaning "restore" it as it was.
 */
async function planWithHeld(
  secret: Secret | undefined,
  held: Secret | undefined,
  service: ServiceName,
  settings: RotationSettings,
  now: number,
): Promise<{ step: RotationStep; base: Secret | undefined }> {
  const step = await planRotation(secret, service, settings, now);
  if (step.kind !== "create" || held === undefined) return { step, base: secret };
  const fromHeld = await planRotation(held, service, settings, now);
  if (fromHeld.kind === "create") return { step, base: secret };
  const lost = `${step.reason}; continuing from the certificate and CA held in memory`;
  if (fromHeld.kind === "none") return { step: { kind: "restore", reason: lost }, base: held };
  return { step: { kind: fromHeld.kind, reason: `${lost}: ${fromHeld.reason}` }, base: held };
}

/**
 * Take the writer's next step once: read the Secret, plan, write (create, or
 * replace with the read resourceVersion — a concurrent write makes it 409,
 * and the step is planned again from the newer Secret next time).
 *
 * @param now "now", ms since the epoch (default `Date.now()`)
 * @param held the last usable Secret this replica saw (kept in memory by
 *   {@link startSecretServing}): when the stored Secret is absent or unusable
 *   beyond repair, the writer continues from it (step "restore", or the
 *   rotation steps from its CA) instead of making a new CA without overlap
 * @returns the step taken (`none` when nothing was due or the write lost a race)
 * @throws Error when the API refuses for another reason (e.g. RBAC)
 */
export async function reconcileSecret(
  kc: KubeClient,
  target: { namespace: string; name: string },
  service: ServiceName,
  settings: RotationSettings,
  log: Logger,
  now = Date.now(),
  held?: Secret,
): Promise<RotationStep> {
  let secret: Secret | undefined;
  try {
    secret = await kc.get<Secret>(secretPath(target), apiDeadline(API_DEADLINE_MS));
  } catch (err) {
    if (apiStatus(err) !== 404) throw new Error(`reading Secret ${target.namespace}/${target.name}: ${(err as Error).message}`);
  }
  const { step, base } = await planWithHeld(secret, held, service, settings, now);
  const applied = await applyStep(step, base, secret, target, service, settings, now);
  if (applied === undefined) return step;
  const body = applied.body;
  try {
    if (secret === undefined) await kc.create<Secret>(secretPath({ namespace: target.namespace }), body, apiDeadline(API_DEADLINE_MS));
    else await kc.replace<Secret>(secretPath(target), body, apiDeadline(API_DEADLINE_MS));
  } catch (err) {
    if (apiStatus(err) === 409) return { kind: "none" };
    throw new Error(`writing Secret ${target.namespace}/${target.name}: ${(err as Error).message}`);
  }
  log({
    level: "info",
    msg: "serving certificate Secret updated",
    secret: `${target.namespace}/${target.name}`,
    step: step.kind,
    reason: "reason" in step ? step.reason : undefined,
    generatedInWorkerThread: applied.workerThreadId,
  });
  return step;
}

/** Settings of {@link startSecretServing}. */
export interface SecretServingOptions {
  kc: KubeClient;
  secret: { namespace: string; name: string };
  service: ServiceName;
  /** elects the one writer; undefined = this replica never writes (it only follows the Secret) */
  elector?: LeaderElector;
  rotation?: RotationSettings;
  log: Logger;
  /** how often the writer re-checks lifetimes, ms (default: 1/20 of the certificate validity, 1 s – 60 s) */
  checkIntervalMs?: number;
  /** how often every replica re-reads the Secret besides its watch, ms (default 60 000) */
  resyncIntervalMs?: number;
}

/** A replica's view of the Secret. */
export interface SecretServing {
  /** the material served now (undefined until a usable Secret was seen) */
  current(): ServingMaterial | undefined;
  /** resolves with the first usable material; rejects after `timeoutMs` */
  ready(timeoutMs: number): Promise<ServingMaterial>;
  /** called with every new usable material (not with the first) */
  onChange(listener: (material: ServingMaterial) => void): void;
  /** run the writer's check now (no-op when not leading) */
  reconcile(): Promise<RotationStep | undefined>;
  stop(): Promise<void>;
}

/**
 * Follow the Secret (every replica) and, while `elector` leads, keep it
 * renewed (see the module comment).
 */
export function startSecretServing(options: SecretServingOptions): SecretServing {
  const { kc, secret: target, service, log } = options;
  const settings = validateRotation(options.rotation ?? DEFAULT_ROTATION);
  const fieldSelector = `metadata.name=${target.name}`;
  const where = `${target.namespace}/${target.name}`;
  let current: ServingMaterial | undefined;
  /** the Secret `current` came from (with `ca.key`): what the writer continues from if the Secret is lost */
  let held: Secret | undefined;
  const listeners: ((m: ServingMaterial) => void)[] = [];
  const waiters: ((m: ServingMaterial) => void)[] = [];
  let stopped = false;
  let lastProblem: string | undefined;
  // Applies are serialized so an older object never overwrites a newer one.
  let chain = Promise.resolve();
  const elector = options.elector;

  const apply = (secret: Secret | undefined, via: string) => {
    chain = chain.then(async () => {
      const seen = await servingFromSecret(secret, service);
      if ("problem" in seen) {
        if (seen.problem !== lastProblem) {
          log({ level: current ? "warn" : "info", msg: "serving certificate Secret not usable; keeping the current certificate", secret: where, problem: seen.problem, via });
        }
        lastProblem = seen.problem;
        if (elector?.isLeader()) void reconcile();
        return;
      }
      lastProblem = undefined;
      held = secret;
      const next = seen.material;
      if (current !== undefined && next.certPem === current.certPem && next.keyPem === current.keyPem && next.caPem === current.caPem) return;
      const first = current === undefined;
      current = next;
      const leaf = certificatesFromPem(next.certPem)[0]!;
      log({ level: "info", msg: first ? "serving certificate loaded from Secret" : "serving certificate changed in Secret", secret: where, notAfter: notAfter(leaf).toISOString(), cas: certificatesFromPem(next.caPem!).length, via });
      if (first) for (const w of waiters.splice(0)) w(next);
      else for (const l of listeners) l(next);
    });
    return chain;
  };

  const informer = new Informer<Secret>(kc, {
    path: secretPath({ namespace: target.namespace }),
    fieldSelector,
    listTimeoutMs: API_DEADLINE_MS,
    onListed: (items) => {
      if (!items.some((s) => s.metadata?.name === target.name)) void apply(undefined, "list");
    },
    onAdd: (obj) => void apply(obj, "watch"),
    onUpdate: (obj) => void apply(obj, "watch"),
    onDelete: () => void apply(undefined, "watch"),
    onError: (err, retryMs) => {
      if (stopped) return;
      log({ level: "warn", msg: "watch of the serving certificate Secret failed; listing again", secret: where, error: err.message, retryMs });
    },
  });

  let reconciling: Promise<RotationStep | undefined> | undefined;
  const reconcile = (): Promise<RotationStep | undefined> => {
    if (elector === undefined || !elector.isLeader() || stopped) return Promise.resolve(undefined);
    reconciling ??= (async () => {
      try {
        let step: RotationStep;
        // Up to 3 steps at once (e.g. a fresh Secret), each from the Secret just written.
        for (let i = 0; i < 3; i++) {
          step = await reconcileSecret(kc, target, service, settings, log, Date.now(), held);
          // Serve (and publish, through onChange → the APIService) what was just
          // written without waiting for the watch: the overlap of the next step
          // counts from the write, so a lagging watch must not delay caBundle.
          if (step.kind !== "none") await resync();
          if (step.kind === "none" || step.kind === "add-ca" || step.kind === "switch" || step.kind === "drop-old-ca") return step;
        }
        return step!;
      } catch (err) {
        log({ level: "error", msg: "could not renew the serving certificate Secret", secret: where, error: (err as Error).message });
        return undefined;
      } finally {
        reconciling = undefined;
      }
    })();
    return reconciling;
  };

  const resync = async () => {
    try {
      const s = await kc.get<Secret>(secretPath(target), apiDeadline(API_DEADLINE_MS));
      await apply(s, "resync");
    } catch (err) {
      if (apiStatus(err) === 404) await apply(undefined, "resync");
      else log({ level: "warn", msg: "could not read the serving certificate Secret", secret: where, error: (err as Error).message });
    }
  };

  elector?.on("started", () => void reconcile());
  const checkMs = options.checkIntervalMs ?? Math.min(60_000, Math.max(1000, (settings.certValiditySeconds * 1000) / 20));
  const checkTimer = setInterval(() => void reconcile(), checkMs);
  checkTimer.unref();
  const resyncTimer = setInterval(() => void resync(), options.resyncIntervalMs ?? 60_000);
  resyncTimer.unref();
  informer.start();

  return {
    current: () => current,
    ready: (timeoutMs) =>
      current !== undefined
        ? Promise.resolve(current)
        : new Promise<ServingMaterial>((resolve, reject) => {
            const timer = setTimeout(() => reject(new Error(`no usable serving certificate in Secret ${where} after ${timeoutMs} ms (${lastProblem ?? "not read yet"})`)), timeoutMs);
            waiters.push((m) => {
              clearTimeout(timer);
              resolve(m);
            });
          }),
    onChange: (listener) => void listeners.push(listener),
    reconcile,
    stop: async () => {
      stopped = true;
      clearInterval(checkTimer);
      clearInterval(resyncTimer);
      await informer.stop();
      await reconciling;
      await chain;
    },
  };
}
