/**
 * Serving-certificate rotation with two proxy replicas, against real
 * Kubernetes (kube-apiserver's aggregation layer and kube-controller-manager's
 * HPA controller, test/k8s/cluster.ts).
 *
 *   HPA controller ─► kube-apiserver (aggregator) ─► round-robin TCP forwarder
 *     ─► proxy-a │ proxy-b (TLS, one Secret, one Lease) ─► bridge ─► fauxqs
 *
 * Both replicas run with the shipped Deployment's arguments
 * (`--tls-secret`, the Lease) and short lifetimes, so within about two minutes
 * the Lease holder renews the serving certificate from the same CA (caBundle
 * unchanged) and rotates the CA in three steps (caBundle old → old+new →
 * new). The aggregator dials one address (the ExternalName Service →
 * 127.0.0.1 on the APIService port), where a forwarder alternates connections
 * between the replicas, as a Service spreads them over pods.
 *
 * Every second during the run: the APIService (`Available`, `caBundle`), the
 * certificate each replica serves (and whether it chains to the caBundle of
 * that moment, as the aggregator verifies it: kube-aggregator
 * `pkg/apiserver/handler_proxy.go`), the HPA's `ScalingActive`, and a value read
 * through kube-apiserver as a user RBAC allows.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { randomBytes, X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";
import { buildControlPlane, freePorts, logTails, startControlPlane, startProcess, waitFor, type ControlPlane, type LoggedProcess } from "../k8s/cluster.ts";
import { API_SERVICE, e2eBridgeConfig, placeholderDeployment, PROXY_NS, PROXY_SERVICE, shippedManifests, startBridgeProcess, waitForAPIServiceAvailable, withFlags, type Condition } from "../k8s/shipped.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "../..");
const GROUP_VERSION = "external.metrics.k8s.io/v1beta1";
const METRIC = "queue_messages_ready";
const NS = "team-a";
const QUEUE = "team-a-jobs";
const SERVER_NAME = `${PROXY_SERVICE}.${PROXY_NS}.svc`;
/**
 * Lifetimes: certificates renewed with a third of 30 s left (every ~20 s); the
 * CA rotated with max(90/3, 2 × 8) = 30 s left, i.e. ~60 s after it was made,
 * its steps 8 s apart.
 */
const CERT_VALIDITY_S = 30;
const CA_VALIDITY_S = 90;
const OVERLAP_S = 8;
const HPA_SYNC_SECONDS = 2;
const [TARGET, MIN, MAX] = [4, 1, 6] as const;
/** the first two replicas; the Lease holder is replaced by proxy-c during the CA rotation */
const REPLICAS = ["proxy-a", "proxy-b", "proxy-c"] as const;

const yamlDocs = (...docs: object[]) => docs.map((d) => stringify(d)).join("---\n");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const expectedReplicas = (depth: number) => Math.min(MAX, Math.max(MIN, Math.ceil(depth / TARGET)));


/** PEM blocks of a bundle, parsed. */
function pemCertificates(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((b) => new X509Certificate(b));
}

/** Whether `leaf` is valid now and signed by a CA of `bundle` that is valid now (what Go's x509 Verify checks, names aside). */
function chainsTo(leaf: X509Certificate, bundle: X509Certificate[], now = Date.now()): boolean {
  const valid = (c: X509Certificate) => Date.parse(c.validFrom) <= now && now < Date.parse(c.validTo);
  return valid(leaf) && leaf.checkHost(SERVER_NAME) !== undefined && bundle.some((ca) => valid(ca) && leaf.checkIssued(ca) && leaf.verify(ca.publicKey));
}

/** The certificate served on 127.0.0.1:`port` for the Service's name (no verification). */
function servedCertificate(port: number): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: "127.0.0.1", port, servername: SERVER_NAME, rejectUnauthorized: false }, () => {
      const cert = socket.getPeerX509Certificate();
      socket.destroy();
      if (cert === undefined) reject(new Error("no peer certificate"));
      else resolve(cert);
    });
    socket.setTimeout(5000, () => socket.destroy(new Error("TLS handshake timed out")));
    socket.once("error", reject);
  });
}

/**
 * A TCP forwarder on 127.0.0.1:`port` sending each new connection to the
 * next enabled one of `targets` in turn, as a Service spreads connections over
 * the ready pods of its endpoints (`setEnabled(i, false)` is a pod leaving them).
 */
