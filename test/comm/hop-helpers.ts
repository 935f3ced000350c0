// A ring all-reduce over memory links whose members keep hop records (src/comm/hop-record.ts):
// for the hop record tests and the coordinator's hop checks.
import { allReduceSum, memoryRing } from '../../src/comm/index.ts';
import { HopRecord, type RelayTamper } from '../../src/comm/hop-record.ts';
import type { WireFormat } from '../../src/protocol/frames.ts';

/**
 * Reduces `inputs` over a memory ring in `buckets` collectives, each member keeping its hop record (`reuse[i]` where
 * given, else a new one); members whose `relayTampers` entry is set relay the all-gather's sums changed by it.
 */
export async function reduceWithHops(
  inputs: readonly Float32Array[], wire: WireFormat = 'f32', buckets = 1, messageBytes = 32 + 4 * 61, relayTampers: readonly (RelayTamper | null)[] = [],
  reuse: readonly HopRecord[] = [],
): Promise<{ outs: Float32Array[]; hops: HopRecord[] }> {
  const n = inputs.length;
  const length = inputs[0]!.length;
  const ids = inputs.map((_, i) => `p${i}`);
  const { rings } = memoryRing(ids);
  const outs = inputs.map((g) => g.slice());
  const hops = ids.map((_, i) => {
    const h = reuse[i] ?? new HopRecord(length);
    h.relayTamper = relayTampers[i] ?? null;
    return h;
  });
  const cuts = Array.from({ length: buckets + 1 }, (_, k) => Math.round((k * length) / buckets));
  try {
    for (let k = 0; k < buckets; k++) {
      const [a, b] = [cuts[k]!, cuts[k + 1]!];
      await Promise.all(rings.map((ring, i) => allReduceSum(outs[i]!.subarray(a, b), { ring, step: k, wire, messageBytes, hops: hops[i]!.view(a, b) })));
    }
  } finally {
    for (const r of rings) r.close();
  }
  if (rings.length !== n) throw new Error('a memory ring of the wrong size');
  return { outs, hops };
}

