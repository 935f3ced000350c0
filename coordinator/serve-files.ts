// Serving files from a folder to strangers: only plain names, only regular files, only inside
// the folder once symlinks are resolved. The URL path is checked segment by segment BEFORE any
// normalisation, so "..", "%2e%2e", "%2f" and backslashes are refused rather than resolved.
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { join, sep } from 'node:path';
import { HttpError } from './http.ts';

const PLAIN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * Cross-origin isolation for the page and its assets (workers' scripts too): with these the
 * page has SharedArrayBuffer, so the wasm engine can run threads. The page only loads from its
 * own origin (/api, /data, the session and signaling sockets), which these do not restrict.
 */
export const ISOLATION_HEADERS: Readonly<Record<string, string>> = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
};

/** Sets ISOLATION_HEADERS on a response (before its head is written). */
export function isolate(res: ServerResponse): void {
  for (const [k, v] of Object.entries(ISOLATION_HEADERS)) res.setHeader(k, v);
}

/** The decoded segments of a raw request path; refuses encoded separators and dot segments. */
export function pathSegments(rawUrl: string): string[] {
  const raw = rawUrl.split(/[?#]/, 1)[0]!;
  if (!raw.startsWith('/')) throw new HttpError('bad-request', 'the request path must start with /');
  return raw.slice(1).split('/').map((s) => {
    let d: string;
    try {
      d = decodeURIComponent(s);
    } catch (e) {
      if (!(e instanceof URIError)) throw e;
      throw new HttpError('bad-request', 'the request path has a malformed %-escape');
    }
    if (d === '.' || d === '..' || /[/\\\0]/.test(d)) throw new HttpError('bad-request', 'the request path may not contain ".", ".." or encoded separators');
    return d;
  });
}

/** Streams `root/name` if `name` is a plain file name whose real path is inside `root`. */
export async function sendFileFrom(res: ServerResponse, root: string, name: string, contentType: string): Promise<void> {
  if (!PLAIN.test(name)) throw new HttpError('not-found', `no file "${name.slice(0, 60)}" here: names are letters, digits, _ . -`);
  let real: string;
  let realRoot: string;
  try {
    [realRoot, real] = await Promise.all([realpath(root), realpath(join(root, name))]);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    throw new HttpError('not-found', `no file "${name}" here`);
  }
  // A symlink inside the folder that points out of it is treated as absent.
  if (!real.startsWith(realRoot + sep)) throw new HttpError('not-found', `no file "${name}" here`);
  const st = await stat(real);
  if (!st.isFile()) throw new HttpError('not-found', `no file "${name}" here`);
  res.writeHead(200, { 'content-type': contentType, 'content-length': st.size, 'cache-control': 'no-cache' });
  await new Promise<void>((resolve, reject) => {
    const s = createReadStream(real);
    s.on('error', reject);
    res.on('close', resolve);
    s.pipe(res);
  });
}
