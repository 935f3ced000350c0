// Server-sent events (GET /api/events): every open stream gets each LiveEvent as
// `event: <type>` / `data: <json>`. Bounded: at most `maxClients` streams, and a client that
// does not keep up (its socket buffer is full) is dropped instead of buffered without end.
import type { ServerResponse } from 'node:http';
import type { LiveEvent } from '../src/protocol/messages.ts';

export interface EventHub {
  /** Starts a stream on `res` and sends `hello` first; false when the hub is full. */
  open(res: ServerResponse, hello: LiveEvent): boolean;
  publish(e: LiveEvent): void;
  readonly clients: number;
  close(): void;
}

const frame = (e: LiveEvent): string => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;

export function createEventHub(maxClients = 256, keepAliveMs = 15_000): EventHub {
  const clients = new Set<ServerResponse>();
  // Proxies close idle streams; a comment line every keepAliveMs keeps them open.
  const keepAlive = setInterval(() => {
    for (const res of clients) if (!res.write(': keep-alive\n\n')) drop(res);
  }, keepAliveMs);
  keepAlive.unref();
  function drop(res: ServerResponse): void {
    clients.delete(res);
    res.destroy();
  }
  return {
    get clients() {
      return clients.size;
    },
    open(res, hello) {
      if (clients.size >= maxClients) return false;
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
      res.write(`retry: 2000\n${frame(hello)}`);
      clients.add(res);
      res.on('close', () => clients.delete(res));
      return true;
    },
    publish(e) {
      const text = frame(e);
      for (const res of clients) if (!res.write(text)) drop(res);
    },
    close() {
      clearInterval(keepAlive);
      for (const res of clients) res.end();
      clients.clear();
    },
  };
}
