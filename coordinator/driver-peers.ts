// What the training driver (driver.ts) keeps of each connected peer, and what it reads from
// those records: the speed and work a step result shows, the ring's speeds for splitting a
// batch, who has been silent for longer than silence.ts allows, and where joiners stand. Pure
// functions but for the records whose admission state they set.
import { MAX_DEAD_MS, MIN_DEAD_MS, RING_FORM_TIMEOUT_MS, type StepResult } from '../src/protocol/messages.ts';
import type { AdmittingPhase, Phase } from './driver-types.ts';
import { silenceLimitMs, type SilenceLimits } from './silence.ts';
import { observeLinks, type LinkObservation } from './two-level.ts';
import { inRing, rankOf } from './ring-index.ts';

export interface PeerRec {
  id: string;
  name: string | null;
  /** Its donor's lasting id (JoinRequest.donor), when it gave one: its work is credited to it. */
  donor?: string;
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
  /** Its own timing of its engine per image, said at its join (unverified): its silence allowance before a step measured it. */
  probeMsPerImage?: number;
  /** The most images it computes at once, said at its join for its session (JoinRequest.microBatch); its results must say the same. */
  microBatch?: number;
  device: string;
  /** What its step results showed of its ring links (the two-level plan: two-level.ts). */
  links: LinkObservation;
  /** Not admitted before this time (its last admission failed for want of a checkpoint). */
  admitAfter: number;
  /** When it began waiting for admission (the joiner batching of the driver's boundary()). */
  waitingSince: number;
  /** A verifying job: the step count before the first committed step it contributed to unaudited (undo.ts); absent: none. */
  unauditedFrom?: number;
  /**
   * When it asked to leave after the running step (Leave.afterStep; absent: it did not): let go
   * at a boundary (under churn in a big ring with the next admission, or after a bounded hold).
   */
  leavingSince?: number;
  /** When a ring failure blaming it last formed the ring again instead of evicting it (blame.ts formAgain). */
  formedAgainAt?: number;
}

/** The record of a peer that connected at `now`: waiting for admission. */
export function newPeer(id: string, name: string | null, now: number): PeerRec {
  return {
    id, name, state: 'waiting', lastSeen: now, maxGap: 0, ips: null, maxWorkMs: null, workPerImage: 0, device: '', links: {}, admitAfter: 0, waitingSince: now,
  };
}

/** The measurements of `p` updated by `m`, its result of the running step. */
export function measureStep(p: PeerRec, m: StepResult): Pick<PeerRec, 'ips' | 'maxWorkMs' | 'workPerImage' | 'links'> {
  // Speed from what it computed now (not the images it reused from a kept sum).
  const computed = m.images - (m.reused ?? 0);
  let ips = p.ips;
  if (computed > 0 && m.timings.computeMs > 0) {
    const measured = computed / (m.timings.computeMs / 1000);
    ips = ips === null ? measured : 0.7 * ips + 0.3 * measured;
  }
  const work = m.timings.computeMs + (m.timings.dataMs ?? 0);
  const workPerImage = computed > 0 ? Math.max(p.workPerImage, work / computed) : p.workPerImage;
  return { ips, maxWorkMs: Math.max(p.maxWorkMs ?? 0, work), workPerImage, links: observeLinks(p.links, m) };
}

/** The ring's measured images/s by rank (the median for a peer not timed yet). */
export function ringSpeeds(ring: readonly string[], peers: ReadonlyMap<string, PeerRec>): number[] {
  const known = ring.map((id) => peers.get(id)?.ips ?? null).filter((v): v is number => v !== null).sort((a, b) => a - b);
  const median = known.length ? known[known.length >> 1]! : 1;
  return ring.map((id) => peers.get(id)?.ips ?? median);
}

/** The joiners of `ph` once none is loading any more: the ready ones, now members (null while one is loading). */
export function admitted(ph: AdmittingPhase, peers: ReadonlyMap<string, PeerRec>): string[] | null {
  if (ph.joiners.some((id) => peers.get(id)?.state === 'loading')) return null;
  const ready = ph.joiners.filter((id) => peers.get(id)?.state === 'ready');
  for (const id of ready) peers.get(id)!.state = 'member';
  return ready;
}

