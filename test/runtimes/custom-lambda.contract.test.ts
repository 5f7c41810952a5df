/**
 * The custom.metrics.k8s.io routes (test/runtimes/custom-contract.ts)
 * against the Lambda handler (functions/lambda.ts), fed Function URL and
 * API Gateway HTTP API v2 events (a POST body as the event's text body);
 * then a body the event carries base64-encoded, as API Gateway and
 * Function URLs send a body they take for binary.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLambdaHandler } from "../../functions/lambda.ts";
import { customReadBody } from "../../shared/values/custom-request.ts";
import { startFakePrometheus, type FakePrometheus } from "../fakes/prometheus-api.ts";
import { expectStatus } from "../helpers/contract.ts";
import { LAMBDA_FIXTURES, lambdaContext, lambdaOrigin, toEvent, toResponse, type HttpHandler, type LambdaEventShape } from "../helpers/lambda.ts";
import { CUSTOM_KEYS, customConfig, customMetricsContract, customSeries, expectValues, PODS, post, signed, type CustomTarget } from "./custom-contract.ts";

/** A Lambda target for `shape` whose every event's body is base64-encoded when `base64`. */
function lambdaTarget(text: string, env: Record<string, string>, shape: LambdaEventShape, base64 = false): CustomTarget {
  const lines: string[] = [];
  const handler = createLambdaHandler({ BRIDGE_CONFIG: text, ...env }, { log: (record) => void lines.push(JSON.stringify(record)) }) as unknown as HttpHandler;
  return {
    origin: lambdaOrigin(shape),
    async request(path, init) {
      const event = await toEvent(shape, path, init);
      // bytes as sent (the helper writes a JSON body as text, which cannot carry bytes that are not UTF-8): base64, as the platform sends a body it takes for binary
      if (init?.body instanceof Uint8Array) {
        event.body = Buffer.from(init.body).toString("base64");
        event.isBase64Encoded = true;
      } else if (base64 && event.body !== undefined && !event.isBase64Encoded) {
        event.body = Buffer.from(event.body, "utf8").toString("base64");
        event.isBase64Encoded = true;
      }
      return toResponse(await handler(event, lambdaContext(event.requestContext.requestId)));
    },
    logs: () => lines.join("\n"),
    close: async () => {},
  };
}

for (const shape of Object.keys(LAMBDA_FIXTURES) as LambdaEventShape[]) {
  customMetricsContract(`AWS Lambda (${shape} events)`, async (text, env) => lambdaTarget(text, env, shape));
}

describe("a custom read's body base64-encoded in the event", () => {
  let prom: FakePrometheus;
  beforeAll(async () => {
    prom = await startFakePrometheus(() => Date.now());
    prom.series.push(...customSeries(Date.now()));
  });
  afterAll(async () => prom?.close());

  for (const shape of Object.keys(LAMBDA_FIXTURES) as LambdaEventShape[]) {
    it(`is decoded, read and its signature verified over the decoded bytes (${shape})`, async () => {
      const target = lambdaTarget(customConfig(prom.url), { BRIDGE_SIGNING_KEYS: CUSTOM_KEYS }, shape, true);
      const body = customReadBody({ pods: ["web-2"] });
      const event = await toEvent(shape, PODS, post(body));
      expect(event.isBase64Encoded).toBe(false); // the helper sends JSON as text; the target re-encodes it
      const items = await expectValues(await target.request(PODS, post(body, await signed(target, "POST", PODS, body))), "v1beta2");
      expect(items.map((i) => [i.describedObject.name, i.value])).toEqual([["web-2", "7500m"]]);
      await expectStatus(await target.request(PODS, post(body)), 401, "Unauthorized");
    });
  }
});
