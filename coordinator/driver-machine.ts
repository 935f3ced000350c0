// The training driver's state machine: the coordinator's steps, generations, admissions,
// evaluations and checkpoints for one job. driver.ts is its front (the Driver class): it feeds
// it the peers' sessions and messages, the checkpoint uploads and the timer, and answers status.
//
//   between steps:  final? -> evaluate? -> admit joiners? -> assign step s to the ring
//   admitting:      a checkpoint of step s is uploaded (unless stored), joiners load it (or
//                   the seed), then the ring grows by the ready ones: generation g+1
//   running:        every member reports step s with the same weight checksum -> commit
//                   (s+1); a member lost, a collective failure, a checksum dissent or a
//                   timeout -> abort: the survivors form g+1 and the SAME step s runs again
//                   (peers undo s if they applied it); a verified step whose checksums differ
//                   is heard first (protocol 15: hear(), heard()): every member's hop records
//                   under a fresh seed name who changed what it relayed; in sync mode each survivor keeps the
//                   gradient sum of its slice and computes only its share of the lost
//                   members' ids (slice-rerun.ts); joiners wait for the step's commit; a
//                   link lost in a generation's first step between two connected peers forms
//                   the same ring again once instead (blame.ts formAgain)
//   evaluating:     members evaluate their share of the val ids on the weights of s
//   finishing:      final evaluation, final checkpoint, 'done' to everyone; also before the
//                   last members leave with no one to take over: a checkpoint of their step
//                   first, then the job idles until peers come (and resumes at that step)
//
// driver-steps.ts plans the steps (the seeded sampler's ids: the same whatever the ring) and
// checks their commits; driver-generations.ts forms the ring's generations and batches joiners;
// driver-peers.ts, driver-eval.ts and driver-checkpoints.ts keep the peers, the evaluations and
// the checkpoints. The ring shrinking to nobody through crashes loses the steps since the newest
// checkpoint: the job resumes from it (same samples again) when peers come back.
import { randomInt } from 'node:crypto';
import { MAX_RING, type CoordinatorMessage, type LiveEvent, type MetricRecord, type StepResult, type VerificationTally } from '../src/protocol/messages.ts';
import type { RingErrorKind } from '../src/comm/errors.ts';
import type { AuditVerdict } from './audits.ts';
import { formAgain, noEvidence, withFailures } from './blame.ts';
import { DialAhead } from './driver-ahead.ts';
import { CheckpointBook } from './driver-checkpoints.ts';
import { Evaluations } from './driver-eval.ts';
import { ADMIT_BATCH_FROM, Generations, leaveHoldMs } from './driver-generations.ts';
import { admitted, requeue, ringDeadMs, ringSpeeds, type PeerRec } from './driver-peers.ts';
import { StepBook, checksumVote, commitRecords, rerunLine, unreachableVerdict } from './driver-steps.ts';
import {
  DEFAULT_TIMEOUTS, PhaseClock, type AdmittingPhase, type DriverDeps, type DriverTimeouts, type EvaluatingPhase, type Phase, type RunningPhase,
} from './driver-types.ts';
import { verdictLine } from './steal-tuner.ts';
import { decisionLine } from './sync-auto.ts';
import { afterUndo, noteUnaudited, undoLine, undoPoint } from './undo.ts';
import { failed, halts, noStreak } from '../src/client/failure-streak.ts';

