// The step loop's face on the rings of a generation (src/client/step-rings.ts): the two-level
// rings over memory links sum like the flat ring (every peer the same bits, the right total),
// each peer's sentBytes is what it really put on its links, and the group ring waits longer
// than the column it waits for.
import { afterEach, describe, expect, it } from 'vitest';
import { memoryTwoLevel, planTopology } from '../../src/comm/index.ts';
import type { Link, LinkEvents } from '../../src/comm/link.ts';
import type { MemoryLink } from '../../src/comm/memory-link.ts';
import { DEFAULT_RING_SETTINGS } from '../../src/comm/ring.ts';
import { FrameKind, parseFrame } from '../../src/comm/wire.ts';
import { GROUP_STALL_FACTOR, groupSettings, twoLevelStepRings, type StepRings } from '../../src/client/step-rings.ts';
import { bitwiseEqual, randomGrad, sum64, worstError } from './helpers.ts';

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

describe('two-level step rings', () => {
  for (const [n, length] of [[5, 1000], [4, 4099], [3, 77]] as const) {
    it(`${n} peers, ${length} floats: the same bits everywhere, the sum, and sentBytes as counted on the links`, async () => {
      const topology = planTopology(Array.from({ length: n }, (_, i) => ({ id: `p${i}` })), { minTwoLevel: 2 });
      expect(topology.groups.length).toBe(2);
      const sent = new Map<string, number>();
      const { peers } = memoryTwoLevel(topology, { wrap: (l, self) => new Counted(l, self, sent) });
      const rings = [...peers.values()].map(twoLevelStepRings);
      open.push(...rings);
      expect(rings.map((r) => r.size)).toEqual(rings.map(() => n));
      const inputs = rings.map((_, i) => randomGrad(length, 11 * i + n));
      const outs = inputs.map((g) => g.slice());
      let first = 0;
      await Promise.all(rings.map((r, i) => r.allReduce(outs[i]!, { step: 3, maxRms: Number.POSITIVE_INFINITY, onFirstFrame: () => { first++; } })));
      for (const g of outs.slice(1)) expect(bitwiseEqual(g, outs[0]!)).toBe(true);
      const err = worstError(outs[0]!, sum64(inputs), inputs);
      expect(err.rel, `worst at ${err.index}`).toBeLessThanOrEqual(n * 2 ** -23);
      expect(first, 'onFirstFrame once per peer').toBe(n);
      [...peers.keys()].forEach((id, i) => expect(rings[i]!.sentBytes(length), id).toBe(sent.get(id) ?? 0));
    });
  }

  it('the group ring stalls only after GROUP_STALL_FACTOR times the column\'s timeout', () => {
    expect(groupSettings({ stallTimeoutMs: 120_000, deadAfterMs: 9 })).toEqual({ stallTimeoutMs: GROUP_STALL_FACTOR * 120_000, deadAfterMs: 9 });
    expect(groupSettings({}).stallTimeoutMs).toBe(GROUP_STALL_FACTOR * DEFAULT_RING_SETTINGS.stallTimeoutMs);
    expect(GROUP_STALL_FACTOR).toBeGreaterThan(1);
  });
});
