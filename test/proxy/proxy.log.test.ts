/**
 * The proxy's JSON-lines logger (shared/proxy/log.ts): the lines of one
 * event-loop turn go out in one write per stream (one system call instead of
 * one per request), in order, and none is lost when the process exits right
 * after logging.
 */
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { jsonLogger, MAX_PENDING_LOG_BYTES } from "../../shared/proxy/log.ts";

afterEach(() => vi.restoreAllMocks());

const nextTurn = () => new Promise((r) => setImmediate(r));

describe("jsonLogger", () => {
  it("writes the lines of one turn in one write per stream, in order", async () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const err = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const log = jsonLogger(() => Date.parse("2026-01-01T00:00:00Z"));
    log({ level: "info", msg: "request", n: 1 });
    log({ level: "warn", msg: "request", n: 2 });
    log({ level: "info", msg: "request", n: 3 });
    expect(out).not.toHaveBeenCalled();
    await nextTurn();
    expect(out).toHaveBeenCalledTimes(1);
    expect(err).toHaveBeenCalledTimes(1);
    expect(String(out.mock.calls[0]![0])).toBe(
      '{"time":"2026-01-01T00:00:00.000Z","level":"info","msg":"request","n":1}\n{"time":"2026-01-01T00:00:00.000Z","level":"info","msg":"request","n":3}\n',
    );
    expect(JSON.parse(String(err.mock.calls[0]![0]))).toMatchObject({ level: "warn", n: 2 });
  });

  it("writes at once when the pending lines pass the bound", () => {
    const out = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    const log = jsonLogger();
    const big = "x".repeat(64 * 1024);
    for (let i = 0; i * big.length <= MAX_PENDING_LOG_BYTES; i++) log({ level: "info", msg: "big", big });
    expect(out).toHaveBeenCalledTimes(1);
  });

  it("loses no line when the process exits right after logging", () => {
    const module = fileURLToPath(new URL("../../shared/proxy/log.ts", import.meta.url));
    const script = `const { jsonLogger } = await import(${JSON.stringify(module)}); const log = jsonLogger(); log({ level: "info", msg: "one" }); log({ level: "error", msg: "two" }); process.exit(3);`;
    let stdout = "";
    try {
      execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    } catch (e) {
      const err = e as { status: number; stdout: string; stderr: string };
      expect(err.status).toBe(3);
      stdout = err.stdout;
      expect(err.stderr).toContain('"msg":"two"');
    }
    expect(stdout).toContain('"msg":"one"');
  });
});
