// The step loop's face on the rings of a generation (src/client/step-rings.ts): the two-level
// rings over memory links sum like the flat ring (every peer the same bits, the right total),
// each peer's sentBytes is what it really put on its links, and the group ring waits longer
// than the column it waits for. A job's half-precision wire (f16, bf16) reaches every collective
// of both kinds of rings: the same bits everywhere, the sum to 16-bit rounding, half the bytes.
import { afterEach, describe, expect, it } from 'vitest';
import { memoryTwoLevel, planTopology } from '../../src/comm/index.ts';
import type { Link, LinkEvents } from '../../src/comm/link.ts';
import type { MemoryLink } from '../../src/comm/memory-link.ts';
import { DEFAULT_RING_SETTINGS } from '../../src/comm/ring.ts';
import { FrameKind, parseFrame, WIRE_FORMATS, type WireFormat } from '../../src/protocol/frames.ts';
import { GROUP_STALL_FACTOR, flatStepRings, groupSettings, twoLevelStepRings, type StepRings } from '../../src/client/step-rings.ts';
import { bitwiseEqual, randomGrad, sum64, worstError, wrappedFlatRing } from './helpers.ts';

/** A link end that counts the bytes of every frame but heartbeats it sends, per sending peer. */
class Counted implements Link {
  constructor(private readonly inner: MemoryLink, private readonly self: string, private readonly sent: Map<string, number>) {}
  get remoteId(): string { return this.inner.remoteId; }
  get bufferedAmount(): number { return this.inner.bufferedAmount; }
  get closed(): boolean { return this.inner.closed; }
  setLowWater(bytes: number): void { this.inner.setLowWater(bytes); }
  send(data: Uint8Array): void {
    const p = parseFrame(data);
    if (!p.ok || p.header.kind !== FrameKind.heartbeat) this.sent.set(this.self, (this.sent.get(this.self) ?? 0) + data.byteLength);
    this.inner.send(data);
  }
  listen(events: LinkEvents): void { this.inner.listen(events); }
  close(): void { this.inner.close(); }
}

const open: StepRings[] = [];
afterEach(() => { for (const r of open.splice(0)) r.close(); });

/** Worst relative error of n adds on a wire: float32's, or one 16-bit rounding per hop (the int8 wire: see below). */
const bound = (wire: WireFormat, n: number): number => n * (wire === 'f32' ? 2 ** -23 : wire === 'f16' ? 2 ** -10 : 2 ** -7);

/**
 * The int8 wire rounds each frame to its largest value over 127, so its error is bounded against
 * the largest partial sum, not each element's own: at most n + 1 roundings (the two-level ring's
 * all-gather rounds the column's sum once more to its own frames) of M / 127, M = max sum |x_i|.
 */
function int8Error(got: Float32Array, inputs: readonly Float32Array[]): number {
  const want = sum64(inputs);
  let m = 0, worst = 0;
  for (let j = 0; j < got.length; j++) {
    m = Math.max(m, inputs.reduce((a, g) => a + Math.abs(g[j]!), 0));
    worst = Math.max(worst, Math.abs(got[j]! - want[j]!));
  }
  return (worst / m) * 127;
}

/** Sums one random gradient per ring; checks the same bits everywhere, the sum, onFirstFrame and sentBytes as counted. */
async function sumOver(rings: StepRings[], ids: readonly string[], sent: ReadonlyMap<string, number>, length: number, wire: WireFormat): Promise<void> {
  open.push(...rings);
  const n = rings.length;
  expect(rings.map((r) => r.size)).toEqual(rings.map(() => n));
  const inputs = rings.map((_, i) => randomGrad(length, 11 * i + n));
  const outs = inputs.map((g) => g.slice());
  let first = 0;
  await Promise.all(rings.map((r, i) => r.allReduce(outs[i]!, { step: 3, maxRms: Number.POSITIVE_INFINITY, onFirstFrame: () => { first++; } })));
  for (const g of outs.slice(1)) expect(bitwiseEqual(g, outs[0]!)).toBe(true);
  if (wire === 'i8') {
    expect(int8Error(outs[0]!, inputs), 'int8 roundings of the largest partial sum').toBeLessThanOrEqual(n + 1);
  } else {
    const err = worstError(outs[0]!, sum64(inputs), inputs);
    expect(err.rel, `worst at ${err.index}`).toBeLessThanOrEqual(bound(wire, n));
  }
  expect(first, 'onFirstFrame once per peer').toBe(n);
  ids.forEach((id, i) => expect(rings[i]!.sentBytes(length), id).toBe(sent.get(id) ?? 0));
}

