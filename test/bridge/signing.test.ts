/**
 * Request signing (shared/signing.ts): key parsing, sign/verify round trips,
 * tampering of every signed part, staleness, unknown keys, rotation, and the
 * wiring into the bridge app (`shared/bridge.ts`): with BRIDGE_SIGNING_KEYS
 * set, unsigned/tampered/stale requests get a 401 Status and the caller comes
 * only from a valid signature; the audience a signature is bound to
 * (scheme, host and port the proxy addressed, or BRIDGE_AUDIENCE), through
 * the app and through a real Node server (host-rewrite replay).
 */
import { createHash, randomBytes } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fcRuns } from "../helpers/fc.ts";
import { buildBridge } from "../helpers/bridge.ts";
import type { Caller } from "../../shared/identity.ts";
import { forbidden, StatusError } from "../../shared/k8s/status.ts";
import { startNodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import {
  canonicalRequest,
  parseAudience,
  parseMaxSkew,
  keyWeakness,
  parseSigningKeys,
  SIGNATURE_HEADERS,
  signatureAuthenticator,
  SIGNATURE_SCHEME,
  SIGNATURE_SCHEME_BODY,
  MAX_SIGNED_BODY_BYTES,
  sha256Hex,
  signingMode,
  signRequest,
  SigningKeyError,
  verifyRequest,
  type SigningKey,
} from "../../shared/signing.ts";
import { expectStatus } from "../helpers/contract.ts";
import { fixtureKey } from "../helpers/keys.ts";

const NOW = Date.UTC(2026, 10, 21, 9, 13, 30);
const secretA = fixtureKey(1).toString("base64");
const secretB = Buffer.concat([fixtureKey(2), fixtureKey("2b").subarray(0, 16)]).toString("base64url");
const KEYS_TEXT = `key-a:${secretA},key-b:${secretB}`;
const [KEY_A, KEY_B] = parseSigningKeys(KEYS_TEXT) as [SigningKey, SigningKey];
const HPA: Caller = {
  user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
  uid: "7b1c2d3e-0000-4000-8000-000000000001",
  groups: ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
  extra: { "authentication.kubernetes.io/pod-name": ["hpa-0"], scopes: ["a,b", "c=d&e"] },
};
const BASE = "https://bridge.example.com";
const PATH = "/apis/external.metrics.k8s.io/v1beta1/namespaces/team-a/queue_messages_ready";
const QUERY = "?labelSelector=queue%3Dworker_tasks";

async function signed(options: { caller?: Caller; key?: SigningKey; now?: number; method?: string; url?: string; requestId?: string } = {}) {
  const url = options.url ?? `${BASE}${PATH}${QUERY}`;
  const method = options.method ?? "GET";
  const headers = await signRequest(
    { method, url, caller: options.caller ?? HPA, requestId: options.requestId ?? "req-1" },
    options.key ?? KEY_A,
    options.now ?? NOW,
  );
  return { url, method, headers };
}

function toRequest(r: { url: string; method: string; headers: Record<string, string> }): Request {
  return new Request(r.url, { method: r.method, headers: r.headers });
}

async function rejection(request: Request, keys: readonly SigningKey[] = [KEY_A, KEY_B], now = NOW): Promise<StatusError> {
  try {
    await verifyRequest(request, keys, { nowMs: now });
  } catch (err) {
    expect(err).toBeInstanceOf(StatusError);
    expect((err as StatusError).code).toBe(401);
    return err as StatusError;
  }
  throw new Error("the request was accepted");
}

describe("signing keys", () => {
  it("parses one or two id:secret entries, base64 or base64url, first one signs", () => {
    expect(parseSigningKeys(KEYS_TEXT).map((k) => [k.id, k.secret.length])).toEqual([
      ["key-a", 32],
      ["key-b", 48],
    ]);
    expect(parseSigningKeys(` only:${secretA} `).map((k) => k.id)).toEqual(["only"]);
    // Secrets with '+' and '/' (base64) and '-' and '_' (base64url) both decode to the same bytes.
    const bytes = Buffer.concat([Buffer.from([0xfb, 0xef, 0xff]), fixtureKey("b64")]);
    expect(bytes.toString("base64")).toMatch(/^\+\+\/\//);
    expect(Buffer.from(parseSigningKeys(`x:${bytes.toString("base64")}`)[0]!.secret)).toEqual(bytes);
    expect(Buffer.from(parseSigningKeys(`x:${bytes.toString("base64url")}`)[0]!.secret)).toEqual(bytes);
  });

  it.each([
    ["", /holds no key/],
    [`a:${secretA},b:${secretA},c:${secretA}`, /at most 2/],
    [`nocolon`, /not id:secret/],
    [`bad id:${secretA}`, /key id must match/],
    [`a:${secretA},a:${secretB}`, /appears twice/],
    [`a:${Buffer.alloc(31).toString("base64")}`, /31 bytes; at least 32/],
    [`a:not*base64!`, /not base64/],
  ])("refuses %j", (text, message) => {
    expect(() => parseSigningKeys(text)).toThrow(SigningKeyError);
    expect(() => parseSigningKeys(text)).toThrow(message);
  });

  it.each([
    ["32 zero bytes", Buffer.alloc(32), /not random enough \(its 32 bytes take only 1 distinct value: at most 0 bits/],
    ["64 bytes of 0x07", Buffer.alloc(64, 7), /only 1 distinct value/],
    ["a word repeated", Buffer.from("hunter2!".repeat(4)), /only 8 distinct values: at most 96 bits, fewer than 128/],
    ["a 16-byte random key pasted twice", Buffer.concat([fixtureKey(1).subarray(0, 16), fixtureKey(1).subarray(0, 16)]), /bytes repeat a 16-byte pattern/],
    ["a counter 0, 1, 2, …", Buffer.from(Array.from({ length: 32 }, (_, i) => i)), /differences between successive bytes take only 1 distinct value/],
    ["a stride of 37", Buffer.from(Array.from({ length: 40 }, (_, i) => (i * 37) & 0xff)), /differences between successive bytes take only 1/],
    ["few symbols", Buffer.from(Array.from({ length: 32 }, (_, i) => [1, 2, 3, 4, 200, 201, 202, 203][(i * 5 + (i >> 2)) % 8]!)), /at most 96 bits/],
  ])("refuses a low-entropy secret: %s", (_what, secret, message) => {
    const text = `k:${secret.toString("base64")}`;
    expect(() => parseSigningKeys(text)).toThrow(SigningKeyError);
    expect(() => parseSigningKeys(text)).toThrow(message);
    expect(() => parseSigningKeys(text)).toThrow(/openssl rand -base64 32/);
    expect(keyWeakness(secret)).toBeDefined();
  });

  it("accepts random secrets of 32 to 96 bytes, and hex or base64 text used as the secret (property)", () => {
    // A random key is SHA-256 output (fast-check's byte arrays favour small values and repeats, unlike a key generator).
    const keyOf = (seed: string, length: number) =>
      Buffer.concat(Array.from({ length: Math.ceil(length / 32) }, (_, i) => createHash("sha256").update(`${seed}\0${i}`).digest())).subarray(0, length);
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 32, max: 96 }), fc.constantFrom("raw", "hex", "base64"), (seed, length, form) => {
        const key = keyOf(seed, length);
        const secret = form === "raw" ? key : Buffer.from(key.toString(form as "hex" | "base64"));
        expect(keyWeakness(secret)).toBeUndefined();
        expect(parseSigningKeys(`k:${secret.toString("base64")}`)[0]!.secret.length).toBe(secret.length);
      }),
      fcRuns(500),
    );
    for (let i = 0; i < 2000; i++) expect(keyWeakness(randomBytes(32))).toBeUndefined();
  });

  it("never echoes the secret in errors", () => {
    const secret = Buffer.alloc(8, 7).toString("base64");
    try {
      parseSigningKeys(`a:${secret}`);
      throw new Error("accepted");
    } catch (err) {
      expect((err as Error).message).not.toContain(secret);
    }
  });

  it("parses the audience setting into origins", () => {
    expect(parseAudience(undefined)).toBeUndefined();
    expect(parseAudience(" ")).toBeUndefined();
    expect(parseAudience("https://Bridge.Example.com/, https://bridge.example.com:443,http://10.0.0.7:8080")).toEqual([
      "https://bridge.example.com",
      "http://10.0.0.7:8080",
    ]);
    for (const bad of ["bridge.example.com", "ftp://x.example", "https://x.example/apis", "https://u:p@x.example", "https://x.example/?a=1"]) {
      expect(() => parseAudience(bad), bad).toThrow(SigningKeyError);
    }
    expect(() => parseAudience(Array.from({ length: 9 }, (_, i) => `https://h${i}.example`).join(","))).toThrow(/at most 8/);
  });

  it("refuses to serve without keys unless unsigned operation is allowed explicitly", () => {
    expect(signingMode({ BRIDGE_SIGNING_KEYS: KEYS_TEXT })).toEqual({ mode: "signed" });
    for (const env of [{}, { BRIDGE_SIGNING_KEYS: " " }, { BRIDGE_INSECURE_ALLOW_UNSIGNED: "false" }]) {
      const mode = signingMode(env);
      expect(mode.mode).toBe("refused");
      expect((mode as { message: string }).message).toMatch(/BRIDGE_SIGNING_KEYS is empty or missing.*BRIDGE_INSECURE_ALLOW_UNSIGNED=true/);
    }
    expect(signingMode({ BRIDGE_INSECURE_ALLOW_UNSIGNED: "yes" })).toMatchObject({ mode: "refused", message: expect.stringMatching(/must be true or false/) });
    expect(signingMode({ BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" })).toMatchObject({ mode: "insecure", warning: expect.stringMatching(/^running insecure/) });
    expect(signingMode({}, { insecureAllowUnsigned: true, flag: "--insecure-allow-unsigned" })).toMatchObject({
      mode: "insecure",
      warning: expect.stringMatching(/--insecure-allow-unsigned/),
    });
    // keys win over the insecure setting
    expect(signingMode({ BRIDGE_SIGNING_KEYS: KEYS_TEXT, BRIDGE_INSECURE_ALLOW_UNSIGNED: "true" })).toEqual({ mode: "signed" });
  });

  it("parses the clock skew setting", () => {
    expect(parseMaxSkew(undefined)).toBe(60);
    expect(parseMaxSkew("15")).toBe(15);
    for (const bad of ["0", "601", "1.5", "x"]) expect(() => parseMaxSkew(bad)).toThrow(SigningKeyError);
  });
});

describe("sign and verify", () => {
  it("round-trips the caller, with commas, equals signs and non-ASCII in identity values", async () => {
    const caller: Caller = { user: "jane@example.com", groups: ["team,a", "grüppe", "x=y&z"], extra: { "k/e y": ["v,1", "v 2"] } };
    const caller2 = await verifyRequest(toRequest(await signed({ caller })), [KEY_A], { nowMs: NOW });
    expect(caller2).toEqual(caller);
    expect(await verifyRequest(toRequest(await signed()), [KEY_A], { nowMs: NOW })).toEqual(HPA);
  });

  it("round-trips any caller (property)", async () => {
    const name = fc.string({ minLength: 1, maxLength: 20, unit: "grapheme" });
    await fc.assert(
      fc.asyncProperty(
        name,
        fc.option(name, { nil: undefined }),
        fc.array(name, { maxLength: 4 }),
        fc.dictionary(name, fc.array(fc.string({ maxLength: 10, unit: "grapheme" }), { minLength: 1, maxLength: 3 }), { maxKeys: 3 }),
        async (user, uid, groups, extra) => {
          const caller: Caller = { user, ...(uid !== undefined ? { uid } : {}), groups, extra };
          const got = await verifyRequest(toRequest(await signed({ caller })), [KEY_A], { nowMs: NOW });
          expect(got).toEqual(caller);
        },
      ),
      fcRuns(150),
    );
  });

  it("signs what the function reads: `|` and `%7C`, and query order, sign alike", async () => {
    const r = await signed({ url: `${BASE}/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/team%7Cdepth?a=1&b=2` });
    await verifyRequest(new Request(`${BASE}/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/team|depth?b=2&a=1`, { headers: r.headers }), [KEY_A], {
      nowMs: NOW,
    });
    // …while `+` and `%20` both mean a space in a query value (WHATWG form decoding).
    const s = await signed({ url: `${BASE}${PATH}?labelSelector=queue+in+%28a%29` });
    await verifyRequest(new Request(`${BASE}${PATH}?labelSelector=queue%20in%20(a)`, { headers: s.headers }), [KEY_A], { nowMs: NOW });
  });

  describe("refuses a request when a signed part is tampered with", () => {
    const cases: [string, (r: { url: string; method: string; headers: Record<string, string> }) => void][] = [
      ["origin: host (another function sharing the keys)", (r) => void (r.url = r.url.replace("bridge.example.com", "other.example.com"))],
      ["origin: scheme", (r) => void (r.url = r.url.replace("https://", "http://"))],
      ["origin: port", (r) => void (r.url = r.url.replace("bridge.example.com", "bridge.example.com:8443"))],
      ["method", (r) => void (r.method = "HEAD")],
      ["path: namespace", (r) => void (r.url = r.url.replace("/team-a/", "/team-b/"))],
      ["path: metric", (r) => void (r.url = r.url.replace("queue_messages_ready", "queue_messages_delayed"))],
      ["query: selector value", (r) => void (r.url = r.url.replace("worker_tasks", "payroll"))],
      ["query: selector removed", (r) => void (r.url = r.url.replace(QUERY, ""))],
      ["query: parameter added", (r) => void (r.url = `${r.url}&watch=true`)],
      ["timestamp", (r) => void (r.headers[SIGNATURE_HEADERS.timestamp] = String(Number(r.headers[SIGNATURE_HEADERS.timestamp]) - 1))],
      ["user", (r) => void (r.headers[SIGNATURE_HEADERS.user] = "system%3Aadmin")],
      ["uid", (r) => void (r.headers[SIGNATURE_HEADERS.uid] = "other")],
      ["uid removed", (r) => void delete r.headers[SIGNATURE_HEADERS.uid]],
      ["groups", (r) => void (r.headers[SIGNATURE_HEADERS.groups] = `${r.headers[SIGNATURE_HEADERS.groups]},system%3Amasters`)],
      ["groups removed", (r) => void delete r.headers[SIGNATURE_HEADERS.groups]],
      ["extra", (r) => void (r.headers[SIGNATURE_HEADERS.extra] = "scopes=all")],
      ["request id", (r) => void (r.headers[SIGNATURE_HEADERS.requestId] = "req-2")],
      ["key id (the other valid key)", (r) => void (r.headers[SIGNATURE_HEADERS.keyId] = "key-b")],
      [
        "signature",
        (r) => {
          const sig = r.headers[SIGNATURE_HEADERS.signature]!;
          r.headers[SIGNATURE_HEADERS.signature] = `${sig[0] === "A" ? "B" : "A"}${sig.slice(1)}`;
        },
      ],
    ];
    it.each(cases)("%s", async (_part, tamper) => {
      const r = await signed();
      await verifyRequest(toRequest(r), [KEY_A, KEY_B], { nowMs: NOW }); // untampered: accepted
      tamper(r);
      const err = await rejection(toRequest(r));
      expect(err.message).toMatch(/does not match|not a base64url/);
    });
  });

  it("refuses unsigned requests and ones missing a signature header", async () => {
    expect((await rejection(new Request(`${BASE}${PATH}`))).message).toMatch(/not signed/);
    for (const header of [SIGNATURE_HEADERS.signature, SIGNATURE_HEADERS.keyId, SIGNATURE_HEADERS.timestamp]) {
      const r = await signed();
      delete r.headers[header];
      expect((await rejection(toRequest(r))).message).toMatch(/not signed/);
    }
  });

  it("refuses a request without a user even when correctly signed", async () => {
    const r = await signed({ caller: { user: "", groups: [], extra: {} } });
    expect((await rejection(toRequest(r))).message).toMatch(/X-Bridge-User is missing/);
  });

  it("refuses unknown key ids", async () => {
    const stranger = parseSigningKeys(`key-c:${fixtureKey(9).toString("base64")}`)[0]!;
    expect((await rejection(toRequest(await signed({ key: stranger })))).message).toMatch(/unknown key id "key-c"/);
  });

  it("refuses a key id that names a known key when another secret signed", async () => {
    const impostor = { id: "key-a", secret: new Uint8Array(32).fill(9) };
    expect((await rejection(toRequest(await signed({ key: impostor })))).message).toMatch(/does not match/);
  });

  it("accepts timestamps within the skew window and refuses stale or future ones", async () => {
    const r = toRequest(await signed());
    await verifyRequest(r, [KEY_A], { nowMs: NOW + 60_000 });
    await verifyRequest(r, [KEY_A], { nowMs: NOW - 60_000 });
    expect((await rejection(toRequest(await signed()), [KEY_A], NOW + 61_000)).message).toMatch(/61 s old; at most 60 s/);
    expect((await rejection(toRequest(await signed()), [KEY_A], NOW - 61_000)).message).toMatch(/61 s in the future/);
    await expect(verifyRequest(toRequest(await signed()), [KEY_A], { nowMs: NOW + 120_000, maxSkewSeconds: 150 })).resolves.toBeTruthy();
    const bad = await signed();
    bad.headers[SIGNATURE_HEADERS.timestamp] = "1e9";
    expect((await rejection(toRequest(bad))).message).toMatch(/whole seconds/);
  });

  it("rotates keys: both active keys verify, a retired key does not", async () => {
    // Phase 1: functions accept [a, b], proxy still signs with a; phase 2: proxy signs with b.
    await verifyRequest(toRequest(await signed({ key: KEY_A })), [KEY_A, KEY_B], { nowMs: NOW });
    await verifyRequest(toRequest(await signed({ key: KEY_B })), [KEY_A, KEY_B], { nowMs: NOW });
    // Phase 3: a retired on the functions; requests still signed with a are refused.
    await verifyRequest(toRequest(await signed({ key: KEY_B })), [KEY_B], { nowMs: NOW });
    expect((await rejection(toRequest(await signed({ key: KEY_A })), [KEY_B])).message).toMatch(/unknown key id "key-a"/);
  });

  it("binds the signature to its audience: scheme id 2, the origin on the second line", async () => {
    expect(SIGNATURE_SCHEME).toBe("EMB-HMAC-SHA256-2");
    const canonical = canonicalRequest("get", `HTTPS://Bridge.Example.com:443${PATH}${QUERY}`, () => undefined).split("\n");
    expect(canonical.slice(0, 2)).toEqual(["EMB-HMAC-SHA256-2", "https://bridge.example.com"]);
    expect(canonicalRequest("GET", `http://10.0.0.7:8080${PATH}`, () => undefined).split("\n")[1]).toBe("http://10.0.0.7:8080");
    // a signer must name the URL it sends to: a bare path has no audience
    await expect(signRequest({ method: "GET", url: PATH, caller: HPA }, KEY_A, NOW)).rejects.toThrow(/absolute http\(s\) URL/);
    expect(() => canonicalRequest("GET", PATH, () => undefined)).toThrow(/needs an origin/);
  });

  it("verifies against the audience list when given, whatever URL the request arrived at", async () => {
    const forA = await signed({ url: `https://a.example${PATH}${QUERY}` });
    // arrived at a.example, but this bridge's audience is b.example only
    const err = await (async () => {
      try {
        await verifyRequest(toRequest(forA), [KEY_A], { nowMs: NOW, audience: ["https://b.example"] });
      } catch (e) {
        return e as StatusError;
      }
      throw new Error("accepted");
    })();
    expect(err.code).toBe(401);
    expect(err.message).toMatch(/another audience than https:\/\/b\.example/);
    // a request signed for b.example is accepted wherever it arrived (a load balancer in front)
    const forB = await signed({ url: `https://b.example${PATH}${QUERY}` });
    const arrived = new Request(`http://10.0.0.7:8080${PATH}${QUERY}`, { headers: forB.headers });
    expect((await verifyRequest(arrived, [KEY_A], { nowMs: NOW, audience: ["https://a.example", "https://b.example"] })).user).toBe(HPA.user);
  });

  it("refuses identity headers that are not percent-encoded", async () => {
    const r = await signed();
    r.headers[SIGNATURE_HEADERS.user] = "jane doe";
    expect((await rejection(toRequest(r))).message).toMatch(/not a percent-encoded value/);
  });
});

describe("a request with a body (scheme 3: the objects of a custom read)", () => {
  const CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/team-a/pods/%2A/http_requests?labelSelector=app%3Dweb";
  const body = new TextEncoder().encode(JSON.stringify({ pods: ["web-7d4b9-abcde", "web-7d4b9-fghij"] }));
  const signBody = async (bytes: Uint8Array, method = "POST") => {
    const url = `${BASE}${CUSTOM}`;
    const headers = await signRequest({ method, url, caller: HPA, requestId: "req-2", body: bytes }, KEY_A, NOW);
    return new Request(url, { method, headers, body: bytes as Uint8Array<ArrayBuffer> });
  };

  it("verifies the same bytes, and takes the caller from them", async () => {
    expect(await verifyRequest(await signBody(body), [KEY_A], { nowMs: NOW, body })).toEqual(HPA);
  });

  it("refuses a changed body, a body-less signature with a body, and a body signature without one (401)", async () => {
    const other = new TextEncoder().encode(JSON.stringify({ pods: ["web-7d4b9-abcde", "db-0"] }));
    const tampered = async () => verifyRequest(await signBody(body), [KEY_A], { nowMs: NOW, body: other });
    await expect(tampered()).rejects.toThrow(/identity headers or body changed \(a request with a body must be signed with EMB-HMAC-SHA256-3\)/);
    // a GET signed without a body, replayed as a POST with objects the proxy never resolved
    const plain = await signed({ method: "POST", url: `${BASE}${CUSTOM}` });
    await expect(verifyRequest(toRequest(plain), [KEY_A], { nowMs: NOW, body })).rejects.toMatchObject({ code: 401 });
    // a body signature checked as if there were no body
    await expect(verifyRequest(await signBody(body), [KEY_A], { nowMs: NOW })).rejects.toMatchObject({ code: 401 });
    // an empty body is a body: it is not the same as none
    await expect(verifyRequest(await signBody(new Uint8Array()), [KEY_A], { nowMs: NOW })).rejects.toMatchObject({ code: 401 });
    expect(await verifyRequest(await signBody(new Uint8Array()), [KEY_A], { nowMs: NOW, body: new Uint8Array() })).toEqual(HPA);
  });

  it("puts scheme 3 first and the body's SHA-256 last in the canonical request (FIPS 180-4 digest)", async () => {
    expect(SIGNATURE_SCHEME_BODY).toBe("EMB-HMAC-SHA256-3");
    const digest = createHash("sha256").update(body).digest("hex");
    expect(await sha256Hex(body)).toBe(digest);
    const lines = canonicalRequest("POST", `${BASE}${CUSTOM}`, () => undefined, undefined, digest).split("\n");
    expect(lines[0]).toBe("EMB-HMAC-SHA256-3");
    expect(lines.at(-1)).toBe(digest);
    expect(lines.length).toBe(canonicalRequest("POST", `${BASE}${CUSTOM}`, () => undefined).split("\n").length + 1);
  });

  it("bounds the body on both sides", async () => {
    const big = new Uint8Array(MAX_SIGNED_BODY_BYTES + 1);
    await expect(signRequest({ method: "POST", url: `${BASE}${CUSTOM}`, caller: HPA, body: big }, KEY_A, NOW)).rejects.toThrow(/at most 262144 bytes/);
    const ok = await signBody(body);
    await expect(verifyRequest(ok, [KEY_A], { nowMs: NOW, body: big })).rejects.toThrow(/larger than 262144 bytes/);
  });
});

describe("the bridge app with BRIDGE_SIGNING_KEYS", () => {
  const CONFIG = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: x, secretAccessKey: y } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
`;
  /** A bridge whose authorize hook records the caller and denies (no backend call is needed). */
  function bridge(env: Record<string, string>, now = NOW) {
    const seen: Caller[] = [];
    const { app } = buildBridge(CONFIG, "test.yaml", { env, now: () => now }, {
      log: () => {},
      authorize: ({ caller }) => {
        seen.push(caller);
        throw forbidden(`recorded ${caller.user}`);
      },
    });
    return { seen, request: (r: Request) => app.fetch(r) as Promise<Response> };
  }

  it("answers 401 Status to unsigned, tampered and stale requests, on discovery and values", async () => {
    const b = bridge({ BRIDGE_SIGNING_KEYS: KEYS_TEXT });
    await expectStatus(await b.request(new Request(`${BASE}${PATH}${QUERY}`)), 401, "Unauthorized", /not signed/);
    await expectStatus(await b.request(new Request(`${BASE}/apis/external.metrics.k8s.io/v1beta1`)), 401, "Unauthorized");
    const r = await signed();
    r.url = r.url.replace("worker_tasks", "payroll");
    await expectStatus(await b.request(toRequest(r)), 401, "Unauthorized", /does not match/);
    const stale = bridge({ BRIDGE_SIGNING_KEYS: KEYS_TEXT }, NOW + 10 * 60_000);
    await expectStatus(await stale.request(toRequest(await signed())), 401, "Unauthorized", /s old/);
    expect(b.seen).toEqual([]);
    // Health probes stay open.
    expect((await b.request(new Request(`${BASE}/healthz`))).status).toBe(200);
  });

  it("takes the caller only from a valid signature", async () => {
    const b = bridge({ BRIDGE_SIGNING_KEYS: KEYS_TEXT });
    await expectStatus(await b.request(toRequest(await signed())), 403, "Forbidden", /recorded system:serviceaccount/);
    const discovery = await b.request(toRequest(await signed({ url: `${BASE}/apis/external.metrics.k8s.io/v1beta1` })));
    expect(discovery.status).toBe(200);
    expect(b.seen).toEqual([HPA]);
  });

  it("without keys, falls back to the configured identity (anonymous here)", async () => {
    const b = bridge({});
    const unsigned = new Request(`${BASE}${PATH}${QUERY}`, { headers: { [SIGNATURE_HEADERS.user]: "system%3Aadmin" } });
    await expectStatus(await b.request(unsigned), 403, "Forbidden", /recorded system:anonymous/);
    expect(b.seen[0]!.user).toBe("system:anonymous");
  });

  it("answers 500 naming the problem (not the secret) when the key text is malformed", async () => {
    const b = bridge({ BRIDGE_SIGNING_KEYS: "a:c2hvcnQ=" });
    const body = await expectStatus(await b.request(toRequest(await signed())), 500, "InternalError", /misconfigured.*at least 32/);
    expect(body.message).not.toContain("c2hvcnQ");
  });

  it("follows the environment as it changes (a Worker's secrets are read per request)", async () => {
    const env: Record<string, string | undefined> = {};
    const auth = signatureAuthenticator({ env, now: () => NOW }, () => ({ user: "local", groups: [], extra: {} }));
    expect((await auth(new Request(`${BASE}${PATH}`))).user).toBe("local");
    env["BRIDGE_SIGNING_KEYS"] = KEYS_TEXT;
    await expect(auth(new Request(`${BASE}${PATH}`))).rejects.toMatchObject({ code: 401 });
    expect((await auth(toRequest(await signed()))).user).toBe(HPA.user);
  });
});

describe("signatures bound to their audience, through the bridge", () => {
  const CONFIG = `apiVersion: external-metrics-bridge.io/v1alpha1
kind: BridgeConfig
providers:
  sqs: { type: aws-sqs, region: us-east-1, endpoint: "http://127.0.0.1:9", credentials: { source: static, accessKeyId: x, secretAccessKey: y } }
metrics:
  - { name: queue_messages_ready, provider: sqs }
`;
  const DISCOVERY = "/apis/external.metrics.k8s.io/v1beta1";
  const signedFor = async (url: string) => ({ url, method: "GET", headers: await signRequest({ method: "GET", url, caller: HPA }, KEY_A, Date.now()) });

  it("a request signed for https://a.example is refused (401) by a bridge whose audience is https://b.example", async () => {
    const { app } = buildBridge(CONFIG, "test.yaml", { env: { BRIDGE_SIGNING_KEYS: KEYS_TEXT, BRIDGE_AUDIENCE: "https://b.example" }, now: Date.now }, { log: () => {} });
    const forA = await signedFor(`https://a.example${DISCOVERY}`);
    // delivered as signed (Host a.example) and delivered to b.example: both refused
    await expectStatus((await app.fetch(toRequest(forA))) as Response, 401, "Unauthorized", /another audience than https:\/\/b\.example/);
    await expectStatus((await app.fetch(new Request(`https://b.example${DISCOVERY}`, { headers: forA.headers }))) as Response, 401, "Unauthorized");
    expect(((await app.fetch(toRequest(await signedFor(`https://b.example${DISCOVERY}`)))) as Response).status).toBe(200);
  });

  it("without BRIDGE_AUDIENCE, a function refuses a request signed for another function sharing the keys", async () => {
    const { app } = buildBridge(CONFIG, "test.yaml", { env: { BRIDGE_SIGNING_KEYS: KEYS_TEXT }, now: Date.now }, { log: () => {} });
    const forA = await signedFor(`https://fn-a.example${DISCOVERY}`);
    await expectStatus((await app.fetch(new Request(`https://fn-b.example${DISCOVERY}`, { headers: forA.headers }))) as Response, 401, "Unauthorized");
    expect(((await app.fetch(toRequest(forA))) as Response).status).toBe(200);
  });

  it("answers 500 naming the problem when BRIDGE_AUDIENCE is malformed", async () => {
    const { app } = buildBridge(CONFIG, "test.yaml", { env: { BRIDGE_SIGNING_KEYS: KEYS_TEXT, BRIDGE_AUDIENCE: "b.example" }, now: Date.now }, { log: () => {} });
    await expectStatus((await app.fetch(toRequest(await signedFor(`https://b.example${DISCOVERY}`)))) as Response, 500, "InternalError", /BRIDGE_AUDIENCE/);
  });

  it("a real Node server: host-rewrite replay is refused; with BRIDGE_AUDIENCE the Host header is never trusted", async () => {
    const config = loadConfig(CONFIG, "test.yaml").config;
    const plain = await startNodeServer({ config, port: 0, log: () => {}, env: { BRIDGE_SIGNING_KEYS: KEYS_TEXT } });
    const pinned = await startNodeServer({ config, port: 0, log: () => {}, env: { BRIDGE_SIGNING_KEYS: KEYS_TEXT, BRIDGE_AUDIENCE: "https://b.example" } });
    try {
      const get = async (server: string, r: { url: string; headers: Record<string, string> }, host?: string) => {
        const path = new URL(r.url).pathname;
        // node:http lets a test set Host; fetch would not
        const { request } = await import("node:http");
        return new Promise<{ status: number; body: string }>((resolve, reject) => {
          const u = new URL(server);
          const req = request({ host: u.hostname, port: u.port, path, headers: { ...r.headers, ...(host !== undefined ? { host } : {}) } }, (res) => {
            let body = "";
            res.setEncoding("utf8");
            res.on("data", (c: string) => (body += c));
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          });
          req.on("error", reject);
          req.end();
        });
      };
      // the plain server's audience is the URL it is reached at: signed for it → 200
      expect((await get(plain.url, await signedFor(`${plain.url}${DISCOVERY}`))).status).toBe(200);
      // signed for another function (b.example) and replayed here → 401
      expect((await get(plain.url, await signedFor(`https://b.example${DISCOVERY}`))).status).toBe(401);
      // pinned to https://b.example: signed for a.example and replayed with Host rewritten to a.example → 401
      const replay = await get(pinned.url, await signedFor(`https://a.example${DISCOVERY}`), "a.example");
      expect(replay.status, replay.body).toBe(401);
      expect(JSON.parse(replay.body)).toMatchObject({ kind: "Status", reason: "Unauthorized" });
      // … and even a signature for the URL it was really reached at is refused: the Host header is not trusted
      expect((await get(pinned.url, await signedFor(`${pinned.url}${DISCOVERY}`))).status).toBe(401);
      // signed for its audience, arriving through whatever front (Host says 127.0.0.1) → 200
      expect((await get(pinned.url, await signedFor(`https://b.example${DISCOVERY}`))).status).toBe(200);
    } finally {
      await Promise.all([plain.close(), pinned.close()]);
    }
  });
});
