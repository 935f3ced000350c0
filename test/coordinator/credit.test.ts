// The credit ledger (coordinator/credit.ts) on the records a job writes: committed steps only,
// a step recorded again replaces its earlier record, aborted attempts credit nothing, reused and
// claimed images go to the member that reported them; the sum of every donor's images is the
// images of the committed steps. The view names donors, never their ids.
import { describe, expect, it } from 'vitest';
import { CreditLedger, creditView, donorKey } from '../../coordinator/credit.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord, PeerStepTiming } from '../../src/protocol/messages.ts';

const gen = (generation: number, peers: { id: string; name: string | null; donor?: string }[]): MetricRecord => ({
  type: 'generation', time: 0, generation, ring: peers.map((p) => p.id),
  peers: peers.map((p) => ({ id: p.id, name: p.name, device: 'wasm', donor: donorKey(p.id, p.name, p.donor) })),
});
const part = (peerId: string, images: number, extra: Partial<PeerStepTiming> = {}): PeerStepTiming & { checksum: string } =>
  ({ peerId, images, computeMs: 10 * images, commMs: 1, waitMs: 0, checksum: 'c', ...extra });
const step = (s: number, generation: number, parts: ReturnType<typeof part>[]): MetricRecord => ({
  type: 'step', time: 0, step: s, generation, ring: parts.length, loss: 1, imagesPerSec: 1, wallMs: 1, peers: parts,
});
const abort = (s: number, generation: number): MetricRecord => ({ type: 'abort', time: 0, step: s, generation, reason: 'a member left' });

const BROWSER = 'Zx81-browser-id-0001';

/** Two donors and a session without a name; a peer killed mid-step (its ids re-run), a step redone after a restart. */
const RECORDS: MetricRecord[] = [
  gen(1, [{ id: 'p1', name: 'alice', donor: BROWSER }, { id: 'p2', name: 'lab-desk-3' }, { id: 'p3', name: null }]),
  step(1, 1, [part('p1', 4), part('p2', 4), part('p3', 4)]),
  step(2, 1, [part('p1', 4), part('p2', 4), part('p3', 4)]),
  // p3 killed while computing step 3: the attempt credits nothing; the survivors reuse their kept sums and take its ids.
  abort(3, 1),
  gen(2, [{ id: 'p1', name: 'alice', donor: BROWSER }, { id: 'p2', name: 'lab-desk-3' }]),
  step(3, 2, [part('p1', 6, { reused: 4 }), part('p2', 6, { reused: 4, claimed: 1 })]),
  // alice's tab comes back under a new session id, same lasting donor id: the same account.
  gen(3, [{ id: 'p9', name: 'alice', donor: BROWSER }, { id: 'p2', name: 'lab-desk-3' }]),
  step(4, 3, [part('p9', 6), part('p2', 6)]),
  // The coordinator restarted from the checkpoint of step 3: step 4 is redone by other members.
  gen(4, [{ id: 'p2', name: 'lab-desk-3' }, { id: 'p7', name: 'lab-desk-4' }]),
  step(4, 4, [part('p2', 5), part('p7', 7)]),
];

describe('credit ledger', () => {
  it('credits the committed steps once each: the donors\' images add up to the images of the committed steps', () => {
    const l = new CreditLedger();
    for (const r of RECORDS) l.add(r);
    const imagesOf = (r: MetricRecord) => (r.type === 'step' ? r.peers.reduce((a, p) => a + p.images, 0) : 0);
    const committed = latestPerStep(RECORDS).reduce((n, r) => n + imagesOf(r), 0);
    expect(committed).toBe(12 + 12 + 12 + 12);
    expect(l.images).toBe(committed);
    const board = l.board();
    expect(board.reduce((n, e) => n + e.credit.images, 0)).toBe(committed);
    const by = new Map(board.map((e) => [e.credit.name ?? e.key, e.credit]));
    // alice: steps 1-3 under p1 (4 + 4 + 6); her step 4 (as p9) was replaced by the redo.
    expect(by.get('alice')).toEqual({ name: 'alice', images: 14, computeMs: 140, steps: 3 });
    expect(by.get('lab-desk-3')).toEqual({ name: 'lab-desk-3', images: 4 + 4 + 6 + 5, computeMs: 190, steps: 4 });
    expect(by.get('lab-desk-4')).toEqual({ name: 'lab-desk-4', images: 7, computeMs: 70, steps: 1 });
    // The nameless session keeps what it committed before it was killed.
    expect(by.get('p:p3')).toEqual({ name: null, images: 8, computeMs: 80, steps: 2 });
    expect(board.map((e) => e.credit.name)).toEqual(['lab-desk-3', 'alice', null, 'lab-desk-4']);
  });

  it('fed the same records in two parts (a restart reads the history, then appends) it ends the same', () => {
    const once = new CreditLedger();
    for (const r of RECORDS) once.add(r);
    const resumed = new CreditLedger();
    for (const r of RECORDS.slice(0, 6)) resumed.add(r);
    for (const r of RECORDS.slice(6)) resumed.add(r);
    expect(resumed.board()).toEqual(once.board());
  });

  it('the view: shares, ranks and the asking donor\'s line by its id; never a donor id', () => {
    const l = new CreditLedger();
    for (const r of RECORDS) l.add(r);
    const v = creditView(l, 2, BROWSER);
    expect(v.images).toBe(48);
    expect(v.donors).toBe(4);
    expect(v.board.map((b) => [b.rank, b.name, b.images])).toEqual([[1, 'lab-desk-3', 19], [2, 'alice', 14]]);
    expect(v.board[0]!.share).toBeCloseTo(19 / 48, 10);
    expect(v.you).toMatchObject({ rank: 2, name: 'alice', images: 14, steps: 3 });
    expect(creditView(l, 20, 'someone-else-0000').you).toBeNull();
    expect(creditView(l, 20, null).you).toBeNull();
    expect(JSON.stringify(v)).not.toContain(BROWSER);
    // The key a record carries is a hash of the id: the metrics route never shows the id either.
    expect(JSON.stringify(RECORDS)).not.toContain(BROWSER);
  });

  it('keys: the lasting id (hashed), else the name, else the session', () => {
    expect(donorKey('p1', 'alice', BROWSER)).toMatch(/^d:[A-Za-z0-9_-]{22}$/);
    expect(donorKey('p1', 'alice', BROWSER)).toBe(donorKey('p9', 'bob', BROWSER));
    expect(donorKey('p1', 'alice', undefined)).toBe('n:alice');
    expect(donorKey('p1', null, undefined)).toBe('p:p1');
  });
});
