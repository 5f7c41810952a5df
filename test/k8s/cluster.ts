/**
 * A real Kubernetes control plane on 127.0.0.1 for end-to-end tests: etcd,
 * kube-apiserver (with its aggregation layer and front-proxy certificates)
 * and kube-controller-manager running only the controllers an HPA needs (and the
 * namespace controller, whose deletions depend on aggregated discovery).
 * Binaries come from test/k8s/build.sh (built from the Go module proxy).
 *
 * Every process logs to a file in the control plane's temporary directory;
 * {@link ControlPlane.logs} returns their tails for failure messages.
 * `node test/k8s/start.ts` runs the same thing by hand. With
 * `EMB_K8S_KEEP=1` the directory (logs, certificates, etcd data) is kept.
 *
 * Flags follow kubeadm's static pod manifests
 * (`cmd/kubeadm/app/phases/controlplane/manifests.go`), reduced to one host.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stringify } from "yaml";
import { createCA, createSigningKeyPair, type CertificateAuthority, type KeyPair } from "./pki.ts";

const HERE = dirname(fileURLToPath(import.meta.url));

/**
 * The Go modules that pin a Kubernetes release for the e2e suites, newest
 * first: test/k8s/go.mod (the newest release tested) and test/k8s/v1.30/go.mod
 * (the oldest minor the chart's `kubeVersion` claims; docs/compatibility.md).
 * Each builds with the same test/k8s/build.sh (v1.30/build.sh is a link to it).
 */
export const K8S_MODULES: readonly { version: string; dir: string }[] = [HERE, join(HERE, "v1.30")].map((dir) => ({
  version: /^\s*(?:require\s+)?k8s\.io\/kubernetes\s+(v\S+)/m.exec(readFileSync(join(dir, "go.mod"), "utf8"))![1]!,
  dir,
}));

/**
 * The module of the Kubernetes release the e2e suites run against:
 * `EMB_K8S_VERSION` (a release such as `v1.30.14`, or a minor such as
 * `v1.30` / `1.30`), else the newest ({@link K8S_MODULES}[0]).
 *
 * @throws Error naming the releases there are when none matches
 */
export function k8sModule(requested: string | undefined = process.env["EMB_K8S_VERSION"]): { version: string; dir: string } {
  if (requested === undefined || requested.trim() === "") return K8S_MODULES[0]!;
  const want = requested.trim().startsWith("v") ? requested.trim() : `v${requested.trim()}`;
  const found = K8S_MODULES.find((m) => m.version === want || m.version.startsWith(`${want}.`));
  if (found === undefined) throw new Error(`EMB_K8S_VERSION=${requested}: no test/k8s module pins it; there are ${K8S_MODULES.map((m) => m.version).join(", ")}`);
  return found;
}

/**
 * Build (or find cached) binaries with test/k8s/build.sh for the release
 * `EMB_K8S_VERSION` selects ({@link k8sModule}; default the newest);
 * resolves to their directory. Cold: many minutes (module download +
 * compile); warm: about a second.
 *
 * @throws Error with the script's output when it fails or times out (default 40 min)
 */
export async function buildControlPlane(options: { timeoutMs?: number; log?: (line: string) => void; version?: string } = {}): Promise<string> {
  const started = Date.now();
  const module = k8sModule(options.version);
  const { status, stdout, stderr } = await new Promise<{ status: number | string; stdout: string; stderr: string }>((resolve) => {
    execFile(
      "bash",
      [join(module.dir, "build.sh")],
      {
        encoding: "utf8",
        timeout: options.timeoutMs ?? 40 * 60_000,
        maxBuffer: 64 << 20,
        env: { ...process.env, PATH: `${process.env["PATH"] ?? ""}:/usr/local/go/bin` },
      },
      (err, out, errOut) => {
        const e = err as (Error & { code?: number | string; signal?: string }) | null;
        resolve({ status: e ? (e.code ?? e.signal ?? e.message) : 0, stdout: out, stderr: errOut });
      },
    );
  });
  if (status !== 0) {
    const seconds = Math.round((Date.now() - started) / 1000);
    throw new Error(`test/k8s/build.sh failed (${status}) after ${seconds}s:\n${stderr.slice(-8000)}`);
  }
  options.log?.(stderr.trim().split("\n").filter((l) => l.startsWith("build.sh:")).join("\n"));
  const bin = stdout.trim().split("\n").pop() ?? "";
  if (bin === "") throw new Error("test/k8s/build.sh printed no bin directory");
  return bin;
}

