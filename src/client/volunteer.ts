// The volunteer: the same client in a browser worker and in Node (headless lab desktops).
// It joins the coordinator's job, then obeys the session: load the state of a step (seed or
// checkpoint), and for each step assignment compute its slice's gradient, sum it with the
// ring over WebRTC bucket by bucket as backward produces it (src/client/sync-step.ts), apply
// LARS and report loss, timings and a checksum of the new weights.
//
// A step is undoable: the state is backed up before each step, and when the
// coordinator re-runs step s (a peer failed while some of us had already applied s), the
// backup is restored first. An assignment of a newer generation closes the ring at once, so a
// collective stuck on a dead peer ends when the coordinator has decided what happens next.
// A lost peer costs its slice, not the step: before each bucket's all-reduce (which sums in
// place) the peer copies that bucket of its slice's gradient sum, the whole copy keyed by
// (step, generation, ids); a re-run whose assignment names that key in `reuse` adds the copy
// and computes only the extra ids.
//
// Data comes ahead of need (src/data/prefetch.ts): an assignment's batch starts loading when it
// arrives (while the ring forms), and the slice of the next step it announces (`next`, or a
// round's next inner step) loads while this one computes and all-reduces.
//
// This file: the job's setup (model, state, data) and the loop of sessions, rejoining after a
// lost coordinator or an eviction. The parts: volunteer-context.ts (the platform, options,
// events), volunteer-session.ts (one membership: socket, messages, leaving),
// volunteer-ring.ts (its rings), volunteer-train.ts (steps and rounds), volunteer-checkpoint.ts
// and volunteer-eval.ts.
import { MAX_UNREACHABLE, reportIce, unreachableError } from './reachability.ts';
import { RoundState } from './rounds.ts';
import { countingSource } from '../data/counting-source.ts';
import { BatchLoader, DEFAULT_CACHE_BYTES, defaultAugment } from '../data/loader.ts';
import { Prefetcher } from '../data/prefetch.ts';
import { httpShardSource, loadManifest } from '../data/source.ts';
import { fitMicroBatch, footprintOf, type MicroFit } from '../nn/fit.ts';
import { Model } from '../nn/model.ts';
import { modelByName } from '../nn/models.ts';
import { checkOuterConfig, OUTER_DEFAULTS } from '../optim/outer.ts';
import { jobWire, syncBuckets } from './sync-step.ts';
import { getJob, withJobToken } from './http.ts';
import { failed, halts, noStreak } from './failure-streak.ts';
import { StateError, TrainingState } from './state.ts';
import { sleep, type Ctx, type VolunteerExit, type VolunteerOptions, type VolunteerPlatform } from './volunteer-context.ts';
import { Session } from './volunteer-session.ts';
import { adversaryOf } from '../trust/adversary.ts';

export type { CheckpointKeeper, SocketCtor, SocketLike, VolunteerEvent, VolunteerExit, VolunteerOptions, VolunteerPlatform } from './volunteer-context.ts';
export { LEAVE_AFTER_STEP_MS, deviceLabel } from './volunteer-session.ts';
export { usableKept } from './sync-step.ts';

