/**
 * Stand-in for `@smithy/core/event-streams` in the Cloudflare Worker
 * (wrangler `[alias]`, `infra/worker/build.ts`). The AWS SDK's protocols
 * import that module only when an operation has an event-stream member
 * (`HttpProtocol.loadEventStreamCapability`, `@smithy/core`
 * `submodules/protocols/HttpProtocol.ts`, a dynamic import). No operation
 * the bridge calls has one — SQS `GetQueueUrl` / `GetQueueAttributes`,
 * CloudWatch `GetMetricData` — so the event-stream codec (≈ 14 KiB
 * minified, ≈ 4 KiB gzip) is left out of the script; should an operation
 * ever need it, the call fails with this error instead of sending anything.
 */

/** The message of the error an event-stream operation gets in the Worker. */
export const NO_EVENT_STREAMS =
  "AWS event streams are not bundled into this Worker (infra/worker/no-event-streams.ts): no operation the bridge calls uses one";

/** `@smithy/core/event-streams`' `EventStreamSerde`: cannot be constructed here. */
export class EventStreamSerde {
  constructor() {
    throw new Error(NO_EVENT_STREAMS);
  }
}

/** `@smithy/core/event-streams`' `eventStreamSerdeProvider`: fails the same way. */
export function eventStreamSerdeProvider(): never {
  throw new Error(NO_EVENT_STREAMS);
}
