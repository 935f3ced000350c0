// Two-level all-reduce for large rings (plan: topology.ts). Each peer takes part in two rings:
// its group's ring, and (when it owns a shard and there are 2+ groups) its column's ring.
//
//   1. group reduce-scatter (group ring, frames of ring step 2s):   n-1 rounds
//      owner j of each group ends with its group's sum of shard j (group-chain.ts)
//   2. column all-reduce of shard j (column ring, step s):           2(G-1) rounds
//      the flat allReduceSum of allreduce.ts over the shard's subarray
//   3. group all-gather (group ring, step 2s+1):                       n-1 rounds
//
// A gradient of fewer than K messages is cut into fewer shards, one message each at least
// (dataChunks of plan.ts, as the flat ring cuts its chunks): the owners of the others only pass
// on in their group ring, and their columns stay idle. A tiny gradient thus costs each peer 2
// frames in its group ring (and its column's flat ring, cut the same way, for the owner of
// shard 0), not 2(n-1) and 2(G-1), in the same rounds.
//
// The fixed order of every element (so every peer ends with the same bits): element i lies in
// shard j = the shard of chunkRange(., length, K') holding i (K' = dataChunks(length, K,
// elements per frame)), and in chunk c of that shard as the flat ring cuts it
// (ringChunkRange(., shardLength, G, elements per frame)). Its value is
//   S_c + S_(c+1) + ... + S_(c+G-1)        (column ranks mod G, left to right, float32)
// where S_g is group g's sum x[j+1] + x[j+2] + ... + x[j+n_g-1] + x[j] (group ranks mod n_g,
// left to right). Each sum is formed once, by one peer, and only copied after that; with a
// half-precision wire the peer that forms a final value keeps the rounded value it sends.
//
// Failures: the two rings of a peer are coupled (TwoLevelRings), so a failure of either fails
// the other too, and the abort travels through both rings' neighbours: every peer of the whole
// topology ends with a RingError that blames the same peer, as with the flat ring.

import { allReduceSentBytes, allReduceSum, DEFAULT_MESSAGE_BYTES } from './allreduce.ts';
import { RingError } from './errors.ts';
import { chainSteps, runChain, shardRange } from './group-chain.ts';
import { dataChunks, segmentCount } from './plan.ts';
import type { Ring } from './ring.ts';
import { checkTopology, roleOf, type Topology, type TwoLevelRole } from './topology.ts';
import { elementsPerFrame, minFrameBytes, PAYLOAD_EXTRA } from '../protocol/codec.ts';
import { BYTES_PER_ELEMENT, HEADER_BYTES, MAX_FRAME_BYTES, Phase, type WireFormat } from '../protocol/frames.ts';

export interface TwoLevelRingsInit {
  topology: Topology;
  /** This peer's group ring, over roleOf(topology, self).groupIds in that order. */
  group: Ring;
  /** Its column ring over roleOf(...).columnIds, or null when columnIds is null. */
  column: Ring | null;
}

/** A peer's two rings for one generation, their failures coupled. Close it to close both. */
export class TwoLevelRings {
  readonly topology: Topology;
  readonly selfId: string;
  readonly role: TwoLevelRole;
  readonly group: Ring;
  readonly column: Ring | null;

  constructor(init: TwoLevelRingsInit) {
    const { topology, group, column } = init;
    checkTopology(topology);
    this.topology = topology;
    this.selfId = group.selfId;
    this.role = roleOf(topology, this.selfId);
    this.group = group;
    this.column = column;
    const bad = (why: string) => new RingError('bad-input', this.selfId, why);
    const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);
    if (!same(group.ids, this.role.groupIds)) throw bad(`the group ring [${group.ids.join(', ')}] is not the plan's group [${this.role.groupIds.join(', ')}]`);
    const want = this.role.columnIds;
    if (want === null && column) throw bad(`${this.selfId} takes part in no column, but a column ring was given`);
    if (want !== null && !column) throw bad(`${this.selfId} needs its column ring [${want.join(', ')}]`);
    if (want !== null && column) {
      if (column.selfId !== this.selfId || !same(column.ids, want)) {
        throw bad(`the column ring [${column.ids.join(', ')}] is not the plan's column [${want.join(', ')}]`);
      }
      if (column.job !== group.job || column.generation !== group.generation) throw bad('the group and column rings must have the same job and generation');
      group.onError((e) => forward(column, e));
      column.onError((e) => forward(group, e));
    }
  }

  /** The failure that ended these rings, or null while usable. */
  get error(): RingError | null {
    return this.group.error ?? this.column?.error ?? null;
  }

  close(): void {
    this.group.close();
    this.column?.close();
  }
}

/** Fails `to` with what failed its partner ring (a local close closes it too). */
function forward(to: Ring, e: RingError): void {
  if (e.kind === 'closed') to.close();
  else if (!to.error) to.fail(e);
}

