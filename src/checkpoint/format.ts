// The checkpoint file format (.vtck): everything a peer needs to enter a ring at a step.
// Shared by the coordinator (checkpoint store) and the volunteers (upload, load); no Node APIs.
//
//   offset  size  field (little-endian)
//        0     4  magic "VTCK"
//        4     4  u32 format version (1)
//        8     4  u32 H: bytes of the header JSON, padded with spaces to a multiple of 4
//       12     4  u32 reserved (0)
//       16     8  u64 P: payload bytes
//       24    32  sha256 of bytes [56, 56 + H + P): header JSON and payload
//       56     H  header JSON (UTF-8): { step, generation, fingerprint, metadata,
//                 tensors: [{ name, offset, length }] }, offset in bytes from the payload
//                 start (4-aligned), length in float32 elements
//  56 + H      P  payload: the tensors' float32 values, back to back
//
// Tensor names: 'weights' (the flat parameter buffer), 'bn-state' (running statistics) and
// 'optim/<name>' for each optimiser state tensor (e.g. 'optim/momentum'). The fixed prefix is
// 56 bytes and H is a multiple of 4, so the payload is 4-aligned and read without copying.
// The file's length must be exactly 56 + H + P: a cut-off or padded file is refused before
// its hash is even computed.
import { newSha256, sha256Hex, toHex } from './sha256.ts';

export const MAGIC = 0x4b435456; // 'VTCK' as a little-endian u32
export const FORMAT_VERSION = 1;
export const PREFIX_BYTES = 56;
/** A header this large is not ours (ours are a few hundred bytes plus metadata). */
const MAX_HEADER_BYTES = 1 << 20;

export interface Checkpoint {
  step: number;
  generation: number;
  /** Model and layout fingerprint (layoutFingerprint): a peer refuses weights of another model. */
  fingerprint: string;
  weights: Float32Array;
  bnState: Float32Array;
  /** Optimiser state by name (e.g. momentum), each with the parameter layout. */
  optimizer: Record<string, Float32Array>;
  /** Free-form JSON (job name, loss, time): stored, not interpreted. */
  metadata: Record<string, unknown>;
}

export class CheckpointError extends Error {
  readonly kind = 'corrupt-checkpoint';
  constructor(what: string, detail: string) {
    super(`checkpoint ${what} is unusable: ${detail}; it is skipped (an older checkpoint is used if there is one).`);
    this.name = 'CheckpointError';
  }
}

interface TensorEntry { name: string; offset: number; length: number }
interface Header { step: number; generation: number; fingerprint: string; metadata: Record<string, unknown>; tensors: TensorEntry[] }

function tensorsOf(c: Checkpoint): [string, Float32Array][] {
  return [['weights', c.weights], ['bn-state', c.bnState], ...Object.entries(c.optimizer).map(([k, v]): [string, Float32Array] => [`optim/${k}`, v])];
}

const bytesOf = (a: Float32Array): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** The file as a list of chunks (written in turn, so a 244 MB model is never copied whole). */
export function encodeCheckpoint(c: Checkpoint): Uint8Array[] {
  const tensors = tensorsOf(c);
  let offset = 0;
  const entries = tensors.map(([name, a]) => {
    const e = { name, offset, length: a.length };
    offset += a.byteLength;
    return e;
  });
  const header: Header = { step: c.step, generation: c.generation, fingerprint: c.fingerprint, metadata: c.metadata, tensors: entries };
  let headerBytes = new TextEncoder().encode(JSON.stringify(header));
  const padded = new Uint8Array(Math.ceil(headerBytes.length / 4) * 4).fill(0x20);
  padded.set(headerBytes);
  headerBytes = padded;
  const hash = newSha256().update(headerBytes);
  for (const [, a] of tensors) hash.update(bytesOf(a));
  const prefix = new Uint8Array(PREFIX_BYTES);
  const v = new DataView(prefix.buffer);
  v.setUint32(0, MAGIC, true);
  v.setUint32(4, FORMAT_VERSION, true);
  v.setUint32(8, headerBytes.byteLength, true);
  v.setBigUint64(16, BigInt(offset), true);
  prefix.set(hash.digest(), 24);
  return [prefix, headerBytes, ...tensors.map(([, a]) => bytesOf(a))];
}

/** The sha256 (hex) a file's prefix records. */
export function recordedSha256(file: Uint8Array): string {
  return toHex(file.subarray(24, PREFIX_BYTES));
}

