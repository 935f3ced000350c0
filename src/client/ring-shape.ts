// A generation's shape (its ring and two-level plan) goes to each peer as an edit of the last
// shape its session was sent, not in full with every message. Every assignment used to carry
// the whole ring and topology: N peer ids (three times) to each of N peers every step, O(N^2)
// bytes a step for the coordinator to encode and send: ~120 MB of JSON a step at 1,024 peers
// with UUID ids (test/coordinator/ring-shape.test.ts measures it). Under churn at that size
// nearly every step is a new generation, so only sending what changed helps there.
//
// On the wire an assignment or a prepare carries `shape` instead of `ring` and `topology`:
//   runs   the ring as pieces: [start, length] copies that run of the previous ring this
//          session was sent, a string is one id (a steady ring is [[0, N]]; a leave or a
//          join adds a piece or two; the first message of a session spells every id);
//   sizes  the two-level plan's group sizes (absent: flat). Groups, one after the other, are
//          the ring, shards the smallest size and column j the j-th member of every group
//          (src/comm/topology.ts), so nothing else needs to travel.
// The session socket is ordered and reliable and both ends forget at its end, so "the previous
// ring" is the same on both (the peer moves on to every ring it could build, as the sender
// did, even when the rest of that message is refused). The peer rebuilds `ring` and `topology`
// and then decodes the message in full as before (src/protocol/messages.ts): a bad edit is refused like any
// bad field.
import { topologyOfSizes, type Topology } from '../comm/topology.ts';
import { MAX_ID_LENGTH, MAX_RING, type CoordinatorMessage, type PrepareRing, type StepAssignment } from '../protocol/messages.ts';
import { decodeCoordinatorMessage } from '../protocol/decode.ts';
import { type Decoded } from '../protocol/fields.ts';

export type RingRun = [number, number] | string;
export interface WireShape { runs: RingRun[]; sizes?: number[] }
type Shaped = StepAssignment | PrepareRing;
/** A message as it goes on the wire: `shape` in place of `ring` and `topology`. */
export type WireShaped<M extends Shaped> = Omit<M, 'ring' | 'topology'> & { shape: WireShape };

/** The pieces that build `next` from `prev` (pure; greedy longest copies, ids spelled where prev lacks them). */
export function ringRuns(prev: readonly string[], next: readonly string[]): RingRun[] {
  const at = new Map<string, number>();
  prev.forEach((id, i) => at.set(id, i));
  const runs: RingRun[] = [];
  for (let i = 0; i < next.length;) {
    const p = at.get(next[i]!);
    if (p === undefined) {
      runs.push(next[i]!);
      i++;
      continue;
    }
    let len = 1;
    while (i + len < next.length && p + len < prev.length && prev[p + len] === next[i + len]) len++;
    runs.push([p, len]);
    i += len;
  }
  return runs;
}

/** The ring the pieces build from `prev`, or a problem (never throws on bad input). */
export function applyRuns(prev: readonly string[], runs: unknown): { ok: true; ring: string[] } | { ok: false; problem: string } {
  const bad = (why: string) => ({ ok: false as const, problem: `shape.runs ${why}` });
  if (!Array.isArray(runs) || runs.length === 0 || runs.length > MAX_RING) return bad(`must be an array of 1..${MAX_RING} pieces`);
  const ring: string[] = [];
  for (let k = 0; k < runs.length; k++) {
    const r: unknown = runs[k];
    if (typeof r === 'string') {
      if (r.length === 0 || r.length > MAX_ID_LENGTH) return bad(`[${k}] is not a peer id`);
      ring.push(r);
    } else if (Array.isArray(r) && r.length === 2 && Number.isInteger(r[0]) && Number.isInteger(r[1])) {
      const [start, len] = r as [number, number];
      if (start < 0 || len < 1 || start + len > prev.length) return bad(`[${k}] copies ${start}..${start + len - 1} of a previous ring of ${prev.length}`);
      for (let i = start; i < start + len; i++) ring.push(prev[i]!);
    } else return bad(`[${k}] must be a peer id or [start, length]`);
    if (ring.length > MAX_RING) return bad(`builds more than ${MAX_RING} ids`);
  }
  return { ok: true, ring };
}

const keys = new WeakMap<readonly string[], string>();
/** The ring's ids joined, once per array (every member's message of one step shares it). */
const keyOf = (ring: readonly string[]): string => {
  let k = keys.get(ring);
  if (k === undefined) keys.set(ring, (k = ring.join(',')));
  return k;
};

/**
 * The fields of a step assignment that differ between the members of one step (their slices, audits, routes); every other
 * field is the same for the whole ring. The shared ones are encoded once per step, not once per member (ShapeSender.encode).
 */
const PER_MEMBER: ReadonlySet<string> = new Set(['rank', 'sampleIds', 'uploadCheckpoint', 'round', 'next', 'reuse', 'verify', 'direct']);

/** The last step assignment's shared fields, as [name, value] in order, and their JSON text (with its shape). */
let shared: { fields: unknown[]; text: string } | null = null;

