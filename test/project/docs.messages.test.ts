/**
 * docs/troubleshooting.md quotes the messages this project emits so users
 * can search for them. Every message marked "(ours)" there must still
 * exist in the code: each part between "…" (the run-time parts) is looked
 * up verbatim in the sources of the bridge, the proxy and the entry points.
 * A reworded message fails this test until the page is updated with it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../..", import.meta.url).pathname;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return name.endsWith(".ts") && !name.endsWith(".test.ts") ? [path] : [];
  });
}

/** Every source file's text, with string-literal escapes of quotes undone (`\"` → `"`). */
const CODE = [...sources(join(ROOT, "shared")), ...sources(join(ROOT, "functions"))]
  .map((f) => readFileSync(f, "utf8").replaceAll('\\"', '"'))
  .join("\n");

/** The `(ours) \`…\`` quotes of a page, split at "…" into the parts that must be in the code. */
function ourMessages(page: string): { quote: string; parts: string[] }[] {
  const text = readFileSync(join(ROOT, page), "utf8");
  return [...text.matchAll(/\(ours\)\s+`([^`]+)`/g)].map((m) => ({
    quote: m[1]!,
    parts: m[1]!
      .split("…")
      .map((p) => p.trim())
      .filter((p) => p.length >= 6),
  }));
}

describe("docs/troubleshooting.md quotes messages the code still emits", () => {
  const quotes = ourMessages("docs/troubleshooting.md");

  it("quotes enough of them to matter", () => {
    expect(quotes.length).toBeGreaterThanOrEqual(20);
  });

  it.each(quotes.map((q) => [q.quote, q.parts] as const))("%s", (_quote, parts) => {
    expect(parts.length).toBeGreaterThan(0);
    for (const part of parts) expect(CODE.includes(part), `"${part}" is not in shared/ or functions/`).toBe(true);
  });
});
