// The IPC protocol between bench/allreduce.ts (the parent: signaling server, round barrier,
// timings) and bench/allreduce-peer.ts (one OS process per peer), plus the inputs both sides
// can compute: every element of every peer's input is a pure function of (seed, index), so the
// parent and each peer can check a result without shipping buffers over IPC.
import type { SignalingAddress, WireFormat } from '../src/comm/index.ts';

interface TaskBase {
  /** The peers taking part, in ring order; ids[0] is the star's hub. */
  ids: string[];
  /** First job number of this attempt (the star uses ids.length - 1 of them, one per pair). */
  job: number;
  /** Frame size including the 32-byte header, as in allReduceSum. */
  msgBytes: number;
}

/** B: every peer streams `bytes` of payload to its next peer while receiving as much from prev. */
export interface StreamTask extends TaskBase { kind: 'stream'; bytes: number; warmBytes: number }
/** allReduceSum of `elems` float32 on a ring of `ids`. */
export interface RingTask extends TaskBase { kind: 'ring'; elems: number; warmElems: number; seed: number; wire: WireFormat }
/** Naive star: all send to ids[0], which sums and, once it has everything, sends the sum back. */
export interface StarTask extends TaskBase { kind: 'star'; elems: number; warmElems: number; seed: number }
export type Task = StreamTask | RingTask | StarTask;

export type ToPeer =
  | { type: 'open'; id: string; token: string; server: SignalingAddress }
  | { type: 'prepare'; task: Task }
  | { type: 'go'; warm: boolean }
  | { type: 'release' }
  | { type: 'exit' };

/** What a peer reports about its result after a timed round (null for streams). */
export interface ResultCheck {
  /** FNV-1a over the result's bits: all peers of a collective must agree. */
  hash: number;
  /** Worst |result - float64 sum| / sum|inputs| over a strided subset of elements. */
  relError: number;
}

export type FailureKind = 'connect-failed' | 'other';

export type FromPeer =
  | { type: 'opened' }
  | { type: 'prepared' }
  | { type: 'done'; seconds: number; cpuSeconds: number; check: ResultCheck | null }
  | { type: 'released' }
  | { type: 'failed'; kind: FailureKind; message: string };

const isObj = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null;

/** Validates a message from a peer process (IPC is JSON; a malformed one is a bug in the peer). */
export function parseFromPeer(x: unknown): FromPeer {
  const bad = () => new Error(`malformed IPC message from a peer process: ${JSON.stringify(x)}`);
  if (!isObj(x)) throw bad();
  switch (x.type) {
    case 'opened': case 'prepared': case 'released':
      return { type: x.type };
    case 'done': {
      const c = x.check;
      if (typeof x.seconds !== 'number' || typeof x.cpuSeconds !== 'number') throw bad();
      const base = { type: 'done', seconds: x.seconds, cpuSeconds: x.cpuSeconds } as const;
      if (c === null) return { ...base, check: null };
      if (!isObj(c) || typeof c.hash !== 'number' || typeof c.relError !== 'number') throw bad();
      return { ...base, check: { hash: c.hash, relError: c.relError } };
    }
    case 'failed':
      if ((x.kind !== 'connect-failed' && x.kind !== 'other') || typeof x.message !== 'string') throw bad();
      return { type: 'failed', kind: x.kind, message: x.message };
    default:
      throw bad();
  }
}

/** Validates a message from the parent. Tasks are trusted to be well-formed past their kind. */
export function parseToPeer(x: unknown): ToPeer {
  const bad = () => new Error(`malformed IPC message from the benchmark parent: ${JSON.stringify(x)}`);
  if (!isObj(x)) throw bad();
  switch (x.type) {
    case 'open':
      if (typeof x.id !== 'string' || typeof x.token !== 'string' || !isObj(x.server)) throw bad();
      return x as ToPeer;
    case 'prepare':
      if (!isObj(x.task) || !['stream', 'ring', 'star'].includes(String(x.task.kind))) throw bad();
      return x as ToPeer;
    case 'go':
      if (typeof x.warm !== 'boolean') throw bad();
      return { type: 'go', warm: x.warm };
    case 'release': case 'exit':
      return { type: x.type };
    default:
      throw bad();
  }
}

/** Input element i of the peer whose seed is `seed`: a hash of (seed, i), uniform in [-1, 1). */
export function inputValue(seed: number, i: number): number {
  let x = (i ^ Math.imul(seed, 0x9e3779b1)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
  x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
  x = (x ^ (x >>> 16)) >>> 0;
  return x / 2 ** 31 - 1;
}

export function fillInput(a: Float32Array, seed: number): void {
  for (let i = 0; i < a.length; i++) a[i] = inputValue(seed, i);
}

/** Hash of the bits and error against the float64 sum of the inputs of `seeds`. */
export function checkResult(got: Float32Array, seeds: readonly number[]): ResultCheck {
  const bits = new Uint32Array(got.buffer, got.byteOffset, got.length);
  let hash = 0x811c9dc5;
  for (let i = 0; i < bits.length; i++) hash = Math.imul(hash ^ bits[i], 16777619);
  // ~256k checked elements whatever the size: enough to catch a missing or doubled segment
  // (every segment is 16k elements) at a small cost per round.
  const stride = Math.max(1, Math.floor(got.length / (1 << 18)));
  let relError = 0;
  for (let i = 0; i < got.length; i += stride) {
    let s = 0, a = 1e-30;
    for (const seed of seeds) { const v = Math.fround(inputValue(seed, i)); s += v; a += Math.abs(v); }
    relError = Math.max(relError, Math.abs(got[i] - s) / a);
  }
  return { hash: hash >>> 0, relError };
}

/**
 * An experiment knob from the environment (see the header of bench/allreduce.ts): a positive
 * integer, or `fallback` when unset. Anything else stops the benchmark, naming the variable.
 */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = Number(raw);
  if (!Number.isInteger(v) || v <= 0) throw new Error(`${name}=${raw}: expected a positive integer (or unset for ${fallback})`);
  return v;
}
