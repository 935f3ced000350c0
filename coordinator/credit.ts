// Credit: what each donor's devices gave the job, from the job's own record of committed steps
// (metrics.jsonl), so it survives restarts and counts only work that went into the model:
//   - a committed step credits each member the images of its part (its own slice, the images it
//     reused from its kept sum of an aborted attempt, the tail chunks it claimed): together,
//     exactly the step's images; an aborted attempt credits nothing (its work is either reused,
//     and credited then, or lost); a step recorded again (redone after a restart from an older
//     checkpoint) replaces its earlier record: nothing is counted twice;
//   - plus its compute seconds and one step in the ring.
// A member's credit goes to its donor key (RingPeer.donor, in the generation records): the
// lasting id a browser keeps, hashed (`d:<sha-256 prefix>`: the records and the metrics route
// never show the id itself, which is what a page asks its own credit with), else its name
// (`n:<name>`, a Node volunteer's --name), else its session (`p:<peer id>`).
import { createHash } from 'node:crypto';
import type { MetricRecord, RingPeer } from '../src/protocol/messages.ts';

export interface DonorCredit {
  /** What the board shows: the donor's last name, or null (anonymous). */
  name: string | null;
  images: number;
  computeMs: number;
  steps: number;
}

/** The key a ring member's work is credited to (see the header). */
export function donorKey(id: string, name: string | null, donor: string | undefined): string {
  if (donor) return `d:${createHash('sha256').update(donor).digest('base64url').slice(0, 22)}`;
  if (name) return `n:${name}`;
  return `p:${id}`;
}

type StepRecord = Extract<MetricRecord, { type: 'step' }>;
type Share = { key: string; name: string | null; images: number; computeMs: number };

/** The ledger of a job: fed every metrics record in order (those read at start, then each appended). */
export class CreditLedger {
  private readonly members = new Map<string, { key: string; name: string | null }>();
  /** Each committed step's shares, by step: a step recorded again replaces its shares. */
  private readonly steps = new Map<number, Share[]>();
  private readonly donors = new Map<string, DonorCredit>();
  private total = 0;

  add(r: MetricRecord): void {
    if (r.type === 'generation') for (const p of r.peers ?? []) this.member(p);
    else if (r.type === 'step') this.commit(r);
  }

  private member(p: RingPeer): void {
    // Records from before credit have no key: the name's or the session's.
    const key = p.donor ?? donorKey(p.id, p.name, undefined);
    this.members.set(p.id, { key, name: p.name });
    const d = this.donors.get(key);
    if (d) d.name = p.name ?? d.name;
  }

  private commit(r: StepRecord): void {
    const old = this.steps.get(r.step);
    if (old) for (const s of old) this.apply(s, -1);
    const shares = r.peers.map((p): Share => {
      const m = this.members.get(p.peerId) ?? { key: donorKey(p.peerId, null, undefined), name: null };
      return { ...m, images: p.images, computeMs: p.computeMs };
    });
    for (const s of shares) this.apply(s, 1);
    this.steps.set(r.step, shares);
  }

  private apply(s: Share, sign: 1 | -1): void {
    let d = this.donors.get(s.key);
    if (!d) this.donors.set(s.key, d = { name: s.name, images: 0, computeMs: 0, steps: 0 });
    d.images += sign * s.images;
    d.computeMs += sign * s.computeMs;
    d.steps += sign;
    this.total += sign * s.images;
    if (d.steps === 0) this.donors.delete(s.key);
  }

  /** Images of every committed step (the sum of every donor's). */
  get images(): number {
    return this.total;
  }

  /** Donors by images, most first (ties by key, so the order is stable). */
  board(): { key: string; credit: DonorCredit }[] {
    return [...this.donors].map(([key, credit]) => ({ key, credit })).sort((a, b) => b.credit.images - a.credit.images || (a.key < b.key ? -1 : 1));
  }
}

/** What GET /api/credit answers: the board's top `top` donors (names only, never ids), the totals, and the asking donor's own line. */
export interface CreditView {
  images: number;
  donors: number;
  board: { rank: number; name: string | null; images: number; share: number; computeS: number; steps: number }[];
  you: { rank: number; name: string | null; images: number; share: number; computeS: number; steps: number } | null;
}

export function creditView(l: CreditLedger, top: number, donor: string | null): CreditView {
  const total = l.images;
  const line = (rank: number, c: DonorCredit) => ({
    rank, name: c.name, images: c.images, share: total > 0 ? c.images / total : 0, computeS: Math.round(c.computeMs / 100) / 10, steps: c.steps,
  });
  const board = l.board();
  // The asking donor's rank in the same sorted board (its key: the hash of its lasting id).
  const key = donor ? donorKey('', null, donor) : null;
  const mine = key === null ? -1 : board.findIndex((e) => e.key === key);
  const shown = board.slice(0, top).map((e, i) => line(i + 1, e.credit));
  return { images: total, donors: board.length, board: shown, you: mine < 0 ? null : line(mine + 1, board[mine]!.credit) };
}
