// The volunteer's training work: the steps a session's assignments ask for, on the training state
// (state.ts) with the session's ring (volunteer-ring.ts). A sync step computes this peer's
// slice and sums it with the ring bucket by bucket as backward runs (sync-step.ts), keeping a
// copy of its sum for a re-run, then applies the update; a round (rounds.ts) runs its inner
// steps here and sums the contributions once. Each reports its loss, timings and a checksum of
// the new weights.
//
// Undo: the state is backed up before each sync step, and a re-run of a step this peer had
// already applied (or begun) restores the backup first; a round undoes its outer step itself.
import { sketch, sketchSeed } from '../trust/sketch.ts';
import { disguiseHops, disguiseRelays } from '../trust/adversary.ts';
import { hopReport, sketchReport } from '../trust/hop-sketch.ts';
import { HopHearing } from './hop-hearing.ts';
import { HopRecord } from '../comm/hop-record.ts';
import type { TensorLike } from '../backend/engine.ts';
import type { StepRings } from './step-rings.ts';
import type { RoundState } from './rounds.ts';
import { microBatches, type MicroFit } from '../nn/fit.ts';
import { recordGradients, uploadBatch } from '../train/step.ts';
import { sliceIds } from '../train/sampler.ts';
import { weightChecksum } from './checksum.ts';
import { GradArrays } from '../train/grad-arrays.ts';
import { GRADIENT_BOUND, checkRingStep, perImageRms, roundRingStep, syncGradients, usableKept, type KeptSum } from './sync-step.ts';
import type {
  AuditTask, HopSeed, HopSketchesMessage, NextSlice, PeerMessage, RoundAssignment, SketchReport, StepAssignment, StepResult, StepTimings,
} from '../protocol/messages.ts';
import { MAX_BATCH } from '../protocol/messages.ts';
import { StateError } from './state.ts';
import { declaredMicroBatch, sleep, type Ctx } from './volunteer-context.ts';
import type { SessionRing } from './volunteer-ring.ts';
import type { TailClaims } from './tail-claims.ts';
import type { StepMachine } from './step-machine.ts';

const MAX_MS = 86_400_000;
const errorText = (e: unknown): string => (e instanceof Error ? e.message : String(e));
const clampMs = (ms: number): number => Math.min(MAX_MS, Math.max(0, ms));

/** What the trainer needs of its session. */
export interface StepHost {
  readonly peerId: string;
  /** The session has ended (left, evicted, coordinator gone): a step still running reports nothing. */
  readonly ended: boolean;
  send(m: PeerMessage): void;
  /** Uploads the weights of `step` (generation: the current ring's by default). */
  upload(step: number, generation?: number): Promise<void>;
  /** Claims on a step's tail (tail-claims.ts). */
  readonly claims: Pick<TailClaims, 'claim'>;
  /** Where the session's step is (step-machine.ts): each step moves it through its phases. */
  readonly machine: StepMachine;
}

/** What the micro-batches of a step with a tail left for its last one (Trainer.tail). */
interface TailWork {
  /** The ids of the last micro-batch, run with the all-reduce overlapped (empty: the gradient held is read back as it is). */
  last: number[];
  /** The ids granted from the tail, in grant order. */
  claimed: number[];
  /** Micro-batches before the last: their gradient sum is on the engine (null: none ran). */
  earlier: { lossSum: number } | null;
  /** Grants it got, and the size of its final grant (0: none came, the tail ran dry). */
  grants: number;
  final: number;
}

/**
 * The largest RMS a received segment of a round's sum may have: GRADIENT_BOUND times the
 * round's images times this peer's own per-image change RMS (none when it computed nothing).
 */
function changeBound(change: Float32Array, images: number, roundImages: number): number {
  const perImage = perImageRms(change, images);
  return perImage === null ? Number.POSITIVE_INFINITY : GRADIENT_BOUND * roundImages * perImage;
}

/**
 * The slices to load while inner step `k` of a round computes: the next two inner steps with
 * images, then the next step the assignment announces. k = -1: from the first.
 */
function innerAhead(a: StepAssignment, plan: RoundAssignment, k: number, count = 2): NextSlice[] {
  const out: NextSlice[] = [];
  for (let j = k + 1; j < plan.ids.length && out.length < count; j++) {
    const ids = plan.ids[j]!;
    if (ids.length) out.push({ step: a.step + j, epoch: plan.epochs[j]!, sampleIds: ids });
  }
  if (out.length < count && a.next) out.push(a.next);
  return out;
}

