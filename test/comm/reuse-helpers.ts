// Helpers of the link-reuse tests (link-reuse.test.ts, dial-ahead.test.ts): endpoints on a fake
// PeerJS network, forming a generation at every member, and the checks made after each step.
import { expect } from 'vitest';
import { allReduceSum, type Ring } from '../../src/comm/index.ts';
import type { PeerEndpoint } from '../../src/comm/peer-endpoint.ts';
import { HEADER_BYTES } from '../../src/protocol/frames.ts';
import { FakeNet, connOf } from './fake-peerjs.ts';
import { bitwiseEqual } from './helpers.ts';

const endpoints: PeerEndpoint[] = [];
/** Destroys every endpoint network() made (afterEach). */
export function closeEndpoints(): void {
  for (const e of endpoints.splice(0)) e.destroy();
}

export function network(ids: readonly string[]): { net: FakeNet; eps: Map<string, PeerEndpoint> } {
  const net = new FakeNet();
  const eps = new Map(ids.map((id) => [id, net.endpoint(id)] as [string, PeerEndpoint]));
  endpoints.push(...eps.values());
  return { net, eps };
}

export const ep = (eps: Map<string, PeerEndpoint>, id: string): PeerEndpoint => {
  const e = eps.get(id);
  if (!e) throw new Error(`no endpoint ${id}`);
  return e;
};

/** Forms generation `generation` of `ids` at every member (each formation starts in this tick). */
export function formAll(eps: Map<string, PeerEndpoint>, ids: readonly string[], generation: number, connectTimeoutMs = 10_000): Promise<Ring>[] {
  return ids.map((id) => ep(eps, id).formRing({ ids, job: 1, generation, connectTimeoutMs }));
}

/** Sums distinct vectors over `rings` at `step`: every peer must hold the total, in the same bits. */
export async function sumsRight(rings: readonly Ring[], step: number): Promise<void> {
  const vectors = rings.map((r) => Float32Array.from({ length: 3001 }, (_, i) => (r.rank + 1) * 0.25 + i * 1e-3));
  const settled = await Promise.allSettled(rings.map((ring, i) => allReduceSum(vectors[i]!, { ring, step, messageBytes: HEADER_BYTES + 4 * 250 })));
  settled.forEach((s, i) => expect(s.status, `${rings[i]!.selfId}: ${s.status === 'rejected' ? String(s.reason) : ''}`).toBe('fulfilled'));
  const want = Float32Array.from({ length: 3001 }, (_, i) => rings.reduce((acc, r) => acc + (r.rank + 1) * 0.25 + i * 1e-3, 0));
  for (const [i, v] of vectors.entries()) {
    for (const k of [0, 1500, 3000]) expect(v[k], `${rings[i]!.selfId}[${k}]`).toBeCloseTo(want[k]!, 3);
    expect(bitwiseEqual(v, vectors[0]!), `${rings[i]!.selfId} holds the same bits as ${rings[0]!.selfId}`).toBe(true);
  }
  for (const r of rings) expect(r.error, r.selfId).toBeNull();
}

/** The dials made for `generation`, as 'from>to'. */
export const dialsOf = (net: FakeNet, generation: number): string[] =>
  net.dials.filter((d) => d.generation === generation).map((d) => `${d.from}>${d.to}`).sort();

/** Every connection end still open in the net belongs to one of `rings`' links (nothing left that nobody holds). */
export function onlyRingsHoldConnections(net: FakeNet, rings: readonly Ring[]): void {
  const held = new Set(rings.flatMap((r) => [r.next, r.prev].filter((l) => l !== null).map((l) => connOf(l))));
  const open = net.dials.flatMap((d) => [d.dialer, d.answerer]).filter((c) => !c.closed);
  const stray = open.filter((c) => !held.has(c)).map((c) => `${c.other?.peer ?? '?'}>${c.peer}`);
  expect(stray, 'open connection ends that no ring holds').toEqual([]);
}

