/** Small helpers for the HTTP(S) servers tests start. */
import type { Server } from "node:http";

/**
 * Close `server` now: drop its open (keep-alive) connections, then stop
 * listening; resolves when it has closed.
 */
export async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}