/** One session's training work on the job's state; owns the batch on the engine. */
export class Trainer {
  /** The step whose weights this peer holds (committed or tentatively applied), null until loaded. */
  committed: number | null = null;
  /** The step the GPU backup was taken before. */
  private backedUp: number | null = null;
  private lastReportAt = 0;
  private x: TensorLike | null = null;
  /** Running per-image RMS of this peer's gradient, per bucket (the all-reduce's bound, sync-step.ts rmsBound). */
  private readonly gradRms: (number | null)[] = [];
  /** Milliseconds the current step (or round) waited for its batches. */
  private dataMs = 0;
  /** The gradient sum of this peer's last sync slice, copied before its all-reduce (null: none). */
  private kept: KeptSum | null = null;
  /** An injected straggler (VolunteerOptions.straggle): this step's slowdown factor X, and the compute per image it scales. */
  private slowdown = 0;
  private msPerImage: number | null = null;
  /**
   * The int8 wire's error feedback (src/protocol/codec.ts): by step, what this peer's sends dropped in the
   * step before it, to add into that step's contribution. A step run again (aborted, undone)
   * finds its own entry still there; a peer that loaded a state starts with none.
   */
  private readonly carries = new Map<number, Float32Array>();
  /** The last verified step's hop records and contribution, for a hearing (protocol 15). */
  private readonly hearing = new HopHearing();
  /** The hop records of the last summed sync step, for the next one to reuse (hopRecord). */
  private spareHops: HopRecord | null = null;
  /** Host arrays of the gradient, reused step after step (a new 100 MB one costs its page faults every step). */
  private readonly arrays: GradArrays;

  constructor(private readonly c: Ctx, private readonly ring: SessionRing, private readonly host: StepHost) {
    this.arrays = new GradArrays(c.model.layout.paramFloats);
  }

  requireStep(step: number, what: string): void {
    if (this.committed !== step) throw new StateError(`asked to ${what} the weights of step ${step}, this peer holds step ${this.committed ?? 'none'}`);
  }

  /** The state of `step` was loaded (seed or checkpoint): nothing before it can be undone or reused. */
  loaded(step: number): void {
    this.committed = step;
    this.backedUp = null;
    this.kept = null;
    this.carries.clear();
    this.c.rounds?.forget();
  }

  /** Undoes a step (or round) this peer applied before the coordinator aborted it. */
  undoApplied(step: number): void {
    if (this.c.rounds?.undo(step)) this.committed = step;
    else if (this.backedUp === step && this.committed === step + 1) {
      this.c.state.restore();
      this.committed = step;
    }
  }

  /** Releases the batch on the engine (the session ended; a step still running first finishes with it). */
  releaseBatch(): void {
    const x = this.x;
    this.x = null;
    if (!x) return;
    // A step that outlived its session may end after the owner destroyed the engine (a volunteer
    // stopped mid-step): its memory went with the engine, and there is nothing left to release.
    try {
      this.c.p.engine.release(x);
    } catch (e) {
      this.c.log(`volunteer: the batch was not released (${e instanceof Error ? e.message : String(e)})`);
    }
  }

  /**
   * The gradient SUM of one slice (and its loss sum), in micro-batches that fit the device; the
   * optimiser runs on the host, so it always comes back. `ahead`: the slices to load while this one
   * computes, nearest first.
   */
  private async gradient(
    ids: number[], epoch: number, seed: number, step: number, ahead: readonly NextSlice[], honest = false,
    fit: Pick<MicroFit, 'images' | 'group'> = this.c.fit, pieces?: readonly number[],
  ): Promise<{ grads: Float32Array; lossSum: number }> {
    const { model } = this.c;
    const engine = this.c.p.engine;
    // Each run of ids computed apart (an audit of a re-run's pieces), each cut into micro-batches.
    const parts = runsOf(ids, pieces).flatMap((run) => this.parts(run, fit));
    let lossSum = 0;
    if (parts.length === 0) model.zeroGrads();
    for (let k = 0; k < parts.length; k++) {
      const next = k + 1 < parts.length ? [{ step, epoch, sampleIds: parts[k + 1]! }] : ahead.map((s) => this.firstPart(s));
      const x = await this.loadBatch(parts[k]!, epoch, next, honest);
      const total = recordGradients(model, x, seed * 1_000_003 + step, this.c.job.job.labelSmoothing ?? 0, k > 0);
      engine.flush();
      lossSum += (await engine.readF32(total))[0]!;
    }
    return { grads: await engine.readF32(model.grads), lossSum };
  }

