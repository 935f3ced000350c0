// A step (or round) of the training driver (driver.ts) from its assignment to its commit: the
// planning state the driver carries from step to step, the assignments of a step, whom a
// failure of the ring blames, and what a commit checks and records.
//
// A step's sample ids come from the seeded sampler (src/train/sampler.ts: global or
// shard-local), so a re-run uses the same samples whatever the ring, and the dead peer's share
// is computed by the others (only that share, where they kept their own: slice-rerun.ts). In
// sync mode each assignment also carries the peer's slice of the next step (a prefetch hint);
// when that step starts with the same ring it is assigned exactly so (step-plan.ts,
// affinity.ts). With syncEvery H > 1 (after the job's warm-up) a step is a round of H inner
// steps (rounds.ts), kept when it is aborted so that its survivors reuse their work.
import { stepUtilisation } from '../src/train/utilisation.ts';
import type { AuditTask, CollectiveFailure, LiveEvent, MetricRecord, NextSlice, PeerStepTiming, StepAssignment, StepResult } from '../src/protocol/messages.ts';
import type { Topology } from '../src/comm/topology.ts';
import { emptyAffinity, type AffinityState } from './affinity.ts';
import { UNREACHABLE_GRACE_MS, blameUnreachable, mayBeFormationRace, noEvidence, type LinkEvidence } from './blame.ts';
import type { DriverDeps, RunningPhase, Unreachable } from './driver-types.ts';
import { splitGroups } from './bn-groups.ts';
import { planImages, planRound, roundAssignment, type RoundPlan } from './rounds.ts';
import { keptSlices, planRerun, sampleDigest, type KeptSlices, type RerunPlan } from './slice-rerun.ts';
import { jobSampler, planStep, steadySplit, type JobSampler, type StepPlan } from './step-plan.ts';
import { newTuner, stealsNext, tunerRecord, type StealTuner, type TunerVerdict } from './steal-tuner.ts';
import { newSyncAuto, syncRecord, type SyncAuto, type SyncDecision } from './sync-auto.ts';
import { AuditBook, type AuditMember } from './audits.ts';
import { WINDOW_COMM_FACTOR, WINDOW_COMPUTE_SHARE, slicesWithGrants, splitTail } from './tail-pool.ts';
import { rankOf } from './ring-index.ts';
import { epochOrder, stepsPerEpoch } from '../src/train/sampler.ts';

/** What a step starts from: the driver's state at the boundary. */
export interface StepStart {
  step: number;
  generation: number;
  ring: readonly string[];
  /** The ring's measured images/s by rank. */
  speeds: readonly number[];
  topology: Topology | null;
  /** Step of the newest stored checkpoint (null: none). */
  checkpointStep: number | null;
  /**
   * The ring that will run the next step (a change announced ahead: driver-ahead.ts), with its
   * members' speeds by rank: the next step's prefetch hint is its plan for that ring.
   */
  coming?: { ring: readonly string[]; speeds: readonly number[] } | null;
  /** By rank: the most images each member said it computes at once (JoinRequest.microBatch; undefined: it said nothing). */
  microBatches?: readonly (number | undefined)[];
}

/** A step as it starts: the running phase, each member's assignment (by rank) and what it asks. */
export interface StepLaunch {
  phase: RunningPhase;
  assignments: StepAssignment[];
  /** Rank 0 uploads the checkpoint of the step's weights after it. */
  upload: boolean;
  /** A re-run after a loss, where the survivors kept their slices' sums. */
  rerun: RerunPlan | null;
}

