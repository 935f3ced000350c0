// The ring's wire format: one fixed 32-byte little-endian header, then the payload.
//
//   0 u32 magic 'VTR1'   4 u8 kind   5 u8 phase   6 u8 dtype   7 u8 0
//   8 u32 job   12 u32 generation   16 u32 step   20 u32 chunk   24 u32 offset   28 u32 length
//
// offset/length count elements of the flat gradient (not bytes). Payload elements are
// encoded by codec.ts (float32, float16, bfloat16, or int8 after one float32 scale); an ABORT frame's payload is UTF-8 JSON; a PLAN
// frame (the first frame of each collective on a link, see allreduce.ts) carries four u32:
// ring size, the sender's rank, gradient length (elements), elements per data frame.
// For ABORT and PLAN frames `length` counts payload bytes.
// REUSE, REUSE_ACK and REUSE_CONFIRM frames (the handshake that moves an open link into the
// next generation's ring, link-pool.ts) carry the NEW generation in the header and the ring tag
// as UTF-8 ('' for the flat ring); `length` counts those bytes. They belong to the endpoint,
// never to a ring.
// A READY frame (header only; job, generation and step 0) is the first frame the accepting end
// of a new connection sends; the dialing end sends nothing before it has heard from the other
// end (peerjs-link.ts says why). It belongs to the link and never reaches a ring.
// Every platform we target (x86, ARM, WebAssembly hosts) is little-endian, so payloads are
// read through typed-array views with no byte swapping.

import { payloadBytes, encodePayload, WIRE_FORMATS, type WireFormat } from './codec.ts';

export { BYTES_PER_ELEMENT, WIRE_FORMATS, type WireFormat } from './codec.ts';

export const MAGIC = 0x31525456; // 'VTR1' read as a little-endian u32
export const HEADER_BYTES = 32;
/** Largest frame we accept or send: the data-channel limit everywhere is 256 KiB. */
export const MAX_FRAME_BYTES = 262_144;

export const FrameKind = { data: 1, heartbeat: 2, abort: 3, plan: 4, reuse: 5, reuseAck: 6, reuseConfirm: 7, ready: 8 } as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

/** The three steps of the link-reuse handshake, in the order they cross the link. */
export type ReuseKind = typeof FrameKind.reuse | typeof FrameKind.reuseAck | typeof FrameKind.reuseConfirm;
const FRAME_KINDS: ReadonlySet<number> = new Set(Object.values(FrameKind));
const isFrameKind = (kind: number): kind is FrameKind => FRAME_KINDS.has(kind);

export const isReuseKind = (kind: number): kind is ReuseKind =>
  kind === FrameKind.reuse || kind === FrameKind.reuseAck || kind === FrameKind.reuseConfirm;

/** A ring tag: a short plain token (it goes into keys joined by '/'); '' is the flat ring. */
const TAG = /^[a-z0-9-]{1,16}$/;
export const isRingTag = (tag: string): boolean => TAG.test(tag);

export const Phase = { reduceScatter: 0, allGather: 1 } as const;
export type Phase = (typeof Phase)[keyof typeof Phase];

/** The header's dtype code of each payload format (codec.ts): its index in WIRE_FORMATS. */
const DTYPE_CODE: Record<WireFormat, number> = { f32: 0, f16: 1, bf16: 2, i8: 3 };

export interface FrameHeader {
  kind: FrameKind;
  phase: Phase;
  dtype: WireFormat;
  job: number;
  generation: number;
  step: number;
  chunk: number;
  offset: number;
  /** Elements for data frames, bytes for abort and plan frames, 0 for heartbeats. */
  length: number;
}

export type ParsedHeader = { ok: true; header: FrameHeader } | { ok: false; reason: string };

/** Writes `h` into the first HEADER_BYTES of `frame`. */
export function writeHeader(frame: Uint8Array, h: FrameHeader): void {
  const v = new DataView(frame.buffer, frame.byteOffset, HEADER_BYTES);
  v.setUint32(0, MAGIC, true);
  v.setUint8(4, h.kind);
  v.setUint8(5, h.phase);
  v.setUint8(6, DTYPE_CODE[h.dtype]);
  v.setUint8(7, 0);
  v.setUint32(8, h.job, true);
  v.setUint32(12, h.generation, true);
  v.setUint32(16, h.step, true);
  v.setUint32(20, h.chunk, true);
  v.setUint32(24, h.offset, true);
  v.setUint32(28, h.length, true);
}

