/**
 * A local stand-in for an AWS Lambda Function URL, as its own process: an
 * HTTP server on 127.0.0.1 that turns each request into a Function URL event
 * (payload format 2.0, built from the recorded fixture by
 * `test/helpers/lambda.ts` `toEvent`) and calls the **built Lambda
 * artifact's** handler (`index.mjs` `handler`, what `infra/lambda/build.ts`
 * writes and Lambda runs as `index.handler`), then turns the 2.0 result back
 * into an HTTP answer (`toResponse`). The handler reads its configuration
 * from this process's environment, as on Lambda (`BRIDGE_CONFIG`,
 * `BRIDGE_SIGNING_KEYS`, `BRIDGE_AUDIENCE`, …).
 *
 *   node test/k8s/function-url.ts --artifact DIR --port N
 *
 * The event's `requestContext.domainName` is the fixture's
 * `<id>.lambda-url.<region>.on.aws`, as on AWS: the bridge then sees
 * `https://<that domain>` as its own origin, so a signature made for this
 * listener's origin verifies only through `BRIDGE_AUDIENCE` — as for a real
 * function behind a front of its own. Invocations are one at a time per
 * request (no concurrency limit) and each logs one JSON line
 * `{"msg":"invoke","path":…,"status":…}` on stdout, so a test can count
 * what reached the function.
 *
 * Source of the payload shapes: AWS Lambda Developer Guide, "Invoking Lambda
 * function URLs › Request and response payloads".
 */
import http from "node:http";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { lambdaContext, toEvent, toResponse } from "../helpers/lambda.ts";

const { values } = parseArgs({ options: { artifact: { type: "string" }, port: { type: "string" } } });
if (values.artifact === undefined || values.port === undefined) {
  console.error("usage: node test/k8s/function-url.ts --artifact DIR --port N");
  process.exit(2);
}
const mod = (await import(pathToFileURL(join(resolve(values.artifact), "index.mjs")).href)) as {
  handler: (event: unknown, context: unknown) => Promise<unknown>;
};
if (typeof mod.handler !== "function") throw new Error(`${values.artifact}/index.mjs exports no handler`);

const server = http.createServer(async (req, res) => {
  try {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string" && k !== "host" && k !== "connection") headers.set(k, v);
    const event = await toEvent("Function URL", req.url ?? "/", { method: req.method ?? "GET", headers });
    const response = toResponse(await mod.handler(event, lambdaContext(event.requestContext.requestId)));
    console.log(JSON.stringify({ msg: "invoke", path: req.url, status: response.status }));
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  } catch (err) {
    // Lambda answers a handler crash with 502 (Function URL: "Internal Server Error")
    console.log(JSON.stringify({ msg: "invoke", path: req.url, status: 502, error: (err as Error).message }));
    res.writeHead(502, { "content-type": "application/json" }).end('{"message":"Internal Server Error"}');
  }
});
server.listen(Number(values.port), "127.0.0.1", () => console.log(JSON.stringify({ msg: "listening", port: Number(values.port) })));
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => server.close(() => process.exit(0)));
