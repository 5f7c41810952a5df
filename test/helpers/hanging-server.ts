/**
 * A TCP server on 127.0.0.1 that accepts connections, reads each request's
 * first line, and never answers: a backend that hangs (a stuck load
 * balancer, a frozen process), as opposed to one that refuses connections.
 */
import net from "node:net";
import type { AddressInfo } from "node:net";

/** A running {@link startHangingServer}. */
export interface HangingServer {
  /** `http://127.0.0.1:PORT` */
  url: string;
  /** connections accepted so far */
  accepted: number;
  /** connections still open (the client has not given up on them yet) */
  open: number;
  /** the first line of each request received (`GET /path?query HTTP/1.1`), in order */
  requestLines: string[];
  /** destroy every connection and stop listening */
  close(): Promise<void>;
}

/** Start a {@link HangingServer} on a free port of 127.0.0.1. */
export async function startHangingServer(): Promise<HangingServer> {
  const sockets = new Set<net.Socket>();
  const hs: HangingServer = { url: "", accepted: 0, open: 0, requestLines: [], close: async () => {} };
  const server = net.createServer((socket) => {
    hs.accepted++;
    hs.open++;
    sockets.add(socket);
    let head = "";
    socket.on("data", (chunk: Buffer) => {
      if (head.includes("\r\n") || head.length > 64 * 1024) return;
      head += chunk.toString("latin1");
      if (head.includes("\r\n")) hs.requestLines.push(head.slice(0, head.indexOf("\r\n")));
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      hs.open--;
      sockets.delete(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  hs.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  hs.close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    });
  return hs;
}
