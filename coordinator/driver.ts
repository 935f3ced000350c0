// The training driver: the coordinator's state machine for one job. It owns membership (ring
// generations), the step barrier, evaluation, checkpoints and the end of the job; peers talk
// to it through their session sockets (sessions.ts) and checkpoint uploads (routes.ts).
//
//   between steps:  final? -> evaluate? -> admit joiners? -> assign step s to the ring
//   admitting:      a checkpoint of step s is uploaded (unless stored), joiners load it (or
//                   the seed), then the ring grows by the ready ones: generation g+1
//   running:        every member reports step s with the same weight checksum -> commit
//                   (s+1); a member lost, a collective failure, a checksum dissent or a
//                   timeout -> abort: the survivors form g+1 and the SAME step s runs again
//                   (peers undo s if they applied it); in sync mode each survivor keeps the
//                   gradient sum of its slice and computes only its share of the lost
//                   members' ids (slice-rerun.ts); joiners wait for the step's commit
//   evaluating:     members evaluate their share of the val ids on the weights of s
//   finishing:      final evaluation, final checkpoint, 'done' to everyone
//
// A step's sample ids come from the seeded sampler (src/train/sampler.ts: global or
// shard-local), so a re-run uses the same samples whatever the ring, and the dead peer's share
// is computed by the others (only that share, where they kept their own: slice-rerun.ts). In
// sync mode each assignment also carries the peer's slice of the next step (a prefetch hint); when that step starts with the same ring it is assigned
// exactly so (step-plan.ts, affinity.ts). The ring shrinking to nobody loses the steps since the newest checkpoint: the
// job resumes from it (same samples again) when peers come back.
import { UNREACHABLE_GRACE_MS, blameUnreachable } from './blame.ts';
import { addToTally, evalMessages, startTally, tallySummary, type EvalTally } from './eval-tally.ts';
import type { CoordinatorMessage, Evaluate, LiveEvent, PeerMessage, PeerStepTiming, StepResult } from '../src/client/protocol.ts';
import { emptyAffinity, type AffinityState } from './affinity.ts';
import { splitBatch, type JobConfig } from './job.ts';
import { jobSampler, planStep, steadySplit, type JobSampler, type StepPlan } from './step-plan.ts';
import { planImages, planRound, roundAssignment, type RoundPlan } from './rounds.ts';
import type { MetricsLog } from './metrics.ts';
import { silenceLimitMs } from './silence.ts';
import { keptSlices, planRerun, sampleDigest, type KeptSlices, type RerunPlan } from './slice-rerun.ts';
import { observeLinks, planGeneration, type LinkObservation } from './two-level.ts';
import type { Topology } from '../src/comm/topology.ts';

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
   * boundary admits.
   */
  admitGapMs: number;
}

// Generous: a peer that leaves closes its session and is noticed at once; these only catch
// peers that hang while connected, and a big model on a CPU-only volunteer is slow.
/**
 * Rings smaller than this admit joiners at once even under churn: there a membership change is
 * cheap and rare, and each joiner is a large share of the ring (a short job would end first).
 */
export const ADMIT_BATCH_FROM = 8;

export const DEFAULT_TIMEOUTS: DriverTimeouts = { stepMs: 120_000, admitMs: 120_000, evalMs: 300_000, silentMs: 6_000, firstSilentMs: 30_000, admitGapMs: 2_000 };

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
  metrics: MetricsLog;
  send(peerId: string, m: CoordinatorMessage): boolean;
  /** Ends a peer's session (it may rejoin as a new peer). */
  disconnect(peerId: string, reason: string): void;
  publish(e: LiveEvent): void;
  log(line: string): void;
  timeouts?: Partial<DriverTimeouts>;
}

interface PeerRec {
  id: string;
  name: string | null;
  state: 'waiting' | 'loading' | 'ready' | 'member';
  lastSeen: number;
  /** The longest time between two of its messages so far (its heartbeats stall while it computes). */
  maxGap: number;
  /** Measured images/s of compute (EMA), null until its first step. */
  ips: number | null;
  /** Its longest step work (computeMs + dataMs) so far, null until its first step: bounds a compute that blocks its heartbeats. */
  maxWorkMs: number | null;
  /** Its largest step work per computed image so far (a bigger slice, e.g. after a loss, blocks longer). */
  workPerImage: number;
  device: string;
  /** What its step results showed of its ring links (the two-level plan: two-level.ts). */
  links: LinkObservation;
  /** Not admitted before this time (its last admission failed for want of a checkpoint). */
  admitAfter: number;
  /** When it began waiting for admission (the joiner batching of boundary()). */
  waitingSince: number;
  /** It asked to leave after the running step (Leave.afterStep): let go at the next boundary. */
  leaving?: boolean;
}

