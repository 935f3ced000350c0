// A volunteer's claims on a step's tail (coordinator/tail-pool.ts): one claim in flight at a
// time, answered by the coordinator's `grant`. Grants arrive beside the message queue (the step
// that claims is the message being handled). A claim ends with the grant's ids, or with
// `cancelled` when the coordinator moved on (a newer generation or step, a reload, the end, an
// eviction) or the session ended: the step then stops claiming and finishes with what it holds.
import type { Claim, CoordinatorMessage, Grant } from '../protocol/messages.ts';

/** What a claim came back with: ids to add (empty: the tail is gone), or the step was left behind. */
export type ClaimAnswer = { kind: 'granted'; ids: number[]; last: boolean } | { kind: 'cancelled' };

export class TailClaims {
  private waiting: { generation: number; step: number; resolve: (a: ClaimAnswer) => void } | null = null;
  /** The session ended: every claim ends at once, cancelled. */
  private closed = false;

  constructor(private readonly peerId: string, private readonly send: (m: Claim) => void) {}

  /** Claims the next chunk of step `step`'s tail in `generation`; one claim at a time. */
  claim(generation: number, step: number): Promise<ClaimAnswer> {
    if (this.waiting) throw new Error(`a claim for step ${this.waiting.step + 1} is still waiting for its grant (one at a time)`);
    if (this.closed) return Promise.resolve({ kind: 'cancelled' });
    return new Promise<ClaimAnswer>((resolve) => {
      this.waiting = { generation, step, resolve };
      this.send({ type: 'claim', peerId: this.peerId, generation, step });
    });
  }

  /** A grant came: it answers the waiting claim of its generation and step (any other is stale, dropped). */
  answer(g: Grant): void {
    const w = this.waiting;
    if (!w || w.generation !== g.generation || w.step !== g.step) return;
    this.waiting = null;
    w.resolve({ kind: 'granted', ids: g.ids, last: g.last === true });
  }

  /**
   * A message that moves the coordinator on from the claiming step ends the claim waiting (a
   * claim sent after it is answered empty: the coordinator grants only to the running step).
   */
  preempt(m: CoordinatorMessage): void {
    const w = this.waiting;
    if (!w) return;
    const moves = m.type === 'load-state' || m.type === 'done' || m.type === 'evicted'
      || (m.type === 'step-assignment' && (m.generation !== w.generation || m.step !== w.step));
    if (moves) this.cancel();
  }

  /** The session ended: the waiting claim and every later one end, cancelled. */
  close(): void {
    this.closed = true;
    this.cancel();
  }

  private cancel(): void {
    const w = this.waiting;
    if (!w) return;
    this.waiting = null;
    w.resolve({ kind: 'cancelled' });
  }
}
