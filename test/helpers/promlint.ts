/**
 * Prometheus exposition helpers for tests: {@link promlint} runs
 * client_golang's `prometheus/testutil/promlint` — the linter behind
 * `promtool check metrics` — built from `test/promlint` (a few seconds, Go's
 * module cache; `infra/tools/go.ts` caches the binary outside the tree).
 */
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { goBinary } from "../../infra/tools/go.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Lint a Prometheus text exposition with client_golang's promlint (what `promtool check metrics` runs): its problems, one per line. */
export function promlint(exposition: string): string[] {
  const binary = goBinary(join(ROOT, "test/promlint"), "promlint");
  const r = spawnSync(binary, [], { input: exposition, encoding: "utf8" });
  if (r.status === 1 || r.error) throw new Error(`promlint failed: ${r.error?.message ?? r.stderr}`);
  return r.stdout.split("\n").filter((l) => l !== "");
}

/** The value of one sample line `name{labels} value` (labels in any order), or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) return Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return undefined;
}

