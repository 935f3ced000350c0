// The rings of one generation at this peer, behind the one face the step loop uses: the flat
// ring of allreduce.ts, or, when the assignment carries a topology (coordinator/two-level.ts),
// the group ring and the column ring of hierarchical.ts. The two rings of a two-level
// generation form in the same tick, as two formations of the endpoint keyed apart by a tag
// (peer-endpoint.ts), so a peer dials its group successor and its column successor at once.
//
// Timeouts: the column ring stalls after the flat ring's stallTimeoutMs. A group ring sits idle
// while the columns run (its all-gather waits for its owners' column sums), so its stall timeout
// is GROUP_STALL_FACTOR times longer; a dead neighbour is still noticed by heartbeats
// (deadAfterMs), and a failure anywhere travels through both rings as an ABORT.
//
// Wire: every collective of the rings sends the job's wire format (allreduce.ts: 'f16' and
// 'bf16' halve the bytes, sums stay float32); sentBytes counts that format.
//
// Ending: close() ends every link (this peer leaves); release() hands the links that may be kept
// back to the endpoint's pool (src/comm/link-pool.ts), so the next generation's rings keep the
// connections to neighbours they share with these.
import { allReduceSentBytes, allReduceSum } from '../comm/allreduce.ts';
import { TwoLevelRings, allReduceTwoLevel, twoLevelSentBytes } from '../comm/hierarchical.ts';
import type { HopView } from '../comm/hop-record.ts';
import type { Link } from '../comm/link.ts';
import type { PeerEndpoint } from '../comm/peer-endpoint.ts';
import { DEFAULT_RING_SETTINGS, type Ring, type RingSettings } from '../comm/ring.ts';
import { roleOf, type Topology } from '../comm/topology.ts';
import type { WireFormat } from '../protocol/frames.ts';
import type { StepAssignment } from '../protocol/messages.ts';

export interface StepReduceOptions {
  /** The training step (strictly increasing per generation). */
  step: number;
  /** Bound on the RMS of any received segment (AllReduceOptions.maxRms). */
  maxRms: number;
  /** Called once, when the first data frame arrives (the time before it is waiting). */
  onFirstFrame?: () => void;
  /** Error feedback (src/protocol/codec.ts), as long as `grad`: what the wire drops of this peer's sends is added here. */
  feedback?: Float32Array;
  /** A verifying job's hop records of this collective (src/comm/hop-record.ts): kept by a flat ring only (hopsKept). */
  hops?: HopView & { noteOwned?(off: number, len: number): void };
}

/** This peer's rings in one generation. */
export interface StepRings {
  readonly generation: number;
  /** Peers in the whole generation (all groups together). */
  readonly size: number;
  /** The links whose kind (direct or relayed) step results report: the flat ring's, or the group ring's. */
  readonly next: Link | null;
  readonly prev: Link | null;
  /** 'ring of 4' or 'group 1 of 2 (2 peers) + column of 2', with ', f16 wire' on a half wire: for logs. */
  readonly shape: string;
  /** Whether allReduce keeps the hop records it is given (a flat ring; a two-level generation's are not checked yet). */
  readonly hopsKept: boolean;
  /**
   * Links of these rings (2 per ring of 2+ peers), how many an earlier generation's rings used
   * already, and the connection attempts made to next and offered by prev while forming them.
   */
  readonly links: { total: number; reused: number; dials: number; offers: number };
  /** Sums `grad` over the generation in place (every peer gets the same bits); rejects with a RingError. */
  allReduce(grad: Float32Array, o: StepReduceOptions): Promise<Float32Array>;
  /** Bytes this peer sends in one allReduce of `length` floats. */
  sentBytes(length: number): number;
  /** The dead time of every ring while a collective runs (the assignment's deadMs; undefined: deadAfterMs alone): Ring.setActiveDeadMs. */
  setDeadMs(ms: number | undefined): void;
  /** Closes every ring of the generation; a running allReduce fails 'closed'. */
  close(): void;
  /** Ends every ring like close(), handing the links that may be kept to the next generation (Ring.release). */
  release(): void;
}

const linksOf = (rings: readonly (Ring | null)[]): StepRings['links'] => ({
  total: rings.reduce((n, r) => n + (r && r.size > 1 ? 2 : 0), 0),
  reused: rings.reduce((n, r) => n + (r?.reusedLinks ?? 0), 0),
  dials: rings.reduce((n, r) => n + (r?.attempts.dials ?? 0), 0),
  offers: rings.reduce((n, r) => n + (r?.attempts.offers ?? 0), 0),
});

