/**
 * A real Prometheus for the provider's integration suites: v3.16.0 built from
 * Go modules (`github.com/prometheus/prometheus` v0.316.0, `cmd/prometheus`,
 * `-tags remove_all_sd`: no service discovery but static configs), cached
 * outside the tree by module version and tags (infra/tools/go.ts
 * `goInstall`), started on 127.0.0.1 scraping an exporter this process serves.
 *
 * - {@link prometheusBinary}: the binary, built on first use (cold about 7
 *   minutes on 2 cores, see the README; warm a stat);
 * - {@link startExporter}: a node:http server speaking the Prometheus text
 *   exposition format 0.0.4 with the samples the test sets (values, labels,
 *   optional explicit timestamps);
 * - {@link startPrometheus}: the server with a temporary TSDB, a generated
 *   `prometheus.yml` scraping the exporter every second, optional
 *   `--web.route-prefix`; ready when `/-/ready` answers 200; stopped with
 *   SIGTERM then SIGKILL, also when the start fails.
 *
 * Sources: Prometheus docs "Exposition formats" (text format 0.0.4),
 * "Configuration" (`scrape_configs`, `static_configs`), "HTTP API"
 * (`/api/v1/query`, `/-/ready`), and `cmd/prometheus/main.go` (flags).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify } from "yaml";
import { goInstall } from "../../infra/tools/go.ts";
import { logTails, startProcess, waitFor, type LoggedProcess } from "../k8s/cluster.ts";
import { freePort } from "./ports.ts";

/** The Go module (and version) whose `cmd/prometheus` is the server: Prometheus v3.16.0 is module version v0.316.0. */
export const PROMETHEUS_MODULE = "github.com/prometheus/prometheus/cmd/prometheus@v0.316.0";
/** Build tags: `remove_all_sd` drops every service discovery plugin (plugins/plugin_*.go), a smaller and faster build. */
export const PROMETHEUS_BUILD_TAGS: readonly string[] = ["remove_all_sd"];
/** The bound on a cold build (module download + compile), in ms: a `beforeAll` that builds needs at least this as its timeout. */
export const PROMETHEUS_BUILD_TIMEOUT_MS = 40 * 60_000;

/**
 * The path of the Prometheus binary, built now when the cache lacks it
 * (synchronous: blocks this worker for the whole cold build, minutes).
 *
 * @throws Error with go's output when the build fails or Go is missing
 */
export function prometheusBinary(): string {
  return goInstall(PROMETHEUS_MODULE, "prometheus", { tags: PROMETHEUS_BUILD_TAGS, timeoutMs: PROMETHEUS_BUILD_TIMEOUT_MS });
}

/** One exported sample: `name{labels} value [timestampMs]` in the text exposition format. */
export interface ExportedSample {
  /** metric name, e.g. `queue_depth` */
  name: string;
  /** label name → value; values are escaped (backslash, double quote, newline) */
  labels?: Readonly<Record<string, string>>;
  /** the value; NaN and ±Inf are written as `NaN`, `+Inf`, `-Inf` */
  value: number;
  /** an explicit sample timestamp in ms since the epoch (Prometheus honours it: `honor_timestamps` defaults to true) */
  timestampMs?: number;
}

/** A local exporter Prometheus scrapes. */
export interface Exporter {
  /** `127.0.0.1:<port>`, the scrape target */
  target: string;
  /**
   * Replace the exposed samples (each metric gets a `# TYPE <name> <type>`
   * line; gauge unless `types` says otherwise). A function is called at
   * every scrape (e.g. a counter that grows with the clock).
   */
  set(samples: readonly ExportedSample[] | (() => readonly ExportedSample[]), types?: Readonly<Record<string, "gauge" | "counter" | "untyped">>): void;
  /** the number of scrapes served so far */
  readonly scrapes: number;
  close(): Promise<void>;
}

