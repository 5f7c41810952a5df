/**
 * The shared logger (`shared/observability/log.ts`): levels, redaction of
 * secrets by field name and inside error texts, `LOG_LEVEL` on the Node
 * server and the proxy process, and the app's request records (probes at
 * debug, a denied read's audit record naming the policy decision).
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { buildBridge } from "../helpers/bridge.ts";
import type { LogRecord } from "../../shared/app.ts";
import { createLogger, parseLevel, REDACTED, redact, redactText } from "../../shared/observability/log.ts";
import { errorKind } from "../../shared/observability/metrics.ts";

describe("levels", () => {
  it("writes records at the level and above; parses LOG_LEVEL values and refuses others", () => {
    const lines: string[] = [];
    const log = createLogger({ level: "warn", sink: (l) => lines.push(l), now: () => 0 });
    log({ level: "debug", msg: "d" });
    log({ level: "info", msg: "i" });
    log({ level: "warn", msg: "w" });
    log({ level: "error", msg: "e" });
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(["w", "e"]);
    expect(lines[0]).toBe('{"time":"1970-01-01T00:00:00.000Z","level":"warn","msg":"w"}\n');
    expect(parseLevel(undefined)).toBe("info");
    expect(parseLevel("DEBUG")).toBe("debug");
    expect(parseLevel("warning")).toBe("warn");
    expect(() => parseLevel("verbose")).toThrow(/debug, info, warn, error/);
  });
});

describe("redaction", () => {
  it("never writes signatures, tokens or credentials, at any depth, and cuts them out of error texts", () => {
    const lines: string[] = [];
    const log = createLogger({ sink: (l) => lines.push(l) });
    log({
      level: "error",
      msg: "x",
      authorization: "Bearer abcdefghijkl",
      headers: { "X-EMB-Signature": "v1=zzz", cookie: "a=b" },
      credentials: { accessKeyId: "AKIA…", secretAccessKey: "s3cr3t" },
      nested: [{ token: "t0k3n" }],
      error: "token review failed for Bearer eyJhbGciOiJSUzI1NiJ9.payload.sig; aws_secret_access_key=abcdefghijklmnopqrstuvwxyz0123456789ABCD",
      user: "alice",
    });
    const text = lines.join("");
    for (const secret of ["abcdefghijkl", "v1=zzz", "a=b", "s3cr3t", "t0k3n", "eyJhbGciOiJSUzI1NiJ9", "abcdefghijklmnopqrstuvwxyz0123456789ABCD"]) expect(text).not.toContain(secret);
    expect(JSON.parse(text)).toMatchObject({ authorization: REDACTED, user: "alice", credentials: REDACTED, nested: [{ token: REDACTED }] });
  });

  it("returns the record itself when nothing is secret (no copy on the request path)", () => {
    const record = { level: "info", msg: "request", user: "u", groups: ["g"], code: 200 };
    expect(redact(record)).toBe(record);
    expect(redactText("plain message")).toBe("plain message");
  });
});

describe("the app's request records", () => {
  const config = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, credentials: { source: static, accessKeyId: a, secretAccessKey: b } }
metrics:
  - { name: queue_messages_ready, provider: sqs, query: { queueLabel: queue } }
policy:
  defaultAction: Deny
  localIdentity: { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts"] }
`;
  it("logs probes at debug and a denied read with caller, selector, decision, the 403's text and no backend call", async () => {
    const records: LogRecord[] = [];
    const bridge = buildBridge(config, "c.yaml", { env: {}, now: Date.now }, { log: (r) => records.push(r) });
    expect((await bridge.app.request("/readyz")).status).toBe(200);
    const res = await bridge.app.request("/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Dorders");
    expect(res.status).toBe(403);
    expect(records[0]).toMatchObject({ level: "debug", path: "/readyz", code: 200 });
    expect(records[1]).toMatchObject({
      level: "warn",
      msg: "request",
      user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
      groups: ["system:serviceaccounts"],
      namespace: "team-a",
      metric: "queue_messages_ready",
      selector: "queue=orders",
      provider: "sqs",
      decision: "deny",
      code: 403,
      errorKind: "forbidden",
    });
    expect(String(records[1]!["error"])).toMatch(/is forbidden/);
    expect(records[1]!["cache"]).toBeUndefined(); // denied before any read
  });

  it("classifies the providers' failure texts", () => {
    expect(errorKind({ code: 503, message: "provider p: GetMetricData was throttled by AWS (ThrottlingException): Rate exceeded" })).toBe("throttled");
    expect(errorKind({ code: 500, message: "provider p: GetQueueUrl failed: no AWS credentials were found, so nothing was sent to AWS" })).toBe("credentials");
    expect(errorKind({ code: 503, message: "metric m: provider p did not answer within 3000 ms" })).toBe("timeout");
    expect(errorKind({ code: 503, message: "provider p: x failed: backend unreachable (Error ECONNREFUSED)" })).toBe("unreachable");
    expect(errorKind({ code: 404, message: 'queue "x" does not exist' })).toBe("not_found");
  });
});

describe("LOG_LEVEL in the processes", () => {
  it("the proxy's and the Node server's loggers write debug lines only at debug", () => {
    const module = fileURLToPath(new URL("../../functions/node-log.ts", import.meta.url));
    const script = `const { batchedJsonLog } = await import(${JSON.stringify(module)}); for (const level of ["info", "debug"]) batchedJsonLog(Date.now, level)({ level: "debug", msg: "probe-" + level });`;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    expect(out).toContain('"msg":"probe-debug"');
    expect(out).not.toContain('"msg":"probe-info"');
  });
});
