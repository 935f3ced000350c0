// Small HTTP helpers for the coordinator's API: JSON replies, errors as the protocol's
// ErrorMessage with a 4xx/5xx status, and request bodies read with a size limit.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { type ErrorKind, type ErrorMessage } from '../src/protocol/messages.ts';
import { parseJsonText } from '../src/protocol/fields.ts';

const STATUS: Record<ErrorKind, number> = {
  'bad-request': 400, unauthorized: 401, forbidden: 403, 'not-found': 404, 'method-not-allowed': 405,
  conflict: 409, 'too-large': 413, 'unsupported-media-type': 415, stale: 409, 'too-many-requests': 429, unavailable: 503, internal: 500,
};

/** A refusal with a reason; routes throw it, the server turns it into a JSON error reply. */
export class HttpError extends Error {
  constructor(readonly kind: ErrorKind, message: string) {
    super(message);
    this.name = 'HttpError';
  }
  get status(): number {
    return STATUS[this.kind];
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store',
  }).end(text);
}

export function sendError(res: ServerResponse, e: HttpError): void {
  const body: ErrorMessage = { type: 'error', kind: e.kind, message: e.message };
  if (res.headersSent) {
    res.destroy(); // mid-stream: the client sees a cut-off reply, which it must treat as failed
    return;
  }
  // A refused body may still be arriving: close the connection rather than read it all.
  if (e.status === 413) res.setHeader('connection', 'close');
  sendJson(res, e.status, body);
}

/**
 * The request's body, refused (413) past `maxBytes` without reading the rest: the declared
 * length is checked first, then the bytes as they arrive (chunked bodies declare none).
 * `tooLarge` words the refusal (given the declared length when that was over).
 */
export async function readBody(req: IncomingMessage, maxBytes: number, tooLarge: (declared?: number) => string = routeLimit(maxBytes)): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  if (declared > maxBytes) throw new HttpError('too-large', tooLarge(declared));
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.byteLength;
      if (size > maxBytes) throw new HttpError('too-large', tooLarge());
      chunks.push(chunk);
    }
  } catch (e) {
    // The client went away mid-body: its refusal, not a failure of ours (nothing to log as a 500).
    if (e instanceof HttpError || !(req.destroyed || (e as NodeJS.ErrnoException).code === 'ECONNRESET')) throw e;
    throw new HttpError('bad-request', 'the request body was cut off (the client closed the connection)');
  }
  return Buffer.concat(chunks);
}

const routeLimit = (maxBytes: number) => (declared?: number): string =>
  declared === undefined
    ? `body is over the ${maxBytes}-byte limit of this route`
    : `body of ${declared} bytes is over the ${maxBytes}-byte limit of this route`;

/**
 * The request's URL, parsed without ever throwing: only its path and query count (the host is a
 * placeholder). `new URL(req.url, base)` throws on targets like "//" or "//[" (read as a host),
 * and a throw in a request or upgrade listener would take the whole process down.
 */
export function requestUrl(req: IncomingMessage): URL {
  const raw = req.url ?? '/';
  try {
    return new URL(`http://x${raw.startsWith('/') ? raw : '/'}`);
  } catch {
    return new URL('http://x/');
  }
}

/**
 * Refuses a raw socket (an upgrade or CONNECT that no handler takes) with a whole HTTP reply
 * and a one-line reason, then lets it close: what the client still sends is read and dropped
 * (a detached socket nobody reads never sees the client's end, and would keep the server from
 * closing), and a client that never hangs up is cut off after a few seconds.
 */
export function refuseSocket(socket: Duplex, status: string, reason: string): void {
  const text = `${reason}\n`;
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
  socket.resume();
  setTimeout(() => socket.destroy(), 5000).unref();
}

/** The request's media type, lower case, without parameters. */
export const mediaType = (req: IncomingMessage): string => (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();

/** The token of an "Authorization: Bearer <token>" header, or null. */
export function bearerToken(req: IncomingMessage): string | null {
  return /^Bearer (\S{1,256})$/.exec(req.headers.authorization ?? '')?.[1] ?? null;
}

/**
 * The request's JSON body as `unknown`, refused (413) past `maxBytes` without reading the
 * rest, and refused (415/400) unless it is application/json that parses.
 */
export async function readJsonBody(req: IncomingMessage, maxBytes: number): Promise<unknown> {
  const type = mediaType(req);
  if (type !== 'application/json') throw new HttpError('unsupported-media-type', `send the body as application/json (got "${type.slice(0, 60)}")`);
  const parsed = parseJsonText((await readBody(req, maxBytes)).toString('utf8'), maxBytes);
  if (!parsed.ok) throw new HttpError(parsed.error.kind === 'too-large' ? 'too-large' : 'bad-request', `body: ${parsed.error.problems.join('; ')}`);
  return parsed.value;
}