export class DriverMachine {
  protected readonly peers = new Map<string, PeerRec>();
  /** The ring's generations: the current one's number, ring and two-level plan. */
  protected readonly gen: Generations;
  protected step: number;
  private current: Phase = { kind: 'between' };
  /** Where the job's time goes: milliseconds in each kind of phase (phaseTimes()). */
  protected readonly clock = new PhaseClock('between');
  protected readonly evals: Evaluations;
  /** The newest stored checkpoint and the uploads expected. */
  protected readonly ckpt: CheckpointBook;
  protected readonly timeouts: DriverTimeouts;
  /** The steps' planning state and commit bookkeeping. */
  private readonly steps: StepBook;
  /** Make before break: a membership change announced to the new ring before it is made. */
  protected readonly ahead: DialAhead;
  /** Steps committed by the current generation (a new one forms its links during its first). */
  private generationSteps = 0;
  protected timer: ReturnType<typeof setInterval> | null = null;
  /** Asked to pause: the job holds at the next step boundary until resume(). */
  protected pauseAsked = false;
  /** The last commit's metrics records and live events, owed until its turn's assignments are out (commit()). */
  private owedRecords: (() => void) | null = null;
  /** In a commit's turn (commit() to startStep's assignments): announcements sent meanwhile wait in owedSends. */
  private inTurn = false;
  private owedSends: [string, CoordinatorMessage][] = [];
  /**
   * The last startStep's times (performance.now()): begun, planned, sending from, and all its assignments handed to the
   * sockets (`at`: a turn ends there, Driver.turns).
   */
  protected assigned = { startedAt: 0, plannedAt: 0, sendFrom: 0, at: 0 };
  private resolveDone!: () => void;
  /** Peers waiting for a place in a full ring (MAX_RING), as last said in the log. */
  private standbys = 0;
  /** Links that failed to open in earlier rings, by peer name: the evidence blame weighs (blame.ts). */
  private linkEvidence = noEvidence();
  /** Failed leaves in a row with one cause and no commit between (src/client/failure-streak.ts). */
  private failures = noStreak();
  private resolveHalt!: (reason: string) => void;
  /** Resolves with the reason when the job pauses itself on a failure that repeats (an admin's resume goes on). */
  readonly halted: Promise<string>;
  /** Resolves when the job has run its last step (and its final checkpoint is stored). */
  readonly finished: Promise<void>;