/** Checks length, hash and header; throws CheckpointError naming `what` (usually the path). */
export function decodeCheckpoint(file: Uint8Array, what: string): Checkpoint {
  const fail = (detail: string): never => {
    throw new CheckpointError(what, detail);
  };
  if (file.byteLength < PREFIX_BYTES) fail(`${file.byteLength} bytes, shorter than the ${PREFIX_BYTES}-byte prefix (a cut-off write?)`);
  const v = new DataView(file.buffer, file.byteOffset, PREFIX_BYTES);
  if (v.getUint32(0, true) !== MAGIC) fail('not a .vtck file (bad magic)');
  if (v.getUint32(4, true) !== FORMAT_VERSION) fail(`format version ${v.getUint32(4, true)}, this coordinator reads ${FORMAT_VERSION}`);
  if (v.getUint32(12, true) !== 0) fail('reserved prefix bytes are not 0 (damaged, or a newer format)');
  const h = v.getUint32(8, true);
  const p = v.getBigUint64(16, true);
  if (h > MAX_HEADER_BYTES || h % 4 !== 0) fail(`header length ${h} is not plausible`);
  const expected = BigInt(PREFIX_BYTES + h) + p;
  if (BigInt(file.byteLength) !== expected) fail(`${file.byteLength} bytes, the prefix says ${expected} (a cut-off write?)`);
  const digest = sha256Hex(file.subarray(PREFIX_BYTES));
  if (digest !== recordedSha256(file)) fail('sha256 mismatch (the file was damaged after it was written)');
  let header: Header;
  try {
    header = JSON.parse(new TextDecoder().decode(file.subarray(PREFIX_BYTES, PREFIX_BYTES + h))) as Header;
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    return fail(`header is not JSON (${e.message})`);
  }
  // The hash only proves the file is unchanged since it was written, and peers will upload
  // these: the header is checked like any untrusted input.
  if (typeof header !== 'object' || header === null || !Array.isArray(header.tensors)) return fail('header has no tensor list');
  const payload = file.subarray(PREFIX_BYTES + h);
  const tensors = new Map<string, Float32Array>();
  for (const t of header.tensors as unknown[] as TensorEntry[]) {
    const ok = typeof t === 'object' && t !== null && typeof t.name === 'string' && Number.isInteger(t.offset) && Number.isInteger(t.length)
      && t.offset >= 0 && t.length >= 0 && t.offset % 4 === 0 && t.offset + 4 * t.length <= payload.byteLength;
    if (!ok) fail(`tensor entry ${JSON.stringify(t).slice(0, 80)} is outside the payload`);
    const start = payload.byteOffset + t.offset;
    // Aligned (always, for files read whole): a view; otherwise a copy.
    tensors.set(t.name, start % 4 === 0
      ? new Float32Array(payload.buffer, start, t.length)
      : new Float32Array(payload.slice(t.offset, t.offset + 4 * t.length).buffer));
  }
  const weights = tensors.get('weights');
  const bnState = tensors.get('bn-state');
  if (!weights || !bnState) return fail('the weights or BN state tensor is missing');
  if (!Number.isInteger(header.step) || !Number.isInteger(header.generation) || typeof header.fingerprint !== 'string') {
    fail('header step, generation or fingerprint is missing');
  }
  const optimizer: Record<string, Float32Array> = {};
  for (const [name, a] of tensors) if (name.startsWith('optim/')) optimizer[name.slice(6)] = a;
  const metadata = typeof header.metadata === 'object' && header.metadata !== null ? header.metadata : {};
  return { step: header.step, generation: header.generation, fingerprint: header.fingerprint, weights, bnState, optimizer, metadata };
}

/** A short digest of what makes weights interchangeable: the model and its buffer layout. */
export function layoutFingerprint(model: string, layout: {
  params: readonly { name: string; offset: number; length: number }[]; state: readonly { name: string; offset: number; length: number }[];
  paramFloats: number; stateFloats: number;
}): string {
  const parts = [
    model, layout.paramFloats, layout.stateFloats,
    ...layout.params.map((p) => `${p.name}@${p.offset}+${p.length}`), ...layout.state.map((s) => `${s.name}@${s.offset}+${s.length}`),
  ];
  return `${model}:${sha256Hex(new TextEncoder().encode(parts.join('\n'))).slice(0, 16)}`;
}
