/**
 * The request path parser (shared/k8s/request-path.ts) against Go's own
 * net/url: test/path-oracle/ is a standard-library Go program (built and
 * cached by infra/tools/go.ts) that escapes segments as client-go does and
 * decodes request targets as Go's HTTP server does.
 *
 * - {@link escapePathSegment} is `url.PathEscape` and
 *   {@link escapeQueryComponent} `url.QueryEscape`, byte for byte, for every
 *   ASCII character and some UTF-8;
 * - both spellings Go clients send — `url.PathEscape` (path segments) and
 *   `URL.EscapedPath` (client-go's request URL, the kube-aggregator's
 *   forwarded path) — are accepted and decode to the segment itself, for
 *   every segment that is a valid path segment name;
 * - for every path the parser accepts, its decoded path is the one Go's
 *   server hands a handler (`req.URL.Path`): what apiserver itself would
 *   have authorized; the same for the custom.metrics.k8s.io shapes (object
 *   name, `*`, metric, namespace metrics, cluster-scoped), whose Go
 *   spellings read back through customMetricsRead.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { goBinary } from "../../infra/tools/go.ts";
import { customMetricsRead, escapePathSegment, escapeQueryComponent, isValidPathSegmentName, parseRequestPath } from "../../shared/k8s/request-path.ts";
import { StatusError } from "../../shared/k8s/status.ts";

const ORACLE_DIR = fileURLToPath(new URL("../path-oracle/", import.meta.url));
const V1 = "/apis/external.metrics.k8s.io/v1beta1";

interface Answer {
  pathEscape?: string;
  queryEscape?: string;
  escapedPath?: string;
  path?: string;
  error?: string;
}

let binary = "";

beforeAll(() => {
  binary = goBinary(ORACLE_DIR, "path-oracle", { timeoutMs: 5 * 60_000 });
}, 6 * 60_000);

function ask(lines: object[]): Answer[] {
  const run = spawnSync(binary, [], { input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n", encoding: "utf8", maxBuffer: 1 << 28, timeout: 60_000 });
  if (run.status !== 0) throw new Error(`oracle failed: ${run.stderr}`);
  const out = run.stdout.split("\n").filter((l) => l !== "");
  expect(out.length).toBe(lines.length);
  return out.map((l) => JSON.parse(l) as Answer);
}

/** Every printable and control ASCII character, alone and inside a name, and some UTF-8. */
function segments(): string[] {
  const out: string[] = [];
  for (let c = 0; c < 128; c++) {
    const ch = String.fromCharCode(c);
    out.push(ch, `a${ch}b`);
  }
  out.push("queue_messages_ready", "team|queue_depth", "custom.googleapis.com\\|depth", "job:rate5m", "café", "名前", "emoji😀", "*", "a*b", "$&+:=@", ",;", "..a", "a..", "...", "queue in (a, b),x!=y", "a b!*()'~");
  return out;
}

const parses = (path: string): string | StatusError => {
  try {
    return parseRequestPath(path).path;
  } catch (err) {
    if (err instanceof StatusError) return err;
    throw err;
  }
};

