// The coordinator's signaling relays WebRTC set-up (OFFER / ANSWER / CANDIDATE) only between
// neighbours of the current ring generation, so a peer outside the ring can never open a data
// connection to a member: refused at the coordinator, before any data exists.
//
// A real job (runJob: HTTP, session sockets, the driver, PeerJS signaling on the same port),
// peers that speak the session protocol by hand (no GPU) and real PeerJS endpoints in Node
// (node-datachannel WebRTC): two members form their ring and sum a vector; an outsider that
// joined but is not in the ring dials a member and never gets a connection (the member sees
// nothing); once the driver takes it into the next generation, it connects and sums too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ringNeighbours } from '../../coordinator/signaling.ts';
import { allReduceSum, openEndpoint, type PeerCtor, type PeerEndpoint, type Ring } from '../../src/comm/index.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';
import type { StepAssignment } from '../../src/protocol/messages.ts';
import { HandPeer } from '../coordinator/hand-peer.ts';
import { buildTestData, startTestJob, tempRoot, testJob, until, type TestJob } from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
let job: TestJob;
let Peer: PeerCtor;
const endpoints: PeerEndpoint[] = [];
const hands: HandPeer[] = [];
let beat: ReturnType<typeof setInterval> | null = null;

beforeAll(async () => {
  Peer = await loadNodePeer();
  root = await tempRoot('signaling-gate');
  const data = await buildTestData(root.dir);
  // Two peers start the ring; no evaluation or checkpoint gets in the way of the steps below.
  job = await startTestJob(root.dir, 'job', data, testJob(50, { minPeers: 2, checkpointEvery: 1000 }));
  // Heartbeats keep the hand peers from being dropped as silent.
  beat = setInterval(() => {
    for (const h of hands) if (h.closed === null) h.send({ type: 'heartbeat', peerId: h.id, generation: 0, step: 0 });
  }, 1000);
}, 60_000);
afterAll(async () => {
  if (beat) clearInterval(beat);
  for (const ep of endpoints) ep.destroy();
  for (const h of hands) h.ws.close();
  await job?.close();
  await root?.remove();
});

async function handPeer(): Promise<HandPeer> {
  const h = await HandPeer.join(job.url);
  hands.push(h);
  return h;
}

async function endpointOf(h: HandPeer): Promise<PeerEndpoint> {
  const ep = await openEndpoint({
    Peer, id: h.id, token: h.accept.signalingToken, server: { host: '127.0.0.1', port: job.coordinator.port, path: h.accept.signalingPath },
    rtcConfig: NODE_RTC_CONFIG,
  });
  endpoints.push(ep);
  return ep;
}

/** Loads the seed and reports ready, as a volunteer does when told to load. */
async function enter(h: HandPeer): Promise<void> {
  const load = await h.next('load-state');
  h.send({ type: 'ready', peerId: h.id, step: load.step, checksum: '00', device: 'hand' });
}

/** Every member forms its ring for `a` and they sum [rank + 1, ...]: each must get the total. */
async function formAndSum(eps: PeerEndpoint[], a: StepAssignment): Promise<void> {
  const rings: Ring[] = await Promise.all(eps.map((ep) => ep.formRing({ ids: a.ring, job: a.job, generation: a.generation, connectTimeoutMs: 10_000 })));
  try {
    const vectors = eps.map((ep) => new Float32Array(1000).fill(a.ring.indexOf(ep.id) + 1));
    await Promise.all(rings.map((ring, i) => allReduceSum(vectors[i]!, { ring, step: a.step })));
    const total = (a.ring.length * (a.ring.length + 1)) / 2;
    for (const v of vectors) expect([v[0], v[999]]).toEqual([total, total]);
  } finally {
    for (const r of rings) r.close();
  }
}