  /**
   * `ids` cut into micro-batches that fit this device (src/nn/fit.ts). A slice that needs more
   * than one where BN normalises over the whole slice (a job without bnGroup) is refused: its
   * gradient would depend on how this device cuts it.
   */
  private parts(ids: readonly number[], fit: Pick<MicroFit, 'images' | 'group'> = this.c.fit): number[][] {
    const parts = microBatches(ids, fit);
    if (parts.length > 1 && this.c.model.bnGroup === null && this.c.model.spec.nodes.some((n) => n.op === 'bn')) {
      throw new StateError(`this device computes at most ${fit.images} images of ${this.c.model.spec.name} at once, `
        + `and its slice of ${ids.length} is more; the job normalises batch norm over each whole slice, so it cannot be cut: `
        + 'the job owner sets a BN group (npm start --bn-group 32) or gives this job more peers');
    }
    return parts;
  }

  /** The first micro-batch of a slice to come: what to load ahead of it. */
  private firstPart(s: NextSlice): NextSlice {
    const first = microBatches(s.sampleIds, this.c.fit)[0];
    return first && first.length < s.sampleIds.length ? { ...s, sampleIds: first } : s;
  }

  /** The batch of a slice on the engine (the wait for it counted in dataMs); then starts loading `ahead` (as far as the prefetcher's bound allows). */
  private async loadBatch(ids: number[], epoch: number, ahead: readonly NextSlice[], honest = false): Promise<TensorLike> {
    const taken = await this.c.batches.take(ids, epoch);
    this.dataMs += taken.waitMs;
    if (this.c.prefetch) for (const s of ahead) this.c.batches.hint(s.sampleIds, s.epoch);
    // A dishonest volunteer (the attack tests and bench only) may train on other labels (`honest`: an audit it does not collude in).
    const cheat = this.c.adversary && !honest ? this.c.adversary : null;
    const batch = cheat ? { ...taken.batch, labels: cheat.labels(taken.batch.labels, this.c.classes) } : taken.batch;
    this.x = uploadBatch(this.c.model, batch, this.x);
    return this.x;
  }

  /** Throttle: idle in proportion to the work, counted as compute so the coordinator gives this peer a smaller share. */
  private async throttle(computeMs: number): Promise<void> {
    const share = Math.min(1, Math.max(0.05, this.c.o.throttle?.() ?? 1));
    if (share < 1) await sleep(computeMs * (1 / share - 1));
  }

