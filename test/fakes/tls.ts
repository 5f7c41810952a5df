/**
 * A throw-away serving certificate for 127.0.0.1, self-signed (it is its
 * own trust anchor), made with the OpenSSL command-line tool: ECDSA P-256,
 * SAN `IP:127.0.0.1` and `DNS:localhost`, valid for one day.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A certificate and its private key, both PEM. */
export interface SelfSigned {
  cert: string;
  key: string;
}

/** Make a self-signed certificate for 127.0.0.1 and localhost. */
export function selfSignedLocalhost(): SelfSigned {
  const dir = mkdtempSync(join(tmpdir(), "emb-tls-"));
  try {
    execFileSync(
      "openssl",
      [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1",
        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "pipe" },
    );
    return { cert: readFileSync(join(dir, "cert.pem"), "utf8"), key: readFileSync(join(dir, "key.pem"), "utf8") };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
