// A raw HTTP/1.1 client for the fuzz tests: the request line, headers and body go on the
// socket exactly as given (no normalisation of ".." or of the method, lying content-lengths
// allowed), from a chosen loopback source address (the coordinator rate-limits per address).
import { connect } from 'node:net';

export interface RawRequest {
  method: string;
  path: string;
  headers: [string, string][];
  body?: Buffer;
  /** Source address, e.g. 127.0.0.7 (all of 127/8 is loopback on Linux). */
  localAddress?: string;
  /**
   * Half-close the write side after the body (for a content-length that promises more than is
   * sent: the server then sees the end at once). Node aborts requests still in flight when the
   * client half-closes, so only requests that cannot be answered otherwise use it.
   */
  halfClose?: boolean;
}

export interface RawReply {
  /** 0 when the server closed the connection without a reply. */
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** A server-sent event stream that was opened (and then dropped by us). */
  stream: boolean;
}

export class HangError extends Error {
  constructor(what: string, ms: number) {
    super(`no complete reply to ${what} within ${ms} ms`);
    this.name = 'HangError';
  }
}

function parse(raw: Buffer): { status: number; headers: Record<string, string>; bodyAt: number } | null {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const lines = raw.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!m) throw new Error(`not an HTTP reply: ${JSON.stringify(lines[0]?.slice(0, 100))}`);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: Number(m[1]), headers, bodyAt: end + 4 };
}

/** Sends one request with "Connection: close" and reads the reply to the end. */
export function rawRequest(port: number, r: RawRequest, timeoutMs: number): Promise<RawReply> {
  // A body goes with its true length unless the request says otherwise (a lie, or chunked).
  const framed = r.headers.some(([k]) => /^(content-length|transfer-encoding)$/i.test(k));
  const headers = r.body?.length && !framed ? [...r.headers, ['content-length', String(r.body.length)]] : r.headers;
  const head = `${r.method} ${r.path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return new Promise<RawReply>((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect({ host: '127.0.0.1', port, localAddress: r.localAddress });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new HangError(`${r.method} ${r.path.slice(0, 120)}`, timeoutMs));
    }, timeoutMs);
    const finish = (reply: RawReply | Error): void => {
      clearTimeout(timer);
      socket.destroy();
      if (reply instanceof Error) reject(reply);
      else resolve(reply);
    };
    socket.on('connect', () => {
      socket.write(Buffer.from(head, 'latin1'));
      if (r.body?.length) socket.write(r.body);
      if (r.halfClose) socket.end();
    });
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      try {
        const p = parse(Buffer.concat(chunks));
        if (p && /text\/event-stream/.test(p.headers['content-type'] ?? '')) finish({
          status: p.status, headers: p.headers, body: Buffer.alloc(0), stream: true,
        });
      } catch (e) {
        finish(e instanceof Error ? e : new Error(String(e)));
      }
    });
    // A reset after the reply (the server closing a connection whose body it refused) is fine.
    socket.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'ECONNRESET' && e.code !== 'EPIPE') finish(e);
    });
    socket.on('close', () => {
      const raw = Buffer.concat(chunks);
      try {
        const p = parse(raw);
        if (!p) return finish(raw.length ? new Error(`a cut-off reply: ${JSON.stringify(raw.subarray(0, 100).toString('latin1'))}`)
          : { status: 0, headers: {}, body: raw, stream: false });
        finish({ status: p.status, headers: p.headers, body: raw.subarray(p.bodyAt), stream: false });
      } catch (e) {
        finish(e instanceof Error ? e : new Error(String(e)));
      }
    });
  });
}