/** A group ring's stall timeout over the column ring's (see the header). */
export const GROUP_STALL_FACTOR = 3;

/** What a collective takes of the step's options besides the step (its bound, its first-frame hook, its error feedback). */
const reduceOptions = (o: StepReduceOptions) => ({ maxRms: o.maxRms, onFirstFrame: o.onFirstFrame, ...(o.feedback ? { feedback: o.feedback } : {}) });

const wireNote = (wire: WireFormat): string => (wire === 'f32' ? '' : `, ${wire} wire`);

export function flatStepRings(ring: Ring, wire: WireFormat = 'f32'): StepRings {
  return {
    generation: ring.generation,
    size: ring.size,
    next: ring.next,
    prev: ring.prev,
    shape: `ring of ${ring.size}${wireNote(wire)}`,
    hopsKept: true,
    links: linksOf([ring]),
    allReduce: (grad, o) => allReduceSum(grad, { ring, step: o.step, wire, ...reduceOptions(o), ...(o.hops ? { hops: o.hops } : {}) }),
    sentBytes: (length) => allReduceSentBytes(ring.rank, length, ring.size, wire),
    setDeadMs: (ms) => ring.setActiveDeadMs(ms ?? null),
    close: () => ring.close(),
    release: () => ring.release(),
  };
}

export function twoLevelStepRings(rings: TwoLevelRings, wire: WireFormat = 'f32'): StepRings {
  const { topology, role, group, column } = rings;
  return {
    generation: group.generation,
    size: topology.groups.reduce((n, g) => n + g.length, 0),
    next: group.next,
    prev: group.prev,
    shape: `group ${role.group + 1} of ${topology.groups.length} (${group.size} peer${group.size === 1 ? '' : 's'})`
      + `${column ? ` + column of ${column.size}` : ''}${wireNote(wire)}`,
    hopsKept: false,
    links: linksOf([group, column]),
    allReduce: (grad, o) => allReduceTwoLevel(grad, { rings, step: o.step, wire, ...reduceOptions(o) }),
    sentBytes: (length) => twoLevelSentBytes(topology, rings.selfId, length, wire),
    setDeadMs: (ms) => {
      group.setActiveDeadMs(ms ?? null);
      column?.setActiveDeadMs(ms ?? null);
    },
    close: () => rings.close(),
    release: () => {
      // Both marked before either closes: each ring closes its partner when it ends (hierarchical.ts).
      group.releaseOnClose();
      column?.releaseOnClose();
      rings.close();
    },
  };
}

/** Ring settings of the group ring, given the column's (or the flat ring's). */
export function groupSettings(s: Partial<RingSettings>): Partial<RingSettings> {
  return { ...s, stallTimeoutMs: GROUP_STALL_FACTOR * (s.stallTimeoutMs ?? DEFAULT_RING_SETTINGS.stallTimeoutMs) };
}

/**
 * Forms this peer's rings of the assignment's generation, whose collectives send the job's
 * `wire` format. Rejects with the first RingError of either formation; a ring of the other that
 * forms is released at once (its links may serve the next generation, which the coordinator
 * forms after this failure).
 */
export async function formStepRings(
  endpoint: PeerEndpoint, a: Pick<StepAssignment, 'ring' | 'job' | 'generation' | 'topology'>, settings: Partial<RingSettings>, wire: WireFormat = 'f32',
  connectTimeoutMs?: number,
): Promise<StepRings> {
  const { job, generation } = a;
  const timeout = connectTimeoutMs === undefined ? {} : { connectTimeoutMs };
  if (!a.topology) return flatStepRings(await endpoint.formRing({ ids: a.ring, job, generation, settings, ...timeout }), wire);
  const topology: Topology = a.topology;
  const role = roleOf(topology, endpoint.id);
  const forming: [Promise<Ring>, Promise<Ring> | null] = [
    endpoint.formRing({ ids: role.groupIds, job, generation, settings: groupSettings(settings), tag: 'group', ...timeout }),
    role.columnIds ? endpoint.formRing({ ids: role.columnIds, job, generation, settings, tag: 'column', ...timeout }) : null,
  ];
  let group: Ring;
  let column: Ring | null;
  try {
    [group, column] = await Promise.all(forming);
  } catch (e) {
    for (const p of forming) p?.then((r) => r.release(), () => undefined);
    throw e;
  }
  try {
    return twoLevelStepRings(new TwoLevelRings({ topology, group, column }), wire);
  } catch (e) {
    // A plan that does not match the rings formed (a bug): close them, report it.
    group.close();
    column?.close();
    throw e;
  }
}