/**
 * `count` distinct TCP ports that were free a moment ago on 127.0.0.1 (all
 * held open together while choosing, so they differ from each other).
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Server>((resolve, reject) => {
          const server = createServer();
          server.once("error", reject);
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Result of one kubectl run. */
export interface KubectlResult {
  status: number;
  stdout: string;
  stderr: string;
}

/** Options of {@link startControlPlane}. */
export interface ControlPlaneOptions {
  /** directory holding etcd, kube-apiserver, kube-controller-manager, kubectl */
  binDir: string;
  /** `--horizontal-pod-autoscaler-sync-period`, seconds (default 2) */
  hpaSyncPeriodSeconds?: number;
  /** `--horizontal-pod-autoscaler-downscale-stabilization`, seconds (default 4) */
  downscaleStabilizationSeconds?: number;
  /** how long to wait for each component to become ready, ms (default 90 000) */
  readyTimeoutMs?: number;
  /**
   * kube-controller-manager controllers to run besides the default few, e.g.
   * `clusterrole-aggregation-controller` (fills the `admin`/`edit`/`view`
   * ClusterRoles from ClusterRoles labelled `aggregate-to-*`)
   */
  extraControllers?: string[];
  /**
   * `--feature-gates` for kube-apiserver and kube-controller-manager, e.g.
   * `{ HPAScaleToZero: true }` on a release where the gate is off by default
   * (both need it: the API server validates `minReplicas: 0`, the controller
   * acts on it); unset: each release's defaults
   */
  featureGates?: Record<string, boolean>;
  /** progress lines */
  log?: (line: string) => void;
}

/** A running control plane. */
export interface ControlPlane {
  /** temporary directory with certificates, kubeconfigs, data and logs */
  dir: string;
  /** kube-apiserver URL, `https://127.0.0.1:<port>` */
  server: string;
  /** PEM files: cluster CA (serving + client certs), front-proxy CA */
  caFile: string;
  frontProxyCaFile: string;
  /** cluster CA, to issue more certificates */
  ca: CertificateAuthority;
  /** kubeconfig of `kubernetes-admin` (group system:masters) */
  adminKubeconfig: string;
  /** write a kubeconfig for a client-certificate user (CN=name, O=each group) */
  userKubeconfig(name: string, groups?: string[]): Promise<string>;
  /** write a kubeconfig that authenticates with a bearer token */
  tokenKubeconfig(name: string, token: string): string;
  /** run kubectl (default: as admin); never throws on a non-zero exit */
  kubectl(args: string[], options?: { kubeconfig?: string; input?: string; timeoutMs?: number }): Promise<KubectlResult>;
  /** kubectl that throws with its stderr on failure; returns stdout */
  kubectlOk(args: string[], options?: { kubeconfig?: string; input?: string; timeoutMs?: number }): Promise<string>;
  /** the last `lines` lines of every component's log */
  logs(lines?: number): string;
  /** kill every process and delete the directory (idempotent) */
  stop(): Promise<void>;
}

