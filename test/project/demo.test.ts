/**
 * The README's main job, run as a user runs it: `npm start` (the demo with
 * its embedded SQS emulator) answers real values, and `npm run queue -- add`
 * moves them. Ports are chosen by the OS so the test never collides with a
 * demo a developer has running.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/ports.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

function runNpm(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn("npm", args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"], detached: true });
}

async function waitForOutput(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<string> {
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; output so far:\n${out}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (pattern.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code} before ${pattern}; output:\n${out}`));
    });
  });
}

async function runToEnd(child: ChildProcess): Promise<string> {
  let out = "";
  child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`exit ${code}: ${out}`);
  return out;
}

describe("npm start (the embedded demo)", () => {
  let demo: ChildProcess;
  let banner: string;
  let bridge: string;
  let sqsEndpoint: string;
  let stderr = "";

  beforeAll(async () => {
    // a developer's shell may hold signing keys: the demo must not depend on them
    demo = runNpm(["start"], { PORT: "0", SQS_PORT: "0", BRIDGE_SIGNING_KEYS: "" });
    demo.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
    banner = await waitForOutput(demo, /Ctrl-C stops/, 60_000);
    bridge = /bridge:\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(banner)![1]!;
    sqsEndpoint = /SQS emulator \(fauxqs\):\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(banner)![1]!;
  });

  afterAll(async () => {
    if (demo?.pid !== undefined && demo.exitCode === null) {
      const exited = new Promise((resolve) => demo.once("exit", resolve));
      process.kill(-demo.pid, "SIGTERM");
      await exited;
    }
  });

  it("says on start that it runs unsigned and open, on purpose (the warnings a deployed bridge must not show)", async () => {
    await expect.poll(() => stderr).toMatch(/"level":"warn","msg":"running insecure: BRIDGE_SIGNING_KEYS is not set and BRIDGE_INSECURE_ALLOW_UNSIGNED=true is/);
    expect(stderr).toMatch(/"level":"warn","msg":"running open: policy.defaultAction is Allow/);
  });

  it("listens on 127.0.0.1 only, the emulator too (fauxqs's startFauxqs binds every interface; the demo does not use it)", () => {
    // Linux's table of IPv4 TCP sockets: local address as hex IP:port, state 0A = LISTEN
    const listening = (port: number) =>
      readFileSync("/proc/net/tcp", "utf8")
        .split("\n")
        .slice(1)
        .map((line) => line.trim().split(/\s+/))
        .filter((f) => f[3] === "0A" && f[1]?.endsWith(`:${port.toString(16).toUpperCase().padStart(4, "0")}`))
        .map((f) => f[1]!.split(":")[0]);
    for (const url of [bridge, sqsEndpoint]) {
      const port = Number(new URL(url).port);
      expect(listening(port), url).toEqual(["0100007F"]); // 127.0.0.1, not 00000000 (0.0.0.0)
    }
  });

  it("prints ready-to-paste curl lines for its own address, none ending in a blank", () => {
    for (const line of banner.split("\n").filter((l) => l.includes("curl "))) expect(line, JSON.stringify(line)).toBe(line.trimEnd());
    expect(banner).toContain(`curl -s '${bridge}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks'`);
  });

  it("serves the seeded queue depth, and the value moves when messages are added", async () => {
    const url = `${bridge}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks`;
    const first = await (await fetch(url)).json();
    expect(first.items).toEqual([expect.objectContaining({ metricName: "queue_messages_ready", metricLabels: { queue: "worker_tasks" }, value: "25" })]);

    const added = await runToEnd(runNpm(["run", "queue", "--", "add", "15", "--endpoint", sqsEndpoint]));
    expect(added).toMatch(/ApproximateNumberOfMessages = 40/);

    // the demo re-uses a read for cacheTTLSeconds (5 s): the new depth shows within that bound
    const deadline = Date.now() + 8_000;
    let value = first.items[0].value;
    while (value !== "40" && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
      value = (await (await fetch(url)).json()).items[0].value;
    }
    expect(value).toBe("40");

    const drained = await runToEnd(runNpm(["run", "queue", "--", "drain", "40", "--endpoint", sqsEndpoint]));
    expect(drained).toMatch(/deleted 40 messages/);
  });

  it("logs each request as a JSON line", async () => {
    const logged = waitForOutput(demo, /"msg":"request".*"path":"\/apis\/external\.metrics\.k8s\.io\/v1beta1"/, 5_000);
    await fetch(`${bridge}/apis/external.metrics.k8s.io/v1beta1`);
    const line = await logged;
    expect(line).toMatch(/"code":200/);
  });
});

describe("npm start when a port is taken", () => {
  it("names the port and a command that keeps the other port the user set (SQS_PORT stays when PORT is taken)", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    const sqsPort = await freePort();
    try {
      const child = runNpm(["start"], { PORT: String(port), SQS_PORT: String(sqsPort), BRIDGE_SIGNING_KEYS: "" });
      let out = "";
      child.stdout!.on("data", (c: Buffer) => (out += c.toString()));
      child.stderr!.on("data", (c: Buffer) => (out += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
      expect(code, out).toBe(1);
      expect(out).toContain(`npm start: port ${port} is already in use, so the bridge cannot listen on it: pick another port, e.g. SQS_PORT=${sqsPort} PORT=${port + 1} npm start`);
    } finally {
      taken.close();
    }
  });
});
