// Typed failures of a ring collective. Callers branch on `kind`; `peerId` names the peer to
// blame, so the coordinator can drop it and form the next generation from the others.

export type RingErrorKind =
  | 'peer-closed' // a neighbour's connection closed mid-ring
  | 'peer-timeout' // a neighbour sent nothing (not even a heartbeat) for `deadAfterMs`
  | 'stalled' // the collective made no progress for `stallTimeoutMs` although peers answer
  | 'stale' // a frame from another job, or of an earlier step of this ring (another generation's frames are dropped, not blamed)
  | 'bad-frame' // a truncated, oversized, out-of-order or malformed frame arrived
  | 'aborted' // another peer of the ring failed and told us (peerId = the peer it blames)
  | 'connect-failed' // the ring could not be formed (peer unknown to the signaling server, timeout)
  | 'closed' // this ring was closed locally while a collective was running
  | 'bad-input'; // the caller passed something unusable (wrong step order, bad ring ids)

const NEXT_STEP: Record<RingErrorKind, string> = {
  'peer-closed': 'form a new ring without it and redo the step',
  'peer-timeout': 'form a new ring without it and redo the step',
  stalled: 'form a new ring (drop the slowest peer) and redo the step',
  stale: 'the sender is out of step: form a new ring and redo the step',
  'bad-frame': 'the sender is faulty or incompatible: form a new ring without it and redo the step',
  aborted: 'form a new ring without the blamed peer and redo the step',
  'connect-failed': 'check that the peer is online and registered, then form a new ring',
  closed: 'this ring is closed: use the new ring for this step',
  'bad-input': 'fix the call',
};

export class RingError extends Error {
  readonly kind: RingErrorKind;
  /** The peer this failure is blamed on (for 'closed'/'bad-input': this peer). */
  readonly peerId: string;
  /** The peer that noticed the failure (differs from peerId for 'aborted'). */
  readonly reportedBy: string;
  /** For 'aborted': the kind the reporting peer saw. */
  readonly origin: RingErrorKind;

  constructor(kind: RingErrorKind, peerId: string, detail: string, reportedBy = '', origin: RingErrorKind = kind) {
    super(`ring ${kind} (peer ${peerId}${reportedBy && reportedBy !== peerId ? `, reported by ${reportedBy}` : ''}): ${detail}; ${NEXT_STEP[kind]}.`);
    this.name = 'RingError';
    this.kind = kind;
    this.peerId = peerId;
    this.reportedBy = reportedBy || peerId;
    this.origin = origin;
  }
}

export function isRingError(e: unknown): e is RingError {
  return e instanceof RingError;
}
