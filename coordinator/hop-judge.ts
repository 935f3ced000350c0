// The hop checks' verdicts for a verifying job (issue 46; docs/trust.md), kept for the job by
// the audit book (audits.ts): a flat ring's step (each member's StepResult.hops under the step's
// seed) and a hearing (protocol 15: every member's records, the all-gather's relays included,
// under a seed drawn after the step). A member whose own records do not add up, or whose relays
// are not what it received, is evicted at once; a link whose two ends disagree is evidence
// against both (hop-evidence.ts), and the step runs again in an order where they are not
// neighbours the same way round, until one of them has disagreed with enough distinct members to
// be named; after HOP_ATTEMPTS attempts of one step without a name the job halts.
import type { HopReport, HopSketchesMessage, SketchReport, StepResult } from '../src/protocol/messages.ts';
import type { GradientSketch } from '../src/trust/sketch.ts';
import { sketchFromReport } from '../src/trust/hop-sketch.ts';
import { hopCheck, type HopSketches, type RelaySketches } from './hop-check.ts';
import { HopEvidence } from './hop-evidence.ts';
import type { CheckedWire } from './trust-check.ts';

/** Attempts of one step whose hop checks may disagree before the job halts (a liar is named at its third distinct partner). */
export const HOP_ATTEMPTS = 8;

/** What the hop checks call for (as the audit book's verdicts); null: every record agrees. */
export type HopJudgement =
  | { kind: 'evict'; ids: string[]; reason: string }
  | { kind: 'halt'; reason: string }
  | { kind: 'again'; reason: string; order: string[] }
  | null;

/** A HopReport's four sketches, each read with `of`. */
function hopSketchesOf(h: HopReport, of: (s: SketchReport) => GradientSketch): HopSketches {
  return { received: of(h.received), forwarded: of(h.forwarded), owned: of(h.owned), gathered: of(h.gathered) };
}

export class HopJudge {
  /** Disagreeing links, kept for the job. */
  private readonly evidence = new HopEvidence();
  /** The step whose attempts met disagreeing links, with how many so far. */
  private failed: { step: number; attempts: number } | null = null;

  /** `caught(n)`: n members were named (the audit book's tally); `draw`: the orders' random draws. */
  constructor(private readonly wire: CheckedWire, private readonly draw: (n: number) => number, private readonly caught: (n: number) => void) {}

  /** A flat ring's step: its members' results (ring order), their contributions `own`, sketches read with `of`. */
  ofResults(step: number, results: readonly StepResult[], own: readonly GradientSketch[], of: (s: SketchReport) => GradientSketch): HopJudgement {
    return this.judge(step, results.map((r) => r.peerId), own, results.map((r) => hopSketchesOf(r.hops!, of)));
  }

  /**
   * A hearing: the members of a verified flat ring's step hold different weights after it, so their sketches, each under
   * its own weights' seed, cannot be compared. Each answered `seed`, drawn after every value was sent, with its
   * contribution and all its records (`replies` in ring order); the checks then say who changed what it passed on. Null:
   * every record agrees, so the members whose weights differ computed them so themselves (the checksum vote decides).
   */
  ofHearing(step: number, ring: readonly string[], replies: readonly HopSketchesMessage[], seed: number): HopJudgement {
    const of = (s: SketchReport): GradientSketch => sketchFromReport(s, seed);
    const hops = replies.map(({ hops: h }) => ({ ...hopSketchesOf(h, of), relayOut: of(h.relayOut), relayIn: of(h.relayIn), relayed: of(h.relayed) }));
    return this.judge(step, ring, replies.map((m) => of(m.sketch)), hops);
  }

  /** Members gone: their disagreements no longer count. */
  forget(ids: readonly string[]): void {
    this.evidence.forget(ids);
  }

  /** The verdict of the hop checks (hop-check.ts) on `ring`'s records of `step` (by rank) and contributions `own`. */
  private judge(step: number, ring: readonly string[], own: readonly GradientSketch[], hops: readonly (HopSketches & Partial<RelaySketches>)[]): HopJudgement {
    const v = hopCheck(own, hops, this.wire);
    if (v.local.length) {
      const ids = v.local.map((l) => ring[l.rank]!);
      this.caught(ids.length);
      const worst = v.local[0]!;
      return {
        kind: 'evict', ids,
        reason: `what it sent on in step ${step + 1} is not what it received plus the contribution it reports `
          + `(bucket ${worst.bucket} is ${worst.z.toFixed(0)} sigma of the rounding off): it sent other than it reports`,
      };
    }
    if (v.relays.length) {
      const ids = v.relays.map((r) => ring[r]!);
      this.caught(ids.length);
      return {
        kind: 'evict', ids,
        reason: `what it relayed in the all-gather of step ${step + 1} is not what it received: it changed the ring's sums on their way`,
      };
    }
    if (v.links.length === 0) {
      if (this.failed?.step === step) this.failed = null;
      return null;
    }
    for (const r of v.links) this.evidence.add(ring[r]!, ring[(r + 1) % ring.length]!);
    const pairs = v.links.map((r) => `${ring[r]} -> ${ring[(r + 1) % ring.length]}`).join(', ');
    const named = this.evidence.named(ring);
    if (named.length) {
      this.caught(named.length);
      const partners = (id: string) => [...this.evidence.partners(id)].filter((p) => ring.includes(p));
      const with_ = named.map((id) => `${id} with ${partners(id).join(', ')}`).join('; ');
      return {
        kind: 'evict', ids: named,
        reason: `its records of what it sent and received disagree with those of ${Math.min(...named.map((id) => partners(id).length))} different `
          + `neighbours (step ${step + 1}: ${with_}): it sent other than it reports`,
      };
    }
    const attempts = this.failed?.step === step ? this.failed.attempts + 1 : 1;
    this.failed = { step, attempts };
    const why = `in step ${step + 1} what a member reports it sent differs from what its successor reports it received (${pairs})`;
    if (attempts >= HOP_ATTEMPTS) {
      this.failed = null;
      return { kind: 'halt', reason: `${why}, in ${attempts} attempts, and nobody disagreed with enough others to be named` };
    }
    return { kind: 'again', reason: `${why}: the step runs again with those members apart`, order: this.evidence.order(ring, this.draw) };
  }
}