/** A child process whose stdout and stderr go to a log file. */
export interface LoggedProcess {
  name: string;
  child: ChildProcess;
  logFile: string;
  /** resolves when the process has exited */
  exited: Promise<void>;
  /** undefined while running; the exit code (-1 for a signal or spawn failure) after */
  exitCode: number | null | undefined;
  /** SIGTERM, then SIGKILL after `graceMs` (default 10 000); resolves when it has exited */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawn `command` with stdout and stderr appended to `logFile`.
 * The process is killed (SIGKILL) if the test process exits first.
 */
export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: { logFile: string; cwd?: string; env?: NodeJS.ProcessEnv },
): LoggedProcess {
  const fd = openSync(options.logFile, "a");
  const child = spawn(command, args, { stdio: ["ignore", fd, fd], cwd: options.cwd, env: options.env ?? process.env });
  closeSync(fd);
  const killOnExit = () => child.kill("SIGKILL");
  process.once("exit", killOnExit);
  const p: LoggedProcess = {
    name,
    child,
    logFile: options.logFile,
    exitCode: undefined,
    exited: Promise.resolve(),
    async stop(graceMs = 10_000) {
      if (p.exitCode === undefined) child.kill("SIGTERM");
      const timer = setTimeout(() => {
        if (p.exitCode === undefined) child.kill("SIGKILL");
      }, graceMs);
      await p.exited;
      clearTimeout(timer);
    },
  };
  p.exited = new Promise<void>((resolve) => {
    child.once("exit", (code, signal) => {
      p.exitCode = code ?? (signal ? -1 : null);
      process.removeListener("exit", killOnExit);
      resolve();
    });
    child.once("error", (err) => {
      writeFileSync(options.logFile, `spawn failed: ${err.message}\n`, { flag: "a" });
      p.exitCode = -1;
      process.removeListener("exit", killOnExit);
      resolve();
    });
  });
  return p;
}

/** The last `lines` lines of each process's log, headed by its name. */
export function logTails(processes: readonly LoggedProcess[], lines = 40): string {
  return processes.map((c) => `----- ${c.name} (${c.logFile}), last ${lines} lines -----\n${tail(c.logFile, lines)}`).join("\n");
}

function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
  } catch (err) {
    return `(no log: ${(err as Error).message})`;
  }
}

/**
 * Poll `probe` until it returns a truthy value or `timeoutMs` passes.
 *
 * @throws Error naming `what` with the last probe error and `context()`
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false | null>,
  options: { timeoutMs: number; intervalMs?: number; context?: () => string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let last = "";
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false && value !== null) return value;
      last = `probe returned ${String(value)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${options.timeoutMs / 1000}s waiting for ${what}; last: ${last}\n${options.context?.() ?? ""}`);
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 500));
  }
}

function kubeconfigYaml(server: string, caPem: string, user: { cert?: KeyPair; token?: string }, name: string): string {
  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const userEntry: Record<string, string> = {};
  if (user.cert) {
    userEntry["client-certificate-data"] = b64(user.cert.cert);
    userEntry["client-key-data"] = b64(user.cert.key);
  }
  if (user.token) userEntry["token"] = user.token;
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "emb-e2e", cluster: { server, "certificate-authority-data": b64(caPem) } }],
    users: [{ name, user: userEntry }],
    contexts: [{ name, context: { cluster: "emb-e2e", user: name } }],
    "current-context": name,
  });
}

/**
 * Start etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 with
 * fresh certificates, and wait until each is ready.
 *
 * @throws Error (with component logs) when a component exits or is not ready in time
 */