export interface TwoLevelOptions {
  rings: TwoLevelRings;
  /** The training step; strictly increasing. The group ring's frames carry 2*step and 2*step+1. */
  step: number;
  /** 'f16' / 'bf16' halve the bytes on every wire, 'i8' quarters them (float32 accumulation). Default 'f32'. */
  wire?: WireFormat;
  /** Error feedback, as long as `grad` (AllReduceOptions.feedback). */
  feedback?: Float32Array;
  /** Frame size including the 32-byte header, at most 256 KiB. Default 64 KiB. */
  messageBytes?: number;
  /** Keep a copy of the input and restore it if the collective fails. */
  keepInput?: boolean;
  /** Bound on the RMS of any received segment (see AllReduceOptions.maxRms). */
  maxRms?: number;
  /** Called once, when the first data frame of any phase arrives (the time before it is waiting). */
  onFirstFrame?: () => void;
}

const U32_MAX = 0xffffffff;

/**
 * Sums `grad` over every peer of the topology, in place, and resolves to `grad`: every peer
 * ends with the same bits. On failure rejects with a RingError naming the peer to blame; the
 * rings are then dead (form the next generation and redo the step).
 */
export async function allReduceTwoLevel(grad: Float32Array, opts: TwoLevelOptions): Promise<Float32Array> {
  const { rings, step } = opts;
  const { group, column, role, selfId, topology } = rings;
  const wire = opts.wire ?? 'f32';
  const messageBytes = opts.messageBytes ?? DEFAULT_MESSAGE_BYTES;
  const maxRms = opts.maxRms ?? Number.POSITIVE_INFINITY;
  const least = minFrameBytes(wire, HEADER_BYTES);
  const bad = (why: string) => new RingError('bad-input', selfId, why);
  if (!(grad instanceof Float32Array)) throw bad('the gradient must be one Float32Array');
  if (grad.length > U32_MAX) throw bad('more than 2^32 elements');
  if (!Number.isInteger(step) || step < 0 || 2 * step + 1 > U32_MAX) throw bad(`step ${step} must be an integer in [0, 2^31)`);
  if (!Number.isInteger(messageBytes) || messageBytes < least || messageBytes > MAX_FRAME_BYTES) {
    throw bad(`messageBytes ${messageBytes} must be an integer in [${least}, ${MAX_FRAME_BYTES}]`);
  }
  const feedback = opts.feedback ?? null;
  if (feedback && feedback.length !== grad.length) throw bad(`the error feedback buffer has ${feedback.length} floats, the gradient ${grad.length}`);
  if (rings.error) throw rings.error;
  const segElems = elementsPerFrame(wire, messageBytes, HEADER_BYTES);
  const shards = dataChunks(grad.length, topology.shards, segElems);
  const backup = opts.keepInput ? grad.slice() : null;
  let first = opts.onFirstFrame;
  const onFirstFrame = (): void => {
    const f = first;
    first = undefined;
    f?.();
  };
  const chain = { grad, ring: group, shards, wire, segElems, maxRms, feedback, onFirstFrame };
  let started = false;
  try {
    await runChain({ ...chain, ringStep: 2 * step, phase: Phase.reduceScatter });
    started = true;
    if (column && role.shard !== null && role.shard < shards) {
      const [a, b] = shardRange(role.shard, grad.length, shards);
      const columnFeedback = feedback ? { feedback: feedback.subarray(a, b) } : {};
      await allReduceSum(grad.subarray(a, b), { ring: column, step, wire, messageBytes, maxRms, onFirstFrame, ...columnFeedback });
    }
    // Every group's owner of a shard rounds the column's sum to its frames (the same in every
    // group, so every peer ends with the same bits), losing the same values: the loss happened
    // once to the sum, so one group (the first) keeps it as error feedback, not all of them.
    await runChain({ ...chain, ringStep: 2 * step + 1, phase: Phase.allGather, feedback: role.group === 0 ? feedback : null });
    return grad;
  } catch (e) {
    if (backup) grad.set(backup);
    // A refusal of ours after data went out (a misused ring): tell the others rather than let them wait.
    if (e instanceof RingError && started && !rings.error) group.fail(e);
    throw e;
  }
}

/**
 * Bytes `selfId` sends in one allReduceTwoLevel of `length` floats: its group ring's
 * reduce-scatter and all-gather (the shards it passes on, each frame with its header) and, when
 * it owns a shard, the flat all-reduce of that shard over its column.
 */
export function twoLevelSentBytes(t: Topology, selfId: string, length: number, wire: WireFormat = 'f32', messageBytes = DEFAULT_MESSAGE_BYTES): number {
  const role = roleOf(t, selfId);
  const bpe = BYTES_PER_ELEMENT[wire];
  const segElems = elementsPerFrame(wire, messageBytes, HEADER_BYTES);
  const shards = dataChunks(length, t.shards, segElems);
  let bytes = 0;
  for (const phase of [Phase.reduceScatter, Phase.allGather]) {
    for (const { send } of chainSteps(phase, role.groupRank, role.groupIds.length, shards)) {
      if (send === null) continue;
      const [a, b] = shardRange(send, length, shards);
      bytes += (b - a) * bpe + segmentCount(b - a, segElems) * (HEADER_BYTES + PAYLOAD_EXTRA[wire]);
    }
  }
  if (role.columnIds && role.shard !== null && role.shard < shards) {
    const [a, b] = shardRange(role.shard, length, shards);
    bytes += allReduceSentBytes(role.columnIds.indexOf(selfId), b - a, role.columnIds.length, wire, messageBytes);
  }
  return bytes;
}
