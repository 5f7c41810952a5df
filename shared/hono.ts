/**
 * The Hono class the bridge's app (`app.ts`) is built on: `hono`'s default
 * preset, whose SmartRouter picks RegExpRouter (one compiled expression for
 * all routes: the fastest match on Node and Lambda, issue 11 P1).
 *
 * Every Cloudflare Worker build replaces this module with
 * `infra/worker/hono-tiny.ts` (wrangler.toml `[alias]`, and
 * `infra/worker/build.ts`): the `hono/tiny` preset, whose PatternRouter
 * tries the app's handful of routes one by one. It leaves RegExpRouter,
 * TrieRouter and SmartRouter out of the script (≈ 2 KiB gzip of the
 * 150 KiB budget, issue 11 P3). Both presets route the same paths to the
 * same handlers; the Worker suite in workerd proves the tiny one.
 */
export { Hono } from "hono";
