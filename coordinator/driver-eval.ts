// The training driver's (driver.ts) evaluations: when one falls due (every evalEvery steps and
// at the job's end, once per step), what each member is asked (its share of the val ids by
// measured speed; the whole split at the end: eval-tally.ts), the answers summed, and the
// result recorded.
import type { EvalResult, Evaluate } from '../src/protocol/messages.ts';
import type { DriverDeps, EvaluatingPhase } from './driver-types.ts';
import type { PeerRec } from './driver-peers.ts';
import { addToTally, evalMessages, startTally, tallySummary } from './eval-tally.ts';

export class Evaluations {
  /** Steps evaluated (those of the metrics history included). */
  private readonly evaluated: Set<number>;

  /** How many steps are recorded as evaluated (the churn bench's leak check). */
  get count(): number {
    return this.evaluated.size;
  }

  constructor(
    private readonly d: Pick<DriverDeps, 'job' | 'evalIds' | 'finalEvalIds' | 'showIds' | 'classes' | 'evaluated' | 'metrics' | 'publish' | 'log'>,
    private readonly evalMs: number,
  ) {
    this.evaluated = new Set(d.evaluated ?? []);
  }

  /** Whether the weights of `step` are evaluated now: the job's last step, or `crossed` (a multiple of evalEvery), unless done. */
  due(step: number, last: boolean, crossed: boolean): boolean {
    return this.d.evalIds.length > 0 && !this.evaluated.has(step) && step > 0 && (last || crossed);
  }

  /** The evaluation of `step` by `ring`: its phase and each member's `evaluate` message (by rank). */
  begin(step: number, ring: readonly string[], peers: ReadonlyMap<string, PeerRec>): { phase: EvaluatingPhase; messages: Evaluate[] } {
    // The job's last evaluation covers the whole test split where one is given.
    const final = step >= this.d.job.totalSteps;
    const ids = final && this.d.finalEvalIds?.length ? this.d.finalEvalIds : this.d.evalIds;
    const plan = { ids, show: (this.d.showIds ?? []).filter((id) => ids.includes(id)), classes: this.d.classes ?? Infinity, final };
    const messages = evalMessages(step, plan, ring.map((id) => peers.get(id)?.ips ?? 1));
    const phase: EvaluatingPhase = {
      kind: 'evaluating', step, pending: new Map(ring.map((id, i) => [id, messages[i]!])), tally: startTally(plan), deadline: Date.now() + this.evalMs,
    };
    return { phase, messages };
  }

  /** Adds the answer `m` of member `id` to `ph`; false when it was not asked for (then nothing changes). */
  answer(ph: EvaluatingPhase, id: string, m: EvalResult): boolean {
    const asked = m.step === ph.step ? ph.pending.get(id) : undefined;
    if (!asked) return false;
    ph.pending.delete(id);
    addToTally(ph.tally, asked, m.counts);
    return true;
  }

  /** `ph` is over (every member answered or is gone): records its result. */
  end(ph: EvaluatingPhase): void {
    this.evaluated.add(ph.step);
    const e = tallySummary(ph.tally, ph.step);
    if (ph.tally.problems.length) this.d.log(`evaluation of step ${ph.step}: ${ph.tally.problems.slice(0, 3).join('; ')} (left out)`);
    if (e) {
      this.d.metrics.append({ type: 'eval', time: Date.now(), ...e });
      this.d.publish({ type: 'eval', ...e });
    }
  }
}