  constructor(protected readonly d: DriverDeps) {
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...d.timeouts };
    this.steps = new StepBook(d, this.timeouts.stepMs);
    this.gen = new Generations(d.generation, d.job.twoLevelFrom);
    this.ahead = new DialAhead(this.timeouts.prepareMs);
    this.evals = new Evaluations(d, this.timeouts.evalMs);
    this.ckpt = new CheckpointBook(d.checkpointStep, d.keptCheckpoints, d.job.keepCheckpoints);
    this.step = d.checkpointStep ?? 0;
    this.finished = new Promise((r) => { this.resolveDone = r; });
    this.halted = new Promise((r) => { this.resolveHalt = r; });
  }

  protected get phase(): Phase {
    return this.current;
  }

  protected set phase(p: Phase) {
    this.clock.enter(p.kind);
    this.current = p;
  }

  /** The current generation's ring, in rank order. */
  protected get ring(): readonly string[] {
    return this.gen.ring;
  }

  /** Stops the timer of the deadlines (Driver's tick). */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  peerGone(id: string, reason: string): void {
    this.gone([id], reason);
  }

  /**
   * A peer left because its work failed (Leave.failed): after HALT_AFTER such leaves in a row with
   * one cause and no step committed between, rejoining would only repeat it, so the job pauses
   * at the boundary and says why (metrics, events, log, `halted`).
   */
  protected workFailed(id: string, reason: string): void {
    this.failures = failed(this.failures, reason);
    if (!halts(this.failures)) return;
    const why = `the same failure ended peers' work ${this.failures.count} times in a row with no step committed (last: ${id}): ${reason}`;
    this.failures = noStreak();
    this.halt(why, 'fix what it says, then resume it (POST /api/admin/resume)');
  }

  /** The job pauses at the next boundary and says why (log with `advice`, metrics, events, `halted`). */
  private halt(why: string, advice: string): void {
    this.d.log(`job paused: ${why}; ${advice}`);
    this.record({ type: 'halted', time: Date.now(), step: this.step, reason: why }, { type: 'halted', step: this.step, reason: why });
    this.pauseAsked = true;
    this.resolveHalt(why);
  }

  /**
   * Sessions that closed together (a machine with several volunteers crashed): each forgotten
   * with its reason, then one abort and one new generation for all of them, not one per session.
   */
  peersGone(gone: readonly { id: string; reason: string }[]): void {
    const left = gone.flatMap((g) => this.forget([g.id], g.reason));
    const reasons = [...new Set(gone.filter((g) => left.includes(g.id)).map((g) => g.reason))];
    if (left.length) this.lose(left, `${left.join(', ')} left (${reasons.join('; ')})`);
  }

  /** Forgets peers (their sessions are closed or closing) and redoes what was in flight with them. */
  protected gone(ids: readonly string[], reason: string): void {
    this.peersGone(ids.map((id) => ({ id, reason })));
  }

  /** Removes peers from the tables and says so; returns those that were here (none after the end: leaving is the plan). */
  private forget(ids: readonly string[], reason: string): string[] {
    const left = ids.filter((id) => this.peers.delete(id));
    if (left.length === 0 || this.phase.kind === 'done') return [];
    for (const id of left) {
      this.ckpt.forget(id);
      this.flushRecords();
      this.d.publish({ type: 'peer-left', peerId: id, reason });
      this.d.log(`peer ${id} left: ${reason}`);
    }
    return left;
  }

  // ---- the state machine -------------------------------------------------------------------

  protected advance(): void {
    const ph = this.phase;
    switch (ph.kind) {
      case 'running':
        // Results are taken from members only, once each (driver.ts): all are in when there are as many.
        if (ph.results.size === ph.ring.length) this.commit(ph);
        return;
      case 'evaluating':
        if (ph.pending.size === 0) this.finishEval(ph);
        return;
      case 'admitting':
        return this.admitProgress(ph);
      case 'finishing':
        if (this.ckpt.step !== ph.step) return;
        return ph.then === 'done' ? this.finish() : this.boundary();
      case 'between':
        return this.boundary();
      case 'paused':
      case 'done':
        return;
    }
  }

  protected boundary(): void {
    if (this.pauseAsked) {
      this.phase = { kind: 'paused' };
      return;
    }
    this.phase = { kind: 'between' };
    const now = Date.now();
    // A ring holds at most MAX_RING peers (every message naming it is bounded so): the rest wait, first come first in.
    const room = Math.max(0, MAX_RING - this.ring.length);
    const ready = [...this.peers.values()].filter((p) => p.state === 'waiting' && (p.admitAfter <= now || this.ring.length === 0)).map((p) => p.id);
    const waiting = ready.slice(0, room);
    if (ready.length > room && this.standbys !== ready.length - room) {
      this.d.log(`the ring is full (${MAX_RING} peers, the protocol's most): ${ready.length - room} peer(s) wait for a place`);
    }
    this.standbys = Math.max(0, ready.length - room);
    if (this.ring.length === 0 && waiting.length < this.d.job.minPeers) return; // idle until enough peers came
    // Joiners enter at a round boundary, after the survivors of an aborted attempt finished it
    // (driver-steps.ts); under churn in a big ring they may wait for more (driver-generations.ts).
    const roundPending = this.steps.survivorsFirst(this.step, this.ring, ringSpeeds(this.ring, this.peers), this.ckpt.loadable(this.step));
    const admitNow = this.ring.length === 0
      || (waiting.length > 0 && !roundPending && this.gen.admitDue(waiting.map((id) => this.peers.get(id)!.waitingSince), this.timeouts.admitGapMs, now));
    // Members that asked to leave after their step: their step is committed, so they go without
    // aborting anything. Under churn in a big ring they train on (at most leaveHoldMs) and
    // go with the next admission, so that leaves and joins make one new generation, not one each:
    // each generation's first step waits for its new links to be dialed.
    const leaving = this.ring.filter((id) => this.peers.get(id)?.leavingSince !== undefined);
    const gap = this.timeouts.admitGapMs;
    const leaveNow = leaving.length > 0 && (admitNow || this.gen.leaveDue(leaving.map((id) => this.peers.get(id)!.leavingSince!), gap, leaveHoldMs(gap), now));
    // The last members go: their weights are saved first, so that joiners (now or later) resume
    // at this step instead of redoing the steps since the newest checkpoint.
    const emptying = leaveNow && leaving.length === this.ring.length;
    if (emptying && !this.ckpt.loadable(this.step)) return this.startFinishing('idle');
    // Made now, announced first (the ring trains on meanwhile), or one announced earlier made now
    // (after the survivors of an aborted attempt finished it, as for any admission).
    // (The last members' leave is made now: no ring is left to announce it to.)
    const change = this.ahead.pending
      ? (roundPending ? null : this.ahead.take(now))
      : emptying
        ? { joiners: admitNow ? waiting : [], leavers: leaving }
        : admitNow || leaveNow ? this.announce(admitNow ? waiting : [], leaveNow ? leaving : [], now) : null;
    if (change && this.changeMembers(change.joiners, change.leavers)) return;
    if (this.ring.length === 0) {
      const from = this.ckpt.step === null ? 'the seed' : `the checkpoint of step ${this.ckpt.step}`;
      this.d.log(`every member has left after step ${this.step}; waiting for peers to resume ${this.ckpt.step === this.step ? 'at it' : `from ${from}`}`);
      // Joiners that were waiting their turn may enter now (the next boundary, with no ring, takes them all).
      return [...this.peers.values()].some((p) => p.state === 'waiting') ? this.boundary() : undefined;
    }
    const last = this.step >= this.d.job.totalSteps;
    if (this.evals.due(this.step, last, this.steps.crossed(this.step, this.d.job.evalEvery))) return this.startEval();
    if (last) return this.startFinishing('done');
    this.startStep();
  }

  /**
   * A planned change (joiners in, leavers out) of a formed ring of ADMIT_BATCH_FROM or more is
   * announced to the new ring first and made later (null now; driver-ahead.ts); any other is
   * made now (returned as is).
   */
  private announce(joiners: string[], leavers: string[], now: number): { joiners: readonly string[]; leavers: readonly string[] } | null {
    if (!this.ahead.enabled || this.ring.length < ADMIT_BATCH_FROM || this.generationSteps === 0) return { joiners, leavers };
    const plan = this.gen.prepare([...this.ring.filter((id) => !leavers.includes(id)), ...joiners], this.peers);
    // In a commit's turn these go after the next step's assignments (startStep): the ring trains on meanwhile either way.
    for (const [id, m] of this.ahead.begin(joiners, leavers, plan, now)) this.sendAfterTurn(id, m);
    this.d.log(`a ring of ${plan.ring.length} announced ahead (${joiners.length} joining, ${leavers.length} leaving): `
      + 'its members dial their new links while the ring trains on');
    return null;
  }

  /**
   * Lets the leavers (still members, still leaving) go after their committed step and admits the
   * joiners (still waiting). True: the state machine moved on (an admission began).
   */
  private changeMembers(joiners: readonly string[], leavers: readonly string[]): boolean {
    const going = leavers.filter((id) => this.ring.includes(id) && this.peers.get(id)?.leavingSince !== undefined);
    for (const id of going) this.d.send(id, { type: 'done', step: this.step, reason: 'left after its step, as its owner asked' });
    const left = this.forget(going, 'left after its step (stopped by its owner)');
    if (left.length) this.setRing(this.ring.filter((id) => !left.includes(id)));
    const entering = joiners.filter((id) => this.peers.get(id)?.state === 'waiting');
    if (entering.length === 0) return false;
    this.startAdmission(entering);
    return true;
  }

  private startAdmission(joiners: string[], undo = false): void {
    const now = Date.now();
    for (const id of joiners) this.peers.get(id)!.state = 'loading';
    if (this.ring.length === 0) {
      this.steps.forget(); // nobody holds the round's work any more
      const from = this.ckpt.step ?? 0;
      if (from !== this.step) {
        this.d.log(`no peer holds the weights of step ${this.step}: resuming from ${this.ckpt.step === null ? 'the seed' : `the checkpoint of step ${from}`}`);
      }
      this.step = from;
    }
    const uploadFrom = this.ckpt.loadable(this.step) ? null : this.ring[0]!;
    this.phase = { kind: 'admitting', step: this.step, joiners, uploadFrom, loadSent: false, deadline: now + this.timeouts.admitMs, ...(undo ? { undo } : {}) };
    if (uploadFrom) {
      this.ckpt.expect(uploadFrom, this.step);
      if (!this.d.send(uploadFrom, { type: 'upload-checkpoint', step: this.step })) return this.peerGone(uploadFrom, 'its session is closed');
    }
    this.admitProgress(this.phase);
  }

  private admitProgress(ph: AdmittingPhase): void {
    if (!this.ckpt.loadable(ph.step)) return; // waiting for the upload
    if (!ph.loadSent) {
      ph.loadSent = true;
      const source = this.ckpt.step === ph.step ? 'checkpoint' : 'seed';
      for (const id of ph.joiners) {
        // Its slice of the first step in the ring announced ahead, if that was hinted: prefetched while it loads.
        const next = this.steps.hintFor(id, ph.step);
        if (this.peers.has(id)) this.d.send(id, { type: 'load-state', source, step: ph.step, ...(next ? { next } : {}) });
      }
    }
    const ready = admitted(ph, this.peers);
    if (!ready) return;
    if (this.ring.length === 0 && ready.length < this.d.job.minPeers && !ph.undo) {
      // A joiner of the first ring failed to load (evicted, or gone): the job still waits for
      // minPeers loaded peers rather than starting smaller (the loaded ones wait again).
      this.d.log(`only ${ready.length} of ${ph.joiners.length} joiners loaded; the first ring waits for ${this.d.job.minPeers} peers`);
      requeue(ready, this.peers, { waitingSince: Date.now() });
      this.phase = { kind: 'between' };
      return this.boundary();
    }
    this.setRing([...this.ring, ...ready]);
    this.boundary();
  }

  private startStep(): void {
    const startedAt = performance.now();
    // Nothing announced is pending: a plan made ahead that did not come true is forgotten.
    if (!this.ahead.pending) this.gen.dropPrepared();
    const coming = this.ahead.armed ? this.gen.prepared?.ring ?? null : null;
    const s = this.steps.begin({
      step: this.step, generation: this.gen.generation, ring: this.ring, speeds: ringSpeeds(this.ring, this.peers), topology: this.gen.topology,
      checkpointStep: this.ckpt.step,
      coming: coming ? { ring: coming, speeds: ringSpeeds(coming, this.peers) } : null,
      microBatches: this.ring.map((id) => this.peers.get(id)?.microBatch),
    });
    const plannedAt = performance.now();
    if (s.rerun) this.d.log(rerunLine(s.rerun, this.step, this.gen.generation, this.ring));
    // The change is made after this step: the joiners learn their first slice now, to load it while they wait.
    if (coming) for (const [id, m] of this.ahead.joinerHints(this.gen.prepared, (j) => this.steps.hintFor(j, this.step + 1))) this.d.send(id, m);
    this.phase = s.phase;
    if (s.upload) this.ckpt.expect(this.ring[0]!, this.step);
    // Known once the upload is expected: the uploader may stay silent as long as an upload may take.
    const deadMs = ringDeadMs(s.phase, this.peers, (id) => this.ckpt.uploading(id), this.timeouts, this.firstStepOfGeneration, this.d.job.ringFormMs);
    for (const a of s.assignments) a.deadMs = deadMs;
    const sendFrom = performance.now();
    this.sendToRing(s.assignments);
    this.assigned = { startedAt, plannedAt, sendFrom, at: performance.now() };
    // What waited for the assignments, and work the next turns need, done while the ring computes.
    this.afterTurn();
    this.steps.warmAhead(this.step);
  }

  /** Sends each member its message (by rank); those whose session is closed are gone. */
  private sendToRing(messages: readonly CoordinatorMessage[]): void {
    const lost: string[] = [];
    this.ring.forEach((id, rank) => { if (!this.d.send(id, messages[rank]!)) lost.push(id); });
    if (lost.length) this.gone(lost, 'its session is closed');
  }

  private commit(ph: RunningPhase): void {
    // A hearing under way: its answers decide (heard()).
    if (ph.hearing) return;
    const results = ph.ring.map((id) => ph.results.get(id)!);
    const { winner, dissent } = checksumVote(results);
    if (dissent.length && this.hearable(ph)) return this.hear(ph, dissent.length);
    if (dissent.length && this.steps.audits && ph.verified && ph.ring.length >= 3) {
      // A two-level generation's hops are not checked: the same members in one flat ring, where a hearing can.
      return this.judged(ph, {
        kind: 'again', order: [...ph.ring],
        reason: `after step ${ph.step + 1} ${dissent.length} of ${ph.ring.length} members of a two-level generation hold other weights than the rest: `
          + 'the step runs again in one flat ring, where their hop records can be heard',
      });
    }
    if (dissent.length) return this.evict(dissent, `its weights after step ${ph.step + 1} differ from the ring's (the ring has checksum ${winner})`);
    if (this.steps.audits && ph.verified && !this.verified(ph, results)) return;
    if (this.steps.audits && ph.verified) this.verification(this.steps.audits.report(ph.step + ph.steps));
    const now = Date.now();
    const { verdict, sync } = this.steps.committed(ph, now - ph.started, results);
    if (verdict) this.d.log(verdictLine(verdict));
    this.generationSteps++;
    this.clock.committed(now - ph.started);
    this.step = ph.step + ph.steps;
    this.failures = noStreak();
    if (sync) this.d.log(decisionLine(sync));
    // The step's records wait until the next step's assignments are out (startStep): nobody waits for them, and at 1,000
    // peers they took ~2.5 ms of the turn. Any other record made meanwhile goes after them (record()), so the order holds.
    const step = this.step;
    this.owedRecords = () => {
      const { record, event } = commitRecords(ph, results, step, now);
      this.d.metrics.append(record);
      this.d.publish(event);
      if (sync) {
        this.d.metrics.append({ type: 'sync', time: now, ...sync });
        this.d.publish({ type: 'sync', ...sync });
      }
    };
    this.phase = { kind: 'between' };
    this.inTurn = true;
    try {
      this.advance();
    } finally {
      this.afterTurn();
    }
  }

  /** Sends `m` now, or in a commit's turn once the next step's assignments are out (afterTurn). */
  private sendAfterTurn(id: string, m: CoordinatorMessage): void {
    if (this.inTurn) this.owedSends.push([id, m]);
    else this.d.send(id, m);
  }

  /** Ends a commit's turn: the messages and records that waited for its assignments go now. */
  private afterTurn(): void {
    this.inTurn = false;
    const owed = this.owedSends;
    this.owedSends = [];
    for (const [id, m] of owed) this.d.send(id, m);
    this.flushRecords();
  }

  /** Appends a metrics record and publishes its live event, after the commit records still owed. */
  protected record(r: MetricRecord, e: LiveEvent): void {
    this.flushRecords();
    this.d.metrics.append(r);
    this.d.publish(e);
  }

  /** Writes the last commit's records if they are still owed. */
  protected flushRecords(): void {
    const owed = this.owedRecords;
    this.owedRecords = null;
    owed?.();
  }

  /**
   * Whether a verified step whose members' weights differ is heard (protocol 15) before anyone is evicted: a flat ring of 3
   * or more, whose members keep their hop records. A member that relays other than it received makes those after it differ.
   */
  private hearable(ph: RunningPhase): boolean {
    return this.steps.audits !== null && ph.verified !== undefined && this.gen.topology === null && ph.ring.length >= 3;
  }

  /** Starts a hearing of `ph`: a fresh seed to every member, each to answer with its hop records under it (driver.ts, heard()). */
  private hear(ph: RunningPhase, dissenting: number): void {
    const seed = randomInt(0x1_0000_0000);
    ph.hearing = { seed, replies: new Map(), deadline: Date.now() + this.timeouts.hearingMs };
    this.d.log(`verification: after step ${ph.step + 1} ${dissenting} of ${ph.ring.length} members hold other weights than the rest: `
      + 'each member\'s hop records are heard under a fresh seed before anyone is evicted');
    this.sendToRing(ph.ring.map(() => ({ type: 'hop-seed', generation: ph.generation, step: ph.step, seed })));
  }

  /**
   * Every member of a hearing answered: the hop checks of its answers (audits.ts hearingVerdict) evict, order the step again
   * or halt; where every record agrees, the members whose weights differ computed them so themselves, and are evicted.
   */
  protected heard(ph: RunningPhase): void {
    const h = ph.hearing!;
    const replies = ph.ring.map((id) => h.replies.get(id)!);
    const v = this.steps.audits!.hearingVerdict(ph.step, ph.ring, replies, h.seed);
    if (v) {
      this.judged(ph, v);
      return;
    }
    const { winner, dissent } = checksumVote(ph.ring.map((id) => ph.results.get(id)!));
    this.evict(dissent, `its weights after step ${ph.step + 1} differ from the ring's (the ring has checksum ${winner}), `
      + 'and every hop record of the step agrees with its neighbours\': this peer computed them so itself');
  }

  /**
   * A verified step's reports (audits.ts) before it commits: true when it may; otherwise the
   * culprit is evicted, or the step runs again in a new generation of the same ring (a dispute or
   * a sum that does not add up), or the job halts (the same step's sum failed twice).
   */
  private verified(ph: RunningPhase, results: readonly StepResult[]): boolean {
    const v = this.steps.audits!.verdict(ph.step, results, this.gen.topology === null, ph.verified?.oneBatch);
    if (v.kind === 'ok') {
      const audited = new Set(v.audited);
      noteUnaudited(results.map((r) => ({ id: r.peerId, images: r.images })), audited, ph.step, (id) => this.peers.get(id)?.unauditedFrom, (id, s) => {
        const p = this.peers.get(id);
        if (p) p.unauditedFrom = s;
      });
      return true;
    }
    this.judged(ph, v);
    return false;
  }

  /** A verdict against `ph` (verified(), heard()): its culprits evicted (their unaudited work undone), the step again, or a halt. */
  private judged(ph: RunningPhase, v: Exclude<AuditVerdict, { kind: 'ok' }>): void {
    this.d.log(`verification: ${v.reason}`);
    if (v.kind === 'evict') {
      this.steps.audits!.forget(v.ids);
      this.d.convicted?.(v.ids, v.reason, ph.step + 1);
      const names = v.ids.map((id) => this.peers.get(id)?.name ?? id);
      this.verification(this.steps.audits!.report(ph.step + 1, { names, reason: v.reason }));
      const undo = undoPoint(v.ids.map((id) => this.peers.get(id)?.unauditedFrom), this.step, this.ckpt.steps);
      if (undo) this.undo(ph, v.ids, names, undo);
      this.evict(v.ids, v.reason);
      return;
    }
    if (v.kind === 'halt') this.halt(v.reason, 'resume it (POST /api/admin/resume) once the ring is one you trust');
    // Hop evidence: the same members in one flat ring (its hops are checked), in an order that parts those whose records
    // disagreed, or as they were where a two-level generation's sum did not add up (a plan made ahead is of the old order).
    const order = v.kind === 'again' && v.order && (v.order.join() !== this.ring.join() || this.gen.topology !== null) ? v.order : null;
    if (order) {
      this.gen.dropPrepared();
      this.began(this.gen.next(order, this.peers, Date.now(), true));
    } else this.began(this.gen.again(this.peers, Date.now()));
    this.abortStep(ph, v.reason);
    this.advance();
  }

  /**
   * Convicted members' unaudited work is undone (undo.ts): the running step is aborted, the ring's
   * other members reload the weights of `u.to` (a kept checkpoint, or the seed) and the steps
   * after it run again; the checkpoints after it are removed. The convicted are evicted next.
   */
  private undo(ph: RunningPhase, convicted: readonly string[], names: readonly string[], u: { first: number; to: number }): void {
    this.d.log(undoLine(names, u, this.step));
    const survivors = this.ring.filter((id) => !convicted.includes(id));
    this.abortStep(ph, `undone to step ${u.to}: ${names.join(', ')} convicted`, false, `the others go back to step ${u.to}`);
    this.ckpt.rollTo(u.to);
    this.d.discardCheckpointsAfter?.(u.to);
    this.step = u.to;
    for (const id of survivors) {
      const p = this.peers.get(id);
      if (p) p.unauditedFrom = afterUndo(p.unauditedFrom, u.to);
    }
    this.gen.dropPrepared();
    // With the ring empty, the admission forgets the sums kept for a re-run (computed on weights being undone) and loads `u.to`.
    this.setRing([]);
    this.startAdmission(survivors, true);
  }

  /** A verification tally (audits.ts report) into the metrics and to the dashboards. */
  private verification(tally: VerificationTally | null): void {
    if (!tally) return;
    this.record({ type: 'verification', time: Date.now(), ...tally }, { type: 'verification', ...tally });
  }

  private startEval(): void {
    const { phase, messages } = this.evals.begin(this.step, this.ring, this.peers);
    this.phase = phase;
    this.sendToRing(messages);
  }

  private finishEval(ph: EvaluatingPhase): void {
    this.evals.end(ph);
    this.phase = { kind: 'between' };
    this.advance();
  }

  private startFinishing(then: 'done' | 'idle'): void {
    if (this.ckpt.step === this.step) return then === 'done' ? this.finish() : this.boundary();
    const from = this.ring[0]!;
    if (then === 'idle') this.d.log(`every member is leaving after step ${this.step}: ${from} uploads its checkpoint before they go`);
    this.phase = { kind: 'finishing', step: this.step, uploadFrom: from, deadline: Date.now() + this.timeouts.admitMs, then };
    this.ckpt.expect(from, this.step);
    if (!this.d.send(from, { type: 'upload-checkpoint', step: this.step })) this.peerGone(from, 'its session is closed');
  }

  private finish(): void {
    this.phase = { kind: 'done' };
    for (const id of this.peers.keys()) this.d.send(id, { type: 'done', step: this.step, reason: `the job has run its ${this.d.job.totalSteps} steps` });
    this.record({ type: 'done', time: Date.now(), step: this.step }, { type: 'done', step: this.step });
    this.stop();
    this.resolveDone();
  }

  // ---- membership ----------------------------------------------------------------------------

  /** Begins a new generation over `ring` unless it is the current ring. */
  private setRing(ring: readonly string[]): void {
    this.began(this.gen.next(ring, this.peers, Date.now()));
  }

  /** A generation began (null: none did): its steps are counted from 0, and it is recorded. */
  private began(g: { record: MetricRecord; event: LiveEvent } | null): void {
    if (!g) return;
    this.generationSteps = 0;
    this.record(g.record, g.event);
  }

  /** A ring failure that blames a member: it is evicted, or (a likely formation race) the ring is formed again with it once. */
  protected ringFailed(ph: RunningPhase, kind: RingErrorKind, f: { evict: string; reason: string }): void {
    const blamed = this.peers.get(f.evict);
    const now = Date.now();
    if (!blamed || !formAgain(kind, this.firstStepOfGeneration, blamed.formedAgainAt, now)) return this.evict([f.evict], f.reason);
    blamed.formedAgainAt = now;
    this.began(this.gen.again(this.peers, now));
    this.abortStep(ph, `${f.reason}; ${f.evict} is still connected, so the ring forms again with it once`, true);
    this.advance();
  }

  /** Whether the running step is its generation's first (its links were just formed). */
  protected get firstStepOfGeneration(): boolean {
    return this.generationSteps === 0;
  }

  /**
   * Decides the collected failure reports of `ph`: connect-failed edges, if any, by the evidence (blame.ts); else the first report
   * of a link closed or silent in the generation's first step, as any ring failure (ringFailed).
   */
  protected decideUnreachable(ph: RunningPhase): void {
    if (!ph.unreachable || this.phase !== ph) return;
    if (!ph.unreachable.edges.length) {
      const first = ph.unreachable.races[0];
      if (first) this.ringFailed(ph, first.kind, first);
      return;
    }
    // Peers by their volunteer names: a machine that rejoins under a new id is one partner (blame.ts).
    const identity = (id: string) => this.peers.get(id)?.name ?? id;
    const v = unreachableVerdict(ph, ph.unreachable, this.linkEvidence, identity);
    this.linkEvidence = withFailures(this.linkEvidence, ph.unreachable.edges.map(([a, b]): [string, string] => [identity(a), identity(b)]), Date.now());
    this.evict([v.evict], v.reason, 'unreachable');
  }

  /** Removes peers that are still connected (their sessions are closed; they may rejoin fresh). */
  protected evict(ids: readonly string[], reason: string, cause?: 'unreachable'): void {
    for (const id of ids) {
      this.d.send(id, { type: 'evicted', reason, ...(cause ? { cause } : {}) });
      this.d.disconnect(id, reason);
    }
    this.gone(ids, `evicted: ${reason}`);
  }

  /** Members are gone: whatever was in flight with them is aborted and redone without them. */
  private lose(ids: string[], reason: string): void {
    const ph = this.phase;
    if (ph.kind === 'done') return;
    const members = ids.filter((id) => this.ring.includes(id));
    // A ring announced ahead with these peers in it: adapted without them, and announced again.
    const planned = this.gen.prepared;
    const lostFromPlan = planned ? ids.filter((id) => planned.ring.includes(id)) : [];
    if (lostFromPlan.length) {
      const plan = this.gen.prepareWithout(lostFromPlan, this.peers);
      for (const [id, m] of this.ahead.without(lostFromPlan, plan)) this.d.send(id, m);
    }
    if (ph.kind === 'admitting') {
      if (ph.uploadFrom && ids.includes(ph.uploadFrom) && this.ckpt.step !== ph.step) {
        // The upload will not come: back to waiting; the next boundary asks a survivor.
        requeue(ph.joiners, this.peers, { waitingSince: Date.now() });
        this.setRing(this.ring.filter((id) => !members.includes(id)));
        this.phase = { kind: 'between' };
        return this.advance();
      }
    }
    if (members.length === 0) return this.advance();
    this.setRing(this.ring.filter((id) => !members.includes(id)));
    if (ph.kind === 'running') {
      this.abortStep(ph, reason);
    } else if (ph.kind === 'evaluating') {
      for (const id of members) ph.pending.delete(id);
    } else if (ph.kind === 'finishing' && members.includes(ph.uploadFrom)) {
      this.phase = { kind: 'between' };
    }
    this.advance();
  }

  /** The running step is given up (the ring is a new generation now): its members' sums are kept for its re-run. */
  private abortStep(ph: RunningPhase, reason: string, formedAgain = false, then = `running it again with ${this.ring.length} peer(s)`): void {
    this.steps.aborted(ph);
    // Metrics and events number steps from 1 (step n: the n-th update; weights "of step n" are after it).
    this.record(
      { type: 'abort', time: Date.now(), step: ph.step + 1, generation: ph.generation, reason, ...(formedAgain ? { formedAgain } : {}) },
      { type: 'step-aborted', step: ph.step + 1, generation: ph.generation, reason },
    );
    this.d.log(`step ${ph.step + 1} of generation ${ph.generation} aborted: ${reason}; ${then}`);
    this.phase = { kind: 'between' };
  }
}