export async function startControlPlane(options: ControlPlaneOptions): Promise<ControlPlane> {
  const log = options.log ?? (() => {});
  const readyTimeoutMs = options.readyTimeoutMs ?? 90_000;
  const dir = mkdtempSync(join(tmpdir(), "emb-k8s-"));
  const file = (name: string, content?: string) => {
    const path = join(dir, name);
    if (content !== undefined) writeFileSync(path, content, { mode: 0o600 });
    return path;
  };
  const bin = (name: string) => join(options.binDir, name);
  const components: LoggedProcess[] = [];
  let stopped = false;
  const gates = Object.entries(options.featureGates ?? {});
  const featureGateFlags = gates.length === 0 ? [] : [`--feature-gates=${gates.map(([gate, on]) => `${gate}=${on}`).join(",")}`];

  const logs = (lines = 40) => logTails(components, lines);

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // controller manager and apiserver first, etcd last
    for (const c of [...components].reverse()) await c.stop();
    if (process.env["EMB_K8S_KEEP"] === "1") console.error(`EMB_K8S_KEEP=1: kept ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
  };

  const startComponent = (name: string, args: string[]): LoggedProcess => {
    const component = startProcess(name, bin(name), args, { logFile: join(dir, `${name}.log`), cwd: dir });
    components.push(component);
    return component;
  };
  const alive = (c: LoggedProcess) => {
    if (c.exitCode !== undefined) throw new Error(`${c.name} exited with ${c.exitCode}`);
  };

  try {
    // --- certificates and keys ---
    const ca = await createCA("emb-e2e-cluster-ca");
    const frontProxyCa = await createCA("emb-e2e-front-proxy-ca");
    const caFile = file("ca.crt", ca.cert);
    const frontProxyCaFile = file("front-proxy-ca.crt", frontProxyCa.cert);
    const serving = await ca.issue("kube-apiserver", ["server"], {
      dns: ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
      ip: ["127.0.0.1", "10.96.0.1"],
    });
    const frontProxyClient = await frontProxyCa.issue("front-proxy-client", ["client"]);
    const admin = await ca.issue("kubernetes-admin", ["client"], { groups: ["system:masters"] });
    const kcm = await ca.issue("system:kube-controller-manager", ["client"]);
    const sa = await createSigningKeyPair();

    const [etcdClientPort, etcdPeerPort, apiPort] = (await freePorts(3)) as [number, number, number];
    const server = `https://127.0.0.1:${apiPort}`;
    const adminKubeconfig = file("admin.kubeconfig", kubeconfigYaml(server, ca.cert, { cert: admin }, "kubernetes-admin"));
    const kcmKubeconfig = file("kcm.kubeconfig", kubeconfigYaml(server, ca.cert, { cert: kcm }, "system:kube-controller-manager"));

    const kubectl = (args: string[], opts: { kubeconfig?: string; input?: string; timeoutMs?: number } = {}) =>
      new Promise<KubectlResult>((resolve) => {
        const child = execFile(
          bin("kubectl"),
          ["--kubeconfig", opts.kubeconfig ?? adminKubeconfig, ...args],
          { timeout: opts.timeoutMs ?? 30_000, maxBuffer: 32 << 20, encoding: "utf8" },
          (err, stdout, stderr) => {
            const code = err ? (typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : -1) : 0;
            resolve({ status: code, stdout, stderr: stderr + (err && code === -1 ? err.message : "") });
          },
        );
        if (opts.input !== undefined) child.stdin?.end(opts.input);
      });
    const kubectlOk = async (args: string[], opts: { kubeconfig?: string; input?: string; timeoutMs?: number } = {}) => {
      const r = await kubectl(args, opts);
      if (r.status !== 0) throw new Error(`kubectl ${args.join(" ")} failed (${r.status}): ${r.stderr.trim()}`);
      return r.stdout;
    };

    // --- etcd ---
    mkdirSync(join(dir, "etcd"), { mode: 0o700 });
    const etcd = startComponent("etcd", [
      "--name=emb-e2e",
      `--data-dir=${join(dir, "etcd")}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=emb-e2e=http://127.0.0.1:${etcdPeerPort}`,
      "--unsafe-no-fsync",
      "--log-level=warn",
    ]);
    await waitFor(
      "etcd /health",
      async () => {
        alive(etcd);
        const res = await fetch(`http://127.0.0.1:${etcdClientPort}/health`);
        return res.ok && ((await res.json()) as { health?: string }).health === "true";
      },
      { timeoutMs: readyTimeoutMs, context: logs },
    );
    log(`etcd ready on 127.0.0.1:${etcdClientPort}`);

    // --- kube-apiserver ---
    const apiserver = startComponent("kube-apiserver", [
      `--etcd-servers=http://127.0.0.1:${etcdClientPort}`,
      "--bind-address=127.0.0.1",
      "--advertise-address=127.0.0.1",
      `--secure-port=${apiPort}`,
      // A loopback address may not be an endpoint: do not publish one for the
      // `kubernetes` Service (nothing in this test reaches it through a Service).
      "--endpoint-reconciler-type=none",
      "--service-cluster-ip-range=10.96.0.0/16",
      `--tls-cert-file=${file("apiserver.crt", serving.cert)}`,
      `--tls-private-key-file=${file("apiserver.key", serving.key)}`,
      `--client-ca-file=${caFile}`,
      "--authorization-mode=RBAC",
      "--anonymous-auth=false",
      // front proxy (aggregation layer): what the aggregator presents to the
      // extension API server, and what that server is told to trust
      `--requestheader-client-ca-file=${frontProxyCaFile}`,
      "--requestheader-allowed-names=front-proxy-client",
      "--requestheader-username-headers=X-Remote-User",
      "--requestheader-group-headers=X-Remote-Group",
      "--requestheader-extra-headers-prefix=X-Remote-Extra-",
      `--proxy-client-cert-file=${file("front-proxy-client.crt", frontProxyClient.cert)}`,
      `--proxy-client-key-file=${file("front-proxy-client.key", frontProxyClient.key)}`,
      // service-account tokens (TokenRequest for the controllers and the proxy)
      "--service-account-issuer=https://kubernetes.default.svc",
      `--service-account-key-file=${file("sa.pub", sa.publicKey)}`,
      `--service-account-signing-key-file=${file("sa.key", sa.privateKey)}`,
      "--profiling=false",
      ...featureGateFlags,
      "--v=1",
    ]);
    await waitFor(
      "kube-apiserver /readyz",
      async () => {
        alive(apiserver);
        const r = await kubectl(["get", "--raw=/readyz"], { timeoutMs: 10_000 });
        if (r.status !== 0) throw new Error(r.stderr.trim().split("\n").pop());
        return r.stdout.trim() === "ok";
      },
      { timeoutMs: readyTimeoutMs, intervalMs: 1000, context: logs },
    );
    log(`kube-apiserver ready on ${server}`);

    // --- kube-controller-manager ---
    const controllerManager = startComponent("kube-controller-manager", [
      `--kubeconfig=${kcmKubeconfig}`,
      `--authentication-kubeconfig=${kcmKubeconfig}`,
      `--authorization-kubeconfig=${kcmKubeconfig}`,
      "--bind-address=127.0.0.1",
      "--secure-port=0",
      "--leader-elect=false",
      // each controller uses its own service account, as in kubeadm clusters:
      // the HPA reads external metrics as system:serviceaccount:kube-system:horizontal-pod-autoscaler
      "--use-service-account-credentials=true",
      `--controllers=${["serviceaccount-controller", "deployment-controller", "replicaset-controller", "horizontal-pod-autoscaler-controller", "namespace-controller", ...(options.extraControllers ?? [])].join(",")}`,
      `--horizontal-pod-autoscaler-sync-period=${options.hpaSyncPeriodSeconds ?? 2}s`,
      `--horizontal-pod-autoscaler-downscale-stabilization=${options.downscaleStabilizationSeconds ?? 4}s`,
      ...featureGateFlags,
      "--v=2",
    ]);
    await waitFor(
      "kube-controller-manager (serviceaccount default/default, serviceaccount kube-system/horizontal-pod-autoscaler)",
      async () => {
        alive(controllerManager);
        const r = await kubectl(["get", "serviceaccount", "-n", "kube-system", "horizontal-pod-autoscaler", "-o", "name"]);
        const d = await kubectl(["get", "serviceaccount", "-n", "default", "default", "-o", "name"]);
        return r.status === 0 && d.status === 0;
      },
      { timeoutMs: readyTimeoutMs, intervalMs: 1000, context: logs },
    );
    log("kube-controller-manager ready");

    return {
      dir,
      server,
      caFile,
      frontProxyCaFile,
      ca,
      adminKubeconfig,
      userKubeconfig: async (name, groups = []) => {
        const cert = await ca.issue(name, ["client"], { groups });
        return file(`${name}.kubeconfig`, kubeconfigYaml(server, ca.cert, { cert }, name));
      },
      tokenKubeconfig: (name, token) => file(`${name}.kubeconfig`, kubeconfigYaml(server, ca.cert, { token }, name)),
      kubectl,
      kubectlOk,
      logs,
      stop,
    };
  } catch (err) {
    const message = (err as Error).message;
    const context = message.includes("-----") ? "" : `\n${logs()}`;
    await stop();
    throw new Error(`${message}${context}`, { cause: err });
  }
}