/** A number as the text format writes it (Go `strconv.ParseFloat` reads the result back exactly). */
export function exposedNumber(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/**
 * The text exposition format 0.0.4 body of `samples` (samples of one metric
 * grouped under its `# TYPE` line, in first-seen order).
 */
export function exposition(samples: readonly ExportedSample[], types: Readonly<Record<string, string>> = {}): string {
  const byName = new Map<string, ExportedSample[]>();
  for (const s of samples) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
  let out = "";
  for (const [name, group] of byName) {
    out += `# TYPE ${name} ${types[name] ?? "gauge"}\n`;
    for (const s of group) {
      const labels = Object.entries(s.labels ?? {}).map(([k, v]) => `${k}="${escapeLabelValue(v)}"`);
      out += `${name}${labels.length ? `{${labels.join(",")}}` : ""} ${exposedNumber(s.value)}`;
      out += s.timestampMs === undefined ? "\n" : ` ${Math.trunc(s.timestampMs)}\n`;
    }
  }
  return out;
}

/** Start an exporter on 127.0.0.1 (a free port) serving `initial` at every path. */
export async function startExporter(initial: readonly ExportedSample[] = []): Promise<Exporter> {
  let body: () => string = () => exposition(initial);
  let scrapes = 0;
  const server: Server = createServer((_req, res) => {
    scrapes++;
    // Prometheus 3 refuses a scrape without a valid Content-Type unless fallback_scrape_protocol is set
    res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
    res.end(body());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    target: `127.0.0.1:${port}`,
    set(samples, types = {}) {
      body = typeof samples === "function" ? () => exposition(samples(), types) : () => exposition(samples, types);
    },
    get scrapes() {
      return scrapes;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** One element of an instant vector in the HTTP API's JSON (`data.result[i]` of `resultType: "vector"`). */
export interface VectorSample {
  metric: Record<string, string>;
  /** [unix seconds (may be fractional), value as a string] */
  value: [number, string];
}

/** A `/api/v1/query` answer (Prometheus docs "HTTP API", format overview). */
export interface QueryResponse {
  status: "success" | "error";
  data?: { resultType: string; result: unknown };
  errorType?: string;
  error?: string;
  warnings?: string[];
  infos?: string[];
}

/** A running Prometheus. */
export interface PrometheusServer {
  /** the HTTP API base URL, route prefix included, no trailing slash (e.g. `http://127.0.0.1:9090/gmp`) */
  url: string;
  port: number;
  process: LoggedProcess;
  /** the temporary directory: prometheus.yml, data/, prometheus.log */
  dir: string;
  /** GET `/api/v1/query` (time: unix seconds, default the server's now); resolves with the JSON whatever the HTTP status */
  query(promql: string, time?: number): Promise<QueryResponse>;
  /** poll until the instant vector `promql` has a sample (and, with `value`, one whose value string is `value`); resolves with the vector */
  waitForSeries(promql: string, options?: { value?: string; timeoutMs?: number }): Promise<VectorSample[]>;
  /**
   * How many HTTP requests the server has answered on `handler` (default
   * `/api/v1/query`), any status: the sum of its own
   * `prometheus_http_requests_total{handler=…}` read from `/metrics` (the
   * reading is not itself counted: it is another handler).
   */
  requests(handler?: string): Promise<number>;
  /** the last lines of the server's log */
  logs(lines?: number): string;
  /** SIGTERM, SIGKILL after `graceMs` (default 10 000), then delete {@link dir}; idempotent */
  stop(graceMs?: number): Promise<void>;
}

/** Options of {@link startPrometheus}. */
export interface PrometheusOptions {
  /** scrape targets (`host:port`), one job `exporter` */
  targets: readonly string[];
  /** `--web.route-prefix` (e.g. `/gmp`): the API then lives under it */
  routePrefix?: string;
  /** the scrape job's name, which Prometheus writes as each scraped series' `job` label (default `exporter`) */
  jobName?: string;
  /** `global.scrape_interval` in seconds (default 1) */
  scrapeIntervalSeconds?: number;
  /** more flags, e.g. `--query.lookback-delta=1m` */
  extraArgs?: readonly string[];
  /** the binary (default {@link prometheusBinary}) */
  binary?: string;
  /** bound on reaching `/-/ready`, in ms (default 60 000) */
  readyTimeoutMs?: number;
  /**
   * Require HTTP basic auth on every endpoint (`--web.config.file` with
   * `basic_auth_users`: prometheus/exporter-toolkit, which compares the
   * password with a bcrypt hash); the helper's own requests send it.
   */
  basicAuth?: { username: string; password: string; bcryptHash: string };
}

/**
 * Start Prometheus on 127.0.0.1 (a free port) with a temporary TSDB and a
 * generated config scraping `targets`, and wait until `/-/ready` answers 200.
 * On any failure the process is killed and the directory removed before the
 * error is thrown (with the server's log tail).
 *
 * @throws Error when the server exits or is not ready within `readyTimeoutMs`
 */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusServer> {
  const binary = options.binary ?? prometheusBinary();
  const prefix = (options.routePrefix ?? "").replace(/\/+$/, "");
  const auth = options.basicAuth;
  return launchPromApiServer({
    name: "prometheus",
    title: "Prometheus",
    binary,
    prefix,
    basicAuth: auth,
    readyPath: "/-/ready",
    requestsCounter: (handler) => ({ name: "prometheus_http_requests_total", label: `handler=${JSON.stringify(handler)}` }),
    readyTimeoutMs: options.readyTimeoutMs,
    args(dir, port) {
      writeFileSync(join(dir, "prometheus.yml"), stringify(scrapeConfig(options)));
      if (auth) writeFileSync(join(dir, "web.yml"), stringify({ basic_auth_users: { [auth.username]: auth.bcryptHash } }));
      return [
        `--config.file=${join(dir, "prometheus.yml")}`,
        `--storage.tsdb.path=${join(dir, "data")}`,
        `--web.listen-address=127.0.0.1:${port}`,
        // the scrape manager applies new targets at most this often (hidden flag, default 5s): the first scrape comes at once
        "--scrape.discovery-reload-interval=100ms",
        ...(prefix ? [`--web.route-prefix=${prefix}`] : []),
        ...(auth ? [`--web.config.file=${join(dir, "web.yml")}`] : []),
        ...(options.extraArgs ?? []),
      ];
    },
  });
}

/**
 * The `prometheus.yml` both servers read (Prometheus `--config.file`,
 * VictoriaMetrics `-promscrape.config`): one job scraping `targets` every
 * `scrapeIntervalSeconds`, sample timestamps honoured (Prometheus' default;
 * VictoriaMetrics' `honor_timestamps` defaults to false, lib/promscrape/config.go).
 */
function scrapeConfig(options: Pick<PrometheusOptions, "targets" | "jobName" | "scrapeIntervalSeconds">): object {
  const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
  return {
    global: { scrape_interval: interval, scrape_timeout: interval },
    scrape_configs: [{ job_name: options.jobName ?? "exporter", honor_timestamps: true, static_configs: [{ targets: [...options.targets] }] }],
  };
}

/** What differs between two servers of the Prometheus HTTP API, for {@link launchPromApiServer}. */
interface PromApiServerSpec {
  /** the process name (log file, temporary directory) */
  name: string;
  /** the server's name in messages (`Prometheus`, `VictoriaMetrics`) */
  title: string;
  binary: string;
  /** the route prefix the API lives under ("" for none) */
  prefix: string;
  basicAuth?: { username: string; password: string };
  /** the path (after the prefix) that answers 200 once the server is ready */
  readyPath: string;
  /** the `/metrics` counter of HTTP requests and its label naming the handler (`handler="/api/v1/query"`), summed over the other labels */
  requestsCounter(handler: string): { name: string; label: string };
  readyTimeoutMs?: number;
  /** how long the server serves the same `/metrics` text, ms (VictoriaMetrics: 1 s, lib/appmetrics/appmetrics.go); {@link PrometheusServer.requests} waits it out */
  metricsCacheMs?: number;
  /** write the server's files into `dir` and return its command-line flags for `port` */
  args(dir: string, port: number): string[];
}

/**
 * Start one server of the Prometheus HTTP API (a temporary directory, a free
 * port on 127.0.0.1, a log file) and wait until `readyPath` answers 200;
 * a port taken between freePort() and the bind is retried with another.
 */
async function launchPromApiServer(spec: PromApiServerSpec): Promise<PrometheusServer> {
  const auth = spec.basicAuth;
  const headers: Record<string, string> = auth
    ? { authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`, "utf8").toString("base64")}` }
    : {};
  for (let attempt = 1; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), `emb-${spec.name}-`));
    const port = await freePort();
    const proc = startProcess(spec.name, spec.binary, spec.args(dir, port), { logFile: join(dir, `${spec.name}.log`), cwd: dir });
    killWithThisProcess(proc);
    const url = `http://127.0.0.1:${port}${spec.prefix}`;
    let stopped = false;
    let metricsReadAt = 0;
    const server: PrometheusServer = {
      url,
      port,
      process: proc,
      dir,
      async query(promql, time) {
        const params = new URLSearchParams({ query: promql });
        if (time !== undefined) params.set("time", String(time));
        const res = await fetch(`${url}/api/v1/query?${params}`, { headers, signal: AbortSignal.timeout(10_000) });
        return (await res.json()) as QueryResponse;
      },
      async waitForSeries(promql, opts = {}) {
        return waitFor(
          `${promql}${opts.value === undefined ? "" : ` = ${opts.value}`} in ${spec.title}`,
          async () => {
            const r = await server.query(promql);
            if (r.status !== "success") throw new Error(`${r.errorType}: ${r.error}`);
            const vector = r.data?.result as VectorSample[];
            if (!vector.length) return undefined;
            return opts.value === undefined || vector.some((s) => s.value[1] === opts.value) ? vector : undefined;
          },
          { timeoutMs: opts.timeoutMs ?? 30_000, intervalMs: 250, context: () => server.logs() },
        );
      },
      async requests(handler = "/api/v1/query") {
        const wait = metricsReadAt + (spec.metricsCacheMs ?? 0) - Date.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        metricsReadAt = Date.now();
        const res = await fetch(`${url}/metrics`, { headers, signal: AbortSignal.timeout(10_000) });
        const text = await res.text();
        const counter = spec.requestsCounter(handler);
        let total = 0;
        for (const line of text.split("\n")) {
          if (!line.startsWith(`${counter.name}{`) || !line.includes(counter.label)) continue;
          total += Number(line.slice(line.lastIndexOf(" ") + 1));
        }
        return total;
      },
      logs: (lines = 40) => logTails([proc], lines),
      async stop(graceMs) {
        if (stopped) return;
        stopped = true;
        await proc.stop(graceMs);
        rmSync(dir, { recursive: true, force: true });
      },
    };
    try {
      const ready = waitFor(
        `${spec.title} ready on ${url}`,
        async () => {
          const res = await fetch(`${url}${spec.readyPath}`, { headers, signal: AbortSignal.timeout(2_000) });
          await res.body?.cancel();
          return res.status === 200;
        },
        { timeoutMs: spec.readyTimeoutMs ?? 60_000, intervalMs: 200, context: () => server.logs() },
      );
      const exited = proc.exited.then(() => {
        throw new Error(`${spec.title} exited with ${proc.exitCode} before it was ready\n${server.logs()}`);
      });
      // whichever loses settles later (the exit when stopped, the poll at its deadline): never an unhandled rejection
      ready.catch(() => {});
      exited.catch(() => {});
      await Promise.race([ready, exited]);
      return server;
    } catch (err) {
      const log = server.logs(200);
      await server.stop(2_000);
      if (attempt < 3 && proc.exitCode !== undefined && /address already in use/.test(log)) continue;
      throw err;
    }
  }
}

/** The Go module (and version) of VictoriaMetrics single-node, the second server of the Prometheus HTTP API in the suites. */
export const VICTORIAMETRICS_MODULE = "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@v1.151.0";
/** vmauth from the same release: routes by request header (`src_headers`), the tenant-header check. */
export const VMAUTH_MODULE = "github.com/VictoriaMetrics/VictoriaMetrics/app/vmauth@v1.151.0";

/** The VictoriaMetrics binary, built on first use (cold about 30 s on 2 cores, measured; warm a stat). @throws Error when go fails */
export function victoriaMetricsBinary(): string {
  return goInstall(VICTORIAMETRICS_MODULE, "victoria-metrics", { timeoutMs: PROMETHEUS_BUILD_TIMEOUT_MS });
}

/** The vmauth binary (same release as {@link victoriaMetricsBinary}). @throws Error when go fails */
export function vmauthBinary(): string {
  return goInstall(VMAUTH_MODULE, "vmauth", { timeoutMs: PROMETHEUS_BUILD_TIMEOUT_MS });
}

/**
 * Start VictoriaMetrics single-node on 127.0.0.1 scraping `targets` with
 * the same scrape config as {@link startPrometheus}; ready when `/health`
 * answers 200. `-search.latencyOffset` is 1 s (default 30 s: instant
 * queries at "now" are evaluated 30 s in the past,
 * app/vmselect/prometheus/prometheus.go) so a suite need not wait 30 s for
 * a first scrape; `extraArgs` may set it back. Basic auth uses
 * `-httpAuth.username`/`-httpAuth.password` (bcryptHash is ignored).
 *
 * @throws Error when the server exits or is not ready within `readyTimeoutMs`
 */
export async function startVictoriaMetrics(options: PrometheusOptions): Promise<PrometheusServer> {
  const prefix = (options.routePrefix ?? "").replace(/\/+$/, "");
  const auth = options.basicAuth;
  return launchPromApiServer({
    name: "victoria-metrics",
    title: "VictoriaMetrics",
    binary: options.binary ?? victoriaMetricsBinary(),
    prefix,
    basicAuth: auth,
    readyPath: "/health",
    requestsCounter: (handler) => ({ name: "vm_http_requests_total", label: `path=${JSON.stringify(handler)}` }),
    metricsCacheMs: 1_100,
    readyTimeoutMs: options.readyTimeoutMs,
    args(dir, port) {
      writeFileSync(join(dir, "prometheus.yml"), stringify(scrapeConfig(options)));
      return [
        `-httpListenAddr=127.0.0.1:${port}`,
        `-storageDataPath=${join(dir, "data")}`,
        `-promscrape.config=${join(dir, "prometheus.yml")}`,
        "-search.latencyOffset=1s",
        // SIGTERM waits up to this long for open connections (default 7s)
        "-http.maxGracefulShutdownDuration=1s",
        ...(prefix ? [`-http.pathPrefix=${prefix}`] : []),
        ...(auth ? [`-httpAuth.username=${auth.username}`, `-httpAuth.password=${auth.password}`] : []),
        ...(options.extraArgs ?? []),
      ];
    },
  });
}

/**
 * Kill `proc` (SIGKILL) when this process dies in any way, SIGKILL included:
 * a vitest worker that is torn down runs no `exit` handlers, so
 * startProcess's own safety net does not fire there. A `sh` watcher blocks
 * reading a pipe from this process; the kernel closes the pipe when this
 * process dies, and the watcher kills the pid. It is itself killed as soon
 * as `proc` exits, so it never signals a reused pid.
 */
export function killWithThisProcess(proc: LoggedProcess): void {
  const pid = proc.child.pid;
  if (pid === undefined) return;
  const watcher = spawn("sh", ["-c", `read _ignored; kill -KILL ${pid} 2>/dev/null`], { stdio: ["pipe", "ignore", "ignore"], detached: true });
  watcher.on("error", () => {}); // no sh: only startProcess's exit handler remains
  watcher.unref();
  (watcher.stdin as unknown as { unref?: () => void }).unref?.();
  void proc.exited.then(() => watcher.kill("SIGKILL"));
}

/**
 * Start vmauth (VictoriaMetrics' auth proxy, same release) on 127.0.0.1 in
 * front of other servers, routing by one request header
 * (`url_map[].src_headers`, app/vmauth/auth_config.go): a request whose
 * `header` is one of `routes`' keys goes to that route's URL prefix (which
 * may carry query args such as VictoriaMetrics' `extra_label=tenant=a`, added
 * to every proxied request); any other request is refused by vmauth itself
 * (HTTP 400 "missing route"). Ready when `/health` answers 200.
 *
 * @throws Error when vmauth exits or is not ready in time
 */
export async function startVmauth(options: { header: string; routes: Readonly<Record<string, string>>; binary?: string }): Promise<PrometheusServer> {
  return launchPromApiServer({
    name: "vmauth",
    title: "vmauth",
    binary: options.binary ?? vmauthBinary(),
    prefix: "",
    readyPath: "/health",
    requestsCounter: (handler) => ({ name: "vmauth_http_requests_total", label: `path=${JSON.stringify(handler)}` }),
    metricsCacheMs: 1_100,
    args(dir, port) {
      const urlMap = Object.entries(options.routes).map(([value, urlPrefix]) => ({ src_headers: [`${options.header}: ${value}`], url_prefix: urlPrefix }));
      writeFileSync(join(dir, "auth.yml"), stringify({ unauthorized_user: { url_map: urlMap } }));
      return [`-httpListenAddr=127.0.0.1:${port}`, `-auth.config=${join(dir, "auth.yml")}`, "-http.maxGracefulShutdownDuration=1s"];
    },
  });
}
