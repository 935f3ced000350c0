// The ICE servers a job hands its volunteers (in the join answer): the coordinator's own STUN
// (stun.ts, UDP on its port), its TURN relay (turn.ts: coturn, `npm start -- --turn`) and
// external servers (`--ice URL,...`). TURN credentials follow the TURN REST API scheme that
// coturn's `use-auth-secret` checks: username `<expiry unix seconds>:<peer id>`, password
// base64(HMAC-SHA1(secret, username)). They expire; nothing long-lived is ever handed out.
import { createHmac } from 'node:crypto';
import { isIP } from 'node:net';
import type { IceServer } from '../src/protocol/messages.ts';

export class IceConfigError extends Error {
  readonly kind = 'ice-config';
  constructor(message: string) {
    super(message);
    this.name = 'IceConfigError';
  }
}

/** One server of `--ice`: static credentials (in the URL), or REST credentials from `--ice-secret`. */
export interface ExternalIce { url: string; username?: string; credential?: string }

const SCHEMES = ['stun', 'stuns', 'turn', 'turns'] as const;
const HOST = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]{1,253})$/;

/**
 * Parses `--ice stun:host[:port],turn:user:pass@host[:port][?transport=udp|tcp],...`. Every
 * problem names the entry and says what a valid one looks like.
 */
export function parseIceList(text: string): ExternalIce[] {
  const entries = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (entries.length === 0) {
    throw new IceConfigError('--ice is empty: give one or more URLs, e.g. --ice stun:stun.example.org:3478,turn:user:pass@turn.example.org:3478');
  }
  return entries.map(parseIceUrl);
}

export function parseIceUrl(entry: string): ExternalIce {
  const example = 'stun:HOST[:PORT] or turn:USER:PASSWORD@HOST[:PORT][?transport=udp|tcp] (turns: for TLS)';
  const colon = entry.indexOf(':');
  const scheme = colon > 0 ? entry.slice(0, colon).toLowerCase() : '';
  if (!(SCHEMES as readonly string[]).includes(scheme)) {
    throw new IceConfigError(`--ice entry "${entry}": the scheme must be stun:, stuns:, turn: or turns: (${example})`);
  }
  let rest = entry.slice(colon + 1);
  if (rest.startsWith('//')) rest = rest.slice(2);
  let query = '';
  const q = rest.indexOf('?');
  if (q >= 0) {
    query = rest.slice(q + 1);
    rest = rest.slice(0, q);
    if (!/^transport=(udp|tcp)$/.test(query)) throw new IceConfigError(`--ice entry "${entry}": the only query allowed is ?transport=udp or ?transport=tcp`);
    if (scheme.startsWith('stun')) throw new IceConfigError(`--ice entry "${entry}": ?transport belongs to turn: URLs only`);
  }
  let username: string | undefined;
  let credential: string | undefined;
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    if (scheme.startsWith('stun')) throw new IceConfigError(`--ice entry "${entry}": STUN takes no credentials (${example})`);
    const cred = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const c = cred.indexOf(':');
    if (c <= 0 || c === cred.length - 1) throw new IceConfigError(`--ice entry "${entry}": credentials must be USER:PASSWORD before the @`);
    username = decodeURIComponent(cred.slice(0, c));
    credential = decodeURIComponent(cred.slice(c + 1));
  }
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(rest);
  if (!m || !HOST.test(m[1]!)) throw new IceConfigError(`--ice entry "${entry}": "${rest}" is not HOST or HOST:PORT (${example})`);
  if (m[1]!.startsWith('[') && isIP(m[1]!.slice(1, -1)) !== 6) throw new IceConfigError(`--ice entry "${entry}": ${m[1]} is not an IPv6 address`);
  if (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 65535)) {
    throw new IceConfigError(`--ice entry "${entry}": port ${m[2]} is out of range 1-65535`);
  }
  const url = `${scheme}:${m[1]}${m[2] ? `:${m[2]}` : ''}${query ? `?${query}` : ''}`;
  return { url, ...(username !== undefined ? { username, credential } : {}) };
}

/** TURN REST API credentials (coturn `use-auth-secret`), valid until now + ttl. */
export function turnCredentials(secret: string, peerId: string, ttlSeconds: number, nowMs = Date.now()): { username: string; credential: string } {
  const expiry = Math.floor(nowMs / 1000) + Math.max(60, Math.floor(ttlSeconds));
  const username = `${expiry}:${peerId}`;
  return { username, credential: createHmac('sha1', secret).update(username).digest('base64') };
}

export interface IcePlan {
  /** The coordinator's own STUN on UDP (stun.ts), on this port; none: off. */
  stunPort?: number;
  /** The coordinator's TURN relay (coturn), on this port with this shared secret. */
  turn?: { port: number; secret: string };
  /** External servers (`--ice`), static or REST credentials. */
  external?: ExternalIce[];
  /** Secret for REST credentials of the external TURN servers that carry none (`--ice-secret`). */
  externalSecret?: string;
  /** How long TURN credentials stay valid (default 24 hours, an overnight job; a rejoin gets fresh ones). */
  ttlSeconds?: number;
}

/** A host as it goes in a URL: IPv6 literals in brackets. */
export const urlHost = (host: string): string => (isIP(host) === 6 ? `[${host}]` : host);

/**
 * The ICE servers for one joining peer. `host` is the coordinator's address as that peer
 * reached it (the Host header of its join request): an address it can reach, so also a
 * usable STUN/TURN address on a LAN.
 */
export function iceServersFor(plan: IcePlan, host: string, peerId: string, nowMs = Date.now()): IceServer[] {
  const out: IceServer[] = [];
  const h = urlHost(host);
  const ttl = plan.ttlSeconds ?? 24 * 3600;
  if (plan.stunPort) out.push({ urls: [`stun:${h}:${plan.stunPort}`] });
  if (plan.turn) {
    out.push({
      urls: [`turn:${h}:${plan.turn.port}?transport=udp`, `turn:${h}:${plan.turn.port}?transport=tcp`],
      ...turnCredentials(plan.turn.secret, peerId, ttl, nowMs),
    });
  }
  for (const e of plan.external ?? []) {
    if (e.url.startsWith('stun')) out.push({ urls: [e.url] });
    else if (e.username !== undefined) out.push({ urls: [e.url], username: e.username, credential: e.credential ?? '' });
    else if (plan.externalSecret) out.push({ urls: [e.url], ...turnCredentials(plan.externalSecret, peerId, ttl, nowMs) });
  }
  return out;
}

/** Checks a plan before the job starts: a TURN URL without any way to get credentials is a mistake. */
export function checkIcePlan(plan: IcePlan): void {
  for (const e of plan.external ?? []) {
    if (e.url.startsWith('turn') && e.username === undefined && !plan.externalSecret) {
      throw new IceConfigError(`--ice ${e.url}: a TURN server needs credentials: put USER:PASSWORD@ in the URL, `
        + 'or pass --ice-secret SECRET (the static-auth-secret of a coturn run with use-auth-secret)');
    }
  }
}

/** The Host header's host name (no port, no brackets); null when absent or malformed. */
export function hostOfHeader(header: string | undefined): string | null {
  if (!header) return null;
  const m = /^(\[([0-9a-fA-F:.]+)\]|[A-Za-z0-9.-]{1,253})(?::\d{1,5})?$/.exec(header.trim());
  if (!m) return null;
  return m[2] ?? m[1]!;
}