  /** Runs a step assignment: a sync step, or a round (when it carries one). */
  async step(a: StepAssignment): Promise<void> {
    if (a.round) {
      if (!this.c.rounds) throw new StateError('the coordinator assigned a round, but this job synchronises every step (syncEvery 1)');
      return this.round(a, a.round, this.c.rounds);
    }
    const arrived = performance.now();
    const { state } = this.c;
    // Start loading this step's (first) batch while the ring forms (a no-op when prefetched already).
    this.dataMs = 0;
    const first = this.firstPart(a);
    if (this.c.prefetch) this.c.batches.hint(first.sampleIds, first.epoch);
    // Undo a step this peer applied (or began) before the coordinator aborted it.
    if (this.backedUp === a.step && (this.committed === a.step + 1 || this.committed === a.step)) {
      state.restore();
      this.committed = a.step;
    }
    this.requireStep(a.step, 'train');
    checkRingStep(a);
    const { machine } = this.host;
    machine.go('SyncPrepare', a.step);
    state.backup();
    this.backedUp = a.step;
    // The ring forms while this peer computes: a slice whose ring never forms (a newer
    // generation came first) is still computed and kept, for the re-run to add.
    const forming = this.ring.join(a);
    // Awaited below; this only keeps a failure from going unhandled while the compute throws.
    forming.catch(() => undefined);
    // Before the compute (which updates the BN statistics): the checkpoint holds the state of a.step.
    if (a.uploadCheckpoint) await this.host.upload(a.step, a.generation);
    // Compute: this slice's gradient SUM, each bucket summed with the other slices over the ring
    // as soon as backward produced it (sync-step.ts); on a re-run, only the ids beyond the sum
    // this peer kept from the aborted attempt (when it holds it).
    machine.go('SyncCompute', a.step);
    const t0 = performance.now();
    const images = a.sampleIds.length;
    const reusable = usableKept(this.kept, a);
    const reused = reusable ? reusable.ids.length : 0;
    const assigned = reused > 0 ? a.sampleIds.slice(reused) : a.sampleIds;
    // A dishonest volunteer (the attack tests and bench only) may compute other ids than it was given.
    const adversary = this.c.adversary;
    const todo = adversary ? adversary.ids(assigned, this.c.train.index.samples) : assigned;
    if (a.reuse && !reusable) {
      this.c.log(`volunteer: step ${a.step + 1} holds no kept sum of generation ${a.reuse.generation} for its ${a.reuse.count} ids: `
        + 'computing the whole slice');
    }
    this.c.log(`volunteer: step ${a.step + 1} computes ${todo.length} of ${images} images (${reused} reused)`
      + `${a.steal ? ', then claims chunks of its tail' : ''}`);
    // An injected straggler (benchmarks): this step's slowdown.
    const mu = this.c.o.straggle ?? 0;
    this.slowdown = mu > 0 ? -mu * Math.log(1 - Math.random()) : 0;
    // A step with a tail: the fixed part and each granted chunk first, the last micro-batch below.
    const tail = a.steal ? await this.tail(a, todo) : null;
    if (tail) {
      this.c.log(`volunteer: step ${a.step + 1} took ${tail.claimed.length} images of the tail in ${tail.grants} grant${tail.grants === 1 ? '' : 's'}`
        + `${tail.final ? ` (its final grant: ${tail.final}, with the all-reduce)` : ''}`);
    }
    // Then every micro-batch but the last of what is left (what fits the device at once); the last one runs with the all-reduce.
    const parts = this.parts(tail ? tail.last : todo);
    let earlier = tail?.earlier ?? null;
    if (parts.length > 1) {
      this.c.log(`volunteer: step ${a.step + 1} runs its ${parts.flat().length} images as ${parts.length} micro-batches of at most ${this.c.fit.images}`
        + ' (what fits this device)');
    }
    const lastPart = parts.length > 1 ? [{ step: a.step, epoch: a.epoch, sampleIds: parts[parts.length - 1]! }] : [];
    earlier = await this.micros(parts.slice(0, -1), a, earlier, lastPart, parts.length);
    // Those micro-batches were throttled one by one already.
    const microMs = performance.now() - t0;
    const last = parts[parts.length - 1] ?? [];
    const claimed = tail?.claimed ?? [];
    const x = last.length > 0 ? await this.loadBatch(last, a.epoch, a.next ? [this.firstPart(a.next)] : []) : null;
    await this.straggle(last.length);
    const uploadMs = performance.now() - t0 - this.dataMs;
    const { buckets, model } = this.c;
    const feedback = this.c.wire === 'i8' ? { carry: this.carries.get(a.step) ?? null, fresh: new Float32Array(model.layout.paramFloats) } : null;
    const tamper = adversary?.tamper ? { tamper: adversary.tamper } : {};
    // A verified step keeps what each collective received and sent, for the hop checks (src/comm/hop-record.ts); alone, it sends nothing.
    this.hearing.clear();
    const hops = a.verify && a.ring.length > 1 ? this.hopRecord(model.layout.paramFloats) : null;
    if (hops) hops.relayTamper = adversary?.relay ?? null;
    const lies = adversary?.tamper?.consistent === false;
    machine.go('SyncAllReduce', a.step);
    const out = await syncGradients({
      model, x, stepSeed: a.seed * 1_000_003 + a.step, labelSmoothing: this.c.job.job.labelSmoothing ?? 0, buckets, reused: reusable,
      ...(earlier ? { earlier } : {}), ...tamper, arrays: this.arrays,
    }, forming, {
      step: a.step, images: images + claimed.length, globalBatch: a.globalBatch, gradRms: this.gradRms,
      // Copied before the all-reduce touches a bucket: a re-run without a lost member starts from it. The sum it
      // replaces is read by nobody now: the hearing let go of it above, and a reused one was added in before this.
      keep: (sum) => {
        const old = this.kept;
        this.kept = { step: a.step, generation: a.generation, ids: [...a.sampleIds, ...claimed], ...sum };
        if (old && old.grads !== sum.grads) this.arrays.give(old.grads);
      },
      onStart: (ring) => this.c.log(`volunteer: step ${a.step + 1} all-reduce of ${model.layout.paramFloats} floats over ${ring.shape} `
        + `in ${buckets.length} bucket${buckets.length === 1 ? '' : 's'} as backward runs`),
      throttle: (computeMs) => (x ? this.throttle(Math.max(0, uploadMs - microMs) + computeMs) : Promise.resolve()),
      ...(feedback ? { feedback } : {}), ...(hops ? { hops } : {}),
    });
    if (out.kind === 'no-ring') return machine.go('Aborted', a.step, 'no ring: superseded, or its formation failed');
    if (out.kind === 'failed') {
      machine.go('Aborted', a.step, `the all-reduce failed: ${errorText(out.error)}`);
      return this.ring.failed(out.error, a);
    }
    machine.go('SyncApply', a.step);
    // An audit (a job that verifies): another member's slice on this step's weights, before the update moves them.
    const audited = a.verify?.audit ? await this.auditGradient(a, a.verify.audit) : null;
    this.timed(out.timings.computeMs, last.length);
    if (feedback) {
      // What this attempt's sends dropped goes into the next step; older entries are done with.
      for (const k of [...this.carries.keys()]) if (k < a.step) this.carries.delete(k);
      this.carries.set(a.step + 1, feedback.fresh);
    }
    state.applyUpdate(out.grads, a.step, a.globalBatch);
    const checksum = weightChecksum(state.w);
    this.committed = a.step + 1;
    machine.go('Reporting', a.step);
    // Left (paused, evicted, coordinator gone) while this step ran: nothing more to say.
    if (this.host.ended) return;
    const all = images + claimed.length;
    const loss = all > 0 && Number.isFinite(out.lossSum / all) ? out.lossSum / all : null;
    // wait: idle between steps (the barrier), plus the time inside the all-reduce before the
    // first frame came (prev was still computing); comm: the rest of the all-reduce, exposedComm
    // the part of it after this peer's backward ended. compute excludes the wait for data.
    const idle = this.lastReportAt > 0 ? Math.max(0, arrived - this.lastReportAt) : 0;
    const t = out.timings;
    const timings = {
      computeMs: clampMs(uploadMs + t.computeMs), commMs: clampMs(t.commMs), waitMs: clampMs(idle + t.waitMs), dataMs: clampMs(this.dataMs),
      exposedCommMs: clampMs(t.exposedCommMs), overheadMs: clampMs(t.overheadMs),
    };
    const kept = hops && out.ring.hopsKept && out.ring.size > 1 ? hops : null;
    // A liar (the attack tests and bench) reports the hops an honest member would have: its successor's show what it sent.
    if (kept && lies && this.kept) disguiseHops(kept, this.kept.grads, this.c.wire);
    if (kept && adversary?.relay) disguiseRelays(kept);
    const own = this.kept && this.kept.step === a.step && this.kept.generation === a.generation ? this.kept.grads : null;
    if (kept && own) this.hearing.keep(a.step, a.generation, kept, own);
    const verified = a.verify ? this.sketches(a, checksum, own, out.grads, audited, kept) : {};
    this.report(a, out.ring, {
      loss, checksum, timings, images: all, sentBytes: out.sentBytes, ...(reused > 0 ? { reused } : {}), ...(tail ? { claimed: claimed.length } : {}),
      ...verified,
    }, 1);
    // Applied, sketched and reported: the summed gradient is read by nobody now; the hop records only by the hearing,
    // until the next step clears it (hopRecord).
    this.arrays.give(out.grads);
    if (hops) this.spareHops = hops;
    machine.go('Ready', a.step);
  }

