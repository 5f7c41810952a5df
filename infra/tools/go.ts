/**
 * Go-built test tools (the apimachinery/apiserver oracles, helm, kubeconform)
 * in a content-addressed cache OUTSIDE the work tree, so a fresh clone on the
 * same machine (CI runs one per submission) reuses them instead of
 * recompiling for minutes:
 *
 * - cache root: `$EMB_CACHE_DIR`, else `$HOME/.cache/external-metrics-bridge`
 *   (the same root test/k8s/build.sh uses for the control plane);
 * - Go's build cache: `<root>/go-build` (`.ci/run` points XDG_CACHE_HOME into
 *   the tree, which would otherwise put GOCACHE there and start cold);
 * - a binary's key: the SHA-256 of its module's go.mod, go.sum and *.go
 *   files, so any change to the oracle's code or pins rebuilds it.
 *
 * Builds run under an exclusive lock per binary, so parallel test files (or
 * two runs) never build the same thing twice at once; a lock left by a
 * killed build is taken over.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

/** The cache root for Go-built tools and Go's build cache. */
export function toolCacheDir(): string {
  return process.env["EMB_CACHE_DIR"] || join(homedir(), ".cache", "external-metrics-bridge");
}

/** The `go` binary (PATH, then /usr/local/go). @throws Error when there is none */
export function findGo(): string {
  for (const candidate of ["go", "/usr/local/go/bin/go"]) {
    const r = spawnSync(candidate, ["version"], { encoding: "utf8" });
    if (r.status === 0) return candidate;
  }
  throw new Error("Go (>= 1.26) is required to build the test oracles and tools; none found on PATH or in /usr/local/go/bin");
}

/** Environment for `go` commands: the persistent build cache, no VCS stamping. */
export function goEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PATH: [process.env["PATH"] ?? "", "/usr/local/go/bin"].join(":"),
    GOCACHE: join(toolCacheDir(), "go-build"),
    GOFLAGS: "-buildvcs=false -modcacherw",
    ...extra,
  };
}

/** The content key of a Go module directory: go.mod, go.sum and its *.go files. */
export function moduleKey(dir: string): string {
  const hash = createHash("sha256");
  const files = readdirSync(dir)
    .filter((f) => f === "go.mod" || f === "go.sum" || f.endsWith(".go"))
    .sort();
  for (const f of files) hash.update(f).update("\0").update(readFileSync(join(dir, f))).update("\0");
  return hash.digest("hex").slice(0, 16);
}

/**
 * Run `fn` holding an exclusive lock: a directory holding the owner's pid.
 * A lock whose owner process is gone (killed mid-build) or that is older
 * than 30 minutes is stale and taken over. Waits up to `timeoutMs` for a
 * live holder.
 */
function withLock<T>(lock: string, timeoutMs: number, fn: () => T): T {
  const started = Date.now();
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      if (lockIsStale(lock)) {
        rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${lock}`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function lockIsStale(lock: string): boolean {
  let age: number;
  try {
    age = Date.now() - statSync(lock).mtimeMs;
  } catch {
    return false; // gone meanwhile: the next mkdir decides
  }
  if (age > 30 * 60_000) return true;
  let pid: number;
  try {
    pid = Number(readFileSync(join(lock, "pid"), "utf8"));
  } catch {
    return age > 5_000; // no pid yet: being created (fresh) or left by an older layout
  }
  if (!Number.isInteger(pid) || pid <= 0) return age > 5_000;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * The path of the binary built from the Go module in `dir` (`go build .`),
 * from the cache when its content key matches, else built now.
 *
 * @param name the binary's name in the cache (e.g. `selector-oracle`)
 * @throws Error with go's output when the build fails
 */
export function goBinary(dir: string, name: string, options: { timeoutMs?: number; args?: string[] } = {}): string {
  const root = join(toolCacheDir(), "go-bin");
  const binary = join(root, `${name}-${moduleKey(dir)}`);
  if (existsSync(binary)) return binary;
  mkdirSync(root, { recursive: true });
  return withLock(`${binary}.lock`, options.timeoutMs ?? 20 * 60_000, () => {
    if (existsSync(binary)) return binary;
    const tmp = `${binary}.tmp-${process.pid}`;
    const r = spawnSync(findGo(), ["build", ...(options.args ?? []), "-o", tmp, "."], {
      cwd: dir,
      encoding: "utf8",
      timeout: options.timeoutMs ?? 20 * 60_000,
      env: goEnv(),
    });
    if (r.status !== 0) {
      rmSync(tmp, { force: true });
      throw new Error(`go build in ${dir} failed (${r.status ?? r.signal}): ${r.error ?? ""}\n${r.stderr}`);
    }
    renameSync(tmp, binary);
    return binary;
  });
}

/**
 * The path of a tool installed with `go install [-tags t1,t2] <module>@<version>`,
 * cached per module@version and build tags (a tool built without tags keeps
 * the key it always had).
 *
 * @param options.tags Go build tags (`go help buildconstraint`), e.g.
 *   `["remove_all_sd"]` for Prometheus without its service discoveries
 * @throws Error with go's output when the install fails
 */
export function goInstall(moduleAtVersion: string, binaryName: string, options: { timeoutMs?: number; tags?: readonly string[] } = {}): string {
  const tags = [...(options.tags ?? [])].sort();
  const key = tags.length ? `${moduleAtVersion} -tags ${tags.join(",")}` : moduleAtVersion;
  const dir = join(toolCacheDir(), "tools", createHash("sha256").update(key).digest("hex").slice(0, 16));
  const binary = join(dir, binaryName);
  if (existsSync(binary)) return binary;
  mkdirSync(dir, { recursive: true });
  return withLock(join(dir, ".lock"), options.timeoutMs ?? 25 * 60_000, () => {
    if (existsSync(binary)) return binary;
    const args = tags.length ? ["install", "-tags", tags.join(","), moduleAtVersion] : ["install", moduleAtVersion];
    const r = spawnSync(findGo(), args, {
      encoding: "utf8",
      timeout: options.timeoutMs ?? 25 * 60_000,
      env: goEnv({ GOBIN: dir }),
    });
    if (r.status !== 0 || !existsSync(binary)) throw new Error(`go install ${moduleAtVersion} failed:\n${r.stderr}`);
    writeFileSync(join(dir, "SOURCE"), `${key}\n`);
    return binary;
  });
}
