/**
 * A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice
 * for port 0, released before returning), for a process a test starts with
 * a `--port`-style flag. Another process may take it in between; tests that
 * need several distinct ports at once use `freePorts` of test/k8s/cluster.ts.
 *
 * @throws Error when no port can be bound (EADDRINUSE etc.)
 */
import { createServer } from "node:net";

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