  /**
   * A hop record for a sync step: the last summed step's, made new (its collectives all ended, and the hearing, the
   * only other holder, was cleared before this), or a new one.
   */
  private hopRecord(floats: number): HopRecord {
    const spare = this.spareHops;
    this.spareHops = null;
    if (!spare || spare.length !== floats) return new HopRecord(floats);
    spare.reset();
    return spare;
  }

  /**
   * `task`'s slice recomputed for an audit: its gradient sum on the weights this peer holds (the
   * step's, not yet updated), in the member's micro-batches (one batch where the task names none),
   * with the step's dropout seed; the BN statistics the forward pass moves are put back, so the
   * audit leaves this peer's state as it was. Null where those micro-batches do not fit this device.
   */
  private async auditGradient(a: StepAssignment, task: AuditTask): Promise<Float32Array | null> {
    const { model } = this.c;
    const engine = this.c.p.engine;
    const runs = runsOf(task.sampleIds, task.pieces);
    const fit = this.auditFit(task, runs);
    if (!fit) return null;
    const bn = model.state.size > 0 ? await engine.readF32(model.state) : null;
    // A colluding adversary (the attack bench only) recomputes the slice the way it cheats.
    const colluder = this.c.adversary?.colludes ? this.c.adversary : null;
    const ids = colluder ? colluder.ids(task.sampleIds, this.c.train.index.samples) : task.sampleIds;
    try {
      const { grads: g } = await this.gradient(ids, task.epoch, a.seed, a.step, [], !colluder, fit, task.pieces);
      if (colluder?.auditTamper) for (const b of this.c.buckets) colluder.auditTamper.apply(g.subarray(b.start, b.end), b.start);
      const cut = (task.microBatch !== undefined && task.microBatch < ids.length ? ` in micro-batches of at most ${task.microBatch}, as it computes` : '')
        + (runs.length > 1 ? ` in ${runs.length} runs of ${runs.map((r) => r.length).join(' + ')} images, as it kept and computed them` : '');
      this.c.log(`volunteer: step ${a.step + 1} audits ${task.peer}'s slice of ${task.sampleIds.length} images${cut}`);
      return g;
    } finally {
      if (bn) engine.write(model.state, bn);
    }
  }

