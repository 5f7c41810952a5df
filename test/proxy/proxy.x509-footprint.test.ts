/**
 * Issue 11 P5: @peculiar/x509 (with reflect-metadata, tsyringe and its ASN.1
 * schemas, ~9 MB of resident memory) stays out of the proxy's main thread.
 * It is bundled only into the certificate worker (`x509-worker.mjs` and its
 * chunks, infra/proxy/build.ts) and the lazily imported verifier of chains
 * with intermediates; the main thread inspects certificates with node:crypto.
 *
 * Proved on the image bundle, run as the container runs it (the image's
 * Node flags and environment) plus an `--import` preload that records, per
 * thread, every module file loaded (`module.registerHooks`): in TLS mode
 * `generate` and `secret` (one replica creating the Secret, one following
 * it), the proxy serves an authenticated read through the front-proxy client
 * certificate while its main thread loads only the statically imported files
 * (which hold no @peculiar input, per esbuild's metafile), and certificates
 * are made in a worker thread that loaded `x509-worker.mjs`.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProxy, imageEnv, imageNodeFlags, type ProxyBuild } from "../../infra/proxy/build.ts";
import { startFakeKubeApiServer, type FakeKubeApiServer } from "../fakes/kube-apiserver.ts";
import { authenticationData, call, createPki, eventually, KEYS, proxyConfigText, startEchoBackend, V1, writeFakeKubeconfig, type EchoBackend, type Pki } from "./proxy.harness.ts";
import { freePort } from "../helpers/ports.ts";

const X509_PACKAGES = /node_modules\/(@peculiar\/|reflect-metadata\/|tsyringe\/|asn1js\/)/;
const SECRET = { namespace: "emb", name: "proxy-tls" };

/** Records `<threadId> <file URL>` for every module file loaded, in every thread that runs it (workers inherit --import). */
const PRELOAD = `import { registerHooks } from "node:module";
import { appendFileSync } from "node:fs";
import { threadId } from "node:worker_threads";
const out = process.env.EMB_LOADED_LOG;
registerHooks({
  load(url, context, nextLoad) {
    if (url.startsWith("file:")) appendFileSync(out, threadId + " " + url + "\\n");
    return nextLoad(url, context);
  },
});
`;

let dir: string;
let out: ProxyBuild;
let pki: Pki;
let backend: EchoBackend;
let fake: FakeKubeApiServer;
const children: ChildProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "emb-proxy-x509-"));
  writeFileSync(join(dir, "preload.mjs"), PRELOAD);
  [out, pki, backend, fake] = await Promise.all([buildProxy(join(dir, "dist")), createPki(), startEchoBackend(["queue_messages_ready"]), startFakeKubeApiServer()]);
  fake.setConfigMap("kube-system", "extension-apiserver-authentication", authenticationData(pki));
  fake.authorize = () => ({ allowed: true });
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await backend?.close();
  await fake?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});


/** Files (relative to the bundle directory) each thread loaded: thread id → files. */
function loadedByThread(logFile: string): Map<number, string[]> {
  const threads = new Map<number, string[]>();
  for (const line of readFileSync(logFile, "utf8").split("\n").filter(Boolean)) {
    const [id, url] = line.split(" ") as [string, string];
    const file = relative(out.outdir, fileURLToPath(url));
    threads.set(Number(id), [...(threads.get(Number(id)) ?? []), file]);
  }
  return threads;
}

/**
 * Start the bundle with `tlsArgs`, serve one front-proxy-authenticated read
 * (CA from `caOf()` once it is known), stop it, and return the log lines and
 * the files each thread loaded.
 */
