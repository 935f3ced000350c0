// Hearings (protocol 15; coordinator/audits.ts hearingVerdict, hop-check.ts): a member that relays
// the all-gather's sums changed makes the members after it hold other weights than those before
// it, so a checksum vote would evict honest members. Each member's records, the relays included,
// sketched under a seed drawn after the step, say who changed what it passed on. On the records
// of real ring all-reduces over memory links, exact and rounding wires.
import { describe, expect, it } from 'vitest';
import { AuditBook } from '../../coordinator/audits.ts';
import { hopCheck } from '../../coordinator/hop-check.ts';
import { namingPartners } from '../../coordinator/hop-evidence.ts';
import type { RelayTamper } from '../../src/comm/hop-record.ts';
import type { WireFormat } from '../../src/protocol/frames.ts';
import type { HopSketchesMessage } from '../../src/protocol/messages.ts';
import { makeRng } from '../../src/rng.ts';
import { disguiseRelays } from '../../src/trust/adversary.ts';
import { relayHopReport, sketchHops, sketchRelays, sketchReport } from '../../src/trust/hop-sketch.ts';
import { sketch } from '../../src/trust/sketch.ts';
import { bitwiseEqual } from '../comm/helpers.ts';
import { reduceWithHops } from '../comm/hop-helpers.ts';

const flip: RelayTamper = (p) => {
  for (let i = 0; i < p.length; i++) p[i] = -p[i]!;
};

/** Members' gradients and the records of their ring all-reduce (2 buckets) when `tamperers` relay sign-flipped sums. */
async function relayStep(ids: readonly string[], tamperers: ReadonlySet<string>, o: { disguise?: boolean; wire?: WireFormat; seed?: number } = {}) {
  const rng = makeRng(o.seed ?? 5);
  const length = 2003;
  const mean = Float32Array.from({ length }, () => rng.normal());
  const kept = ids.map(() => mean.map((m) => m + 3 * rng.normal()));
  const tampers = ids.map((id) => (tamperers.has(id) ? flip : null));
  const { outs, hops } = await reduceWithHops(kept, o.wire ?? 'f32', 2, undefined, tampers);
  if (o.disguise ?? true) ids.forEach((id, i) => { if (tamperers.has(id)) disguiseRelays(hops[i]!); });
  return { kept, outs, hops };
}

const sketched = (s: Awaited<ReturnType<typeof relayStep>>, seed: number) => s.hops.map((h) => ({ ...sketchHops(h, seed), ...sketchRelays(h, seed) }));

function replies(ids: readonly string[], s: Awaited<ReturnType<typeof relayStep>>, seed: number): HopSketchesMessage[] {
  return ids.map((peerId, i) => ({
    type: 'hop-sketches', peerId, generation: 1, step: 0, sketch: sketchReport(sketch(s.kept[i]!, seed)), hops: relayHopReport(s.hops[i]!, seed),
  }));
}

describe('the relays of the all-gather', () => {
  for (const wire of ['f32', 'bf16'] as const) {
    it(`${wire} wire: honest rings of 2 to 6 relay bit for bit; every check of a hearing passes`, async () => {
      for (let n = 2; n <= 6; n++) {
        const ids = Array.from({ length: n }, (_, i) => `p${i}`);
        const s = await relayStep(ids, new Set(), { wire, seed: n });
        const seed = 1000 + n;
        const v = hopCheck(s.kept.map((g) => sketch(g, seed)), sketched(s, seed), wire);
        expect(v, `ring of ${n}`).toEqual({ local: [], relays: [], links: [] });
        for (const out of s.outs) expect(bitwiseEqual(out, s.outs[0]!)).toBe(true);
      }
    });
  }

  it('a relay tamperer leaves its own sums as the ring\'s but its successor\'s not; told, it fails its relay check, disguised its link', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    for (const wire of ['f32', 'bf16'] as const) {
      const honest = await relayStep(ids, new Set(), { wire });
      const told = await relayStep(ids, new Set(['c']), { wire, disguise: false });
      expect(bitwiseEqual(told.outs[2]!, honest.outs[2]!), 'the tamperer holds the ring\'s sum').toBe(true);
      expect(bitwiseEqual(told.outs[3]!, honest.outs[3]!), 'its successor does not').toBe(false);
      // What the others hold tells nothing by itself: its successor differs from it just as a member lying about its checksum would.
      const v = hopCheck(told.kept.map((g) => sketch(g, 77)), sketched(told, 77), wire);
      expect(v).toEqual({ local: [], relays: [2], links: [] });
      const disguised = await relayStep(ids, new Set(['c']), { wire });
      const w = hopCheck(disguised.kept.map((g) => sketch(g, 78)), sketched(disguised, 78), wire);
      expect(w).toEqual({ local: [], relays: [], links: [2] });
    }
  });

  it('a disguised relay tamperer in rings of 3 to 8 is named by hearings within HOP_COLLUDERS + 1 attempts and evicted alone', async () => {
    for (let n = 3; n <= 8; n++) {
      const rng = makeRng(40 + n);
      const book = new AuditBook(0, 'f32', (k) => rng.int(k), false);
      let ring = Array.from({ length: n }, (_, i) => `p${i}`);
      let attempts = 0;
      for (;;) {
        attempts++;
        const seed = rng.int(2 ** 31);
        const v = book.hearingVerdict(0, ring, replies(ring, await relayStep(ring, new Set(['p2']), { seed: attempts }), seed), seed);
        expect(v, `ring of ${n}, attempt ${attempts}`).not.toBeNull();
        if (v!.kind === 'evict') {
          expect(v!.ids).toEqual(['p2']);
          break;
        }
        expect(v!.kind).toBe('again');
        if (v!.kind !== 'again') break;
        ring = v!.order;
      }
      expect(attempts, `ring of ${n}`).toBe(namingPartners(n));
    }
  });

  it('a tamperer whose records tell what it relayed is evicted at its first hearing; where every record agrees the hearing finds nobody', async () => {
    const ring = ['a', 'b', 'c', 'd'];
    const book = new AuditBook(0, 'f32', undefined, false);
    const told = book.hearingVerdict(0, ring, replies(ring, await relayStep(ring, new Set(['b']), { disguise: false }), 99), 99);
    expect(told).toMatchObject({ kind: 'evict', ids: ['b'] });
    expect(told!.reason).toMatch(/what it relayed in the all-gather of step 1 is not what it received/);
    // An honest ring's records (a member that reports a false checksum changes none of them): nothing to name.
    expect(book.hearingVerdict(1, ring, replies(ring, await relayStep(ring, new Set()), 7), 7)).toBeNull();
  });
});