export class StepBook {
  private readonly sampler: JobSampler;
  /** Which shards each peer holds (shard-local sampling): what it was given ids of. */
  private affinity: AffinityState = emptyAffinity();
  /** The split of the last step assigned (shard-local jobs keep it while speeds only jitter). */
  private lastSplit: { ring: string[]; images: number[] } | null = null;
  /**
   * The next step's plan as hinted to the ring of `generation` (null: to a ring announced ahead,
   * whatever generation begins it): assigned as is if that ring runs it.
   */
  private hinted: { generation: number | null; ring: readonly string[]; plan: StepPlan } | null = null;
  /** Rounds (syncEvery > 1): the round in flight, kept when it is aborted so survivors reuse their work. */
  private round: RoundPlan | null = null;
  /** Sync mode: the slices whose gradient sums the members of the last aborted attempt kept (slice-rerun.ts). */
  private kept: KeptSlices | null = null;
  /**
   * A verified job: how each member of the aborted attempt computed the sum it keeps, as runs of its slice's ids computed
   * apart (SumPieces): a re-run that reuses it is audited in the same pieces.
   */
  private pieces: ReadonlyMap<string, SumPieces> = new Map();
  /** Steps the last commit advanced (1, or a round's length): evaluations and checkpoints fall due on crossing a multiple. */
  private lastAdvance = 1;
  private recentStepMs: number[] = [];
  /**
   * The overlap window of a step's final grants (tail-pool.ts): the larger of WINDOW_COMM_FACTOR
   * times the last sync step's median all-reduce time and WINDOW_COMPUTE_SHARE of its median
   * compute; 0 before a step with an all-reduce committed.
   */
  private overlapWindowMs = 0;
  /** A job that steals "auto": which way the next fresh sync steps run (steal-tuner.ts). */
  private tuner: StealTuner = newTuner();
  /** The fresh sync step begun last of a job that steals auto: its commit tells the tuner (whether it stole: its phase's tail). */
  private tuned: { step: number; generation: number } | null = null;
  /** A job with syncEvery "auto": the H in force and what it was measured from (sync-auto.ts). */
  private auto: SyncAuto | null;
  /** A job that verifies its steps (its `verify` > 0): who audits whom, and the verdicts (audits.ts). */
  readonly audits: AuditBook | null;

  /** Throws SamplingError where the job cannot be sampled over the given train split. */
  constructor(
    private readonly d: Pick<DriverDeps, 'job' | 'jobId' | 'trainSamples' | 'trainShards' | 'syncH' | 'audit'>,
    private readonly stepMs: number,
  ) {
    this.sampler = jobSampler(d.job, d.trainSamples, d.trainShards);
    const h = d.syncH !== undefined && d.syncH >= 1 && d.syncH <= d.job.outer.syncEvery ? d.syncH : 1;
    this.auto = d.job.outer.auto ? newSyncAuto(h) : null;
    const wire = d.job.wire;
    this.audits = d.job.verify > 0 && wire !== 'i8' ? new AuditBook(d.job.verify, wire, d.audit?.draw, d.audit?.directed ?? true) : null;
  }

  /** The H a job with syncEvery "auto" has in force (null: the job's H is fixed). */
  get autoH(): number | null {
    return this.auto?.h ?? null;
  }

  /** Orders the samples of the epoch the turn after next will plan (after `step` was assigned), while the ring computes. */
  warmAhead(step: number): void {
    const s = this.sampler;
    if (s.globalBatch > s.trainSamples) return;
    epochOrder(s.seed, Math.floor((step + 2) / stepsPerEpoch(s.trainSamples, s.globalBatch)), s.trainSamples, s.sampling);
  }