/** Reads and checks the header and that the frame's size matches what the header claims. */
export function parseFrame(frame: Uint8Array): ParsedHeader {
  if (frame.byteLength < HEADER_BYTES) return { ok: false, reason: `truncated frame: ${frame.byteLength} bytes, header needs ${HEADER_BYTES}` };
  if (frame.byteLength > MAX_FRAME_BYTES) return { ok: false, reason: `oversized frame: ${frame.byteLength} bytes > ${MAX_FRAME_BYTES}` };
  const v = new DataView(frame.buffer, frame.byteOffset, HEADER_BYTES);
  if (v.getUint32(0, true) !== MAGIC) return { ok: false, reason: 'not a ring frame (bad magic)' };
  const kind = v.getUint8(4);
  const phase = v.getUint8(5);
  const dtype = WIRE_FORMATS[v.getUint8(6)];
  if (!isFrameKind(kind)) return { ok: false, reason: `unknown frame kind ${kind}` };
  if (phase !== Phase.reduceScatter && phase !== Phase.allGather) return { ok: false, reason: `unknown phase ${phase}` };
  if (dtype === undefined) return { ok: false, reason: `unknown dtype ${v.getUint8(6)}` };
  const header: FrameHeader = {
    kind, phase, dtype,
    job: v.getUint32(8, true),
    generation: v.getUint32(12, true),
    step: v.getUint32(16, true),
    chunk: v.getUint32(20, true),
    offset: v.getUint32(24, true),
    length: v.getUint32(28, true),
  };
  const payload = frame.byteLength - HEADER_BYTES;
  const expected = kind === FrameKind.data ? payloadBytes(dtype, header.length) : kind === FrameKind.heartbeat ? 0 : header.length;
  if (payload < expected) return { ok: false, reason: `truncated frame: payload ${payload} bytes, header says ${expected}` };
  if (payload > expected) return { ok: false, reason: `oversized frame: payload ${payload} bytes, header says ${expected}` };
  return { ok: true, header };
}

export interface ControlIds { job: number; generation: number }

/** Where a data frame's elements belong in a collective (its ids come from the ring). */
export interface DataFrameAt { phase: Phase; dtype: WireFormat; step: number; chunk: number; offset: number }

/**
 * A data frame carrying `src` (elements at.offset .. at.offset + src.length), encoded by codec.ts.
 * On a lossy wire with `keepRounded` the sender writes the decoded values back into `src`, so
 * the peer whose sum it is keeps exactly what the others receive (bitwise agreement); with
 * `feedback` (src's range of the error feedback buffer) it adds what the wire lost there.
 */
export function dataFrame(ids: ControlIds, at: DataFrameAt, src: Float32Array, keepRounded: boolean, feedback?: Float32Array): Uint8Array {
  const len = src.length;
  const frame = new Uint8Array(HEADER_BYTES + payloadBytes(at.dtype, len));
  writeHeader(frame, { kind: FrameKind.data, ...at, job: ids.job, generation: ids.generation, length: len });
  encodePayload(src, frame.subarray(HEADER_BYTES), at.dtype, { keepRounded, ...(feedback ? { feedback } : {}) });
  return frame;
}

export function heartbeatFrame(ids: ControlIds): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES);
  writeHeader(frame, { kind: FrameKind.heartbeat, phase: 0, dtype: 'f32', job: ids.job, generation: ids.generation, step: 0, chunk: 0, offset: 0, length: 0 });
  return frame;
}

/** The READY frame: the accepting end of a new connection hears it from now on (see the header). */
export function readyFrame(): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES);
  writeHeader(frame, { kind: FrameKind.ready, phase: 0, dtype: 'f32', job: 0, generation: 0, step: 0, chunk: 0, offset: 0, length: 0 });
  return frame;
}

/**
 * Whether `f` holds a whole header whose kind `accept` takes and whose magic is ours, reading
 * nothing else: for a link or a pool routing the frames that are theirs before any ring parses
 * them. The kind byte first: a data frame (nearly every frame) is told apart without a DataView.
 */
export function hasFrameKind(f: Uint8Array, accept: (kind: number) => boolean): boolean {
  if (f.byteLength < HEADER_BYTES || !accept(f[4] ?? 0)) return false;
  return new DataView(f.buffer, f.byteOffset, 4).getUint32(0, true) === MAGIC;
}

const isReadyKind = (kind: number) => kind === FrameKind.ready;