  /**
   * How an audit cuts the audited member's slices (`slices`: the step's, or each inner step's of a round): in its
   * micro-batches (task.microBatch), or each as one batch. Null, said in the log, where a micro-batch would not fit this
   * device (the coordinator picks auditors whose micro-batch is large enough; an older plan may not have).
   */
  private auditFit(task: AuditTask, slices: readonly (readonly number[])[]): Pick<MicroFit, 'images' | 'group'> | null {
    const fit = { images: task.microBatch ?? MAX_BATCH, group: this.c.fit.group };
    const largest = Math.max(0, ...slices.flatMap((ids) => microBatches(ids, fit).map((p) => p.length)));
    if (largest <= this.c.fit.images) return fit;
    this.c.log(`volunteer: cannot audit ${task.peer}: its micro-batches of up to ${largest} images do not fit this device (${this.c.fit.images})`);
    return null;
  }

  /**
   * The step's verification reports (StepResult.sketch, total, audit): sketches under the seed of
   * the weights after the step (known to nobody before every contribution was sent) of this peer's
   * contribution (its kept sum, what went into the ring), of the ring's sum, and of an audited slice.
   */
  private sketches(
    a: StepAssignment, checksum: string, own: Float32Array | null, total: Float32Array, audited: Float32Array | null, hops: HopRecord | null,
  ): Pick<StepResult, 'sketch' | 'total' | 'audit' | 'hops'> {
    const seed = sketchSeed(checksum);
    const report = (g: Float32Array, under = seed): SketchReport => sketchReport(sketch(g, under));
    return {
      ...(own ? { sketch: report(own) } : {}), total: report(total),
      ...(audited && a.verify?.audit ? { audit: { peer: a.verify.audit.peer, ...report(audited, a.verify.audit.seed) } } : {}),
      ...(hops ? { hops: hopReport(hops, seed) } : {}),
    };
  }

  /** A hearing's answer (protocol 15): the kept contribution and hop records of the step `m` names under its seed; null if not kept. */
  hopSketches(m: HopSeed): HopSketchesMessage | null {
    return this.hearing.answer(m, this.host.peerId);
  }

  /**
   * A step with a tail (StepAssignment.steal): computes `own` (its fixed part) as one micro-batch,
   * then each chunk granted, with one claim in flight ahead, the gradient summed on the engine.
   * A chunk is computed only once the next grant came: the last chunk obtained, together with
   * the final grant when one comes, is left for the overlapped all-reduce (so a step is two
   * micro-batches when its first rated claim is answered with its final grant). A claim the
   * coordinator left behind (cancelled) ends the claiming: the step finishes with what it holds.
   */
  private async tail(a: StepAssignment, own: number[]): Promise<TailWork> {
    const next0 = this.host.claims.claim(a.generation, a.step);
    let earlier: { lossSum: number } | null = null;
    const add = async (ids: number[], ahead: readonly NextSlice[]): Promise<void> => {
      earlier = await this.micros(this.parts(ids), a, earlier, ahead);
    };
    await add(own, []);
    let next = next0;
    let pending: number[] = [];
    const claimed: number[] = [];
    let grants = 0;
    let final = 0;
    for (;;) {
      const answer = await next;
      if (answer.kind === 'cancelled' || answer.ids.length === 0) break;
      claimed.push(...answer.ids);
      grants++;
      // Its final grant (sized to its rate): run with the chunk before it, the all-reduce overlapped.
      if (answer.last) {
        pending = [...pending, ...answer.ids];
        final = answer.ids.length;
        break;
      }
      next = this.host.claims.claim(a.generation, a.step);
      // The granted chunk loads while the one before it computes.
      await add(pending, [{ step: a.step, epoch: a.epoch, sampleIds: answer.ids }]);
      pending = answer.ids;
    }
    return { last: pending, claimed, earlier, grants, final };
  }

  /**
   * Micro-batches of a slice in turn, each added to the gradient the engine holds from `earlier`
   * ones (the first replacing it when there are none), each loading the next ahead (`ahead` after
   * the last) and throttled after it, so that this peer claims and computes at its set pace.
   * `of`: the parts the slice was cut into, when it was cut to fit (each is then logged).
   */
  private async micros(
    parts: number[][], a: StepAssignment, earlier: { lossSum: number } | null, ahead: readonly NextSlice[], of = 1,
  ): Promise<{ lossSum: number } | null> {
    let sum = earlier;
    for (let k = 0; k < parts.length; k++) {
      const at = performance.now();
      const next = k + 1 < parts.length ? [{ step: a.step, epoch: a.epoch, sampleIds: parts[k + 1]! }] : ahead;
      const lossSum = await this.microBatch(parts[k]!, a, sum !== null, next);
      await this.throttle(performance.now() - at);
      sum = { lossSum: (sum?.lossSum ?? 0) + lossSum };
      const ms = (performance.now() - at).toFixed(0);
      if (of > 1) this.c.log(`volunteer: step ${a.step + 1} micro-batch ${k + 1} of ${of} (${parts[k]!.length} images) in ${ms} ms`);
    }
    return sum;
  }