  /** Plans the step at `s.step` over `s.ring` and the running phase that waits for its results. */
  begin(s: StepStart): StepLaunch {
    const B = this.d.job.globalBatch;
    // Shard-locally a split that jitters with the measured speeds moves ids (and shards) between members every step.
    const G = this.sampler.bnGroup;
    const fresh = splitGroups(B, G, s.speeds);
    const images = this.d.job.sampling === 'shard-local' ? steadySplit(this.lastSplit, s.ring, fresh) : fresh;
    this.lastSplit = { ring: [...s.ring], images };
    // Exact sync steps first when the job asks for a warm-up, then rounds.
    const H = this.innerSteps(s.step);
    const steps = H > 1 ? Math.min(H, this.d.job.totalSteps - s.step) : 1;
    if (H > 1 && (this.round?.step !== s.step || planImages(this.round, s.ring) === 0)) {
      const r = planRound(this.sampler, this.affinity, s.step, steps, s.ring, images);
      this.round = r.plan;
      this.affinity = r.affinity;
    }
    const round = H > 1 ? this.round : null;
    // A re-run after a loss: survivors keep their slices and share the lost ones (slice-rerun.ts).
    const rerun = round ? null : this.rerunPlan(s.step, s.ring, s.speeds);
    const plan = round ? null
      : rerun ? { step: s.step, epoch: this.kept!.epoch, slices: rerun.slices }
      : this.hintedPlan(s) ?? this.plan(s.step, s.ring, images);
    // A fresh sync step of a job that steals (auto: when the tuner says so): each slice's last part waits as the step's tail (tail-pool.ts).
    const steal = this.d.job.steal;
    const freshSync = plan !== null && !rerun;
    const steals = freshSync && steal !== undefined && (!steal.auto || stealsNext(this.tuner, s.generation));
    const tail = steals ? splitTail(plan.slices, steal, s.ring, { windowMs: this.overlapWindowMs, medianIps: median(s.speeds) }) : null;
    this.tuned = freshSync && steal?.auto && s.ring.length > 1 ? { step: s.step, generation: s.generation } : null;
    this.kept = null;
    // Sync mode: the next step's slices go out now as a prefetch hint, and are remembered.
    const nextStep = s.step + 1;
    // The ring announced to come next gets the hint of its own plan (members in both rings prefetch their new slice).
    const nextRing = s.coming?.ring ?? s.ring;
    const nextImages = s.coming ? splitGroups(B, G, s.coming.speeds) : images;
    const next = plan && nextStep < this.d.job.totalSteps && this.innerSteps(nextStep) === 1 ? this.plan(nextStep, nextRing, nextImages) : null;
    this.hinted = next ? { generation: s.coming ? null : s.generation, ring: [...nextRing], plan: next } : null;
    const hintOf = (id: string): number[] | undefined => next?.slices[rankOf(nextRing, id)];
    const epoch = round ? round.epochs[0]! : plan!.epoch;
    const upload = this.d.job.checkpointEvery > 0 && s.step > 0 && this.crossed(s.step, this.d.job.checkpointEvery) && s.checkpointStep !== s.step;
    const now = Date.now();
    const recent = this.recentStepMs.length ? Math.max(...this.recentStepMs) : 0;
    const phase: RunningPhase = {
      kind: 'running', step: s.step, steps: round ? round.steps : 1, generation: s.generation, ring: [...s.ring], results: new Map(),
      // Before any step was timed (the first of a ring, big models) allow four times as long (per inner step of a round).
      started: now, deadline: now + (recent > 0 ? Math.max(this.stepMs, 6 * recent) : 4 * this.stepMs * (round ? round.steps : 1)),
      slices: tail ? tail.fixed : plan ? plan.slices : null, epoch, ...(tail ? { tail: tail.pool } : {}),
    };
    // A verified sync step or round: sketches from everyone, and the audits drawn now (audits.ts). A round's audit recomputes
    // the member's whole round (each inner step's slice); the budget counts its images.
    const roundSlices = round ? phase.ring.map((id) => round.slices.get(id) ?? []) : null;
    const audited = phase.slices ?? roundSlices?.map((inner) => inner.flat()) ?? null;
    const verify = this.audits && audited ? this.verifyPlan(this.audits, s, phase, audited, roundSlices, rerun) : null;
    // Optional fields are set only where present (no spread temporaries: 1,000 members made ~7,000 a turn). The members
    // share one `steal` object, so the sessions encode it once a step (src/client/ring-shape.ts).
    const stealing = tail ? { chunk: tail.pool.chunk } : null;
    const assignments = phase.ring.map((id, rank): StepAssignment => {
      const a: StepAssignment = {
        type: 'step-assignment', job: this.d.jobId, generation: s.generation, step: s.step, ring: phase.ring, rank,
        globalBatch: B, sampleIds: phase.slices ? phase.slices[rank]! : [], epoch, seed: this.d.job.seed,
      };
      if (upload && rank === 0) a.uploadCheckpoint = true;
      if (stealing) a.steal = stealing;
      const part = round ? roundAssignment(round, phase.ring, id) : null;
      if (part) a.round = part;
      const hint = hintOf(id);
      if (next && hint) a.next = { step: next.step, epoch: next.epoch, sampleIds: hint };
      const reuse = rerun?.reuse[rank];
      if (reuse) a.reuse = reuse;
      if (s.topology) a.topology = s.topology;
      if (verify) a.verify = verify[rank]!;
      return a;
    });
    return { phase, assignments, upload, rerun };
  }

