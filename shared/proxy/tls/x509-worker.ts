/**
 * The worker thread that makes certificates (`cert-generation.ts`): it
 * imports @peculiar/x509 (through `certs.ts`), makes what `workerData` asks
 * ({@link GenerationRequest}), posts one {@link GenerationReply} with PEM
 * strings and ends, so the library's memory goes with this isolate. Built as
 * its own entry point `x509-worker.mjs` in the image bundle
 * (infra/proxy/build.ts).
 *
 * @throws Error at load when started outside a worker thread
 */
import { isMainThread, parentPort, threadId, workerData } from "node:worker_threads";
import type { GenerationReply, GenerationRequest, GenerationResult, PemPair } from "./cert-generation.ts";
import { caFromPem, createServingCA, generateServingCertificate, issueServingCertificate, type IssuedCertificate } from "./certs.ts";

if (isMainThread || parentPort === null) throw new Error("x509-worker runs only as a worker thread of cert-generation.ts");

const pems = (c: IssuedCertificate): PemPair => ({ certPem: c.certPem, keyPem: c.keyPem });

async function run(req: GenerationRequest): Promise<Omit<GenerationResult, "threadId">> {
  switch (req.op) {
    case "generate": {
      const { ca, serving } = await generateServingCertificate(req.service, req.namespace, req.validDays, req.nowMs);
      return { ca: pems(ca), serving: pems(serving) };
    }
    case "create-pair": {
      const ca = await createServingCA(req.service, req.namespace, req.caValiditySeconds, req.nowMs);
      const serving = await issueServingCertificate(ca, req.service, req.namespace, req.certValiditySeconds, req.nowMs);
      return { ca: pems(ca), serving: pems(serving) };
    }
    case "create-ca":
      return { ca: pems(await createServingCA(req.service, req.namespace, req.validSeconds, req.nowMs)) };
    case "issue-serving": {
      const ca = await caFromPem(req.ca.certPem, req.ca.keyPem);
      return { serving: pems(await issueServingCertificate(ca, req.service, req.namespace, req.validSeconds, req.nowMs)) };
    }
  }
}

let reply: GenerationReply;
try {
  reply = { ok: true, result: { ...(await run(workerData as GenerationRequest)), threadId } };
} catch (err) {
  reply = { ok: false, message: err instanceof Error ? err.message : String(err) };
}
parentPort.postMessage(reply);