/** The outsider dials `member` for `generation`; resolves with whether the connection opened. */
async function dial(from: PeerEndpoint, member: string, jobId: number, generation: number, ms: number): Promise<{ opened: boolean; unavailable: boolean }> {
  let unavailable = false;
  from.peer.on('error', (e) => { if (e.type === 'peer-unavailable' && e.message.includes(member)) unavailable = true; });
  const conn = from.peer.connect(
    member, { label: `vt/${jobId}/${generation}`, metadata: { vt: 'ring', job: jobId, generation, from: from.id }, serialization: 'raw', reliable: true },
  );
  if (!conn) throw new Error('PeerJS could not start a connection');
  let opened = false;
  conn.on('open', () => {
    opened = true;
    conn.send(new Uint8Array([1, 2, 3]));
  });
  await new Promise((r) => setTimeout(r, ms));
  conn.close();
  return { opened, unavailable };
}

describe('signaling gate', () => {
  it('ringNeighbours: next to each other in the ring, both ways round', () => {
    expect(ringNeighbours(['a', 'b', 'c', 'd'], 'a', 'b')).toBe(true);
    expect(ringNeighbours(['a', 'b', 'c', 'd'], 'a', 'd')).toBe(true);
    expect(ringNeighbours(['a', 'b', 'c', 'd'], 'a', 'c')).toBe(false);
    expect(ringNeighbours(['a', 'b'], 'b', 'a')).toBe(true);
    expect(ringNeighbours(['a', 'b'], 'a', 'a')).toBe(false);
    expect(ringNeighbours(['a', 'b'], 'a', 'x')).toBe(false);
    expect(ringNeighbours([], 'a', 'b')).toBe(false);
  });

  it('only members of the current ring generation connect; an outsider is refused until the ring takes it in', async () => {
    const [a, b] = [await handPeer(), await handPeer()];
    const [epA, epB] = [await endpointOf(a), await endpointOf(b)];
    // Everything that reaches a member's PeerJS from anyone: the outsider must never appear.
    const seen: string[] = [];
    for (const ep of [epA, epB]) ep.peer.on('connection', (c) => seen.push(c.peer));

    await Promise.all([enter(a), enter(b)]);
    const [a1, b1] = [await a.next('step-assignment'), await b.next('step-assignment')];
    expect(new Set(a1.ring)).toEqual(new Set([a.id, b.id]));
    expect(b1.generation).toBe(a1.generation);
    const ordered = a1.ring.map((id) => (id === a.id ? epA : epB));
    await formAndSum(ordered, a1);

    // An outsider: joined, holds a signaling id, but is not in the ring being trained.
    const o = await handPeer();
    const epO = await endpointOf(o);
    expect(job.driver.status().ring).not.toContain(o.id);
    const refused = await dial(epO, a.id, a1.job, a1.generation + 1, 3000);
    expect(refused, 'the outsider got no connection; its PeerJS was told the member is unavailable').toEqual({ opened: false, unavailable: true });
    expect(seen.filter((id) => id === o.id), 'the member never saw a connection from the outsider').toEqual([]);
    expect(job.lines.some((l) => l.includes(`refused OFFER from ${o.id} to ${a.id}`)), job.lines.join('\n')).toBe(true);
    expect(job.lines.join('\n')).not.toContain(o.accept.signalingToken);

    // The ring changes: b leaves, the step is aborted, and the driver admits the outsider.
    b.send({ type: 'leave', peerId: b.id, reason: 'test' });
    await enter(o);
    const [a2, o2] = [await a.next('step-assignment'), await o.next('step-assignment')];
    expect(new Set(a2.ring)).toEqual(new Set([a.id, o.id]));
    expect(a2.generation).toBeGreaterThan(a1.generation);
    await formAndSum(a2.ring.map((id) => (id === a.id ? epA : epO)), o2);
    expect(seen).toContain(o.id);
    // b, now outside the ring (and its session gone), is no neighbour of a any more.
    await until(() => !job.driver.status().ring.includes(b.id), 5000, 'b to be out of the ring');
  }, 60_000);
});
