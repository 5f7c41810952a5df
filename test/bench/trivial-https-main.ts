/**
 * "Bare Node + Hono over HTTPS" as one process, for the memory baselines of
 * `npm run bench:memory` (bundled there by esbuild and run with the image's
 * Node flags, as the proxy is): serves test/bench/trivial.ts with the
 * certificate and key in `TRIVIAL_CERT_PEM` / `TRIVIAL_KEY_PEM`, prints its
 * URL as one line on stdout, and runs until killed. `TRIVIAL_HOLD=1`: keep
 * one answer per distinct request (trivial.ts `trivialApp`'s `hold`).
 * `TRIVIAL_LIBRARIES=1`: first load and use the proxy's libraries
 * (trivial-libraries.ts, a chunk of its own in the bundle, read only then).
 */
import { startTrivialHttps } from "./trivial.ts";

if (process.env["TRIVIAL_LIBRARIES"] === "1") await import("./trivial-libraries.ts");
const { url } = await startTrivialHttps(process.env["TRIVIAL_CERT_PEM"] ?? "", process.env["TRIVIAL_KEY_PEM"] ?? "", process.env["TRIVIAL_HOLD"] === "1");
process.stdout.write(`${url}\n`);
