/**
 * `build_info`'s version (`emb_bridge_build_info`, `emb_proxy_build_info`):
 * package.json's `version`, from source and in the bundles — where esbuild's
 * `define` (infra/build-common.ts `VERSION_DEFINE`, used by the Node/Lambda
 * bundles and infra/proxy/build.ts) writes it in at build time, so a bundle
 * reads no package.json when it runs.
 */
import { build } from "esbuild";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { VERSION_DEFINE } from "../../infra/build-common.ts";
import { BRIDGE_VERSION } from "../../shared/observability/prometheus.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const PACKAGE_VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("build_info version", () => {
  it("is package.json's version when run from source", () => {
    expect(BRIDGE_VERSION).toBe(PACKAGE_VERSION);
  });

  it("is what the builds define: package.json's version", () => {
    expect(VERSION_DEFINE).toEqual({ __EMB_VERSION__: JSON.stringify(PACKAGE_VERSION) });
  });

  it("in a bundle, is the string esbuild defined, and no package.json is read (the bundle runs from a directory without one)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "emb-version-"));
    try {
      const entry = join(dir, "entry.ts");
      writeFileSync(entry, `export { BRIDGE_VERSION } from ${JSON.stringify(join(ROOT, "shared/observability/prometheus.ts"))};\n`);
      const out = join(dir, "out", "bundle.mjs");
      await build({
        entryPoints: [entry],
        outfile: out,
        bundle: true,
        platform: "node",
        format: "esm",
        minify: true,
        external: ["prom-client"],
        define: { ...VERSION_DEFINE, __EMB_VERSION__: JSON.stringify("9.8.7-test") },
        logLevel: "silent",
      });
      const text = readFileSync(out, "utf8");
      expect(text).not.toContain("__EMB_VERSION__");
      expect(text).not.toContain("package.json");
      // prom-client resolved from the repository (the bundle's own directory has no node_modules)
      symlinkSync(join(ROOT, "node_modules"), join(dir, "out", "node_modules"), "dir");
      const mod = (await import(pathToFileURL(out).href)) as { BRIDGE_VERSION: string };
      expect(mod.BRIDGE_VERSION).toBe("9.8.7-test");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
