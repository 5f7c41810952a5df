/**
 * Service-account keys for tests: a fresh RSA key pair in the JSON shape
 * Google issues ("Create and delete service account keys"), with `token_uri`
 * pointing at the fake OAuth endpoint.
 */
import { generateKeyPairSync, type KeyObject } from "node:crypto";

/** A generated key: the JSON an operator would put in a secret, and the public key fakes verify with. */
export interface TestServiceAccount {
  json: {
    type: "service_account";
    project_id: string;
    private_key_id: string;
    private_key: string;
    client_email: string;
    client_id: string;
    token_uri: string;
  };
  /** `JSON.stringify(json)`, what the environment variable holds */
  text: string;
  publicKey: KeyObject;
}

/** Generate a service-account key whose `token_uri` is `tokenUri`. */
export function makeServiceAccount(tokenUri: string, email = "bridge@test-project.iam.gserviceaccount.com"): TestServiceAccount {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const json = {
    type: "service_account" as const,
    project_id: "test-project",
    private_key_id: "0123456789abcdef",
    private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
    client_email: email,
    client_id: "100000000000000000001",
    token_uri: tokenUri,
  };
  return { json, text: JSON.stringify(json), publicKey };
}
