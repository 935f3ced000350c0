// The training driver with peers played by a test through its inputs (no sockets): what it
// sends to whom, its metrics and events, and helpers to answer as peers do.
import { Driver, type AuditHooks, type DriverTimeouts } from '../../coordinator/driver.ts';
import { parseJobConfig } from '../../coordinator/job.ts';
import type { MetricRecord } from '../../coordinator/metrics.ts';
import type { CoordinatorMessage, LiveEvent, StepAssignment } from '../../src/protocol/messages.ts';
import { expect } from 'vitest';

export const N_TRAIN = 500;

/** Images an assignment gives its peer: its slice, or its slices of every inner step of a round. */
export const imagesOf = (a: StepAssignment): number => (a.round ? a.round.ids.reduce((n, s) => n + s.length, 0) : a.sampleIds.length);

export function driverHarness(
  config: Record<string, unknown>,
  o: {
    checkpointStep?: number | null; evalIds?: number[]; finalEvalIds?: number[]; showIds?: number[]; classes?: number; trainShards?: number[];
    timeouts?: Partial<DriverTimeouts>; syncH?: number; audit?: AuditHooks;
  } = {},
) {
  const sent: { to: string; m: CoordinatorMessage }[] = [];
  const records: MetricRecord[] = [];
  const events: LiveEvent[] = [];
  const disconnected: string[] = [];
  const logs: string[] = [];
  /** Steps the driver went back to (its checkpoints after each are to be removed). */
  const discarded: number[] = [];
  const job = parseJobConfig({
    model: 'small-cnn', dataset: 'mnist', globalBatch: 12, steps: 10, optimizer: { kind: 'lars', lr: 1 }, evalEvery: 0, checkpointEvery: 100, seed: 9,
    ...config,
  }, N_TRAIN);
  const d = new Driver({
    job, jobId: 4, trainSamples: N_TRAIN, ...(o.trainShards ? { trainShards: o.trainShards } : {}), evalIds: o.evalIds ?? [],
    ...(o.finalEvalIds ? { finalEvalIds: o.finalEvalIds } : {}), ...(o.showIds ? { showIds: o.showIds } : {}), ...(o.classes ? { classes: o.classes } : {}),
    checkpointStep: o.checkpointStep ?? null, generation: 0, ...(o.syncH ? { syncH: o.syncH } : {}), ...(o.audit ? { audit: o.audit } : {}),
    discardCheckpointsAfter: (step) => discarded.push(step),
    metrics: { path: '', append: (r) => records.push(r), flush: async () => undefined },
    send: (to, m) => { if (disconnected.includes(to)) return false; sent.push({ to, m }); return true; },
    disconnect: (id) => disconnected.push(id),
    publish: (e) => events.push(e),
    log: (line) => logs.push(line),
    // Joiners enter at the next boundary unless a test is about batching them; changes are made
    // at once unless a test is about announcing them ahead (driver-ahead.test.ts).
    timeouts: { admitGapMs: 0, prepareMs: 0, ...o.timeouts },
  });
  const take = <T extends CoordinatorMessage['type']>(to: string, type: T): Extract<CoordinatorMessage, { type: T }> => {
    const i = sent.findIndex((s) => s.to === to && s.m.type === type);
    if (i < 0) throw new Error(`no ${type} for ${to}; sent: ${JSON.stringify(sent.map((s) => [s.to, s.m.type]))}`);
    return sent.splice(i, 1)[0]!.m as Extract<CoordinatorMessage, { type: T }>;
  };
  const has = (to: string, type: CoordinatorMessage['type']): boolean => sent.some((s) => s.to === to && s.m.type === type);
  const ready = (id: string, step: number) => d.message(id, { type: 'ready', peerId: id, step, checksum: 'aa', device: 'test' });
  const result = (id: string, a: StepAssignment, checksum = 'c0ffee', sentBytes?: number) => d.message(id, {
    type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum, timings: { computeMs: 10, commMs: 1, waitMs: 0 },
    images: imagesOf(a), ...(sentBytes === undefined ? {} : { sentBytes }),
  });
  /** Peers connect, load the seed and get the first step's assignments (in ring order). */
  const startRing = (ids: string[]): StepAssignment[] => {
    for (const id of ids) d.peerConnected(id, null);
    for (const id of ids) { take(id, 'load-state'); ready(id, 0); }
    return ids.map((id) => take(id, 'step-assignment'));
  };
  return { d, sent, records, events, logs, discarded, take, has, ready, result, startRing };
}

/** Answers `a` as a peer that computed `computeMs` for its slice (the driver measures speed from it). */
export function answer(h: ReturnType<typeof driverHarness>, id: string, a: StepAssignment, computeMs = 10): void {
  h.d.message(id, {
    type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum: 'c0ffee', timings: { computeMs, commMs: 1, waitMs: 0 },
    images: imagesOf(a), ...(a.reuse ? { reused: a.reuse.count } : {}),
  });
}

type H = ReturnType<typeof driverHarness>;

/** Every member answers its assignment; returns the next step's assignments (in ring order; none once the ring is gone). */
export function commitAll(h: H, as: readonly StepAssignment[]): StepAssignment[] {
  for (const a of as) answer(h, a.ring[a.rank]!, a);
  return h.d.status().ring.filter((id) => h.has(id, 'step-assignment')).map((id) => h.take(id, 'step-assignment'));
}

/** The committed steps' numbers, in the order committed. */
export const committedSteps = (h: H): number[] => h.records.flatMap((r) => (r.type === 'step' ? [r.step] : []));
/** `id` claims; returns the ids granted (the grant must be addressed to it). */
export function claim(h: H, id: string, a: StepAssignment): number[] {
  h.d.message(id, { type: 'claim', peerId: id, generation: a.generation, step: a.step });
  const g = h.take(id, 'grant');
  expect([g.generation, g.step]).toEqual([a.generation, a.step]);
  return g.ids;
}
/** `id` claims until its claim comes back empty; returns everything granted. */
export function drain(h: H, id: string, a: StepAssignment): number[] {
  const all: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const ids = claim(h, id, a);
    if (ids.length === 0) return all;
    all.push(...ids);
  }
  throw new Error('the tail never ran dry');
}
export const report = (h: H, id: string, a: StepAssignment, claimed: number, images = a.sampleIds.length + claimed) =>
  h.d.message(id, {
    type: 'step-result', peerId: id, generation: a.generation, step: a.step, loss: 1, checksum: 'c0ffee', timings: { computeMs: 10, commMs: 1, waitMs: 0 },
    images, ...(claimed ? { claimed } : {}),
  });
