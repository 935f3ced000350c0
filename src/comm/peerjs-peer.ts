// The parts of PeerJS a peer endpoint (peer-endpoint.ts) uses, kept to the shapes this project
// relies on so that the browser's peerjs, Node's (node.ts: node-datachannel underneath), the
// relay fallback (relay.ts) and the tests' fakes all fit; and the metadata a ring link's dial
// carries (who dials, for which job, generation and ring).
import type { DataConnectionLike } from './peerjs-link.ts';
import { isRingTag } from '../protocol/frames.ts';
import type { DirectRoutes } from '../protocol/messages.ts';

export interface PeerOptionsLike {
  host: string;
  port: number;
  path: string;
  secure: boolean;
  token: string;
  key?: string;
  config: RTCConfiguration;
  debug?: number;
}

export interface ConnectOptionsLike {
  label: string;
  metadata: RingMetadata;
  serialization: 'raw';
  reliable: true;
}

/** The parts of a PeerJS Peer we use. */
export interface PeerLike {
  readonly id: string;
  readonly open: boolean;
  readonly destroyed: boolean;
  connect(peer: string, options: ConnectOptionsLike): DataConnectionLike | undefined;
  on(event: 'open', cb: (id: string) => void): unknown;
  on(event: 'connection', cb: (conn: DataConnectionLike) => void): unknown;
  on(event: 'error', cb: (err: Error & { type?: string }) => void): unknown;
  destroy(): void;
  /** Direct routes to peers (a Node volunteer's DirectPeer: direct-peer.ts); absent: every link is WebRTC. */
  learn?(routes: DirectRoutes): void;
  /** Whether a direct dial to `peer` failed, so that it is dialed over WebRTC from now on. */
  fellBack?(peer: string): boolean;
}
export type PeerCtor = new (id: string, options: PeerOptionsLike) => PeerLike;

/** Picks the Peer class out of the peerjs module (ESM build in browsers, CommonJS in Node). */
export function peerClassOf(mod: unknown): PeerCtor {
  const m = mod as { Peer?: unknown; default?: { Peer?: unknown } };
  const P = m.Peer ?? m.default?.Peer;
  if (typeof P !== 'function') throw new Error("the 'peerjs' module has no Peer class: check that peerjs@1.5 is installed");
  // peerjs's own typings are richer than PeerLike (typed EventEmitter3); the shapes match.
  return P as PeerCtor;
}

/** In a browser (or a bundler): import peerjs as is. In Node use loadNodePeer() from ./node.ts. */
export async function loadBrowserPeer(): Promise<PeerCtor> {
  return peerClassOf(await import('peerjs'));
}

export interface SignalingAddress {
  host: string;
  port: number;
  /** Where the coordinator mounted the signaling server, e.g. '/signal'. */
  path: string;
  secure?: boolean;
}

export interface RingMetadata {
  vt: 'ring';
  job: number;
  generation: number;
  from: string;
  /** Which ring of the generation (FormRingOptions.tag); absent: the flat ring. */
  tag?: string;
  /** Dialed ahead for a ring that has not formed yet (preDial): kept idle in the pool at both ends. */
  pre?: true;
}

/** The ring metadata a dial carries, or null when `x` is not one (a connection not for a ring, or malformed). */
export function ringMetadata(x: unknown): RingMetadata | null {
  if (typeof x !== 'object' || x === null) return null;
  const m = x as Record<string, unknown>;
  if (m.vt !== 'ring' || typeof m.job !== 'number' || typeof m.generation !== 'number' || typeof m.from !== 'string') return null;
  if (m.tag !== undefined && (typeof m.tag !== 'string' || !isRingTag(m.tag))) return null;
  if (m.pre !== undefined && m.pre !== true) return null;
  return { vt: 'ring', job: m.job, generation: m.generation, from: m.from, ...(m.tag ? { tag: m.tag } : {}), ...(m.pre ? { pre: true as const } : {}) };
}