/** Whether `f` is a READY frame (a header alone, of its kind and magic; nothing else is read). */
export function isReadyFrame(f: Uint8Array): boolean {
  return f.byteLength === HEADER_BYTES && hasFrameKind(f, isReadyKind);
}

/** What an ABORT frame says: which peer is blamed and what the sender saw. */
export interface AbortNotice { peerId: string; kind: string; detail: string }

export function abortFrame(ids: ControlIds, notice: AbortNotice): Uint8Array {
  const body = new TextEncoder().encode(JSON.stringify(notice)).subarray(0, MAX_FRAME_BYTES - HEADER_BYTES);
  const frame = new Uint8Array(HEADER_BYTES + body.byteLength);
  writeHeader(frame, {
    kind: FrameKind.abort, phase: 0, dtype: 'f32', job: ids.job, generation: ids.generation, step: 0, chunk: 0, offset: 0, length: body.byteLength,
  });
  frame.set(body, HEADER_BYTES);
  return frame;
}

export function parseAbort(frame: Uint8Array): AbortNotice | null {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(frame.subarray(HEADER_BYTES)));
  } catch (e) {
    if (e instanceof SyntaxError) return null; // malformed JSON: the caller reports a bad frame
    throw e;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { peerId, kind, detail } = value as Record<string, unknown>;
  if (typeof peerId !== 'string' || typeof kind !== 'string' || typeof detail !== 'string') return null;
  return { peerId, kind, detail };
}

/**
 * The shape of one collective as its sender sees it. Every peer of a ring must agree on it
 * (apart from rank): a receiver compares it with its own before any data frame is read, so a
 * disagreement is named for what it is rather than surfacing as an out-of-order chunk.
 */
export interface CollectivePlan { ringSize: number; rank: number; length: number; segElems: number }

const PLAN_FIELDS = ['ringSize', 'rank', 'length', 'segElems'] as const;
const PLAN_BYTES = 4 * PLAN_FIELDS.length;

/** The PLAN frame that opens a collective (`step`, `dtype`) on the link to next. */
export function planFrame(ids: ControlIds, step: number, dtype: WireFormat, plan: CollectivePlan): Uint8Array {
  const frame = new Uint8Array(HEADER_BYTES + PLAN_BYTES);
  writeHeader(frame, { kind: FrameKind.plan, phase: 0, dtype, job: ids.job, generation: ids.generation, step, chunk: 0, offset: 0, length: PLAN_BYTES });
  const v = new DataView(frame.buffer, frame.byteOffset + HEADER_BYTES, PLAN_BYTES);
  PLAN_FIELDS.forEach((k, i) => v.setUint32(4 * i, plan[k], true));
  return frame;
}

/** The plan a PLAN frame carries, or null when its payload is not one (parseFrame checked its size). */
export function parsePlan(frame: Uint8Array): CollectivePlan | null {
  if (frame.byteLength !== HEADER_BYTES + PLAN_BYTES) return null;
  const v = new DataView(frame.buffer, frame.byteOffset + HEADER_BYTES, PLAN_BYTES);
  const u = (i: number): number => v.getUint32(4 * i, true);
  return { ringSize: u(0), rank: u(1), length: u(2), segElems: u(3) };
}

/** Bytes of a PLAN frame on the wire. */
export const PLAN_FRAME_BYTES = HEADER_BYTES + PLAN_BYTES;

/** What a reuse-handshake frame says: the step, and which ring of which generation it is for. */
export interface ReuseNotice { kind: ReuseKind; job: number; generation: number; tag: string }

export function reuseFrame(n: ReuseNotice): Uint8Array {
  const tag = new TextEncoder().encode(n.tag);
  const frame = new Uint8Array(HEADER_BYTES + tag.byteLength);
  writeHeader(frame, { kind: n.kind, phase: 0, dtype: 'f32', job: n.job, generation: n.generation, step: 0, chunk: 0, offset: 0, length: tag.byteLength });
  frame.set(tag, HEADER_BYTES);
  return frame;
}

/** The notice a reuse-handshake frame carries, or null when it is not a well-formed one. */
export function parseReuse(frame: Uint8Array): ReuseNotice | null {
  const p = parseFrame(frame);
  if (!p.ok || !isReuseKind(p.header.kind)) return null;
  const tag = new TextDecoder().decode(frame.subarray(HEADER_BYTES));
  if (tag !== '' && !isRingTag(tag)) return null;
  return { kind: p.header.kind, job: p.header.job, generation: p.header.generation, tag };
}
