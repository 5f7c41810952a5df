/**
 * The `amp` flavour's config: `region` and `workspaceId` (`ws-` and a UUID)
 * are required, the generic flavour's fields are refused, the endpoint
 * defaults to AMP's regional one and the base URL is
 * `{endpoint}/workspaces/{workspaceId}`; the generic flavour stays the
 * default. The signing itself is checked against a real verifier in
 * `prometheus.amp.real.test.ts`.
 */
import { describe, expect, it } from "vitest";
import { ampBaseUrl } from "../../shared/providers/prometheus/amp.ts";
import { prometheusProviderSchema } from "../../shared/providers/prometheus/schema.ts";

const WS = "ws-6b1f3c2e-0a4d-4e8f-9c1b-2d3e4f5a6b7c";

function issues(input: unknown): string[] {
  const r = prometheusProviderSchema.safeParse(input);
  return r.success ? [] : r.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
}

describe("prometheus provider config, amp flavour", () => {
  it("takes region and workspaceId, defaults credentials to the SDK chain, and builds AMP's URL", () => {
    const cfg = prometheusProviderSchema.parse({ flavour: "amp", region: "us-east-1", workspaceId: WS });
    expect(cfg).toEqual({ flavour: "amp", region: "us-east-1", workspaceId: WS, credentials: { source: "default" }, timeoutSeconds: 2, batchWindowSeconds: 0.01, maxBatchSize: 100 });
    if (cfg.flavour !== "amp") throw new Error("not amp");
    expect(ampBaseUrl(cfg)).toBe(`https://aps-workspaces.us-east-1.amazonaws.com/workspaces/${WS}`);
    expect(ampBaseUrl({ ...cfg, endpoint: "https://vpce-1.aps-workspaces.us-east-1.vpce.amazonaws.com/" })).toBe(`https://vpce-1.aps-workspaces.us-east-1.vpce.amazonaws.com/workspaces/${WS}`);
  });

  it("refuses a workspace id that is not ws- and a UUID, a missing region, and the generic flavour's fields", () => {
    expect(issues({ flavour: "amp", region: "us-east-1", workspaceId: "6b1f3c2e-0a4d-4e8f-9c1b-2d3e4f5a6b7c" })).toEqual([expect.stringMatching(/^workspaceId: must be an AMP workspace id/)]);
    expect(issues({ flavour: "amp", region: "us-east-1", workspaceId: "ws-../../x" })).toEqual([expect.stringMatching(/^workspaceId: /)]);
    expect(issues({ flavour: "amp", workspaceId: WS })).toEqual([expect.stringMatching(/^region: /)]);
    expect(issues({ flavour: "amp", region: "us-east-1", workspaceId: WS, url: "http://x" })).toEqual([expect.stringMatching(/Unrecognized key: "url"/)]);
    expect(issues({ flavour: "amp", region: "us-east-1", workspaceId: WS, credentials: { source: "static", accessKeyId: "a" } })).toEqual([expect.stringMatching(/^credentials.secretAccessKey: /)]);
  });

  it("keeps generic the default flavour and refuses an unknown one", () => {
    expect(prometheusProviderSchema.parse({ url: "http://p:9090" })).toMatchObject({ flavour: "generic", url: "http://p:9090" });
    expect(issues({ url: "http://p:9090", region: "us-east-1" })).toEqual([expect.stringMatching(/Unrecognized key: "region"/)]);
    expect(issues({ flavour: "nope", url: "http://p:9090" })).toEqual([expect.stringMatching(/^flavour: /)]);
  });
});