  /** One micro-batch of a slice: its gradient added to the engine's (`accumulate`) or replacing it; resolves its loss sum. */
  private async microBatch(ids: number[], a: StepAssignment, accumulate: boolean, ahead: readonly NextSlice[]): Promise<number> {
    const engine = this.c.p.engine;
    const x = await this.loadBatch(ids, a.epoch, ahead);
    await this.straggle(ids.length);
    const at = performance.now();
    const total = recordGradients(this.c.model, x, a.seed * 1_000_003 + a.step, this.c.job.job.labelSmoothing ?? 0, accumulate);
    engine.flush();
    const lossSum = (await engine.readF32(total))[0]!;
    this.timed(performance.now() - at, ids.length);
    return lossSum;
  }

  /** An injected straggler waits X times the expected compute of `images` before computing them (none before a compute was timed). */
  private async straggle(images: number): Promise<void> {
    if (this.slowdown > 0 && this.msPerImage !== null && images > 0) await sleep(this.slowdown * images * this.msPerImage);
  }

  /** Compute of `images` took `ms` (no waiting in it): the expected compute per image an injected straggler scales. */
  private timed(ms: number, images: number): void {
    if (!this.c.o.straggle || images === 0) return;
    const per = ms / images;
    this.msPerImage = this.msPerImage === null ? per : 0.8 * this.msPerImage + 0.2 * per;
  }

  private report(
    a: StepAssignment, ring: StepRings,
    r: { loss: number | null; checksum: string; timings: StepTimings & { dataMs: number }; images: number; sentBytes: number; reused?: number }
      & Pick<StepResult, 'sketch' | 'total' | 'audit' | 'hops'>,
    steps: number,
  ): void {
    const fetchedBytes = this.c.fetched.bytes;
    this.host.send({
      type: 'step-result', peerId: this.host.peerId, generation: a.generation, step: a.step, ...r, fetchedBytes, microBatch: declaredMicroBatch(this.c.fit),
      ...(ring.size > 1 && this.ring.links.next ? { link: this.ring.links.next } : {}),
      ...(ring.size > 1 && this.ring.links.prev ? { linkPrev: this.ring.links.prev } : {}),
    });
    this.lastReportAt = performance.now();
    this.c.o.onEvent?.({
      type: 'step', step: a.step + steps, generation: a.generation, ringSize: ring.size, images: r.images, loss: r.loss, computeMs: r.timings.computeMs,
      commMs: r.timings.commMs, innerSteps: steps, sentBytes: r.sentBytes, dataMs: r.timings.dataMs, fetchedBytes,
    });
  }