type Phase =
  | { kind: 'between' }
  | { kind: 'admitting'; step: number; joiners: string[]; uploadFrom: string | null; loadSent: boolean; deadline: number }
  | { kind: 'running'; step: number; steps: number; generation: number; ring: string[]; results: Map<string, StepResult>; started: number; deadline: number; unreachable?: Unreachable;
      /** Sync steps: each member's slice (slices[rank]) and the step's epoch; null for a round. */
      slices: number[][] | null; epoch: number }
  | { kind: 'evaluating'; step: number; pending: Map<string, Evaluate>; tally: EvalTally; deadline: number }
  | { kind: 'finishing'; step: number; uploadFrom: string; deadline: number }
  | { kind: 'paused' }
  | { kind: 'done' };

/** connect-failed reports of a running ring (blame.ts), decided at `decideAt` or when every member reported. */
interface Unreachable { edges: [string, string][]; reporters: Set<string>; decideAt: number }

export interface DriverStatus { step: number; generation: number; peers: number; phase: Phase['kind']; ring: string[]; topology: Topology | null }

export class Driver {
  private readonly peers = new Map<string, PeerRec>();
  private ring: string[] = [];
  /** The generation's two-level plan (its groups, in order, are `ring`), or null: a flat ring. */
  private topology: Topology | null = null;
  /** When the newest generation and the one before it began (joiner batching). */
  private generationAt = 0;
  private previousGenerationAt = 0;
  private generation: number;
  private step: number;
  private checkpointStep: number | null;
  private phase: Phase = { kind: 'between' };
  private readonly evaluated = new Set<number>();
  /** Checkpoint uploads expected: peer id -> step. */
  private readonly uploads = new Map<string, number>();
  private readonly timeouts: DriverTimeouts;
  private recentStepMs: number[] = [];
  /** Rounds (syncEvery > 1): the round in flight, kept when it is aborted so survivors reuse their work. */
  private round: RoundPlan | null = null;
  /** Sync mode: the slices whose gradient sums the members of the last aborted attempt kept (slice-rerun.ts). */
  private kept: KeptSlices | null = null;
  /** Steps the last commit advanced (1, or a round's length): evaluations and checkpoints fall due on crossing a multiple. */
  private lastAdvance = 1;
  private readonly sampler: JobSampler;
  /** Which shards each peer holds (shard-local sampling): what it was given ids of. */
  private affinity: AffinityState = emptyAffinity();
  /** The split of the last step assigned (shard-local jobs keep it while speeds only jitter). */
  private lastSplit: { ring: string[]; images: number[] } | null = null;
  /** The next step's plan as hinted to the ring of `generation`: assigned as is if that ring runs it. */
  private hinted: { generation: number; ring: readonly string[]; plan: StepPlan } | null = null;
  private timer: ReturnType<typeof setInterval> | null = null;
  /** Asked to pause: the job holds at the next step boundary until resume(). */
  private pauseAsked = false;
  private resolveDone!: () => void;
  /** Resolves when the job has run its last step (and its final checkpoint is stored). */
  readonly finished: Promise<void>;

  constructor(private readonly d: DriverDeps) {
    this.timeouts = { ...DEFAULT_TIMEOUTS, ...d.timeouts };
    this.sampler = jobSampler(d.job, d.trainSamples, d.trainShards);
    this.generation = d.generation;
    this.checkpointStep = d.checkpointStep;
    this.step = d.checkpointStep ?? 0;
    for (const s of d.evaluated ?? []) this.evaluated.add(s);
    this.finished = new Promise((r) => { this.resolveDone = r; });
    this.timer = setInterval(() => this.tick(), 250);
    this.timer.unref?.();
  }

  status(): DriverStatus {
    return { step: this.step, generation: this.generation, peers: this.peers.size, phase: this.phase.kind, ring: [...this.ring], topology: this.topology };
  }

  /** Holds the job at the next step boundary (peers stay connected and idle). */
  pause(): void {
    this.pauseAsked = true;
    this.advance();
  }

