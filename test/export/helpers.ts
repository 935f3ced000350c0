// Shared by the export tests: models with random weights and non-trivial BN statistics, our
// engine's inference forward, ONNX Runtime's, and a minimal protobuf READER that pulls
// metadata_props out of a file (so the metadata is checked without trusting our writer).
import { InferenceSession, Tensor } from 'onnxruntime-node';
import type { ModelSpec } from '../../src/nn/graph.ts';
import { type Layout, initParams, initState } from '../../src/nn/layout.ts';
import { Model } from '../../src/nn/model.ts';
import { makeRng } from '../../src/rng.ts';
import type { WasmEngine } from '../../src/wasm/engine.ts';

/**
 * He-initialised weights, then biases ~ N(0, 0.1), BN gamma in [0.5, 1.5), beta ~ N(0, 0.2);
 * running means ~ N(0, 0.2) and variances in [0.5, 2): nothing the export could get away with
 * ignoring (a BN exported as identity, or with swapped mean/var, fails the comparison).
 */
export function randomTrained(layout: Layout, seed: number): { weights: Float32Array; bnState: Float32Array } {
  const rng = makeRng(seed);
  const weights = initParams(layout, seed);
  for (const p of layout.params) {
    const v = weights.subarray(p.offset, p.offset + p.length);
    if (p.role === 'bias') v.forEach((_, i) => (v[i] = 0.1 * rng.normal()));
    else if (p.role === 'bn-gamma') v.forEach((_, i) => (v[i] = 0.5 + rng.next()));
    else if (p.role === 'bn-beta') v.forEach((_, i) => (v[i] = 0.2 * rng.normal()));
  }
  const bnState = initState(layout);
  for (const s of layout.state) {
    const v = bnState.subarray(s.offset, s.offset + s.length);
    v.forEach((_, i) => (v[i] = s.role === 'running-mean' ? 0.2 * rng.normal() : 0.5 + 1.5 * rng.next()));
  }
  return { weights, bnState };
}

/** Logits of our engine's inference-mode forward (BN from running statistics, no dropout). */
export async function engineLogits(
  engine: WasmEngine, spec: ModelSpec, weights: Float32Array, bnState: Float32Array, x: Float32Array, batch: number,
): Promise<Float32Array> {
  const model = new Model(engine, spec, { weights });
  try {
    engine.write(model.state, bnState);
    const xt = engine.upload(x, [batch, ...spec.input]);
    const y = model.forward(xt, { train: false });
    const logits = await engine.readF32(y);
    engine.release(xt);
    return logits;
  } finally {
    model.destroy();
  }
}

export async function ortLogits(session: InferenceSession, spec: ModelSpec, x: Float32Array, batch: number): Promise<Float32Array> {
  const out = await session.run({ input: new Tensor('float32', x, [batch, ...spec.input]) });
  const logits = out.logits;
  if (!logits || logits.type !== 'float32') throw new Error('the ONNX model has no float32 "logits" output');
  expectDims(logits.dims, [batch, spec.classes]);
  return logits.data as Float32Array;
}

function expectDims(got: readonly number[], want: readonly number[]): void {
  if (got.length !== want.length || got.some((d, i) => d !== want[i])) throw new Error(`logits are [${got}], expected [${want}]`);
}

/** max |a - b| / max |b|: the error relative to the logits' scale (never vacuous: b must vary). */
export function relativeDifference(a: Float32Array, b: Float32Array): { rel: number; maxAbs: number; scale: number } {
  if (a.length !== b.length) throw new Error(`lengths differ: ${a.length} vs ${b.length}`);
  let maxAbs = 0, scale = 0;
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i]!) || !Number.isFinite(b[i]!)) throw new Error(`non-finite logit at ${i}: ${a[i]} vs ${b[i]}`);
    maxAbs = Math.max(maxAbs, Math.abs(a[i]! - b[i]!));
    scale = Math.max(scale, Math.abs(b[i]!));
  }
  if (scale === 0) throw new Error('the logits are all zero: the comparison would say nothing');
  return { rel: maxAbs / scale, maxAbs, scale };
}

// --- a protobuf reader, just enough for ModelProto.metadata_props (field 14) -------------

interface Field { field: number; wire: number; value: number | Uint8Array }

function* fields(b: Uint8Array): Generator<Field> {
  let i = 0;
  const varint = (): number => {
    let v = 0, mul = 1, byte: number;
    do {
      byte = b[i++]!;
      v += (byte & 0x7f) * mul;
      mul *= 128;
    } while (byte & 0x80);
    return v;
  };
  while (i < b.length) {
    const tag = varint();
    const field = Math.floor(tag / 8), wire = tag % 8;
    if (wire === 0) yield { field, wire, value: varint() };
    else if (wire === 2) {
      const n = varint();
      yield { field, wire, value: b.subarray(i, i + n) };
      i += n;
    } else if (wire === 5) { yield { field, wire, value: b.subarray(i, i + 4) }; i += 4; }
    else if (wire === 1) { yield { field, wire, value: b.subarray(i, i + 8) }; i += 8; }
    else throw new Error(`protobuf wire type ${wire} at byte ${i}`);
  }
}

/** ModelProto's metadata_props, ir_version and opset, read from the file's bytes. */
export function readOnnxHeader(file: Uint8Array): { irVersion: number; opset: number; metadata: Map<string, string> } {
  const text = new TextDecoder();
  const metadata = new Map<string, string>();
  let irVersion = -1, opset = -1;
  for (const f of fields(file)) {
    if (f.field === 1 && f.wire === 0) irVersion = f.value as number;
    if (f.field === 8 && f.wire === 2) for (const g of fields(f.value as Uint8Array)) if (g.field === 2) opset = g.value as number;
    if (f.field === 14 && f.wire === 2) {
      let k = '', v = '';
      for (const g of fields(f.value as Uint8Array)) {
        if (g.field === 1) k = text.decode(g.value as Uint8Array);
        if (g.field === 2) v = text.decode(g.value as Uint8Array);
      }
      metadata.set(k, v);
    }
  }
  return { irVersion, opset, metadata };
}