  /**
   * A round (rounds.ts): H' inner steps on this peer's slices (or the contribution it already
   * computed, when the coordinator re-runs the round without a lost member), the ring's sum of
   * the contributions, the outer step.
   */
  private async round(a: StepAssignment, plan: RoundAssignment, rounds: RoundState): Promise<void> {
    const arrived = performance.now();
    this.dataMs = 0;
    // The round's first inner slices start loading while the ring forms.
    if (this.c.prefetch) for (const s of innerAhead(a, plan, -1).map((n) => this.firstPart(n))) this.c.batches.hint(s.sampleIds, s.epoch);
    if (rounds.undo(a.step)) this.committed = a.step;
    this.requireStep(a.step, 'train');
    checkRingStep(a);
    const { machine } = this.host;
    machine.go('RoundPrepare', a.step);
    const ring = await this.ring.join(a);
    if (!ring) return machine.go('Aborted', a.step, 'no ring: superseded, or its formation failed');
    if (a.uploadCheckpoint) await this.host.upload(a.step);
    machine.go('InnerSteps', a.step);
    const tc = performance.now();
    // A dishonest volunteer (the attack tests and bench only) may compute other ids than its slices.
    const adversary = this.c.adversary;
    const samples = this.c.train.index.samples;
    const { work, reused } = await rounds.contribution(
      a.step, plan,
      (ids, epoch, step) => this.gradient(adversary ? adversary.ids(ids, samples) : ids, epoch, a.seed, step, innerAhead(a, plan, step - a.step)),
    );
    if (reused) this.c.log(`volunteer: round at step ${a.step + 1}: reusing the ${work.images} images computed before (a member was lost)`);
    else await this.throttle(work.computeMs - this.dataMs);
    const t1 = performance.now();
    let firstFrame = t1;
    const sum = work.change.slice();
    // What it puts into the ring: a dishonest volunteer's change tampered with as it leaves (a consistent kind reports it, a liar the honest one).
    const tamper = adversary?.tamper ?? null;
    if (tamper) tamper.apply(sum, 0);
    const reported = tamper?.consistent ? sum.slice() : work.change;
    const hops = a.verify && ring.hopsKept && ring.size > 1 ? new HopRecord(sum.length) : null;
    if (hops) hops.relayTamper = adversary?.relay ?? null;
    this.hearing.clear();
    machine.go('RoundAllReduce', a.step);
    if (ring.size > 1) {
      this.c.log(`volunteer: round at step ${a.step + 1} (${plan.ids.length} inner steps, ${work.images} images here): `
        + `all-reduce of ${sum.length} floats over ${ring.shape}`);
      try {
        await ring.allReduce(sum, {
          step: roundRingStep(a.step), maxRms: changeBound(work.change, work.images, plan.images), onFirstFrame: () => { firstFrame = performance.now(); },
          ...(hops ? { hops: hops.view(0, sum.length) } : {}),
        });
      } catch (e) {
        machine.go('Aborted', a.step, `the all-reduce failed: ${errorText(e)}`);
        return this.ring.failed(e, a);
      }
    }
    machine.go('OuterStep', a.step);
    const t2 = performance.now();
    // An audit (a job that verifies): another member's round recomputed from the round's start, before the outer step.
    const audited = a.verify?.audit?.round ? await this.auditRound(a, plan, a.verify.audit, rounds) : null;
    rounds.apply(a.step, sum, plan.images, plan.ids.length);
    this.committed = a.step + plan.ids.length;
    machine.go('Reporting', a.step);
    if (this.host.ended) return;
    if (hops && tamper?.consistent === false) disguiseHops(hops, work.change, this.c.wire);
    if (hops && adversary?.relay) disguiseRelays(hops);
    if (hops) this.hearing.keep(a.step, a.generation, hops, reported);
    const checksum = weightChecksum(this.c.state.w);
    const verified = a.verify ? this.sketches(a, checksum, reported, sum, audited, hops) : {};
    const idle = this.lastReportAt > 0 ? Math.max(0, arrived - this.lastReportAt) : 0;
    const timings = {
      computeMs: Math.min(MAX_MS, reused ? 0 : Math.max(0, t1 - tc - this.dataMs)), commMs: Math.min(MAX_MS, t2 - firstFrame),
      waitMs: Math.min(MAX_MS, idle + (firstFrame - t1)), dataMs: Math.min(MAX_MS, this.dataMs),
    };
    const loss = work.images > 0 && Number.isFinite(work.lossSum / work.images) ? work.lossSum / work.images : null;
    this.report(a, ring, {
      loss, checksum, timings, images: work.images, sentBytes: ring.sentBytes(sum.length), ...verified,
    }, plan.ids.length);
    machine.go('Ready', a.step);
  }

  /**
   * `task`'s round recomputed for an audit (rounds.ts recompute) on the weights this peer holds at the round's start, its
   * inner steps with the round's dropout seeds; the batch norm statistics the forward passes move are put back.
   */
  private async auditRound(a: StepAssignment, plan: RoundAssignment, task: AuditTask, rounds: RoundState): Promise<Float32Array | null> {
    const { model } = this.c;
    const engine = this.c.p.engine;
    const inner = task.round ?? [];
    const fit = this.auditFit(task, inner);
    if (!fit) return null;
    const bn = model.state.size > 0 ? await engine.readF32(model.state) : null;
    // A colluding adversary (the attack bench only) recomputes the round the way it cheats.
    const colluder = this.c.adversary?.colludes ? this.c.adversary : null;
    const samples = this.c.train.index.samples;
    this.c.log(`volunteer: round at step ${a.step + 1} audits ${task.peer}'s round of ${inner.flat().length} images`);
    try {
      const change = await rounds.recompute(a.step, inner, plan.epochs,
        (ids, epoch, step) => this.gradient(colluder ? colluder.ids(ids, samples) : ids, epoch, a.seed, step, [], !colluder, fit));
      if (colluder?.auditTamper) colluder.auditTamper.apply(change, 0);
      return change;
    } finally {
      if (bn) engine.write(model.state, bn);
    }
  }
}

/** `ids` as the runs of `pieces` (their lengths, in order; they add up to ids.length, as the decoder checks); absent: one run. */
export function runsOf(ids: readonly number[], pieces: readonly number[] | undefined): number[][] {
  return pieces && pieces.length > 1 ? sliceIds(ids, pieces) : [[...ids]];
}
