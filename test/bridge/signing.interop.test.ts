/**
 * The two HMAC implementations of request signing (shared/signing.ts): the
 * `node:crypto` one that Node and Lambda use (reached through
 * `process.getBuiltinModule`, no static `node:` import) and the WebCrypto one
 * the Worker uses. They compute the same HMAC-SHA256 (RFC 4231 vectors, any
 * key and text), so a request signed by either verifies with the other —
 * in-process, and across runtimes: Node-signed requests verified by the real
 * Worker in workerd, Worker-style (WebCrypto) signatures verified by the
 * Node server. On Node the default is `node:crypto`: signing works without
 * `crypto.subtle`.
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { startNodeServer, type NodeServer } from "../../functions/node.ts";
import { loadConfig } from "../../shared/config/config.ts";
import {
  defaultHmac,
  nodeCryptoHmac,
  parseSigningKeys,
  sha256Hex,
  signRequest,
  verifyRequest,
  webCryptoHmac,
  type HmacSha256,
  type SigningKey,
} from "../../shared/signing.ts";
import { sqsConfigHead } from "../helpers/emulator.ts";
import { fcRuns } from "../helpers/fc.ts";
import { startWorker, type RunningWorker } from "../helpers/worker.ts";
import { fixtureKey } from "../helpers/keys.ts";

const NODE = nodeCryptoHmac()!;
const IMPLEMENTATIONS: [string, HmacSha256][] = [
  ["node:crypto", NODE],
  ["webcrypto", webCryptoHmac],
];
const KEYS = `k1:${fixtureKey(7).toString("base64url")}`;
const [KEY] = parseSigningKeys(KEYS) as [SigningKey];
const V1 = "/apis/external.metrics.k8s.io/v1beta1";
const HPA = { user: "system:serviceaccount:kube-system:horizontal-pod-autoscaler", groups: ["system:serviceaccounts"], extra: {} };
const hex = (mac: Uint8Array) => Buffer.from(mac).toString("hex");

describe("HMAC implementations", () => {
  it("on Node the default is node:crypto: requests are signed and verified with crypto.subtle out of order", async () => {
    expect(NODE).toBeDefined();
    expect(defaultHmac.name).toBe("node:crypto");
    const broken = () => Promise.reject(new Error("crypto.subtle is out of order"));
    const stubs = (["importKey", "sign", "verify"] as const).map((name) => vi.spyOn(crypto.subtle, name).mockImplementation(broken));
    try {
      await expect(webCryptoHmac.sign({ id: "probe", secret: new Uint8Array(32) }, "x")).rejects.toThrow("out of order"); // the stubs hold
      const url = `https://bridge.example${V1}`;
      const headers = await signRequest({ method: "GET", url, caller: HPA }, KEY, Date.now());
      expect(await verifyRequest(new Request(url, { headers }), [KEY], { nowMs: Date.now() })).toMatchObject({ user: HPA.user });
    } finally {
      for (const stub of stubs) stub.mockRestore();
    }
  });

  it("webcrypto: a key whose import failed once is imported again on its next use (a failure is not remembered)", async () => {
    const key: SigningKey = { id: "retry", secret: new Uint8Array(32).fill(3) };
    const stub = vi.spyOn(crypto.subtle, "importKey").mockImplementationOnce(() => Promise.reject(new Error("import failed once")));
    try {
      await expect(webCryptoHmac.sign(key, "x")).rejects.toThrow("import failed once");
      expect(hex(await webCryptoHmac.sign(key, "x"))).toBe(hex(NODE.sign(key, "x") as Uint8Array));
    } finally {
      stub.mockRestore();
    }
  });

  it("the body digest is the same with node:crypto and with WebCrypto (the Worker's), on FIPS 180-4 vectors and any bytes", async () => {
    const abc = new TextEncoder().encode("abc");
    const viaNode = await sha256Hex(abc);
    const spy = vi.spyOn(process, "getBuiltinModule").mockReturnValue(undefined as never);
    try {
      expect(await sha256Hex(abc)).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
      expect(spy).toHaveBeenCalled();
      await fc.assert(
        fc.asyncProperty(fc.uint8Array({ maxLength: 2048 }), async (bytes) => {
          spy.mockRestore();
          const node = await sha256Hex(bytes);
          vi.spyOn(process, "getBuiltinModule").mockReturnValue(undefined as never);
          expect(await sha256Hex(bytes)).toBe(node);
        }),
        fcRuns(50),
      );
    } finally {
      vi.restoreAllMocks();
    }
    expect(viaNode).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it.each(IMPLEMENTATIONS)("%s computes the RFC 4231 HMAC-SHA256 test vectors", async (_name, hmac) => {
    // RFC 4231 §4.2 (test case 1) and §4.3 (test case 2)
    const case1 = { id: "t1", secret: new Uint8Array(20).fill(0x0b) };
    const case2 = { id: "t2", secret: new TextEncoder().encode("Jefe") };
    expect(hex(await hmac.sign(case1, "Hi There"))).toBe("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    expect(hex(await hmac.sign(case2, "what do ya want for nothing?"))).toBe("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  });

  it("both give the same MAC for any key and text (UTF-8, non-ASCII included), and each verifies the other's", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 32, maxLength: 96 }), fc.string({ unit: "binary", maxLength: 300 }), async (secret, text) => {
        const key = { id: "p", secret };
        const a = await NODE.sign(key, text);
        const b = await webCryptoHmac.sign(key, text);
        expect(hex(a)).toBe(hex(b));
        expect(await NODE.verify(key, b, text)).toBe(true);
        expect(await webCryptoHmac.verify(key, a, text)).toBe(true);
      }),
      fcRuns(200),
    );
  });

  it.each(IMPLEMENTATIONS)("%s refuses a MAC of another text, another key, a flipped bit or a wrong length", async (_name, hmac) => {
    const mac = await hmac.sign(KEY, "GET\n/a");
    expect(await hmac.verify(KEY, mac, "GET\n/a")).toBe(true);
    expect(await hmac.verify(KEY, mac, "GET\n/b")).toBe(false);
    expect(await hmac.verify({ id: "other", secret: new Uint8Array(32).fill(8) }, mac, "GET\n/a")).toBe(false);
    const flipped = Uint8Array.from(mac);
    flipped[31]! ^= 1;
    expect(await hmac.verify(KEY, flipped, "GET\n/a")).toBe(false);
    expect(await hmac.verify(KEY, mac.slice(0, 31), "GET\n/a")).toBe(false);
  });

  it.each([
    [NODE, webCryptoHmac],
    [webCryptoHmac, NODE],
  ])("a request signed with %o verifies with %o, and a tampered one is refused (401)", async (signer, verifier) => {
    const url = `https://bridge.example${V1}/namespaces/team-a/queue_messages_ready?labelSelector=queue%3Djobs`;
    const now = Date.now();
    const headers = await signRequest({ method: "GET", url, caller: HPA, requestId: "req-7" }, KEY, now, signer);
    const caller = await verifyRequest(new Request(url, { headers }), [KEY], { nowMs: now, hmac: verifier });
    expect(caller).toEqual(HPA);
    await expect(verifyRequest(new Request(url.replace("jobs", "payroll"), { headers }), [KEY], { nowMs: now, hmac: verifier })).rejects.toMatchObject({
      code: 401,
    });
  });
});

describe("across runtimes", () => {
  let worker: RunningWorker;
  let node: NodeServer;

  beforeAll(async () => {
    // Discovery is authenticated like every /apis request; no backend is read.
    const text = `${sqsConfigHead("http://127.0.0.1:9", { policy: null })}
metrics:
  - { name: q, provider: sqs, query: { queueLabel: queue } }
policy: { defaultAction: Deny }
`;
    [worker, node] = await Promise.all([
      startWorker(text, { BRIDGE_SIGNING_KEYS: KEYS }),
      startNodeServer({ config: loadConfig(text, "bridge.yaml").config, port: 0, env: { BRIDGE_SIGNING_KEYS: KEYS }, log: () => {} }),
    ]);
  }, 240_000);

  afterAll(async () => {
    await Promise.all([worker?.close(), node?.close()]);
  });

  it("the Worker (WebCrypto in workerd) accepts a request Node signed with node:crypto, and refuses it tampered", async () => {
    const url = `${worker.url}${V1}`;
    const headers = await signRequest({ method: "GET", url, caller: HPA }, KEY, Date.now(), NODE);
    const ok = await fetch(url, { headers });
    expect(ok.status, await ok.text()).toBe(200);
    const tampered = await fetch(url, { headers: { ...headers, "x-bridge-user": "jane" } });
    expect(tampered.status).toBe(401);
  });

  it("the Node server (node:crypto) accepts a request signed with WebCrypto, and refuses it tampered", async () => {
    const url = `${node.url}${V1}`;
    const headers = await signRequest({ method: "GET", url, caller: HPA }, KEY, Date.now(), webCryptoHmac);
    const ok = await fetch(url, { headers });
    expect(ok.status, await ok.text()).toBe(200);
    const tampered = await fetch(url, { headers: { ...headers, "x-bridge-user": "jane" } });
    expect(tampered.status).toBe(401);
  });
});