async function runBundle(name: string, tlsArgs: string[], caOf: () => string | undefined) {
  const kubeconfig = writeFakeKubeconfig(join(dir, `${name}.kubeconfig.yaml`), fake);
  const config = join(dir, `${name}.proxy.yaml`);
  writeFileSync(config, proxyConfigText({ echo: backend.url }, [[".*", "echo"]]));
  const logFile = join(dir, `${name}.loaded.log`);
  writeFileSync(logFile, "");
  const port = await freePort();
  const lines: string[] = [];
  const child = spawn(
    process.execPath,
    [
      ...imageNodeFlags(),
      "--import",
      join(dir, "preload.mjs"),
      join(out.outdir, "main.mjs"),
      "--config",
      config,
      "--kubeconfig",
      kubeconfig,
      "--bind-address",
      "127.0.0.1",
      "--secure-port",
      String(port),
      "--shutdown-delay-seconds",
      "0",
      "--leader-elect-identity",
      name,
      ...tlsArgs,
    ],
    { cwd: out.outdir, env: { ...process.env, ...imageEnv(), BRIDGE_SIGNING_KEYS: KEYS, POD_NAMESPACE: "emb", EMB_LOADED_LOG: logFile }, stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  for (const stream of [child.stdout!, child.stderr!]) stream.on("data", (chunk: Buffer) => lines.push(...chunk.toString("utf8").split("\n").filter(Boolean)));
  const url = `https://127.0.0.1:${port}${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Djobs`;
  let status = 0;
  let text = "";
  await eventually(
    async () => {
      if (child.exitCode !== null) return true;
      const ca = caOf();
      if (ca === undefined) return false;
      try {
        const res = await call(url, ca, { cert: pki.frontProxy, headers: { "X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler" } });
        [status, text] = [res.status, res.text];
        // Serving starts before the authentication ConfigMap is read: that 503 (not ready yet) means ask again.
        return !(res.status === 503 && res.text.includes("has not loaded kube-system/extension-apiserver-authentication yet"));
      } catch {
        return false;
      }
    },
    30_000,
    `${name} served a read`,
  );
  expect(child.exitCode, lines.join("\n")).toBeNull();
  expect(status, `${text}\n${lines.join("\n")}`).toBe(200);
  expect(JSON.parse(text).items[0]).toMatchObject({ value: "42", metricLabels: { caller: "system:serviceaccount:kube-system:horizontal-pod-autoscaler" } });
  const exited = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await exited;
  return { lines, threads: loadedByThread(logFile) };
}

/** The main thread loaded only main.mjs's static files, none of which holds @peculiar/x509 or its helpers. */
function expectMainThreadWithoutX509(threads: Map<number, string[]>) {
  const main = threads.get(0) ?? [];
  expect(main).toContain("main.mjs");
  const bundled = main.filter((f) => !f.startsWith(".."));
  expect(bundled.filter((f) => !out.staticFiles.includes(f))).toEqual([]);
  for (const file of bundled) expect(readFileSync(join(out.outdir, file), "utf8"), file).not.toMatch(/X509CertificateGenerator|X509ChainBuilder|reflect-metadata|tsyringe/);
}

/** Worker threads (id > 0) that loaded the certificate worker. */
const x509Workers = (threads: Map<number, string[]>) => [...threads].filter(([id, files]) => id > 0 && files.includes("x509-worker.mjs")).map(([id]) => id);

/** Thread ids the proxy logged as having made certificates. */
const generatedIn = (lines: string[]) =>
  lines.flatMap((l) => {
    try {
      const r = JSON.parse(l) as { generatedInWorkerThread?: number };
      return r.generatedInWorkerThread === undefined ? [] : [r.generatedInWorkerThread];
    } catch {
      return [];
    }
  });

describe("@peculiar/x509 is never in the proxy's main thread", () => {
  it("esbuild's metafile: only the certificate worker's files (and a dynamic import()) hold it; main.mjs's static graph does not", () => {
    for (const i of out.inputs) expect(i).not.toMatch(X509_PACKAGES);
    for (const m of ["shared/proxy/tls/x509.ts", "shared/proxy/tls/certs.ts", "shared/proxy/authn/client-cert-chain.ts", "shared/proxy/tls/x509-worker.ts"]) expect(out.inputs, m).not.toContain(m);
    for (const m of ["shared/proxy/tls/pem.ts", "shared/proxy/authn/client-cert.ts", "shared/proxy/tls/cert-generation.ts", "shared/proxy/tls/rotation.ts"]) expect(out.inputs, m).toContain(m);
    expect(out.worker.files).toContain("x509-worker.mjs");
    expect(out.worker.inputs).toEqual(expect.arrayContaining(["shared/proxy/tls/x509-worker.ts", "shared/proxy/tls/certs.ts", "shared/proxy/tls/x509.ts"]));
    expect(out.worker.inputs.some((i) => i.includes("node_modules/@peculiar/x509/"))).toBe(true);
    expect(out.lazy.inputs).toContain("shared/proxy/authn/client-cert-chain.ts");
    for (const f of out.worker.files) expect(out.lazy.files).not.toContain(f);
  });

  it("TLS mode generate: the certificate is made in a worker thread; the main thread serves a front-proxy read without loading the library", async () => {
    let ca: string | undefined;
    const run = runBundle("generate", [], () => {
      const api = fake.apiServices.get("v1beta1.external.metrics.k8s.io") as unknown as { spec: { caBundle: string } } | undefined;
      return (ca ??= api ? Buffer.from(api.spec.caBundle, "base64").toString("utf8") : undefined);
    });
    const { lines, threads } = await run;
    expectMainThreadWithoutX509(threads);
    const workers = x509Workers(threads);
    expect(workers, lines.join("\n")).toHaveLength(1);
    expect(generatedIn(lines)).toEqual(workers);
    fake.apiServices.delete("v1beta1.external.metrics.k8s.io");
  }, 60_000);

  it("TLS mode secret: the Lease holder creates the Secret in a worker thread; a replica that finds it usable makes nothing; neither main thread loads the library", async () => {
    const secretCa = () => {
      const data = (fake.getSecret(SECRET.namespace, SECRET.name) as unknown as { data?: Record<string, string> } | undefined)?.data;
      return data?.["ca.crt"] === undefined ? undefined : Buffer.from(data["ca.crt"], "base64").toString("utf8");
    };
    const args = ["--tls-secret", `${SECRET.namespace}/${SECRET.name}`, "--leader-elect-lease-duration-seconds", "3", "--leader-elect-renew-deadline-seconds", "2", "--leader-elect-retry-period-seconds", "1"];
    const writer = await runBundle("writer", args, secretCa);
    expectMainThreadWithoutX509(writer.threads);
    const workers = x509Workers(writer.threads);
    expect(workers.length, writer.lines.join("\n")).toBeGreaterThanOrEqual(1);
    expect(generatedIn(writer.lines).length).toBeGreaterThanOrEqual(1);
    for (const id of generatedIn(writer.lines)) expect(workers).toContain(id);

    const follower = await runBundle("follower", args, secretCa);
    expectMainThreadWithoutX509(follower.threads);
    expect([...follower.threads.keys()], follower.lines.join("\n")).toEqual([0]);
    expect(generatedIn(follower.lines)).toEqual([]);
  }, 90_000);
});
