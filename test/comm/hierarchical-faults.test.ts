// Faults in the two-level all-reduce (17 peers, groups 4+4+4+5, memory links): a peer that
// closes in the group reduce-scatter, in its column's all-reduce or in the group all-gather, a
// peer that vanishes without a word. Every other peer must end within a bounded time with the
// flat ring's RingError kinds, blaming that peer, its input restored, or (after the failure
// could no longer matter to it) with the exact sum: never a hang, never a wrong result.
import { afterEach, describe, expect, it } from 'vitest';
import {
  RingError, TwoLevelRings, allReduceTwoLevel, memoryTwoLevel, planTopology, roleOf, type MemoryTwoLevel, type RingSettings,
} from '../../src/comm/index.ts';
import { memoryRing } from '../../src/comm/memory-ring.ts';
import { FrameKind, Phase, parseFrame } from '../../src/protocol/frames.ts';
import { bitwiseEqual, randomGrad, twoLevelReference } from './helpers.ts';

const PEERS = Array.from({ length: 17 }, (_, i) => ({ id: `p${String(i).padStart(2, '0')}`, bandwidth: 100 - i }));
const T = planTopology(PEERS);
const LEN = 20_000;
const MSG = 32 + 4 * 100; // 100 floats a message: many chances to interrupt
const open: MemoryTwoLevel[] = [];
afterEach(() => { for (const m of open.splice(0)) for (const r of m.peers.values()) r.close(); });

type Where = 'groupPrev' | 'columnPrev';

/** What the receiver of the frame after a lost one says (the test of a frame lost on a group link). */
const LOST_FRAME = new RegExp(
  /this receiver was at chain step 0 of \d+, segment 2 \(2 frames in at this step, 2 in this phase\), /.source
  + /rank 2 of 4, 4 shards, 100 elements per frame; the frame is segment 3 of chain step 0/.source,
);

/** Runs one step; when `victim` has received `after` data frames of `phase` on `where`, applies `fault`. */
async function runWithFault(
  victim: string, where: Where, phase: Phase, after: number, fault: (m: MemoryTwoLevel) => void, settings: Partial<RingSettings> = {},
) {
  const m = memoryTwoLevel(T, { settings });
  open.push(m);
  const inputs = new Map([...m.peers.keys()].map((id, i) => [id, randomGrad(LEN, i + 1)]));
  const outs = new Map([...inputs].map(([id, g]) => [id, g.slice()]));
  let seen = 0;
  let fired = false;
  const link = m.links.get(victim)?.[where];
  if (!link) throw new Error(`${victim} has no ${where} link`);
  link.onReceive = (f) => {
    const p = parseFrame(f);
    if (fired || !p.ok || p.header.kind !== FrameKind.data || p.header.phase !== phase) return;
    if (++seen === after) {
      fired = true;
      fault(m);
    }
  };
  const t0 = Date.now();
  const settled = await Promise.allSettled(
    [...m.peers].map(([id, rings]) => allReduceTwoLevel(outs.get(id)!, { rings, step: 4, messageBytes: MSG, keepInput: true })),
  );
  const ms = Date.now() - t0;
  expect(fired, 'the fault was injected').toBe(true);
  const ids = [...m.peers.keys()];
  return { ids, settled, inputs, outs, ms, ref: twoLevelReference(T, inputs, LEN, (MSG - 32) / 4) };
}

type Res = Awaited<ReturnType<typeof runWithFault>>;

/** Every peer but the victim failed blaming it with one of `kinds`, input restored; or (if allowed) holds the exact sum. */
function expectOutcome(res: Res, victim: string, kinds: string[], mayFinish: (id: string) => boolean = () => false): number {
  let failed = 0;
  res.ids.forEach((id, i) => {
    if (id === victim) return;
    const s = res.settled[i];
    if (s.status === 'fulfilled') {
      expect(mayFinish(id), `${id} finished although it needed ${victim}`).toBe(true);
      expect(bitwiseEqual(res.outs.get(id)!, res.ref), `${id} finished with the exact sum`).toBe(true);
      return;
    }
    failed++;
    const e: unknown = s.reason;
    expect(e).toBeInstanceOf(RingError);
    if (!(e instanceof RingError)) return;
    expect(e.peerId, `${id}: ${e.message}`).toBe(victim);
    expect(kinds).toContain(e.kind === 'aborted' ? e.origin : e.kind);
    expect(bitwiseEqual(res.outs.get(id)!, res.inputs.get(id)!), `${id}: input restored`).toBe(true);
  });
  return failed;
}

const close = (id: string) => (m: MemoryTwoLevel) => m.peers.get(id)?.close();