  resume(): void {
    this.pauseAsked = false;
    if (this.phase.kind === 'paused') this.phase = { kind: 'between' };
    this.advance();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  // ---- inputs ----------------------------------------------------------------------------

  peerConnected(id: string, name: string | null): void {
    if (this.phase.kind === 'done') {
      this.d.send(id, { type: 'done', step: this.step, reason: 'the job has finished' });
      return;
    }
    this.peers.set(id, { id, name, state: 'waiting', lastSeen: Date.now(), maxGap: 0, ips: null, maxWorkMs: null, workPerImage: 0, device: '', links: {}, admitAfter: 0, waitingSince: Date.now() });
    this.advance();
  }

  peerGone(id: string, reason: string): void {
    this.gone([id], reason);
  }

  /** Forgets peers (their sessions are closed or closing) and redoes what was in flight with them. */
  private gone(ids: readonly string[], reason: string): void {
    const left = ids.filter((id) => this.peers.delete(id));
    if (left.length === 0 || this.phase.kind === 'done') return; // after the end, leaving is the plan
    for (const id of left) {
      this.uploads.delete(id);
      this.d.publish({ type: 'peer-left', peerId: id, reason });
      this.d.log(`peer ${id} left: ${reason}`);
    }
    this.lose(left, `${left.join(', ')} left (${reason})`);
  }

  message(id: string, m: PeerMessage): void {
    const peer = this.peers.get(id);
    if (!peer) return;
    const now = Date.now();
    peer.maxGap = Math.max(peer.maxGap, now - peer.lastSeen);
    peer.lastSeen = now;
    const ph = this.phase;
    switch (m.type) {
      case 'heartbeat':
        return;
      case 'leave':
        // A member of the running step that asks to leave after it: let go at its commit
        // (boundary()), so the ring keeps its slice; anyone else is gone now.
        if (m.afterStep && ph.kind === 'running' && ph.ring.includes(id)) {
          peer.leaving = true;
          this.d.log(`peer ${id} leaves after step ${ph.step + 1} (${m.reason ?? 'asked'})`);
          return;
        }
        this.d.disconnect(id, m.reason ?? 'left');
        return this.peerGone(id, m.reason ?? 'left');
      case 'ready':
        if (ph.kind === 'admitting' && peer.state === 'loading' && m.step === ph.step) {
          peer.state = 'ready';
          peer.device = m.device;
          this.advance();
        }
        return;
      case 'step-result':
        if (ph.kind !== 'running' || m.generation !== ph.generation || m.step !== ph.step || !ph.ring.includes(id) || ph.results.has(id)) return;
        ph.results.set(id, m);
        {
          // Speed from what it computed now (not the images it reused from a kept sum).
          const computed = m.images - (m.reused ?? 0);
          if (computed > 0 && m.timings.computeMs > 0) {
            const ips = computed / (m.timings.computeMs / 1000);
            peer.ips = peer.ips === null ? ips : 0.7 * peer.ips + 0.3 * ips;
          }
          const work = m.timings.computeMs + (m.timings.dataMs ?? 0);
          peer.maxWorkMs = Math.max(peer.maxWorkMs ?? 0, work);
          if (computed > 0) peer.workPerImage = Math.max(peer.workPerImage, work / computed);
          peer.links = observeLinks(peer.links, m);
        }
        return this.advance();
      case 'collective-failure': {
        if (ph.kind !== 'running' || m.generation !== ph.generation || m.step !== ph.step || !ph.ring.includes(id)) return;
        if (m.kind === 'connect-failed') {
          // Both ends of a link that never opened report it: collect, then blame (blame.ts).
          const u = ph.unreachable ??= { edges: [], reporters: new Set(), decideAt: Date.now() + UNREACHABLE_GRACE_MS };
          u.edges.push([id, m.failedPeerId]);
          u.reporters.add(id);
          if (ph.ring.every((p) => u.reporters.has(p) || ph.results.has(p))) this.decideUnreachable(ph);
          return;
        }
        // Blame whom the ring blames, if it is a member; a report naming a stranger blames its sender.
        const blamed = ph.ring.includes(m.failedPeerId) && m.failedPeerId !== id ? m.failedPeerId : id;
        this.evict([blamed], `the ring failed in step ${m.step + 1} (${m.kind}, reported by ${id})`);
        return;
      }
      case 'eval-result':
      {
        const asked = ph.kind === 'evaluating' && m.step === ph.step ? ph.pending.get(id) : undefined;
        if (!asked || ph.kind !== 'evaluating') return;
        ph.pending.delete(id);
        addToTally(ph.tally, asked, m.counts);
        return this.advance();
      }
      case 'join':
      case 'checkpoint-announce':
        return;
    }
  }

  /** Whether `peerId` may upload the checkpoint of `step` now (the upload route asks). */
  expectsUpload(peerId: string, step: number): boolean {
    return this.uploads.get(peerId) === step;
  }

  checkpointStored(peerId: string, step: number): void {
    if (this.uploads.get(peerId) === step) this.uploads.delete(peerId);
    if (this.checkpointStep === null || step > this.checkpointStep) this.checkpointStep = step;
    this.d.metrics.append({ type: 'checkpoint', time: Date.now(), step });
    this.d.publish({ type: 'checkpoint', step });
    this.advance();
  }

  // ---- the state machine -------------------------------------------------------------------

  private advance(): void {
    const ph = this.phase;
    switch (ph.kind) {
      case 'running':
        if (ph.ring.every((id) => ph.results.has(id))) this.commit(ph);
        return;
      case 'evaluating':
        if (ph.pending.size === 0) this.finishEval(ph);
        return;
      case 'admitting':
        return this.admitProgress(ph);
      case 'finishing':
        if (this.checkpointStep === ph.step) this.finish();
        return;
      case 'between':
        return this.boundary();
      case 'paused':
      case 'done':
        return;
    }
  }

  private boundary(): void {
    if (this.pauseAsked) {
      this.phase = { kind: 'paused' };
      return;
    }
    this.phase = { kind: 'between' };
    const leaving = this.ring.filter((id) => this.peers.get(id)?.leaving);
    if (leaving.length > 0) {
      // Their step is committed: they go now, without aborting anything.
      for (const id of leaving) this.d.send(id, { type: 'done', step: this.step, reason: 'left after its step, as its owner asked' });
      return this.gone(leaving, 'left after its step (stopped by its owner)');
    }
    const now = Date.now();
    const waiting = [...this.peers.values()].filter((p) => p.state === 'waiting' && (p.admitAfter <= now || this.ring.length === 0)).map((p) => p.id);
    if (this.ring.length === 0 && waiting.length < this.d.job.minPeers) return; // idle until enough peers came
    // Joiners enter at a round boundary: an aborted round runs again with its survivors first.
    // Likewise a sync step that lost a member: its survivors finish it with the sums they kept,
    // unless the joiners can enter at once (the step's weights are stored or are the seed: no
    // upload to wait for); then the step runs afresh with them.
    const rerunPending = this.rerunPlan() !== null && !this.loadable(this.step);
    const roundPending = this.ring.length > 0 && ((this.round !== null && this.round.step === this.step) || rerunPending);
    // Batched: under churn (the last two generations began within admitGapMs) in a ring of
    // ADMIT_BATCH_FROM or more, joiners wait up to admitGapMs, so that those who came meanwhile
    // enter together in one new generation.
    const gap = this.timeouts.admitGapMs;
    const churning = now - this.generationAt < gap && this.generationAt - this.previousGenerationAt < gap;
    const due = this.ring.length < ADMIT_BATCH_FROM || !churning || waiting.some((id) => now - this.peers.get(id)!.waitingSince >= gap);
    if (this.ring.length === 0 || (waiting.length > 0 && !roundPending && due)) return this.startAdmission(waiting);
    const last = this.step >= this.d.job.totalSteps;
    const evalDue = this.d.evalIds.length > 0 && !this.evaluated.has(this.step) && this.step > 0 &&
      (last || this.crossed(this.d.job.evalEvery));
    if (evalDue) return this.startEval();
    if (last) return this.startFinishing();
    this.startStep();
  }

  /** Whether the last commit crossed a multiple of `every` (in sync mode: the step is a multiple). */
  private crossed(every: number): boolean {
    return every > 0 && Math.floor(this.step / every) > Math.floor((this.step - this.lastAdvance) / every);
  }

  private startAdmission(joiners: string[]): void {
    const now = Date.now();
    for (const id of joiners) this.peers.get(id)!.state = 'loading';
    if (this.ring.length === 0) {
      this.round = null; // nobody holds the round's work any more
      this.kept = null;
      const from = this.checkpointStep ?? 0;
      if (from !== this.step) this.d.log(`no peer holds the weights of step ${this.step}: resuming from ${this.checkpointStep === null ? 'the seed' : `the checkpoint of step ${from}`}`);
      this.step = from;
    }
    const uploadFrom = this.loadable(this.step) ? null : this.ring[0]!;
    this.phase = { kind: 'admitting', step: this.step, joiners, uploadFrom, loadSent: false, deadline: now + this.timeouts.admitMs };
    if (uploadFrom) {
      this.uploads.set(uploadFrom, this.step);
      if (!this.d.send(uploadFrom, { type: 'upload-checkpoint', step: this.step })) return this.peerGone(uploadFrom, 'its session is closed');
    }
    this.admitProgress(this.phase);
  }

  /** Whether joiners can load the weights of `step` now: its checkpoint, or the seed at step 0. */
  private loadable(step: number): boolean {
    return this.checkpointStep === step || (step === 0 && this.checkpointStep === null);
  }

  private admitProgress(ph: Extract<Phase, { kind: 'admitting' }>): void {
    if (!this.loadable(ph.step)) return; // waiting for the upload
    if (!ph.loadSent) {
      ph.loadSent = true;
      const source = this.checkpointStep === ph.step ? 'checkpoint' : 'seed';
      for (const id of ph.joiners) if (this.peers.has(id)) this.d.send(id, { type: 'load-state', source, step: ph.step });
    }
    const loading = ph.joiners.filter((id) => this.peers.get(id)?.state === 'loading');
    if (loading.length > 0) return;
    const ready = ph.joiners.filter((id) => this.peers.get(id)?.state === 'ready');
    for (const id of ready) this.peers.get(id)!.state = 'member';
    this.setRing([...this.ring, ...ready]);
    this.boundary();
  }

  private startStep(): void {
    const B = this.d.job.globalBatch;
    // Shard-locally a split that jitters with the measured speeds moves ids (and shards) between members every step.
    const fresh = splitBatch(B, this.speeds());
    const images = this.d.job.sampling === 'shard-local' ? steadySplit(this.lastSplit, this.ring, fresh) : fresh;
    this.lastSplit = { ring: [...this.ring], images };
    // Exact sync steps first when the job asks for a warm-up, then rounds.
    const H = this.innerSteps(this.step);
    const steps = H > 1 ? Math.min(H, this.d.job.totalSteps - this.step) : 1;
    if (H > 1 && (this.round?.step !== this.step || planImages(this.round, this.ring) === 0)) {
      const r = planRound(this.sampler, this.affinity, this.step, steps, this.ring, images);
      this.round = r.plan;
      this.affinity = r.affinity;
    }
    const round = H > 1 ? this.round : null;
    // A re-run after a loss: survivors keep their slices and share the lost ones (slice-rerun.ts).
    const rerun = round ? null : this.rerunPlan();
    if (rerun) this.logRerun(rerun);
    const plan = round ? null : rerun ? { step: this.step, epoch: this.kept!.epoch, slices: rerun.slices } : this.hintedPlan(this.step) ?? this.plan(this.step, images);
    this.kept = null;
    // Sync mode: the next step's slices go out now as a prefetch hint, and are remembered.
    const nextStep = this.step + 1;
    const next = plan && nextStep < this.d.job.totalSteps && this.innerSteps(nextStep) === 1 ? this.plan(nextStep, images) : null;
    this.hinted = next ? { generation: this.generation, ring: [...this.ring], plan: next } : null;
    const epoch = round ? round.epochs[0]! : plan!.epoch;
    const upload = this.d.job.checkpointEvery > 0 && this.step > 0 && this.crossed(this.d.job.checkpointEvery) && this.checkpointStep !== this.step;
    const now = Date.now();
    const recent = this.recentStepMs.length ? Math.max(...this.recentStepMs) : 0;
    const ph: Extract<Phase, { kind: 'running' }> = {
      kind: 'running', step: this.step, steps: round ? round.steps : 1, generation: this.generation, ring: [...this.ring], results: new Map(),
      // Before any step was timed (the first of a ring, big models) allow four times as long (per inner step of a round).
      started: now, deadline: now + (recent > 0 ? Math.max(this.timeouts.stepMs, 6 * recent) : 4 * this.timeouts.stepMs * (round ? round.steps : 1)),
      slices: plan ? plan.slices : null, epoch,
    };
    this.phase = ph;
    if (upload) this.uploads.set(this.ring[0]!, this.step);
    const lost: string[] = [];
    this.ring.forEach((id, rank) => {
      const part = round ? roundAssignment(round, ph.ring, id) : null;
      const ok = this.d.send(id, {
        type: 'step-assignment', job: this.d.jobId, generation: this.generation, step: this.step, ring: ph.ring, rank,
        globalBatch: B, sampleIds: plan ? plan.slices[rank]! : [], epoch, seed: this.d.job.seed, ...(upload && rank === 0 ? { uploadCheckpoint: true } : {}),
        ...(part ? { round: part } : {}),
        ...(next ? { next: { step: next.step, epoch: next.epoch, sampleIds: next.slices[rank]! } } : {}),
        ...(rerun?.reuse[rank] ? { reuse: rerun.reuse[rank]! } : {}),
        ...(this.topology ? { topology: this.topology } : {}),
      });
      if (!ok) lost.push(id);
    });
    if (lost.length) this.gone(lost, 'its session is closed');
  }

  /** The re-run of the current step over the current ring, if members of its last attempt kept their sums. */
  private rerunPlan(): RerunPlan | null {
    const k = this.kept;
    if (!k || k.step !== this.step || this.innerSteps(this.step) !== 1) return null;
    return planRerun(k, this.ring, this.speeds());
  }

  /** The ring's measured images/s by rank (the median for a peer not timed yet). */
  private speeds(): number[] {
    const known = this.ring.map((id) => this.peers.get(id)?.ips ?? null).filter((v): v is number => v !== null).sort((a, b) => a - b);
    const median = known.length ? known[known.length >> 1]! : 1;
    return this.ring.map((id) => this.peers.get(id)?.ips ?? median);
  }

  private logRerun(r: RerunPlan): void {
    const shares = this.ring.map((id, i) => `${id} +${r.extra[i]}`).join(', ');
    this.d.log(`step ${this.step + 1} runs again in generation ${this.generation}: the survivors keep their slices' sums and compute the ${r.lost.length} lost ids (${shares})`);
  }

  /** H: the inner steps of the round starting at `step` (1: an exact sync step). */
  private innerSteps(step: number): number {
    return step < this.d.job.outer.warmup ? 1 : this.d.job.outer.syncEvery;
  }

  /** Plans `step` over the current ring; the peers are taken to hold what they are given. */
  private plan(step: number, images: readonly number[]): StepPlan {
    const r = planStep(this.sampler, this.affinity, step, this.ring, images);
    this.affinity = r.affinity;
    return r.plan;
  }

  /** The plan hinted for `step`, if the ring it was hinted to is the ring now. */
  private hintedPlan(step: number): StepPlan | null {
    const h = this.hinted;
    if (!h || h.plan.step !== step || h.generation !== this.generation) return null;
    const same = h.ring.length === this.ring.length && h.ring.every((id, i) => id === this.ring[i]);
    return same ? h.plan : null;
  }

  private commit(ph: Extract<Phase, { kind: 'running' }>): void {
    const results = ph.ring.map((id) => ph.results.get(id)!);
    // The weights must agree everywhere. The most common checksum wins (rank 0 breaks ties);
    // whoever disagrees is evicted and the step runs again without it: what it added to the
    // sum cannot be trusted either, so the step is not committed with its contribution in.
    const votes = new Map<string, number>();
    for (const r of results) votes.set(r.checksum, (votes.get(r.checksum) ?? 0) + 1);
    let winner = results[0]!.checksum;
    for (const [c, n] of votes) if (n > votes.get(winner)!) winner = c;
    const dissent = results.filter((r) => r.checksum !== winner).map((r) => r.peerId);
    if (dissent.length) return this.evict(dissent, `its weights after step ${ph.step + 1} differ from the ring's (the ring has checksum ${winner})`);
    const now = Date.now();
    const wallMs = now - ph.started;
    this.recentStepMs = [...this.recentStepMs.slice(-4), wallMs];
    const images = results.reduce((a, r) => a + r.images, 0);
    const lossed = results.filter((r) => r.loss !== null && r.images > 0);
    const lossImages = lossed.reduce((a, r) => a + r.images, 0);
    const loss = lossImages > 0 ? lossed.reduce((a, r) => a + r.loss! * r.images, 0) / lossImages : null;
    const timings: PeerStepTiming[] = results.map((r, i) => {
      // The edge to the successor, as either end saw it: relayed if either saw a relay.
      const next = results[(i + 1) % results.length];
      const link = r.link === 'relayed' || next?.linkPrev === 'relayed' ? 'relayed' : r.link ?? next?.linkPrev;
      return { peerId: r.peerId, images: r.images, ...(r.reused ? { reused: r.reused } : {}), computeMs: r.timings.computeMs, commMs: r.timings.commMs, waitMs: r.timings.waitMs, ...(results.length > 1 && link ? { link } : {}), ...(r.timings.dataMs !== undefined ? { dataMs: r.timings.dataMs } : {}), ...(r.timings.exposedCommMs !== undefined ? { exposedCommMs: r.timings.exposedCommMs } : {}), ...(r.timings.overheadMs !== undefined ? { overheadMs: r.timings.overheadMs } : {}), ...(r.fetchedBytes !== undefined ? { fetchedBytes: r.fetchedBytes } : {}) };
    });
    this.step = ph.step + ph.steps;
    this.lastAdvance = ph.steps;
    this.round = null;
    this.kept = null;
    const imagesPerSec = images / Math.max(wallMs, 1) * 1000;
    const sent = results.reduce((a, r) => a + (r.sentBytes ?? 0), 0);
    const traffic = { innerSteps: ph.steps, bytesPerImage: images > 0 ? sent / images : 0 };
    this.d.metrics.append({ type: 'step', time: now, step: this.step, generation: ph.generation, ring: ph.ring.length, loss, imagesPerSec, wallMs, peers: results.map((r, i) => ({ ...timings[i]!, checksum: r.checksum })), traffic, ...(ph.slices ? { samples: sampleDigest(ph.slices) } : {}) });
    this.d.publish({ type: 'step', step: this.step, generation: ph.generation, loss, imagesPerSec, peers: ph.ring.length, timings, traffic });
    this.phase = { kind: 'between' };
    this.advance();
  }

  private startEval(): void {
    // The job's last evaluation covers the whole test split where one is given.
    const final = this.step >= this.d.job.totalSteps;
    const ids = final && this.d.finalEvalIds?.length ? this.d.finalEvalIds : this.d.evalIds;
    const plan = { ids, show: (this.d.showIds ?? []).filter((id) => ids.includes(id)), classes: this.d.classes ?? Infinity, final };
    const messages = evalMessages(this.step, plan, this.ring.map((id) => this.peers.get(id)?.ips ?? 1));
    const ph: Extract<Phase, { kind: 'evaluating' }> = { kind: 'evaluating', step: this.step, pending: new Map(this.ring.map((id, i) => [id, messages[i]!])), tally: startTally(plan), deadline: Date.now() + this.timeouts.evalMs };
    this.phase = ph;
    const lost: string[] = [];
    this.ring.forEach((id, i) => { if (!this.d.send(id, messages[i]!)) lost.push(id); });
    if (lost.length) this.gone(lost, 'its session is closed');
  }

  private finishEval(ph: Extract<Phase, { kind: 'evaluating' }>): void {
    this.evaluated.add(ph.step);
    const e = tallySummary(ph.tally, ph.step);
    if (ph.tally.problems.length) this.d.log(`evaluation of step ${ph.step}: ${ph.tally.problems.slice(0, 3).join('; ')} (left out)`);
    if (e) {
      this.d.metrics.append({ type: 'eval', time: Date.now(), ...e });
      this.d.publish({ type: 'eval', ...e });
    }
    this.phase = { kind: 'between' };
    this.advance();
  }

  private startFinishing(): void {
    if (this.checkpointStep === this.step) return this.finish();
    const from = this.ring[0]!;
    this.phase = { kind: 'finishing', step: this.step, uploadFrom: from, deadline: Date.now() + this.timeouts.admitMs };
    this.uploads.set(from, this.step);
    if (!this.d.send(from, { type: 'upload-checkpoint', step: this.step })) this.peerGone(from, 'its session is closed');
  }

  private finish(): void {
    this.phase = { kind: 'done' };
    for (const id of this.peers.keys()) this.d.send(id, { type: 'done', step: this.step, reason: `the job has run its ${this.d.job.totalSteps} steps` });
    this.d.metrics.append({ type: 'done', time: Date.now(), step: this.step });
    this.d.publish({ type: 'done', step: this.step });
    this.stop();
    this.resolveDone();
  }

  // ---- membership ----------------------------------------------------------------------------

  private setRing(ring: string[]): void {
    const same = ring.length === this.ring.length && ring.every((id, i) => id === this.ring[i]);
    if (same) return;
    // From the job's twoLevelFrom peers on: groups by measured links, and the ring in their order.
    const plan = planGeneration(ring, (id) => this.peers.get(id)?.links, this.d.job.twoLevelFrom, this.topology);
    ring = plan.ring;
    this.topology = plan.topology;
    this.ring = ring;
    this.generation++;
    this.previousGenerationAt = this.generationAt;
    this.generationAt = Date.now();
    const peers = ring.map((id) => ({ id, name: this.peers.get(id)?.name ?? null, device: this.peers.get(id)?.device ?? '' }));
    // The plan goes out with the ring (absent when flat, as older records are) for the dashboard.
    const shape = this.topology ? { topology: this.topology } : {};
    this.d.metrics.append({ type: 'generation', time: Date.now(), generation: this.generation, ring, peers, ...shape });
    this.d.publish({ type: 'generation', generation: this.generation, ring, peers, ...shape });
  }

  private decideUnreachable(ph: Extract<Phase, { kind: 'running' }>): void {
    const u = ph.unreachable;
    if (!u || this.phase !== ph) return;
    const blamed = blameUnreachable(ph.ring, u.edges);
    const failed = u.edges.map(([a, b]) => `${a}->${b}`).join(', ');
    this.evict([blamed], `no WebRTC link to it could be opened in step ${ph.step + 1} (failed: ${failed}); check its network, or run the coordinator with --turn`, 'unreachable');
  }

  /** Removes peers that are still connected (their sessions are closed; they may rejoin fresh). */
  private evict(ids: readonly string[], reason: string, cause?: 'unreachable'): void {
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
    if (ph.kind === 'admitting') {
      if (ph.uploadFrom && ids.includes(ph.uploadFrom) && this.checkpointStep !== ph.step) {
        // The upload will not come: back to waiting; the next boundary asks a survivor.
        for (const j of ph.joiners) { const p = this.peers.get(j); if (p) { p.state = 'waiting'; p.waitingSince = Date.now(); } }
        this.setRing(this.ring.filter((id) => !members.includes(id)));
        this.phase = { kind: 'between' };
        return this.advance();
      }
    }
    if (members.length === 0) return this.advance();
    this.setRing(this.ring.filter((id) => !members.includes(id)));
    if (ph.kind === 'running') {
      // Sync mode: every member of the attempt holds (or is computing) its slice's sum: keep track.
      if (ph.slices && ph.steps === 1) this.kept = keptSlices(ph.step, ph.epoch, ph.generation, ph.ring, ph.slices);
      // Metrics and events number steps from 1 (step n: the n-th update; weights "of step n" are after it).
      this.d.metrics.append({ type: 'abort', time: Date.now(), step: ph.step + 1, generation: ph.generation, reason });
      this.d.publish({ type: 'step-aborted', step: ph.step + 1, generation: ph.generation, reason });
      this.d.log(`step ${ph.step + 1} of generation ${ph.generation} aborted: ${reason}; running it again with ${this.ring.length} peer(s)`);
      this.phase = { kind: 'between' };
    } else if (ph.kind === 'evaluating') {
      for (const id of members) ph.pending.delete(id);
    } else if (ph.kind === 'finishing' && members.includes(ph.uploadFrom)) {
      this.phase = { kind: 'between' };
    }
    this.advance();
  }

  /** Whether `p` does work nothing has timed yet: loading, uploading, evaluating, or its first step. */
  private unmeasured(p: PeerRec): boolean {
    const ph = this.phase;
    return p.state === 'loading' || this.uploads.has(p.id) ||
      (ph.kind === 'evaluating' && ph.pending.has(p.id)) ||
      (ph.kind === 'running' && p.maxWorkMs === null && ph.ring.includes(p.id));
  }

  /** The longest work `p` has shown, scaled up to the slice it computes now where that is bigger. */
  private expectedWorkMs(p: PeerRec): number | null {
    const ph = this.phase;
    const rank = ph.kind === 'running' && ph.slices ? ph.ring.indexOf(p.id) : -1;
    const slice = rank >= 0 && ph.kind === 'running' && ph.slices ? ph.slices[rank]!.length : 0;
    return p.maxWorkMs === null ? null : Math.max(p.maxWorkMs, p.workPerImage * slice);
  }

  private tick(): void {
    const now = Date.now();
    // Silent: no message for longer than silence.ts allows this peer (more where its compute
    // may block its heartbeats).
    const silent = [...this.peers.values()].filter((p) => now - p.lastSeen > silenceLimitMs({ maxGap: p.maxGap, maxWorkMs: this.expectedWorkMs(p), unmeasured: this.unmeasured(p) }, this.timeouts)).map((p) => p.id);
    if (silent.length) {
      for (const id of silent) this.d.disconnect(id, `silent for over ${Math.round((now - (this.peers.get(id)?.lastSeen ?? now)) / 1000)} s`);
      this.gone(silent, `no heartbeat for longer than its silence limit (${this.timeouts.silentMs} ms, or more while it computes)`);
    }
    const ph = this.phase;
    if (ph.kind === 'running' && ph.unreachable && now >= ph.unreachable.decideAt) {
      this.decideUnreachable(ph);
    } else if (ph.kind === 'running' && now > ph.deadline) {
      this.evict(ph.ring.filter((id) => !ph.results.has(id)), `no result for step ${ph.step} within ${ph.deadline - ph.started} ms`);
    } else if (ph.kind === 'evaluating' && now > ph.deadline) {
      this.evict([...ph.pending.keys()], `no evaluation result within ${this.timeouts.evalMs} ms`);
    } else if (ph.kind === 'admitting' && now > ph.deadline) {
      if (!this.loadable(ph.step)) {
        this.d.log(`the checkpoint of step ${ph.step} was not uploaded in time; training on without the joiners for now`);
        if (ph.uploadFrom) this.uploads.delete(ph.uploadFrom);
        for (const j of ph.joiners) {
          const p = this.peers.get(j);
          if (!p) continue;
          p.state = 'waiting';
          p.admitAfter = now + this.timeouts.admitMs;
        }
        return this.boundary();
      }
      const slow = ph.joiners.filter((id) => this.peers.get(id)?.state === 'loading');
      if (slow.length) this.evict(slow, `did not load step ${ph.step} within ${this.timeouts.admitMs} ms`);
    } else if (ph.kind === 'finishing' && now > ph.deadline) {
      this.evict([ph.uploadFrom], `did not upload the final checkpoint within ${this.timeouts.admitMs} ms`);
    }
  }
}