/** Joiners whose admission failed (those still connected) wait again; `set`: since when, or not before when they enter. */
export function requeue(ids: readonly string[], peers: ReadonlyMap<string, PeerRec>, set: Partial<Pick<PeerRec, 'waitingSince' | 'admitAfter'>>): void {
  const patch: Partial<PeerRec> = { state: 'waiting', ...set };
  for (const id of ids) {
    const p = peers.get(id);
    if (p) Object.assign(p, patch);
  }
}

/**
 * The peers silent for longer than silence.ts allows them at `now` (more where their compute
 * may block their heartbeats); `uploading`: whether a checkpoint upload is expected from one.
 */
export function silentPeers(peers: Iterable<PeerRec>, ph: Phase, uploading: (id: string) => boolean, limits: SilenceLimits, now: number)
  : { id: string; limitMs: number }[] {
  return [...peers].flatMap((p) => {
    const limitMs = limitOf(p, ph, uploading, limits);
    return now - p.lastSeen > limitMs ? [{ id: p.id, limitMs }] : [];
  });
}

/** How long `p` may stay silent in `ph` (silence.ts). */
const limitOf = (p: PeerRec, ph: Phase, uploading: (id: string) => boolean, limits: SilenceLimits): number => silenceLimitMs({
  maxGap: p.maxGap, maxWorkMs: expectedWorkMs(p, ph), unmeasured: unmeasured(p, ph, uploading),
  probedWorkMs: p.probeMsPerImage ? p.probeMsPerImage * sliceOf(p, ph) : null,
}, limits);

/** Beyond the longest silence a member is allowed: the ring's own tick and a heartbeat queued behind data on a slow link. */
export const RING_DEAD_MARGIN_MS = 2000;

/**
 * The dead time of the ring running `ph` (StepAssignment.deadMs): a neighbour silent this long
 * in a collective is gone. The longest silence the coordinator allows any member now (its
 * compute may block its heartbeats; a first step, an upload: firstSilentMs) plus a margin, at
 * most MAX_DEAD_MS; so a link cut between two members that both still reach the coordinator is
 * noticed in seconds, not at the volunteers' own dead time (120 s). In a generation's first step at
 * least RING_FORM_TIMEOUT_MS plus the margin.
 */
export function ringDeadMs(ph: Phase & { ring: readonly string[] }, peers: ReadonlyMap<string, PeerRec>, uploading: (id: string) => boolean,
  limits: SilenceLimits, firstStepOfGeneration = false, ringFormMs = RING_FORM_TIMEOUT_MS): number {
  // A generation's first step: a neighbour still forming its other link sends nothing until formation's own timeout (the job's).
  let most = firstStepOfGeneration ? Math.max(limits.silentMs, ringFormMs) : limits.silentMs;
  for (const id of ph.ring) {
    const p = peers.get(id);
    if (p) most = Math.max(most, limitOf(p, ph, uploading, limits));
  }
  return Math.max(MIN_DEAD_MS, Math.min(MAX_DEAD_MS, Math.round(most + RING_DEAD_MARGIN_MS)));
}

/** Whether `p` does work nothing has timed yet: loading, uploading, evaluating, or its first step. */
function unmeasured(p: PeerRec, ph: Phase, uploading: (id: string) => boolean): boolean {
  return p.state === 'loading' || uploading(p.id) ||
    (ph.kind === 'evaluating' && ph.pending.has(p.id)) ||
    (ph.kind === 'running' && p.maxWorkMs === null && inRing(ph.ring, p.id));
}

/** The longest work `p` has shown, scaled up to the slice it computes now where that is bigger. */
function expectedWorkMs(p: PeerRec, ph: Phase): number | null {
  return p.maxWorkMs === null ? null : Math.max(p.maxWorkMs, p.workPerImage * sliceOf(p, ph));
}

/** The images `p` computes in the running step (its fixed slice; 0 outside one, or with no fixed slices). */
function sliceOf(p: PeerRec, ph: Phase): number {
  const rank = ph.kind === 'running' && ph.slices ? rankOf(ph.ring, p.id) : -1;
  return rank >= 0 && ph.kind === 'running' && ph.slices ? ph.slices[rank]!.length : 0;
}
