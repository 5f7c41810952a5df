/**
 * Stand-in for `shared/hono.ts` in every Worker build (wrangler.toml
 * `[alias]`, infra/worker/build.ts): Hono's `hono/tiny` preset
 * (PatternRouter), so the Worker script carries none of RegExpRouter,
 * TrieRouter and SmartRouter (issue 11 P3, the 150 KiB gzip budget).
 */
export { Hono } from "hono/tiny";
