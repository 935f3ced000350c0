// The hop records of a ring all-reduce (src/comm/hop-record.ts), over in-memory links: what each
// member received and sent, element by element, against what its neighbours recorded and against
// its own input, on both exact and rounding wires, awkward lengths and several buckets.
import { describe, expect, it } from 'vitest';
import { allReduceSum, memoryRing } from '../../src/comm/index.ts';
import { HopRecord } from '../../src/comm/hop-record.ts';
import type { WireFormat } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad } from './helpers.ts';
import { reduceWithHops } from './hop-helpers.ts';

/** Rounds like the wire: the value a frame of `wire` carries for x. */
function onWire(x: number, wire: WireFormat): number {
  const f = Math.fround(x);
  if (wire === 'f32') return f;
  const b = new Float32Array([f]);
  const u = new Uint32Array(b.buffer);
  if (wire === 'bf16') {
    u[0] = ((u[0]! + 0x7fff + ((u[0]! >>> 16) & 1)) >>> 16) << 16;
    return b[0]!;
  }
  throw new Error(`no rounding model for ${wire}`);
}

describe('hop records of a ring all-reduce', () => {
  for (const wire of ['f32', 'bf16'] as const) {
    for (const n of [2, 3, 5]) {
      it(`${wire} wire, ring of ${n}: links agree bit for bit, each member sent what it received plus its input, the owned chunks tile the sum`, async () => {
        for (const [length, buckets] of [[1, 1], [n - 1, 1], [7 * n + 3, 2], [4_099, 3]] as const) {
          if (length === 0) continue;
          const inputs = Array.from({ length: n }, (_, i) => randomGrad(length, 31 * i + length + n));
          const { outs, hops } = await reduceWithHops(inputs, wire, buckets);
          for (let r = 0; r < n; r++) {
            const h = hops[r]!;
            const next = hops[(r + 1) % n]!;
            expect(bitwiseEqual(h.forwarded, next.received), `forwarded ${r} -> received ${(r + 1) % n}, length ${length}`).toBe(true);
            expect(bitwiseEqual(h.gatherOut, next.gatherIn), `all-gather ${r} -> ${(r + 1) % n}, length ${length}`).toBe(true);
            const mask = (ranges: [number, number][]) => {
              const m = new Uint8Array(length);
              for (const [a, b] of ranges) m.fill(1, a, b);
              return m;
            };
            const owned = mask(h.ownedRanges);
            // The first chunk received is prev's own, the last next's (in a ring of 2 they are one).
            expect(mask(h.firstRanges)).toEqual(mask(hops[(r + n - 1) % n]!.ownedRanges));
            expect(mask(h.lastRanges)).toEqual(mask(next.ownedRanges));
            const last = mask(h.lastRanges);
            for (let j = 0; j < length; j++) {
              // Every element is either forwarded or owned; what went out is what came in plus the input, rounded once by each add and wire.
              const out = owned[j] ? h.gatherOut[j]! : h.forwarded[j]!;
              if (owned[j]) expect(h.forwarded[j]).toBe(0);
              expect(out).toBe(onWire(h.received[j]! + inputs[r]![j]!, wire));
              if (owned[j]) expect(out).toBe(outs[r]![j]);
              // The all-gather: every other chunk's sum received as it ends up; all but the last relayed bit for bit.
              else {
                expect(h.gatherIn[j]).toBe(outs[r]![j]);
                expect(h.gatherOut[j]).toBe(last[j] ? 0 : h.gatherIn[j]);
              }
            }
          }
          // Each element is owned by exactly one member.
          const owners = new Int32Array(length);
          for (const h of hops) for (const [a, b] of h.ownedRanges) for (let j = a; j < b; j++) owners[j]!++;
          expect([...owners].every((c) => c === 1)).toBe(true);
        }
      });
    }
  }

  it('a record reset after a step records the next as a new one would, bit for bit (the volunteer reuses them)', async () => {
    const length = 4_099;
    const first = Array.from({ length: 3 }, (_, i) => randomGrad(length, 7 + i));
    const second = Array.from({ length: 3 }, (_, i) => randomGrad(length, 70 + i));
    const used = (await reduceWithHops(first, 'f32', 3)).hops;
    for (const h of used) h.reset();
    const again = await reduceWithHops(second, 'f32', 2, undefined, [], used);
    const fresh = await reduceWithHops(second, 'f32', 2);
    for (let r = 0; r < 3; r++) {
      const [a, b] = [again.hops[r]!, fresh.hops[r]!];
      expect(a).toBe(used[r]);
      for (const k of ['received', 'forwarded', 'gatherOut', 'gatherIn'] as const) expect(bitwiseEqual(a[k], b[k]), `${k} of member ${r}`).toBe(true);
      for (const k of ['ownedRanges', 'firstRanges', 'lastRanges'] as const) expect(a[k]).toEqual(b[k]);
    }
  });

  it('refuses records of another length', async () => {
    const { rings } = memoryRing(['a', 'b']);
    try {
      const h = new HopRecord(5);
      await expect(allReduceSum(new Float32Array(4), { ring: rings[0]!, step: 0, hops: h.view(0, 5) })).rejects.toThrow(/hop records are not as long/);
      expect(() => h.view(2, 7)).toThrow(/outside a record of 5/);
    } finally {
      for (const r of rings) r.close();
    }
  });
});