describe('two-level all-reduce faults (memory links)', () => {
  it('an owner closing in the group reduce-scatter fails all 16 others, naming it', async () => {
    const victim = T.groups[1][2];
    const res = await runWithFault(victim, 'groupPrev', Phase.reduceScatter, 5, close(victim));
    expect(expectOutcome(res, victim, ['peer-closed'])).toBe(16);
    const own = res.settled[res.ids.indexOf(victim)];
    expect(own.status === 'rejected' && own.reason instanceof RingError && own.reason.kind).toBe('closed');
    expect(res.ms).toBeLessThan(3000);
  });

  it('an owner closing in its column all-reduce fails all 16 others (every group needs its shard)', async () => {
    const victim = T.groups[2][1];
    const res = await runWithFault(victim, 'columnPrev', Phase.reduceScatter, 3, close(victim));
    expect(expectOutcome(res, victim, ['peer-closed'])).toBe(16);
    expect(res.ms).toBeLessThan(3000);
  });

  it('the extra member of the larger group closing in the all-gather: the peer after it fails, the others fail or hold the exact sum', async () => {
    const big = T.groups[3];
    const victim = big[big.length - 1];
    expect(roleOf(T, victim).shard).toBeNull();
    const res = await runWithFault(victim, 'groupPrev', Phase.allGather, 20, close(victim));
    // Peers that already held every shard may finish (the columns were done before the failure),
    // but only with the exact sum; the victim's ring successor, which still needed it, fails.
    const failed = expectOutcome(res, victim, ['peer-closed'], () => true);
    const after = res.settled[res.ids.indexOf(big[0])];
    expect(after.status, `${big[0]} receives from ${victim}`).toBe('rejected');
    expect(failed).toBeGreaterThanOrEqual(1);
    expect(res.ms).toBeLessThan(3000);
  });

  it('a peer that vanishes without a word is found by heartbeats (deadAfterMs), all others fail', async () => {
    const victim = T.groups[0][3];
    const vanish = (m: MemoryTwoLevel) => {
      const l = m.links.get(victim);
      for (const x of [l?.groupNext, l?.groupPrev, l?.columnNext, l?.columnPrev]) x?.vanish();
    };
    const res = await runWithFault(victim, 'groupPrev', Phase.reduceScatter, 10, vanish, { heartbeatMs: 100, deadAfterMs: 600 });
    expect(expectOutcome(res, victim, ['peer-timeout'])).toBe(16);
    expect(res.ms).toBeLessThan(5000);
  });

  it('a frame lost on a group link is refused with where the receiver stood and where the frame that came belongs', async () => {
    // The honest-eviction reports said only "expected shard 4, got chunk 3": a lost frame and a
    // sender with another plan read the same. Now the reason tells them apart.
    const victim = T.groups[1][2];
    const m = memoryTwoLevel(T, {});
    open.push(m);
    let seen = 0;
    const into = m.links.get(victim)?.groupPrev;
    if (!into) throw new Error(`${victim} has no group link from prev`);
    into.dropIncoming = (f) => {
      const p = parseFrame(f);
      return p.ok && p.header.kind === FrameKind.data && p.header.phase === Phase.reduceScatter && ++seen === 3;
    };
    const inputs = new Map([...m.peers.keys()].map((id, i) => [id, randomGrad(LEN, i + 1)]));
    const settled = await Promise.allSettled(
      [...m.peers].map(([id, rings]) => allReduceTwoLevel(inputs.get(id)!.slice(), { rings, step: 4, messageBytes: MSG, keepInput: true })),
    );
    const mine = settled[[...m.peers.keys()].indexOf(victim)]!;
    expect(mine.status).toBe('rejected');
    const e: unknown = mine.status === 'rejected' ? mine.reason : null;
    expect(e).toBeInstanceOf(RingError);
    if (!(e instanceof RingError)) return;
    const prev = T.groups[1][1];
    expect({ kind: e.kind, peerId: e.peerId }).toEqual({ kind: 'bad-frame', peerId: prev });
    expect(e.message).toMatch(LOST_FRAME);
  });

  it('refuses rings that do not match the plan', () => {
    const id = T.groups[0][0];
    const role = roleOf(T, id);
    const wrong = memoryRing([...role.groupIds].reverse());
    const group = memoryRing(role.groupIds);
    try {
      const self = (rs: ReturnType<typeof memoryRing>) => rs.rings.find((r) => r.selfId === id)!;
      expect(() => new TwoLevelRings({ topology: T, group: self(wrong), column: null })).toThrow(/is not the plan's group/);
      expect(() => new TwoLevelRings({ topology: T, group: self(group), column: null })).toThrow(/needs its column ring/);
    } finally {
      for (const r of [...wrong.rings, ...group.rings]) r.close();
    }
  });
});
