// The training driver's (driver.ts) interface and states: its timeouts, what it is given, what
// it reports, and the phases of its state machine with what each holds while it lasts.
import type { TailPool } from './tail-pool.ts';
import type { CoordinatorMessage, Evaluate, HopSketchesMessage, LiveEvent, StepResult } from '../src/protocol/messages.ts';
import type { Topology } from '../src/comm/topology.ts';
import type { RingErrorKind } from '../src/comm/errors.ts';
import type { EvalTally } from './eval-tally.ts';
import type { JobConfig } from './job.ts';
import type { MetricsLog } from './metrics.ts';

export interface DriverTimeouts {
  /** A step (assignment to last result) may take at most max(stepMs, 6 x the recent step time). */
  stepMs: number;
  /** Joiners have this long to load a checkpoint (and the uploader to upload it). */
  admitMs: number;
  evalMs: number;
  /**
   * A peer whose session sent nothing (heartbeats, every 2 s by default) for this long, or for
   * 4x the longest gap it has shown, or 2x its longest step's work, is dropped: a host whose
   * link is cut is noticed in seconds (silence.ts).
   */
  silentMs: number;
  /** The silence allowed during work nothing has timed yet (its first step, loading, evaluating, uploading). */
  firstSilentMs: number;
  /**
   * Joiner batching: while the ring is churning (its last two generations began less than this
   * apart, the newest less than this ago), joiners wait at most this long, so that several enter
   * in one new generation instead of one generation each; a calm ring admits at once. 0: every
   * boundary admits. 6 s by default: every member of a big ring pays for each new generation
   * (its announcement, the rings formed again from kept links, a slower first step), so a ring
   * that changes every second or two spends much of its time changing (the churn bench: 2 s let
   * 110-130 generations happen in 1,500 steps, 6 s 45-68, and membership_goodput went from
   * 0.88-0.90 to 0.89-0.92).
   */
  admitGapMs: number;
  /**
   * Make before break (driver-ahead.ts): a planned membership change of a ring of
   * ADMIT_BATCH_FROM or more waits at most this long while the ring trains on and its members
   * dial the new ring's links ahead. 0: changes are made at once (links dialed as the ring forms).
   */
  prepareMs: number;
  /** A hearing (a verified step whose members' weights differ: audits.ts): each member has this long to answer. */
  hearingMs: number;
}

// Generous: a peer that leaves closes its session and is noticed at once; these only catch
// peers that hang while connected, and a big model on a CPU-only volunteer is slow.
export const DEFAULT_TIMEOUTS: DriverTimeouts = {
  stepMs: 120_000, admitMs: 120_000, evalMs: 300_000, silentMs: 6_000, firstSilentMs: 30_000, admitGapMs: 6_000, prepareMs: 2_000,
  hearingMs: 30_000,
};

/** The test hooks of a verifying job's audits (audits.ts), passed as one from runJob, the test bed and the driver harness. */
export interface AuditHooks {
  /** The audits' random draws (an integer in [0, n)); default crypto's randomInt. */
  draw?: (n: number) => number;
  /** Whether suspects and newcomers are audited too (default true): tests whose fixed draws leave a cheater unaudited turn it off. */
  directed?: boolean;
}

export interface DriverDeps {
  job: JobConfig;
  jobId: number;
  /** Size of the train split (the sampler's n). */
  trainSamples: number;
  /** Samples of each train shard, in the manifest's order (needed by a job that samples shard-locally). */
  trainShards?: readonly number[];
  /** Val ids evaluated at each evaluation. */
  evalIds: readonly number[];
  /** Val ids of the job's last evaluation (default: evalIds); the whole split, usually. */
  finalEvalIds?: readonly number[];
  /** Val ids whose predictions each evaluation reports (the dashboard's grid). */
  showIds?: readonly number[];
  /** The model's classes: a confusion matrix is asked for up to MAX_CONFUSION_CLASSES (absent: none). */
  classes?: number;
  /** Step of the newest stored checkpoint (null: none; the job starts from its seed). */
  checkpointStep: number | null;
  /** First generation number (after a restart: above every one used before). */
  generation: number;
  /** Steps already evaluated (from the metrics history). */
  evaluated?: readonly number[];
  /** A job with syncEvery "auto": the H it chose last (from the metrics history); absent: it starts with sync steps. */
  syncH?: number;
  metrics: MetricsLog;
  send(peerId: string, m: CoordinatorMessage): boolean;
  /** Ends a peer's session (it may rejoin as a new peer). */
  disconnect(peerId: string, reason: string): void;
  publish(e: LiveEvent): void;
  log(line: string): void;
  /** Peers that verification convicted (audits.ts) in `step` (numbered from 1), before they are evicted: refused from now on (bans.ts). */
  convicted?(peerIds: readonly string[], reason: string, step: number): void;
  /** Steps of every checkpoint kept on disk (a verifying job's undo goes back to one: undo.ts); default: the newest alone. */
  keptCheckpoints?: readonly number[];
  /** The job went back to the weights of `step`: the checkpoints after it hold undone work and are removed. */
  discardCheckpointsAfter?(step: number): void;
  /** How a verifying job draws its audits (tests fix them); default: at random, suspects too. */
  audit?: AuditHooks;
  timeouts?: Partial<DriverTimeouts>;
}

