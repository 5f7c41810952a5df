/**
 * The README's first hour, through the real npm scripts (issue 13 item 7):
 * taken ports are one line naming the port and the variable (no stack
 * trace), `--help` works on every script, file arguments are relative to
 * where `npm run` was typed, and a bridge without AWS credentials says no
 * credentials were found (and where the SDK looked) instead of "AWS refused".
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startEmulator, type Emulator } from "../helpers/emulator.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

/** The environment without the caller's AWS and signing settings. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(AWS_|BRIDGE_|PORT$|SQS_)/.test(k)) env[k] = v;
  return { ...env, ...extra };
}

/** `npm --prefix ROOT run <args>` from `cwd` (default ROOT): as a user types it, from any directory. */
function npm(args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): ChildProcess {
  return spawn("npm", ["--prefix", ROOT, ...args], { cwd: options.cwd ?? ROOT, env: options.env ?? cleanEnv(), stdio: ["ignore", "pipe", "pipe"], detached: true });
}

async function runToEnd(child: ChildProcess, timeoutMs = 120_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => process.kill(-child.pid!, "SIGKILL"), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/** Hold a port on 127.0.0.1 as another program (LocalStack, another server) would. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  return { port: (server.address() as AddressInfo).port, server };
}

/** What the script itself printed: npm's own lines (`> name`, `npm warn …`, `npm error …`) and JSON log records left out. */
function ownLines(text: string): string[] {
  return text.split("\n").filter((l) => l.trim() !== "" && !l.startsWith(">") && !/^npm (warn|error|notice)\b/.test(l) && !l.startsWith("{"));
}

describe("taken ports: one line naming the port and the setting, exit 1", () => {
  let held: { port: number; server: Server };
  beforeAll(async () => {
    held = await holdPort();
  });
  afterAll(() => new Promise<void>((resolve) => held.server.close(() => resolve())));

  it("npm start with the SQS emulator's port taken names SQS_PORT", async () => {
    const r = await runToEnd(npm(["start"], { env: cleanEnv({ SQS_PORT: String(held.port), PORT: "0" }) }));
    expect(r.code).toBe(1);
    expect(ownLines(r.stderr)).toEqual([
      `npm start: port ${held.port} is already in use, so the SQS emulator cannot listen on it: pick another port, e.g. SQS_PORT=${held.port + 1} PORT=0 npm start (LocalStack uses 4566 too)`, // the PORT the user set is kept
    ]);
    expect(r.stderr).not.toMatch(/EADDRINUSE|\n\s+at /);
  });

  it("npm start with the bridge's port taken names PORT (and stops the emulator it started)", async () => {
    const r = await runToEnd(npm(["start"], { env: cleanEnv({ SQS_PORT: "0", PORT: String(held.port) }) }));
    expect(r.code).toBe(1);
    expect(ownLines(r.stderr)).toEqual([`npm start: port ${held.port} is already in use, so the bridge cannot listen on it: pick another port, e.g. SQS_PORT=0 PORT=${held.port + 1} npm start`]); // the SQS_PORT the user set is kept
  });

  it("npm run serve -- --config FILE reads FILE relative to where npm was typed, and a taken --port names --port and PORT", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-first-hour-"));
    try {
      writeFileSync(
        join(dir, "bridge.yaml"),
        [
          "apiVersion: external-metrics-bridge.io/v1alpha1",
          "kind: BridgeConfig",
          "providers: { sqs: { type: aws-sqs, region: us-east-1, endpoint: 'http://127.0.0.1:9' } }",
          "metrics: [{ name: m, provider: sqs, query: { queueLabel: queue, attribute: ApproximateNumberOfMessages } }]",
          "policy: { defaultAction: Allow }",
        ].join("\n"),
      );
      const r = await runToEnd(npm(["run", "serve", "--", "--config", "bridge.yaml", "--insecure-allow-unsigned", "--port", String(held.port)], { cwd: dir }));
      expect(r.stderr).not.toMatch(/ENOENT/);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `external-metrics-bridge cannot start: port ${held.port} is already in use, so the bridge cannot listen on it: pick another port, e.g. --port ${held.port + 1} or PORT=${held.port + 1}`,
      );
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("--help on every npm script (commander, as the admin CLI)", () => {
  it.each([
    [["start", "--", "--help"], ["Usage: npm start --", "--sqs-port <port>", "SQS_PORT", "--port <port>"]],
    [["run", "serve", "--", "--help"], ["Usage: npm run serve --", "--config <file>", "--insecure-allow-unsigned", "BRIDGE_SIGNING_KEYS"]],
    [["run", "queue", "--", "--help"], ["Usage: npm run queue --", "add N | drain N | purge | depth", "SQS_PORT"]],
    [["run", "build:lambda", "--", "--help"], ["Usage: npm run build:lambda --", "--config <file>", "--outdir <dir>"]],
    [["run", "build:node", "--", "--help"], ["Usage: npm run build:node --", "--outdir <dir>"]],
  ])("npm %j prints its options and exits 0", async (args, expected) => {
    const r = await runToEnd(npm(args));
    expect(r.stderr).not.toMatch(/ERR_PARSE_ARGS|Error/);
    expect(r.code).toBe(0);
    for (const text of expected) expect(r.stdout).toContain(text);
  });

  it("an unknown option is a usage error (exit 2) pointing at --help", async () => {
    const r = await runToEnd(npm(["run", "serve", "--", "--no-such-option"]));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("error: unknown option '--no-such-option'");
    expect(r.stderr).toContain("(add --help for the options)");
  });
});

describe("npm run build:lambda -- --config bridge.yaml, as the README writes it", () => {
  it("finds bridge.yaml in the directory npm was typed in and writes the artifact relative to it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-first-hour-"));
    try {
      writeFileSync(
        join(dir, "bridge.yaml"),
        [
          "apiVersion: external-metrics-bridge.io/v1alpha1",
          "kind: BridgeConfig",
          "providers: { sqs: { type: aws-sqs, region: us-east-1 } }",
          "metrics: [{ name: m, provider: sqs, query: { queueLabel: queue, attribute: ApproximateNumberOfMessages } }]",
          "policy: { defaultAction: Deny }",
        ].join("\n"),
      );
      const r = await runToEnd(npm(["run", "build:lambda", "--", "--config", "bridge.yaml", "--outdir", "out"], { cwd: dir }));
      expect(r.stderr).not.toMatch(/ENOENT/);
      expect(r.code).toBe(0);
      expect(readdirSync(join(dir, "out"))).toEqual(expect.arrayContaining(["index.mjs", "bridge.yaml"]));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe("the Worker build's --config from another directory", () => {
  it("npm run prebuild:worker -- --config bridge.yaml checks the bridge.yaml of the directory npm was typed in", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-first-hour-"));
    try {
      writeFileSync(join(dir, "bridge.yaml"), readFileSync(join(ROOT, "infra/examples/demo.yaml"), "utf8"));
      const r = await runToEnd(npm(["run", "prebuild:worker", "--", "--config", "bridge.yaml"], { cwd: dir }));
      expect(r.stderr).not.toMatch(/ENOENT|cannot read/);
      expect(r.code).toBe(0);
      expect(ownLines(r.stdout)).toEqual([`${relative(ROOT, join(dir, "bridge.yaml"))}: valid BridgeConfig (providers aws-sqs)`]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("npm run build:node -- --outdir out, from another directory", () => {
  it("writes the Node server's bundle relative to the directory npm was typed in", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-first-hour-"));
    try {
      const r = await runToEnd(npm(["run", "build:node", "--", "--outdir", "out"], { cwd: dir }));
      expect(r.code).toBe(0);
      expect(readdirSync(join(dir, "out"))).toEqual(expect.arrayContaining(["node.mjs", "chunks"]));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 180_000);
});

describe("the demo's queue script and a bridge without AWS credentials", () => {
  let emulator: Emulator;
  beforeAll(async () => {
    emulator = await startEmulator();
    await emulator.add("worker_tasks", 3);
  });
  afterAll(() => emulator?.stop());

  it("npm run queue follows SQS_PORT (the variable npm start listens on)", async () => {
    const r = await runToEnd(npm(["run", "queue", "--", "depth"], { env: cleanEnv({ SQS_PORT: String(emulator.port) }) }));
    expect(ownLines(r.stderr)).toEqual([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("worker_tasks: ApproximateNumberOfMessages = 3");
  });

  it("no credentials anywhere: the 500 says none were found and where the SDK looked, not that AWS refused them", async () => {
    const home = mkdtempSync(join(tmpdir(), "emb-first-hour-home-"));
    const child = npm(["run", "serve", "--", "--insecure-allow-unsigned", "--port", "0"], {
      env: cleanEnv({
        HOME: home,
        AWS_EC2_METADATA_DISABLED: "true", // no instance metadata call leaves the machine
        BRIDGE_CONFIG: [
          "apiVersion: external-metrics-bridge.io/v1alpha1",
          "kind: BridgeConfig",
          `providers: { sqs: { type: aws-sqs, region: us-east-1, endpoint: '${emulator.endpoint}' } }`,
          "metrics: [{ name: queue_messages_ready, provider: sqs, query: { queueLabel: queue, attribute: ApproximateNumberOfMessages } }]",
          "policy: { defaultAction: Allow }",
        ].join("\n"),
      }),
    });
    try {
      let stderr = "";
      child.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
      await expect.poll(() => stderr, { timeout: 30_000 }).toMatch(/listening on http:\/\/127\.0\.0\.1:\d+/);
      const url = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(stderr)![1]!;
      const res = await fetch(`${url}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready?labelSelector=queue%3Dworker_tasks`);
      const body = (await res.json()) as { code: number; message: string };
      expect(res.status).toBe(500);
      expect(body.message).toContain("no AWS credentials were found, so nothing was sent to AWS (CredentialsProviderError)");
      expect(body.message).toContain("AWS_ACCESS_KEY_ID");
      expect(body.message).toContain("AWS_WEB_IDENTITY_TOKEN_FILE");
      expect(body.message).not.toMatch(/refused/);
    } finally {
      process.kill(-child.pid!, "SIGTERM");
      await new Promise((resolve) => child.once("exit", resolve));
      rmSync(home, { recursive: true, force: true });
    }
  });
});