describe('two-level step rings', () => {
  for (const [n, length] of [[5, 1000], [4, 4099], [3, 77]] as const) {
    it(`${n} peers, ${length} floats: the same bits everywhere, the sum, and sentBytes as counted on the links`, async () => {
      const topology = planTopology(Array.from({ length: n }, (_, i) => ({ id: `p${i}` })), { minTwoLevel: 2 });
      expect(topology.groups.length).toBe(2);
      const sent = new Map<string, number>();
      const { peers } = memoryTwoLevel(topology, { wrap: (l, self) => new Counted(l, self, sent) });
      await sumOver([...peers.values()].map((p) => twoLevelStepRings(p)), [...peers.keys()], sent, length, 'f32');
    });
  }

  it('the group ring stalls only after GROUP_STALL_FACTOR times the column\'s timeout', () => {
    expect(groupSettings({ stallTimeoutMs: 120_000, deadAfterMs: 9 })).toEqual({ stallTimeoutMs: GROUP_STALL_FACTOR * 120_000, deadAfterMs: 9 });
    expect(groupSettings({}).stallTimeoutMs).toBe(GROUP_STALL_FACTOR * DEFAULT_RING_SETTINGS.stallTimeoutMs);
    expect(GROUP_STALL_FACTOR).toBeGreaterThan(1);
  });
});

describe('the job\'s wire format on step rings', () => {
  const length = 4099;
  const ids = ['p0', 'p1', 'p2', 'p3'];
  const flat = (wire: WireFormat, sent: Map<string, number>) =>
    wrappedFlatRing(ids, (l, self) => new Counted(l, self, sent)).map((r) => flatStepRings(r, wire));
  const twoLevel = (wire: WireFormat, sent: Map<string, number>) => {
    const topology = planTopology(ids.map((id) => ({ id })), { minTwoLevel: 2 });
    const { peers } = memoryTwoLevel(topology, { wrap: (l, self) => new Counted(l, self, sent) });
    return ids.map((id) => twoLevelStepRings(peers.get(id)!, wire));
  };
  for (const [kind, make] of [['flat', flat], ['two-level', twoLevel]] as const) {
    for (const wire of WIRE_FORMATS.filter((w) => w !== 'f32')) {
      // Half the payload on f16 and bf16, a quarter on i8 (its scale per frame included); the frame headers on top.
      const share = wire === 'i8' ? 0.25 : 0.5;
      it(`${kind}, ${wire}: the same bits everywhere, the sum to ${wire} rounding, sentBytes as counted and about ${share} of f32's`, async () => {
        const sent = new Map<string, number>();
        const rings = make(wire, sent);
        expect(rings.every((r) => r.shape.endsWith(`, ${wire} wire`)), rings[0]!.shape).toBe(true);
        await sumOver(rings, ids, sent, length, wire);
        const f32 = make('f32', new Map());
        open.push(...f32);
        expect(f32.every((r) => !r.shape.includes('wire'))).toBe(true);
        rings.forEach((r, i) => {
          const ratio = r.sentBytes(length) / f32[i]!.sentBytes(length);
          expect(ratio).toBeGreaterThan(share);
          expect(ratio, `${ids[i]}: headers only on top of ${share} of the payload`).toBeLessThan(share + 0.02);
        });
      });
    }
  }
});