  /**
   * Whether joiners wait while the survivors of an aborted attempt of `step` finish it: an
   * aborted round runs again with its survivors first. Likewise a sync step that lost a member:
   * its survivors finish it with the sums they kept, unless the joiners can enter at once
   * (`loadable`: the step's weights are stored or are the seed, no upload to wait for); then the
   * step runs afresh with them.
   */
  survivorsFirst(step: number, ring: readonly string[], speeds: readonly number[], loadable: boolean): boolean {
    const rerunPending = this.rerunPlan(step, ring, speeds) !== null && !loadable;
    return ring.length > 0 && ((this.round !== null && this.round.step === step) || rerunPending);
  }

  /** Whether the last commit, which reached `step`, crossed a multiple of `every` (in sync mode: the step is a multiple). */
  crossed(step: number, every: number): boolean {
    return every > 0 && Math.floor(step / every) > Math.floor((step - this.lastAdvance) / every);
  }

  /**
   * `ph` committed after `wallMs` with `results` (ring order). `verdict`: the steal tuner's when
   * the step ended a probe of the other way; `sync`: a job with syncEvery "auto" changed H.
   */
  committed(ph: RunningPhase, wallMs: number, results: readonly StepResult[] = []): { verdict: TunerVerdict | null; sync: SyncDecision | null } {
    if (ph.steps === 1 && results.length > 1) this.overlapWindowMs = overlapWindow(results);
    const t = this.tuned;
    let verdict: TunerVerdict | null = null;
    if (t && t.step === ph.step && t.generation === ph.generation) {
      ({ tuner: this.tuner, verdict } = tunerRecord(this.tuner, t.generation, ph.tail !== undefined, wallMs));
    }
    this.tuned = null;
    let sync: SyncDecision | null = null;
    if (this.auto) {
      // Its slowest member's compute; a re-run that reused work, a ring of one and the sync warm-up say nothing of the ring's costs.
      const computeMs = Math.max(0, ...results.map((r) => r.timings.computeMs));
      const measured = results.length > 1 && !results.some((r) => r.reused) && ph.step >= this.d.job.outer.warmup;
      ({ auto: this.auto, decision: sync } = syncRecord(this.auto, ph.generation, ph.step + ph.steps, { h: ph.steps, wallMs, computeMs }, measured));
    }
    this.recentStepMs = [...this.recentStepMs.slice(-4), wallMs];
    this.lastAdvance = ph.steps;
    this.round = null;
    this.kept = null;
    return { verdict, sync };
  }

  /**
   * A verified step's or round's `verify` part of each member's assignment (rank order), the audits drawn now; sets
   * `phase.verified`, what its results are judged against. Only a verified job pays for it (a step of 1,000 members is hot).
   */
  private verifyPlan(
    audits: AuditBook, s: StepStart, phase: RunningPhase, audited: readonly (readonly number[])[], roundSlices: number[][][] | null,
    rerun: RerunPlan | null,
  ): { audit?: AuditTask }[] {
    const ring = phase.ring;
    const oneBatch = roundSlices ? roundSlices.map((inner) => Math.max(0, ...inner.map((x) => x.length))) : audited.map((x) => x.length);
    const reused = ring.map((_, rank) => rerun?.reuse[rank]?.count ?? 0);
    const pieces = ring.map((id, rank) => sumPieces(audited[rank]!.length, reused[rank]!, this.pieces.get(id)));
    const verify = audits.plan(s.step, ring, audited, phase.epoch, auditMembers(oneBatch, s.microBatches ?? [], pieces, reused));
    if (roundSlices) for (const v of verify) if (v.audit) v.audit = { ...v.audit, sampleIds: [], round: roundSlices[ring.indexOf(v.audit.peer)]! };
    phase.verified = {
      oneBatch: new Map(ring.map((id, rank) => [id, oneBatch[rank]!])),
      reuse: new Map(ring.flatMap((id, rank) => (reused[rank]! > 0 ? [[id, reused[rank]!] as const] : []))),
      pieces: new Map(ring.flatMap((id, rank) => (pieces[rank] ? [[id, pieces[rank]] as const] : []))),
    };
    return verify;
  }