async function roundRobin(
  port: number,
  targets: readonly number[],
): Promise<{ connections: number[]; setEnabled(i: number, enabled: boolean): void; close(): Promise<void> }> {
  const connections = targets.map(() => 0);
  const enabled = targets.map(() => true);
  const open = new Set<Socket>();
  let next = 0;
  const server: Server = createServer((client) => {
    let i = next++ % targets.length;
    for (let tries = 0; !enabled[i] && tries < targets.length; tries++) i = next++ % targets.length;
    connections[i]!++;
    const upstream = netConnect(targets[i]!, "127.0.0.1");
    open.add(client).add(upstream);
    const close = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on("error", close);
      s.on("close", close);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  return {
    connections,
    setEnabled: (i, on) => {
      enabled[i] = on;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

let cp: ControlPlane | undefined;
let emulator: Emulator | undefined;
let forwarder: Awaited<ReturnType<typeof roundRobin>> | undefined;
let work = "";
const processes: LoggedProcess[] = [];
/** the replicas' addresses (slots behind the forwarder) and the process serving each now */
const slots: { port: number; name: string; process?: LoggedProcess }[] = [];
let startReplica: (slot: number, name: string) => LoggedProcess = () => {
  throw new Error("not set up");
};
let aliceKubeconfig = "";

function context(lines = 60): string {
  return `${cp?.logs(lines) ?? ""}\n${logTails(processes, lines)}`;
}

/** A replica's JSON log lines. */
function replicaLog(name: string): Record<string, unknown>[] {
  const p = processes.find((x) => x.name === name);
  if (p === undefined) return [];
  return readFileSync(p.logFile, "utf8")
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

async function kubectlJson<T>(args: string[], kubeconfig?: string): Promise<T> {
  return JSON.parse(await cp!.kubectlOk([...args, "-o", "json"], kubeconfig ? { kubeconfig } : {})) as T;
}

const replicasOf = async () => (await kubectlJson<{ spec: { replicas: number } }>(["-n", NS, "get", "deployment", "worker"])).spec.replicas;

describe("real Kubernetes: two proxy replicas through a serving-certificate renewal and a CA rotation", () => {
  beforeAll(async () => {
    const binDir = await buildControlPlane({ log: (l) => console.log(l) });
    cp = await startControlPlane({ binDir, hpaSyncPeriodSeconds: HPA_SYNC_SECONDS, downscaleStabilizationSeconds: 4, log: (l) => console.log(l) });
    work = mkdtempSync(join(tmpdir(), "emb-k8s-rotation-"));
    emulator = await startEmulator();
    await emulator.createQueue(QUEUE);

    // --- the bridge: one SQS rule, a policy, signatures required ---
    const signingKeys = `e2e:${randomBytes(32).toString("base64")}`;
    const bridgeConfig = join(work, "bridge.yaml");
    writeFileSync(
      bridgeConfig,
      yamlDocs(
        e2eBridgeConfig(emulator.endpoint, [{ name: METRIC, attribute: "ApproximateNumberOfMessages" }]),
        {
          apiVersion: "external-metrics-bridge.io/v1alpha1",
          kind: "ExternalMetricPolicy",
          metadata: { name: "team-a-queues", namespace: NS },
          spec: { rules: [{ metric: "queue_messages_.*", selector: { matchLabels: { queue: QUEUE } } }], defaultAction: "Deny" },
        },
      ),
    );
    const [bridgePort, servicePort, portA, portB] = (await freePorts(4)) as [number, number, number, number];
    const env = { ...process.env, BRIDGE_SIGNING_KEYS: signingKeys };
    processes.push(await startBridgeProcess({ config: bridgeConfig, port: bridgePort, env, logFile: join(work, "bridge.log"), context }));

    // --- the proxy's identity, RBAC (Secret, Lease) and Service: the shipped manifests ---
    const shipped = shippedManifests();
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs(...shipped.install) });
    await cp.kubectlOk(["apply", "-f", "-"], { input: yamlDocs({ apiVersion: "v1", kind: "Namespace", metadata: { name: NS } }) });
    await cp.kubectlOk(["apply", "-f", join(ROOT, "infra/examples/rbac/team-a-metrics-reader.yaml")]);
    aliceKubeconfig = await cp.userKubeconfig("alice", ["team-a-developers"]);
    const token = (await cp.kubectlOk(["-n", PROXY_NS, "create", "token", PROXY_SERVICE, "--duration=2h"])).trim();
    const proxyKubeconfig = cp.tokenKubeconfig("proxy", token);

    // --- the aggregator's one address: a forwarder alternating between the replicas ---
    forwarder = await roundRobin(servicePort, [portA, portB]);

    // --- two replicas, the shipped Deployment's arguments with short lifetimes ---
    const proxyConfig = join(work, "proxy.yaml");
    writeFileSync(
      proxyConfig,
      stringify({
        apiVersion: "external-metrics-bridge.io/v1alpha1",
        kind: "ProxyConfig",
        backends: { bridge: { url: `http://127.0.0.1:${bridgePort}`, timeoutSeconds: 4 } },
        routes: [{ metric: ".*", backend: "bridge" }],
        cache: { ttlSeconds: 1 },
      }),
    );
    slots.push({ port: portA, name: REPLICAS[0] }, { port: portB, name: REPLICAS[1] });
    startReplica = (slot, name) => {
      const args = withFlags(shipped.proxyArgs, {
        "--config": proxyConfig,
        "--kubeconfig": proxyKubeconfig,
        "--bind-address": "127.0.0.1",
        "--secure-port": String(slots[slot]!.port),
        "--admission-port": "0", // the webhook's own listener: a free port (this suite does not call it)
        // the aggregator dials the ExternalName host on the APIService's port: the forwarder
        "--service-port": String(servicePort),
        "--tls-cert-validity-seconds": String(CERT_VALIDITY_S),
        "--tls-ca-validity-seconds": String(CA_VALIDITY_S),
        "--tls-rotation-overlap-seconds": String(OVERLAP_S),
        "--leader-elect-identity": name,
        "--readiness-interval-seconds": "1",
        "--shutdown-delay-seconds": "1",
        "--drain-timeout-seconds": "2",
      });
      const proxy = startProcess(name, process.execPath, [join(ROOT, "functions/proxy/main.ts"), ...args], {
        logFile: join(work, `${name}.log`),
        env: { ...env, POD_NAMESPACE: PROXY_NS, POD_NAME: name },
      });
      processes.push(proxy);
      slots[slot] = { ...slots[slot]!, name, process: proxy };
      return proxy;
    };
    startReplica(0, REPLICAS[0]);
    startReplica(1, REPLICAS[1]);

    await waitForAPIServiceAvailable(cp, processes, { timeoutMs: 120_000, context });
  }, 50 * 60_000);

  afterEach(({ task }) => {
    if (task.result?.state === "fail") console.error(`component logs after the failure of "${task.name}":\n${context(80)}`);
  });

  afterAll(async () => {
    for (const p of [...processes].reverse()) await p.stop(5_000);
    await forwarder?.close();
    await emulator?.stop();
    await cp?.stop();
    if (work !== "") rmSync(work, { recursive: true, force: true });
  }, 120_000);

  it("keeps the APIService Available and the HPA scaling through certificate renewals, a CA rotation and a Lease handover in its middle; caBundle changes only at CA rotation", async () => {
    const started = Date.now();
    const at = () => Math.round((Date.now() - started) / 100) / 10;
    // --- what the run records ---
    const bundles: { at: number; pem: string; certs: X509Certificate[] }[] = [];
    const notAvailable: { at: number; condition: Condition | undefined }[] = [];
    let availabilitySamples = 0;
    /** per slot (address behind the forwarder): each new certificate served there */
    const served = slots.map(() => [] as { at: number; replica: string; serial: string; issuer: string }[]);
    const unchained: { at: number; replica: string; serial: string; bundle: string[] }[] = [];
    const probeErrors: { at: number; replica: string; error: string }[] = [];
    const hpaFailures: { at: number; condition: Condition }[] = [];
    let hpaSamples = 0;
    const reads: { at: number; ok: boolean; detail: string }[] = [];
    const errors: string[] = [];
    let running = true;
    /** slots taken out of the forwarder (a replica being replaced) are not probed */
    const replacing = new Set<number>();

    /** a name for a CA: its position in the order CAs appeared */
    const caNames = new Map<string, string>();
    const caName = (c: X509Certificate) => {
      if (!caNames.has(c.fingerprint256)) caNames.set(c.fingerprint256, `CA${caNames.size + 1}`);
      return caNames.get(c.fingerprint256)!;
    };
    const bundleNames = () => bundles.map((b) => `${b.at}s [${b.certs.map(caName).join(", ")}]`).join(" → ");

    const loop = async (name: string, everyMs: number, body: () => Promise<void>) => {
      while (running) {
        const t = Date.now();
        try {
          await body();
        } catch (err) {
          errors.push(`${at()}s ${name}: ${(err as Error).message}`);
        }
        await sleep(Math.max(0, everyMs - (Date.now() - t)));
      }
    };

    // APIService (Available, caBundle), then what each replica serves, checked against that caBundle
    const apiServiceLoop = loop("apiservice", 1000, async () => {
      const a = await kubectlJson<{ spec: { caBundle?: string }; status?: { conditions?: Condition[] } }>(["get", "apiservice", API_SERVICE]);
      const available = a.status?.conditions?.find((c) => c.type === "Available");
      availabilitySamples++;
      if (available?.status !== "True") notAvailable.push({ at: at(), condition: available });
      const pem = Buffer.from(a.spec.caBundle ?? "", "base64").toString();
      if (bundles.at(-1)?.pem !== pem) {
        const certs = pemCertificates(pem);
        certs.forEach(caName);
        bundles.push({ at: at(), pem, certs });
        console.log(`${at()}s caBundle: [${certs.map(caName).join(", ")}]`);
      }
      const bundle = bundles.at(-1)!;
      for (let slot = 0; slot < slots.length; slot++) {
        if (replacing.has(slot)) continue;
        const replica = slots[slot]!.name;
        try {
          const leaf = await servedCertificate(slots[slot]!.port);
          const issuerCa = bundles.flatMap((b) => b.certs).find((c) => leaf.checkIssued(c) && leaf.verify(c.publicKey));
          const issuer = issuerCa ? caName(issuerCa) : "unknown";
          const list = served[slot]!;
          if (list.at(-1)?.serial !== leaf.serialNumber) {
            list.push({ at: at(), replica, serial: leaf.serialNumber, issuer });
            console.log(`${at()}s ${replica} serves ${leaf.serialNumber.slice(0, 8)}… from ${issuer}, valid until ${leaf.validTo}`);
          }
          if (!chainsTo(leaf, bundle.certs)) unchained.push({ at: at(), replica, serial: leaf.serialNumber, bundle: bundle.certs.map(caName) });
        } catch (err) {
          probeErrors.push({ at: at(), replica, error: (err as Error).message });
        }
      }
    });
    const readPath = `/apis/${GROUP_VERSION}/namespaces/${NS}/${METRIC}?labelSelector=${encodeURIComponent(`queue=${QUEUE}`)}`;
    const readLoop = loop("read", 1000, async () => {
      const r = await cp!.kubectl(["get", "--raw", readPath], { kubeconfig: aliceKubeconfig });
      const ok = r.status === 0 && (JSON.parse(r.stdout) as { kind?: string }).kind === "ExternalMetricValueList";
      reads.push({ at: at(), ok, detail: ok ? "" : r.stderr.trim() });
    });
    let hpaLoop: Promise<void> = Promise.resolve();

    const waitForReplicas = (replicas: number, why: string) =>
      waitFor(`deployment ${NS}/worker at ${replicas} replicas (${why})`, async () => (await replicasOf()) === replicas, {
        timeoutMs: 90_000,
        intervalMs: 1000,
        context: () => `caBundles: ${bundleNames()}\n${context()}`,
      });
    const bundleWith = (n: number, why: string) =>
      waitFor(`caBundle with ${n} certificates (${why})`, async () => bundles.length > 1 && bundles.at(-1)!.certs.length === n, {
        timeoutMs: (CA_VALIDITY_S + 4 * OVERLAP_S) * 1000,
        intervalMs: 250,
        context: () => `caBundles: ${bundleNames()}\n${context()}`,
      });
    let handover = { stoppedAt: 0, leader: "", replacement: "", slot: -1 };

    try {
      // --- the HPA: 7 messages / 4 per replica → 2 ---
      await emulator!.add(QUEUE, 7);
      await cp!.kubectlOk(["apply", "-f", "-"], { input: workload() });
      hpaLoop = loop("hpa", 1000, async () => {
        const hpa = await kubectlJson<{ status: { conditions?: Condition[] } }>(["-n", NS, "get", "hpa", "worker"]);
        hpaSamples++;
        const active = hpa.status.conditions?.find((c) => c.type === "ScalingActive");
        if (active?.status === "False") hpaFailures.push({ at: at(), condition: active });
      });
      await waitForReplicas(expectedReplicas(7), "7 messages");

      // --- the CA rotation starts (caBundle old + new): replace the Lease holder, as a rolling update would ---
      await bundleWith(2, "CA rotation started");
      const lease = await kubectlJson<{ spec: { holderIdentity?: string } }>(["-n", PROXY_NS, "get", "lease", `${PROXY_SERVICE}-tls`]);
      const leader = lease.spec.holderIdentity ?? "";
      const slot = slots.findIndex((s) => s.name === leader);
      expect(slot, `Lease holder ${leader} is one of the replicas`).toBeGreaterThanOrEqual(0);
      console.log(`${at()}s rotation started; stopping the Lease holder ${leader} (endpoint removed first), replacing it with ${REPLICAS[2]}`);
      replacing.add(slot);
      forwarder!.setEnabled(slot, false);
      await slots[slot]!.process!.stop(15_000);
      handover = { stoppedAt: Date.now(), leader, replacement: REPLICAS[2], slot };
      expect(slots[slot]!.process!.exitCode, `${leader} exit code`).toBe(0);
      // meanwhile the HPA follows the queue: 17 messages → 5
      await emulator!.add(QUEUE, 10);
      const replacement = startReplica(slot, REPLICAS[2]);
      await waitFor(
        `${REPLICAS[2]} serving TLS`,
        async () => {
          if (replacement.exitCode !== undefined) throw new Error(`${REPLICAS[2]} exited with ${replacement.exitCode}`);
          return servedCertificate(slots[slot]!.port);
        },
        { timeoutMs: 60_000, intervalMs: 500, context },
      );
      forwarder!.setEnabled(slot, true);
      replacing.delete(slot);
      console.log(`${at()}s ${REPLICAS[2]} serves; back behind the forwarder`);
      await waitForReplicas(expectedReplicas(17), "17 messages, during the CA rotation");

      // --- the rotation ends (new CA only), finished by the new Lease holder; drain to 2 messages → 1 ---
      await bundleWith(1, "old CA dropped");
      console.log(`${at()}s rotation finished: draining to 2 messages`);
      expect(await emulator!.drain(QUEUE, 15)).toBe(15);
      await waitForReplicas(expectedReplicas(2), "2 messages, after the CA rotation");
      // the aggregator goes on with the new CA alone (connections re-made, availability re-checked), through one more renewal
      await sleep(CERT_VALIDITY_S * 1000 * 0.75);
    } finally {
      running = false;
      await Promise.all([apiServiceLoop, hpaLoop, readLoop]);
    }
    console.log(`run: ${at()}s; forwarder connections ${slots.map((s, i) => `slot ${i}=${forwarder!.connections[i]}`).join(", ")}`);

    // --- the APIService stayed Available, the HPA never lost its metric, every read answered ---
    expect(errors, "poll errors").toEqual([]);
    expect(availabilitySamples).toBeGreaterThan(30);
    expect(notAvailable, "APIService Available≠True (FailedDiscoveryCheck)").toEqual([]);
    expect(hpaSamples).toBeGreaterThan(30);
    expect(hpaFailures, "HPA ScalingActive=False (FailedGetExternalMetric)").toEqual([]);
    expect(reads.length).toBeGreaterThan(30);
    expect(reads.filter((r) => !r.ok), "value reads through kube-apiserver that failed").toEqual([]);

    // --- every replica served the aggregator ---
    for (let i = 0; i < slots.length; i++) expect(forwarder!.connections[i], `connections forwarded to slot ${i}`).toBeGreaterThan(0);
    for (const replica of REPLICAS) {
      const aggregated = replicaLog(replica).filter((l) => l["msg"] === "request" && l["authn"] === "front-proxy" && l["code"] === 200);
      expect(aggregated.length, `${replica}: requests through the aggregator answered 200`).toBeGreaterThan(0);
    }

    // --- caBundle: old → old+new → new, nothing else ---
    const steps = bundles.map((b) => b.certs.map(caName));
    console.log(`caBundle values: ${bundleNames()}`);
    expect(steps[0]).toHaveLength(1);
    expect(steps.length, "distinct caBundle values").toBeGreaterThanOrEqual(3);
    for (let i = 1; i < steps.length; i++) {
      const [before, after] = [steps[i - 1]!, steps[i]!];
      if (after.length > before.length) {
        // add: every CA kept, one new one appended (it signs from now on)
        expect(after.slice(0, -1), `caBundle change ${i}: a CA added`).toEqual(before);
        expect(after).toHaveLength(before.length + 1);
      } else {
        // drop: only the newest CA stays
        expect(after, `caBundle change ${i}: old CAs dropped`).toEqual([before.at(-1)]);
      }
    }
    // Every change is a CA-rotation step the Lease holder wrote (no flips between replicas, no CA of a starting replica).
    const written = REPLICAS.flatMap((r) =>
      replicaLog(r)
        .filter((l) => l["msg"] === "serving certificate Secret updated")
        .map((l) => ({ replica: r, step: String(l["step"]), time: Date.parse(String(l["time"])) })),
    ).sort((x, y) => x.time - y.time);
    console.log(`Secret writes: ${written.map((w) => `${Math.round((w.time - started) / 100) / 10}s ${w.replica}:${w.step}`).join(", ")}`);
    expect(written.filter((w) => w.step === "create"), "the Secret was created once").toHaveLength(1);
    expect(bundles.length - 1, "caBundle changes = CA rotation steps written").toBe(written.filter((w) => w.step === "add-ca" || w.step === "drop-old-ca").length);
    // one writer at a time: the old holder until it stopped, then one other replica
    const before = written.filter((w) => w.time < handover.stoppedAt);
    const after = written.filter((w) => w.time >= handover.stoppedAt);
    expect(new Set(before.map((w) => w.replica)), "writer before the handover").toEqual(new Set([handover.leader]));
    expect(new Set(after.map((w) => w.replica)).size, "writers after the handover").toBe(1);
    expect(after[0]?.replica, "the new Lease holder").not.toBe(handover.leader);
    expect(after.map((w) => w.step), "the new holder finished the rotation").toContain("drop-old-ca");
    // the rotation's steps an overlap apart (the log line follows the stamped write by the write's latency: 1 s slack)
    const stepAt = (kind: string) => written.find((w) => w.step === kind)?.time ?? NaN;
    expect((stepAt("switch") - stepAt("add-ca")) / 1000, "seconds from add-ca to switch").toBeGreaterThanOrEqual(OVERLAP_S - 1);
    expect((stepAt("drop-old-ca") - stepAt("switch")) / 1000, "seconds from switch to drop-old-ca").toBeGreaterThanOrEqual(OVERLAP_S - 1);
    const replacementLog = replicaLog(handover.replacement);
    expect(replacementLog.filter((l) => l["msg"] === "serving certificate loaded from Secret"), `${handover.replacement} loaded the Secret`).toHaveLength(1);

    // --- every replica served certificates that chain to the caBundle of the moment ---
    expect(probeErrors, "TLS handshakes with the replicas that failed").toEqual([]);
    expect(unchained, "served certificates not verifiable with the published caBundle").toEqual([]);
    for (let slot = 0; slot < slots.length; slot++) {
      const list = served[slot]!;
      console.log(`slot ${slot} served: ${list.map((s) => `${s.at}s ${s.replica} ${s.serial.slice(0, 8)}… (${s.issuer})`).join(" → ")}`);
      // renewed from the same CA (caBundle unchanged), and moved to the new CA
      const renewals = list.slice(1).filter((s, i) => s.issuer === list[i]!.issuer);
      const switches = list.slice(1).filter((s, i) => s.issuer !== list[i]!.issuer);
      expect(renewals.length, `slot ${slot}: certificate renewals from the same CA`).toBeGreaterThan(0);
      expect(switches.length, `slot ${slot}: moves to the new CA`).toBeGreaterThan(0);
      expect(list.at(-1)!.issuer, `slot ${slot}: serves from the CA caBundle holds at the end`).toBe(steps.at(-1)![0]);
    }
  }, 8 * 60_000);
});

function workload(): string {
  return yamlDocs(
    // No kubelet runs: pods stay Pending, which an AverageValue target does not mind.
    placeholderDeployment("worker", NS),
    {
      apiVersion: "autoscaling/v2",
      kind: "HorizontalPodAutoscaler",
      metadata: { name: "worker", namespace: NS },
      spec: {
        scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "worker" },
        minReplicas: MIN,
        maxReplicas: MAX,
        metrics: [{ type: "External", external: { metric: { name: METRIC, selector: { matchLabels: { queue: QUEUE } } }, target: { type: "AverageValue", averageValue: String(TARGET) } } }],
        behavior: { scaleUp: { stabilizationWindowSeconds: 0, policies: [{ type: "Pods", value: 100, periodSeconds: 1 }] } },
      },
    },
  );
}