/** The coordinator's side, one per session socket. */
export class ShapeSender {
  private last: readonly string[] = [];
  /** The last edit made from a ring array to another (members of one ring share both arrays). */
  private static readonly edits = new WeakMap<readonly string[], { next: readonly string[]; runs: RingRun[] }>();

  /** `m` as it goes on the wire to this session. */
  compact<M extends Shaped>(m: M): WireShaped<M> {
    const { ring, topology, ...rest } = m;
    return { ...rest, shape: shapeOf(this.runsTo(ring), topology) } as WireShaped<M>;
  }

  /**
   * The JSON text of compact(m). A step assignment's shared fields (PER_MEMBER's complement) are encoded once for all the
   * members of its step: their text is kept while each next message's shared values are the same (===) as those it was made
   * from, and each member's own fields are encoded in front of it (JSON does not order fields). At 1,000 peers this took
   * the turn's encoding from ~6 to ~3 ms (bench/coordinator.ts).
   */
  encode(m: Shaped): string {
    if (m.type !== 'step-assignment') return JSON.stringify(this.compact(m));
    const runs = this.runsTo(m.ring);
    const fields: unknown[] = [runs, m.topology];
    let own = '';
    for (const [k, v] of Object.entries(m)) {
      if (k === 'ring' || k === 'topology' || v === undefined) continue;
      if (PER_MEMBER.has(k)) own += `${own ? ',' : ''}"${k}":${JSON.stringify(v)}`;
      else fields.push(k, v);
    }
    const c = shared;
    if (!c || c.fields.length !== fields.length || !c.fields.every((f, i) => f === fields[i])) {
      const o: Record<string, unknown> = {};
      for (let i = 2; i < fields.length; i += 2) o[fields[i] as string] = fields[i + 1];
      o.shape = shapeOf(runs, m.topology);
      shared = { fields, text: JSON.stringify(o) };
    }
    const text = shared!.text;
    return own ? `{${own},${text.slice(1)}` : text;
  }

  /** The pieces that build `ring` from the last ring this session was sent; `ring` is the last one from now on. */
  private runsTo(ring: readonly string[]): RingRun[] {
    // Every member of a step is sent the same ring array after the same previous one: the edit
    // between them (comparing two rings of 1,000 ids is itself ~37 KB of characters) is made once.
    const cached = ShapeSender.edits.get(this.last);
    let runs: RingRun[];
    if (cached && cached.next === ring) runs = cached.runs;
    else {
      runs = keyOf(ring) === keyOf(this.last) ? [[0, ring.length]] : ringRuns(this.last, ring);
      ShapeSender.edits.set(this.last, { next: ring, runs });
    }
    this.last = ring;
    return runs;
  }
}

/** The wire shape of a ring's runs and its two-level plan (absent: flat). */
function shapeOf(runs: RingRun[], topology: Topology | undefined): WireShape {
  return { runs, ...(topology ? { sizes: topology.groups.map((g) => g.length) } : {}) };
}

/** The peer's side, one per session socket. */
export class ShapeReceiver {
  private last: readonly string[] = [];

  /** A parsed session message with its ring and topology rebuilt, or a problem. Others pass unchanged. */
  private complete(raw: unknown): { ok: true; value: unknown } | { ok: false; problem: string } {
    if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: true, value: raw };
    const { shape, ...o } = raw as Record<string, unknown>;
    if ((o.type !== 'step-assignment' && o.type !== 'prepare') || shape === undefined) return { ok: true, value: raw };
    const bad = (why: string) => ({ ok: false as const, problem: `${String(o.type)}: ${why}` });
    if (Object.hasOwn(o, 'ring') || Object.hasOwn(o, 'topology')) return bad('shape together with ring or topology');
    if (typeof shape !== 'object' || shape === null || Array.isArray(shape)) return bad('shape must be an object {runs, sizes?}');
    const { runs, sizes, ...extra } = shape as Record<string, unknown>;
    if (Object.keys(extra).length) return bad('shape has unknown fields; allowed: runs, sizes');
    const built = applyRuns(this.last, runs);
    if (!built.ok) return bad(built.problem);
    // The sender moved on to this ring whatever the rest of the message holds: so does the peer.
    // Held as built: only the decoder reads it, and the decoder copies what it returns.
    const ring = built.ring;
    this.last = ring;
    if (sizes === undefined) return { ok: true, value: { ...o, ring } };
    if (!Array.isArray(sizes) || sizes.length < 2 || sizes.some((s) => !Number.isInteger(s) || (s as number) < 1)) {
      return bad('shape.sizes must be 2 or more group sizes');
    }
    const total = (sizes as number[]).reduce((a, b) => a + b, 0);
    if (total !== ring.length) return bad(`shape.sizes add up to ${total}, not the ring's ${ring.length}`);
    return { ok: true, value: { ...o, ring, topology: topologyOfSizes(ring, sizes as number[]) } };
  }

  /** A parsed session message decoded (its shape rebuilt first). */
  decode(raw: unknown): Decoded<CoordinatorMessage> {
    const full = this.complete(raw);
    if (!full.ok) return { ok: false, error: { kind: 'malformed', problems: [full.problem] } };
    return decodeCoordinatorMessage(full.value);
  }
}