  /** `ph` was aborted: in sync mode every member of the attempt holds (or is computing) its slice's sum. */
  aborted(ph: RunningPhase): void {
    // With a tail: each member holds its fixed part and its grants; what was never granted is re-run as lost.
    const held = heldSlices(ph);
    if (held && ph.steps === 1) this.kept = keptSlices(ph.step, ph.epoch, ph.generation, ph.ring, held, ph.tail?.left ?? []);
    this.pieces = held && ph.verified ? ph.verified.pieces : new Map();
  }

  /** Nobody holds the work of an aborted round or step any more (the ring emptied). */
  forget(): void {
    this.round = null;
    this.kept = null;
  }

  /** The re-run of `step` over `ring`, if members of its last attempt kept their sums. */
  private rerunPlan(step: number, ring: readonly string[], speeds: readonly number[]): RerunPlan | null {
    const k = this.kept;
    if (!k || k.step !== step || this.innerSteps(step) !== 1) return null;
    return planRerun(k, ring, speeds, this.sampler.bnGroup);
  }

  /** H: the inner steps of the round starting at `step` (1: an exact sync step); "auto" jobs: the H chosen last. */
  private innerSteps(step: number): number {
    return step < this.d.job.outer.warmup ? 1 : this.auto ? this.auto.h : this.d.job.outer.syncEvery;
  }

  /** Plans `step` over `ring`; the peers are taken to hold what they are given. */
  private plan(step: number, ring: readonly string[], images: readonly number[]): StepPlan {
    const r = planStep(this.sampler, this.affinity, step, ring, images);
    this.affinity = r.affinity;
    return r.plan;
  }

  /** A joiner's slice of `step` in the ring hinted ahead (its load-state carries it: it prefetches while it loads). */
  hintFor(id: string, step: number): NextSlice | null {
    const h = this.hinted;
    const rank = h && h.generation === null && h.plan.step === step ? rankOf(h.ring, id) : -1;
    return rank < 0 ? null : { step, epoch: h!.plan.epoch, sampleIds: h!.plan.slices[rank]! };
  }

  /** The plan hinted for the step, if the ring it was hinted to is the ring now. */
  private hintedPlan(s: StepStart): StepPlan | null {
    const h = this.hinted;
    if (!h || h.plan.step !== s.step || (h.generation !== null && h.generation !== s.generation)) return null;
    const same = h.ring.length === s.ring.length && h.ring.every((id, i) => id === s.ring[i]);
    return same ? h.plan : null;
  }
}

