// The volunteer's step, inside one session, as one state machine: the phases a session's
// messages move it through, and the only transitions between them. The table below is the
// drawing in docs/architecture.md ("A volunteer's step"), line for line (a test compares them);
// Session (messages) and Trainer (steps and rounds) call `go` where each transition happens, and
// a transition the table does not hold is refused (a StateError: the session ends as failed, with
// the phases it went through in its log). The decisions stay where they are made (the trainer's
// guards, the ring's failures); this module only holds where the step is and what may follow.
//
// A transition from a phase to itself (a grant in SyncCompute, a hearing in Ready) changes nothing
// and is listed for the drawing only. The session's own life (joining, ended, rejoining) is the
// volunteer loop's (volunteer.ts), drawn around this machine.
import { StateError } from './state.ts';

export type StepPhase =
  | 'NoState' | 'Loading' | 'Ready' | 'Evaluating' | 'Uploading' | 'Aborted' | 'Reporting'
  | 'SyncPrepare' | 'SyncCompute' | 'SyncAllReduce' | 'SyncApply'
  | 'RoundPrepare' | 'InnerSteps' | 'RoundAllReduce' | 'OuterStep';

/** One arrow of the drawing: `on` is its label there. */
export interface StepTransition {
  readonly from: StepPhase;
  readonly to: StepPhase;
  readonly on: string;
}

const t = (from: StepPhase, to: StepPhase, on: string): StepTransition => ({ from, to, on });

/** Every transition of the volunteer's step, in the drawing's order. */
export const STEP_TRANSITIONS: readonly StepTransition[] = [
  t('NoState', 'Loading', 'load-state'),
  t('Ready', 'Loading', 'load-state'),
  t('Aborted', 'Loading', 'load-state'),
  t('Loading', 'Ready', 'seed reset or checkpoint loaded, ready(step, checksum) sent'),
  t('Ready', 'SyncPrepare', 'step-assignment, no round, s = committed (after undoing s when backedUp = s)'),
  t('Aborted', 'SyncPrepare', 'step-assignment re-running s (backup restored)'),
  t('SyncPrepare', 'SyncCompute', 'backup taken, ring.join started, checkpoint uploaded if uploadCheckpoint'),
  t('SyncCompute', 'SyncCompute', 'grant (steal) or micro-batch done, next slice prefetched'),
  t('SyncCompute', 'SyncAllReduce', 'last micro-batch, bucket k all-reduced once backward produced it'),
  t('SyncAllReduce', 'Aborted', 'no-ring (superseded, or formation failure reported), or RingError (collective-failure sent unless closed)'),
  t('SyncAllReduce', 'SyncApply', 'every bucket summed, kept sum copied before'),
  t('SyncApply', 'Reporting', 'audit if asked, applyUpdate, committed = s+1'),
  t('Ready', 'RoundPrepare', 'step-assignment with round, s = committed (after undoing its outer step)'),
  t('Aborted', 'RoundPrepare', 'step-assignment with round'),
  t('RoundPrepare', 'Aborted', 'ring.join null (superseded, or failure reported)'),
  t('RoundPrepare', 'InnerSteps', 'ring formed, checkpoint uploaded if uploadCheckpoint'),
  t('InnerSteps', 'RoundAllReduce', 'contribution computed, or reused (same roundKey)'),
  t('RoundAllReduce', 'Aborted', 'RingError, collective-failure sent unless closed'),
  t('RoundAllReduce', 'OuterStep', 'contributions summed (no collective in a ring of 1)'),
  t('OuterStep', 'Reporting', 'audit if asked, rounds.apply, committed = s+H'),
  t('Reporting', 'Ready', 'step-result sent (none if the session ended)'),
  t('Ready', 'Ready', 'hop-seed of a step it kept, hop-sketches sent (a hearing)'),
  t('Ready', 'Evaluating', 'evaluate, committed = step'),
  t('Aborted', 'Evaluating', 'evaluate, committed = step'),
  t('Evaluating', 'Ready', 'eval-result sent'),
  t('Ready', 'Uploading', 'upload-checkpoint, undoApplied(step), committed = step'),
  t('Aborted', 'Uploading', 'upload-checkpoint, undoApplied(step), committed = step'),
  t('Uploading', 'Ready', 'uploaded, or CoordinatorError logged'),
];

/** Whether the table holds a transition from `from` to `to`. */
export function allowed(from: StepPhase, to: StepPhase): boolean {
  return STEP_TRANSITIONS.some((x) => x.from === from && x.to === to);
}

/** A transition taken: the step it was taken in (0-based, as in assignments) and why, when it is a failure path. */
export interface PhaseChange {
  readonly from: StepPhase;
  readonly to: StepPhase;
  readonly step: number;
  readonly why?: string;
}

/** How many transitions a machine remembers for a failure's log. */
const TRAIL = 12;

/** Where one session's step is. Owned by the session; the trainer moves it through its steps. */
export class StepMachine {
  private current: StepPhase = 'NoState';
  private readonly recent: PhaseChange[] = [];

  constructor(private readonly onChange: (c: PhaseChange) => void = () => undefined) {}

  get phase(): StepPhase {
    return this.current;
  }

  /** The last transitions taken, oldest first ("Ready -> SyncPrepare (step 3)"). */
  trail(): string {
    return this.recent.map((c) => `${c.from} -> ${c.to} (step ${c.step + 1})`).join(', ');
  }

  /** Takes the transition to `to` in `step`; a transition the table does not hold is a StateError. */
  go(to: StepPhase, step: number, why?: string): void {
    const from = this.current;
    if (from === to) return;
    if (!allowed(from, to)) {
      throw new StateError(`the volunteer's step went from ${from} to ${to} in step ${step + 1}, which its state machine does not allow `
        + `(src/client/step-machine.ts; after ${this.trail() || 'no transition'}): this is a bug, please report it with this log`);
    }
    this.current = to;
    const change: PhaseChange = why === undefined ? { from, to, step } : { from, to, step, why };
    this.recent.push(change);
    if (this.recent.length > TRAIL) this.recent.shift();
    this.onChange(change);
  }
}