describe("request paths against Go's net/url", () => {
  it("escapePathSegment is url.PathEscape, escapeQueryComponent url.QueryEscape; Go's two spellings of a valid segment name read back to it", () => {
    const list = segments();
    const theirs = ask(list.map((segment) => ({ segment })));
    const mismatches: string[] = [];
    list.forEach((segment, i) => {
      const go = theirs[i]!;
      const pathEscape = go.pathEscape ?? "";
      if (escapePathSegment(segment) !== pathEscape) mismatches.push(`escape ${JSON.stringify(segment)}: ours ${escapePathSegment(segment)}, Go ${pathEscape}`);
      if (escapeQueryComponent(segment) !== (go.queryEscape ?? "")) mismatches.push(`query escape ${JSON.stringify(segment)}: ours ${escapeQueryComponent(segment)}, Go ${go.queryEscape}`);
      // eslint-disable-next-line no-control-regex
      if (segment === "" || !isValidPathSegmentName(segment) || /[\u0000-\u001f\u007f]/.test(segment)) return;
      for (const spelling of [pathEscape, go.escapedPath ?? ""]) {
        const got = parses(`${V1}/namespaces/team-b/${spelling}`);
        if (got instanceof StatusError) mismatches.push(`${JSON.stringify(segment)} spelled ${spelling}: refused (${got.message})`);
        else if (got !== `${V1}/namespaces/team-b/${segment}`) mismatches.push(`${JSON.stringify(segment)} spelled ${spelling}: read as ${got}`);
      }
    });
    expect(mismatches).toEqual([]);
  });

  it("every path the parser accepts decodes as Go's server decodes it", () => {
    // each byte escaped (upper- and lowercase hex) and written as is, in a namespace and in a metric name
    const pieces: string[] = [];
    for (let b = 0; b < 256; b++) {
      const hex = b.toString(16).padStart(2, "0");
      pieces.push(`%${hex.toUpperCase()}`, `%${hex}`);
      if (b > 0x20 && b < 0x7f && b !== 0x3f && b !== 0x23) pieces.push(String.fromCharCode(b));
    }
    pieces.push("%C3%A9", "%E5%90%8D", "%F0%9F%98%80", "%C3", "%zz", "%4", "..", ".", "%2E%2E", "");
    const targets = pieces.flatMap((p) => [`${V1}/namespaces/team-${p}b/m`, `${V1}/namespaces/team-b/m${p}x`, `${V1}/namespaces/team-b/${p}`]);
    const theirs = ask(targets.map((target) => ({ target })));
    const mismatches: string[] = [];
    let accepted = 0;
    targets.forEach((target, i) => {
      const ours = parses(target);
      if (ours instanceof StatusError) return; // refused: stricter than Go, never looser
      accepted++;
      const go = theirs[i]!;
      if (go.error !== undefined) mismatches.push(`${target}: accepted as ${ours}, Go refuses it (${go.error})`);
      else if (go.path !== ours) mismatches.push(`${target}: ours ${ours}, Go ${go.path}`);
    });
    expect(mismatches).toEqual([]);
    expect(accepted, "the comparison covers accepted paths").toBeGreaterThan(100);
  });

  it("custom metrics paths: Go's spellings of a name and a metric read back; every accepted path decodes as Go's server decodes it", () => {
    const CM = "/apis/custom.metrics.k8s.io";
    const list = ["*", "web-0.shard.a", "job:rate5m", "a,b;c", "caf\u00e9", "a b", "RequestCountPerTarget", "x|y", "a@b=c"];
    const theirs = ask(list.map((segment) => ({ segment })));
    const mismatches: string[] = [];
    list.forEach((segment, i) => {
      for (const spelling of [theirs[i]!.pathEscape ?? "", theirs[i]!.escapedPath ?? ""]) {
        for (const [path, want] of [
          [`${CM}/v1beta2/namespaces/a/pods/${spelling}/m`, { name: segment, metric: "m" }],
          [`${CM}/v1beta1/namespaces/a/pods/p/${spelling}`, { name: "p", metric: segment }],
          [`${CM}/v1beta2/namespaces/a/metrics/${spelling}`, { name: "a", metric: segment }],
          [`${CM}/v1beta1/nodes/${spelling}/${spelling}`, { name: segment, metric: segment }],
        ] as const) {
          let got: unknown;
          try {
            got = customMetricsRead(parseRequestPath(path));
          } catch (err) {
            got = err instanceof StatusError ? err.message : err;
          }
          if (typeof got !== "object" || got === null || (got as { name: string }).name !== want.name || (got as { metric: string }).metric !== want.metric) mismatches.push(`${path}: ${JSON.stringify(got)}`);
        }
      }
    });
    expect(mismatches).toEqual([]);

    const pieces: string[] = [];
    for (let b = 0x20; b < 0x80; b++) {
      const hex = b.toString(16).padStart(2, "0").toUpperCase();
      pieces.push(`%${hex}`);
      if (b > 0x20 && b < 0x7f && b !== 0x3f && b !== 0x23) pieces.push(String.fromCharCode(b));
    }
    pieces.push("%C3%A9", "%2a", "%FF", "..", "%2E");
    const targets = pieces.flatMap((p) => [`${CM}/v1beta2/namespaces/a/pods/x${p}y/m`, `${CM}/v1beta2/namespaces/a/pods/${p}/m${p}`, `${CM}/v1beta1/namespaces/a/metrics/m${p}`, `${CM}/v1beta2/no${p}des/n/m`]);
    const go = ask(targets.map((target) => ({ target })));
    const decoded: string[] = [];
    let accepted = 0;
    targets.forEach((target, i) => {
      const ours = parses(target);
      if (ours instanceof StatusError) return;
      accepted++;
      if (go[i]!.error !== undefined) decoded.push(`${target}: accepted as ${ours}, Go refuses it (${go[i]!.error})`);
      else if (go[i]!.path !== ours) decoded.push(`${target}: ours ${ours}, Go ${go[i]!.path}`);
    });
    expect(decoded).toEqual([]);
    expect(accepted, "the comparison covers accepted paths").toBeGreaterThan(100);
  });
});