/** A sync step's slices as its members hold them (ring order): with a tail, each fixed part and its grants. */
function heldSlices(ph: RunningPhase): number[][] | null {
  return ph.slices && ph.tail ? slicesWithGrants(ph.ring, ph.slices, ph.tail) : ph.slices;
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** A step's overlap window (StepBook.overlapWindowMs) from its results. */
export function overlapWindow(results: readonly StepResult[]): number {
  return Math.max(WINDOW_COMM_FACTOR * median(results.map((r) => r.timings.commMs)), WINDOW_COMPUTE_SHARE * median(results.map((r) => r.timings.computeMs)));
}

/**
 * What member `id`'s report of a failed collective in `ph` calls for. A link that never opened
 * is reported by both its ends, so connect-failed reports are collected, and whom to blame is
 * decided (unreachableVerdict) once every member has reported or answered ('decide'), or
 * UNREACHABLE_GRACE_MS after the first report. In a generation's first step (`firstStep`) a link
 * reported closed or silent is collected the same way (blame.ts, mayBeFormationRace): its closer
 * may have failed to form. Any other failure evicts whom the ring blames, if it is a member; a
 * report naming a stranger blames its sender.
 */
export function ringFailure(ph: RunningPhase, id: string, m: CollectiveFailure, firstStep = false): 'wait' | 'decide' | { evict: string; reason: string } {
  const blamed = ph.ring.includes(m.failedPeerId) && m.failedPeerId !== id ? m.failedPeerId : id;
  const reason = `the ring failed in step ${m.step + 1} (${m.kind}, reported by ${id}${m.detail ? `: ${m.detail}` : ''})`;
  const collect = m.kind === 'connect-failed' || mayBeFormationRace(m.kind, firstStep);
  if (!collect) return { evict: blamed, reason };
  const u = ph.unreachable ??= { edges: [], races: [], reporters: new Set(), decideAt: Date.now() + UNREACHABLE_GRACE_MS };
  if (m.kind === 'connect-failed') u.edges.push([id, m.failedPeerId]);
  else u.races.push({ kind: m.kind, evict: blamed, reason });
  u.reporters.add(id);
  return ph.ring.every((p) => u.reporters.has(p) || ph.results.has(p)) ? 'decide' : 'wait';
}

/** The member to evict for the connect-failed reports `u` of `ph` (blame.ts), weighed with what earlier rings `seen`, and why. */
export function unreachableVerdict(
  ph: RunningPhase, u: Unreachable, seen: LinkEvidence = noEvidence(), identity: (id: string) => string = (id) => id,
): { evict: string; reason: string } {
  const failed = u.edges.map(([a, b]) => `${a}->${b}`).join(', ');
  const evict = blameUnreachable(ph.ring, u.edges, seen, identity);
  const before = seen.failedWith.get(identity(evict));
  const history = before?.size ? `; before this ring it failed with ${[...before.keys()].join(', ')}` : '';
  const reason = `no WebRTC link to it could be opened in step ${ph.step + 1} (failed: ${failed}${history}); `
    + 'check its network, or run the coordinator with --turn';
  return { evict, reason };
}

/** The log line of a re-run (`ring` the survivors, `generation` theirs) of step `step` (numbered from 0). */
export function rerunLine(r: RerunPlan, step: number, generation: number, ring: readonly string[]): string {
  const shares = ring.map((id, i) => `${id} +${r.extra[i]}`).join(', ');
  return `step ${step + 1} runs again in generation ${generation}: the survivors keep their slices' sums and compute the ${r.lost.length} lost ids (${shares})`;
}

/**
 * The weights must agree everywhere. The most common checksum wins (rank 0 breaks ties);
 * whoever disagrees is evicted and the step runs again without it: what it added to the
 * sum cannot be trusted either, so the step is not committed with its contribution in.
 */
export function checksumVote(results: readonly StepResult[]): { winner: string; dissent: string[] } {
  const votes = new Map<string, number>();
  for (const r of results) votes.set(r.checksum, (votes.get(r.checksum) ?? 0) + 1);
  let winner = results[0]!.checksum;
  for (const [c, n] of votes) if (n > votes.get(winner)!) winner = c;
  return { winner, dissent: results.filter((r) => r.checksum !== winner).map((r) => r.peerId) };
}

/** The metrics record and live event of `ph` committed as `step` at `now`; `results` in ring order. */
export function commitRecords(ph: RunningPhase, results: readonly StepResult[], step: number, now: number): { record: MetricRecord; event: LiveEvent } {
  const wallMs = now - ph.started;
  const images = results.reduce((a, r) => a + r.images, 0);
  const lossed = results.filter((r) => r.loss !== null && r.images > 0);
  const lossImages = lossed.reduce((a, r) => a + r.images, 0);
  const loss = lossImages > 0 ? lossed.reduce((a, r) => a + r.loss! * r.images, 0) / lossImages : null;
  // Built field by field, optional ones only when present: a ring of 1,000 made ~10,000 spread temporaries a commit.
  const timings: PeerStepTiming[] = results.map((r, i) => {
    // The edge to the successor, as either end saw it: relayed if either saw a relay.
    const next = results[(i + 1) % results.length];
    const link = r.link === 'relayed' || next?.linkPrev === 'relayed' ? 'relayed' : r.link ?? next?.linkPrev;
    const t: PeerStepTiming = { peerId: r.peerId, images: r.images, computeMs: r.timings.computeMs, commMs: r.timings.commMs, waitMs: r.timings.waitMs };
    if (r.reused) t.reused = r.reused;
    if (r.claimed) t.claimed = r.claimed;
    if (results.length > 1 && link) t.link = link;
    if (r.timings.dataMs !== undefined) t.dataMs = r.timings.dataMs;
    if (r.timings.exposedCommMs !== undefined) t.exposedCommMs = r.timings.exposedCommMs;
    if (r.timings.overheadMs !== undefined) t.overheadMs = r.timings.overheadMs;
    if (r.fetchedBytes !== undefined) t.fetchedBytes = r.fetchedBytes;
    if (r.microBatch !== undefined) t.microBatch = r.microBatch;
    return t;
  });
  const imagesPerSec = images / Math.max(wallMs, 1) * 1000;
  const sent = results.reduce((a, r) => a + (r.sentBytes ?? 0), 0);
  const traffic = { innerSteps: ph.steps, bytesPerImage: images > 0 ? sent / images : 0 };
  const utilisation = +stepUtilisation(timings, wallMs).toFixed(4);
  return {
    record: {
      type: 'step', time: now, step, generation: ph.generation, ring: ph.ring.length, loss, imagesPerSec, wallMs,
      peers: results.map((r, i) => ({ ...timings[i]!, checksum: r.checksum })),
      traffic, utilisation, ...(ph.slices ? { samples: sampleDigest(heldSlices(ph)!) } : {}),
    },
    event: { type: 'step', step, generation: ph.generation, loss, imagesPerSec, peers: ph.ring.length, timings, traffic, utilisation, wallMs },
  };
}

/** How a member computed its slice's sum: the lengths of the runs of its ids (in order) computed apart, each cut as it cuts. */
export type SumPieces = readonly number[];

/**
 * The pieces of a slice of `length` ids whose first `reused` come from a kept sum computed in `kept` pieces (slice-rerun.ts),
 * the rest computed now: one piece when nothing is reused; null when the kept sum's pieces are not known (or do not cover
 * `reused`): no audit could recompute it.
 */
export function sumPieces(length: number, reused: number, kept: SumPieces | undefined): SumPieces | null {
  if (reused === 0) return [length];
  if (!kept || kept.reduce((a, b) => a + b, 0) !== reused) return null;
  return length > reused ? [...kept, length - reused] : kept;
}

/**
 * What the audit plan needs of each member (rank order): the most images it is asked to compute at once (`oneBatch`), what it
 * said it computes at once (`microBatches`), the pieces its sum is computed in (null: unknown, so it is not audited) and the
 * ids it reuses of a kept sum (`reused`: the member must say the same, or it computed otherwise than the audit would).
 */
export function auditMembers(
  oneBatch: readonly number[], microBatches: readonly (number | undefined)[], pieces: readonly (SumPieces | null)[], reused: readonly number[],
): AuditMember[] {
  return oneBatch.map((most, rank) => {
    const microBatch = microBatches[rank];
    const p = pieces[rank];
    const r = reused[rank] ?? 0;
    return {
      oneBatch: most, ...(microBatch !== undefined ? { microBatch } : {}), ...(p === null ? { reusing: true } : {}),
      ...(p && p.length > 1 ? { pieces: [...p] } : {}), ...(r > 0 ? { reused: r } : {}),
    };
  });
}