export type Phase =
  | { kind: 'between' }
  /** `undo`: the ring reloads older weights (undo.ts), not a first ring waiting for minPeers. */
  | { kind: 'admitting'; step: number; joiners: string[]; uploadFrom: string | null; loadSent: boolean; deadline: number; undo?: true }
  | {
    kind: 'running'; step: number; steps: number; generation: number; ring: string[]; results: Map<string, StepResult>; started: number; deadline: number;
    unreachable?: Unreachable;
    /** Sync steps: each member's slice (slices[rank]; its fixed part when the step has a tail) and the step's epoch; null for a round. */
    slices: number[][] | null; epoch: number;
    /** The step's tail, granted in chunks to members that claim it (tail-pool.ts); absent: none. */
    tail?: TailPool;
    /**
     * A verified step or round (audits.ts planned its audits): its results are judged before it commits. `oneBatch`: per
     * member, the most images it was asked to compute at once (its slice; a round's largest inner slice). `reuse`: the
     * members asked to reuse a kept sum, and for how many ids (slice-rerun.ts): none may say it reused more. `pieces`: how
     * each member computes its sum (driver-steps.ts sumPieces; absent: not known), which a re-run's audit follows.
     */
    verified?: { oneBatch: Map<string, number>; reuse: Map<string, number>; pieces: Map<string, readonly number[]> };
    /** Its results in, the members' weights differ: each member's hop records are heard under a fresh seed before anyone is evicted. */
    hearing?: Hearing;
  }
  | { kind: 'evaluating'; step: number; pending: Map<string, Evaluate>; tally: EvalTally; deadline: number }
  /**
   * A checkpoint of `step` uploaded by `uploadFrom`; then 'done' (the job's end) or 'idle' (the last members leave, and whoever comes
   * later resumes at `step`).
   */
  | { kind: 'finishing'; step: number; uploadFrom: string; deadline: number; then: 'done' | 'idle' }
  | { kind: 'paused' }
  | { kind: 'done' };

/** A hearing of a verified step (protocol 15): the seed sent to every member, the answers so far, and when the silent are evicted. */
export interface Hearing { seed: number; replies: Map<string, HopSketchesMessage>; deadline: number }

export type AdmittingPhase = Extract<Phase, { kind: 'admitting' }>;
export type RunningPhase = Extract<Phase, { kind: 'running' }>;
export type EvaluatingPhase = Extract<Phase, { kind: 'evaluating' }>;

/**
 * Failure reports of a running ring collected before deciding (blame.ts), decided at `decideAt` or when every member reported:
 * connect-failed edges, and in a generation's first step the closed or silent links that may be formation races (`races`, in order).
 */
export interface Unreachable { edges: [string, string][]; races: RaceReport[]; reporters: Set<string>; decideAt: number }

/** A peer-closed or peer-timeout report in a generation's first step: whom it blames, and why. */
export interface RaceReport { kind: RingErrorKind; evict: string; reason: string }

/** `paused`: the owner paused the job, or asked it to pause at the next step boundary. */
export interface DriverStatus {
  step: number; generation: number; peers: number; phase: Phase['kind']; ring: string[]; topology: Topology | null; paused: boolean;
}

/** Milliseconds per kind of phase; `committedRunning` is the part of `running` whose step committed. */
export type PhaseTimes = Record<Phase['kind'] | 'committedRunning', number>;

/** Where a job's time goes: the driver enters phases, this adds up how long each kind lasted. */
export class PhaseClock {
  private readonly ms: PhaseTimes = { between: 0, admitting: 0, running: 0, committedRunning: 0, evaluating: 0, finishing: 0, paused: 0, done: 0 };
  private since = performance.now();

  constructor(private kind: Phase['kind']) {}

  enter(kind: Phase['kind'], now = performance.now()): void {
    this.ms[this.kind] += now - this.since;
    this.since = now;
    this.kind = kind;
  }

  /** A running phase of `ms` committed its step. */
  committed(ms: number): void {
    this.ms.committedRunning += ms;
  }

  /** The totals so far, the current phase counted up to `now`. */
  times(now = performance.now()): PhaseTimes {
    const t = { ...this.ms };
    t[this.kind] += now - this.since;
    return t;
  }
}