/** Joins the job at `url` and trains until the job is done (or `signal` aborts). */
export async function runVolunteer(p: VolunteerPlatform, o: VolunteerOptions): Promise<VolunteerExit> {
  const base = o.url.replace(/\/+$/, '');
  // A private job's data, checkpoints and job info need its token (coordinator/routes.ts checkAccess).
  const fetchFn = withJobToken(p.fetch ?? fetch, base, o.token);
  const log = o.log ?? (() => undefined);
  const rejoinFor = o.rejoinForMs ?? 600_000;
  const job = await withRetry(() => getJob(fetchFn, base), rejoinFor, log, o.signal);
  const wire = jobWire(job.job);
  // Counted below any cache: what this peer downloaded from the coordinator.
  const fetched = countingSource(httpShardSource(`${base}/data/${job.job.dataset}/`, fetchFn));
  const source = p.cacheShards ? p.cacheShards(fetched, job.job.dataset) : fetched;
  const manifest = await loadManifest(source);
  const { channels, height, width } = manifest.image;
  const spec = modelByName(job.job.model, [channels, height, width], manifest.classes.length);
  const layout = { biasTrust: job.job.optimizer.biasTrust };
  const bnGroup = job.job.bnGroup;
  const model = new Model(p.engine, spec, { seed: job.job.seed, layout, ...(bnGroup !== undefined ? { bnGroup } : {}) });
  const buckets = syncBuckets(model.layout, job.job);
  // Checked here too (a coordinator's settings are input): peers must agree on every field. A
  // field an older coordinator does not send takes its default (the warm-up is its business).
  const outer = job.job.outer && job.job.outer.syncEvery > 1 ? checkOuterConfig({ ...OUTER_DEFAULTS, ...job.job.outer }) : null;
  const state = await TrainingState.create(model, job.job.optimizer, outer);
  if (state.why) log(`volunteer: the optimiser runs in JavaScript, about 3x slower than in wasm (${state.why})`);
  const rounds = outer ? new RoundState(state, outer) : null;
  // What fits this device at once, with the model and its state in place: larger slices run as micro-batches.
  let fit: MicroFit;
  try {
    fit = fitMicroBatch(await footprintOf(p.engine, spec, layout), p.engine.memory(), bnGroup ?? 1, {
      ...(o.memoryBytes !== undefined ? { memoryBytes: o.memoryBytes } : {}), ...(o.microBatch !== undefined ? { maxImages: o.microBatch } : {}),
    });
  } catch (e) {
    state.destroy();
    model.destroy();
    throw e;
  }
  const perImage = (fit.footprint.perImageBytes / 2 ** 20).toFixed(1);
  log(`volunteer: ${fit.images} images fit at once on ${p.engine.info.description} (${perImage} MiB and ${fit.footprint.msPerImage.toFixed(0)} ms`
    + ` measured per image, bound by ${fit.bound}`
    + `${bnGroup ? `, BN groups of ${bnGroup}` : ''})`);
  const memory = o.memoryCacheBytes ?? DEFAULT_CACHE_BYTES;
  if (!(memory > 0)) throw new RangeError(`memoryCacheBytes must be > 0, got ${memory}`);
  const valBytes = Math.max(1, Math.floor(memory / 4));
  const loader = (split: 'train' | 'val', cacheBytes: number) => new BatchLoader({
    manifest, source, decoder: p.decoder, split, augment: defaultAugment(manifest, split), seed: job.job.seed, gunzip: p.gunzip, cacheBytes,
  });
  const train = loader('train', Math.max(1, memory - valBytes));
  const batches = new Prefetcher(train, {
    onError: (e, ids) => log(`volunteer: loading ${ids.length} images ahead failed (${e instanceof Error ? e.message : String(e)}); `
      + 'the step will load them itself'),
  });
  const ctx: Ctx = {
    p, o, base, fetchFn, log, job, model, buckets, wire, state, rounds, train, val: loader('val', valBytes), batches, prefetch: o.prefetch ?? true,
    fetched, fit, classes: manifest.classes.length, adversary: o.adversary ? adversaryOf(o.adversary, job.job.seed, o.collude === true) : null,
  };
  // A data set that fits the cache loads while this peer joins and waits to be admitted, not in its first step.
  if (ctx.prefetch) {
    const warming = train.warmAll();
    if (warming > 0) log(`volunteer: loading all ${warming} shards of the training data while joining (the data set fits the cache)`);
  }
  let step: number | null = null;
  let unreachable = 0;
  let streak = noStreak();
  /** The step this peer held when its streak of failures last grew (a commit since breaks it). */
  let streakAt: number | null | undefined;
  let checkedIce = false;
  try {
    for (;;) {
      if (o.signal?.aborted) return { reason: 'stopped', step };
      let session: Session;
      try {
        session = await withRetry(() => Session.open(ctx), rejoinFor, log, o.signal);
      } catch (e) {
        if (o.signal?.aborted) return { reason: 'stopped', step };
        throw e;
      }
      // Once, in the background: what this device offers WebRTC, and any server that failed.
      if (!checkedIce && p.iceCheck && session.iceServers.length) checkedIce = reportIce(p.iceCheck, session.iceServers, session.rtcConfig, log);
      const end = await session.run();
      if (end.reason === 'done' || end.reason === 'stopped') return { reason: end.reason, step: session.committed };
      // A step's staged backward may outlive its session: the next session uses the model after it.
      const endedAt = Date.now();
      await session.drained(60_000);
      if (Date.now() - endedAt > 2000) {
        log(`volunteer: waited ${((Date.now() - endedAt) / 1000).toFixed(1)} s after the session ended for the step it was in to finish`);
      }
      // Its own work failed the same way again and again with no step in between: rejoining will not help.
      streak = end.failed ? failed(session.committed === streakAt ? streak : noStreak(), end.detail) : noStreak();
      streakAt = session.committed;
      if (halts(streak)) {
        throw new StateError(`this volunteer stops: its work failed ${streak.count} times in a row the same way, `
          + `with no step committed between: ${end.detail}`);
      }
      step = session.committed;
      // Evicted again and again because no neighbour could be reached: rejoining will not help.
      unreachable = end.unreachable ? (session.linked ? 1 : unreachable + 1) : 0;
      if (unreachable >= MAX_UNREACHABLE) throw await unreachableError(p, session.iceServers, session.rtcConfig, end.detail, log);
      o.onEvent?.({ type: 'left', reason: end.detail });
      log(`volunteer: session ended (${end.detail}); rejoining`);
      await sleep(500);
    }
  } finally {
    state.destroy();
    model.destroy();
  }
}

/** Retries `f` while the coordinator is unreachable or restarting, for up to `forMs`. */
async function withRetry<T>(f: () => Promise<T>, forMs: number, log: (l: string) => void, signal?: AbortSignal): Promise<T> {
  const until = Date.now() + forMs;
  for (let wait = 250; ; wait = Math.min(wait * 2, 4000)) {
    try {
      return await f();
    } catch (e) {
      // 4xx are answers (wrong token, bad request): retrying will not change them, except
      // 429 (too many joins from this address, e.g. a lab behind one NAT): wait and retry.
      const status = (e as { status?: number }).status ?? 0;
      if ((status >= 400 && status < 500 && status !== 429) || Date.now() + wait > until || signal?.aborted) throw e;
      log(`volunteer: ${e instanceof Error ? e.message : String(e)}; retrying in ${wait} ms`);
      await sleep(wait);
    }
  }
}
