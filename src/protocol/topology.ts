// The `topology` field of a step assignment (a two-level generation: coordinator/two-level.ts),
// read from untrusted JSON like every field of messages.ts: either a Topology that passes
// checkTopology and whose groups, one after the other, are exactly the assignment's ring (so
// ranks and rings agree), or a problem that says what is wrong. Never throws on bad input.
import { RingError } from '../comm/errors.ts';
import { checkTopology, type Topology } from '../comm/topology.ts';

const ID = /^[A-Za-z0-9_-]{1,64}$/;

const isIdRows = (v: unknown): v is string[][] =>
  Array.isArray(v) && v.every((row) => Array.isArray(row) && row.length > 0 && row.every((id) => typeof id === 'string' && ID.test(id)));

export type TopologyField = { ok: true; value: Topology } | { ok: false; problem: string };

/** Reads `v` as the topology of a generation whose ring is `ring` (validated already). */
export function readTopology(v: unknown, ring: readonly string[]): TopologyField {
  const bad = (why: string): TopologyField => ({ ok: false, problem: `topology ${why}` });
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return bad('must be an object {groups, shards, columns}');
  const o = v as Record<string, unknown>;
  const extra = Object.keys(o).filter((k) => k !== 'groups' && k !== 'shards' && k !== 'columns');
  if (extra.length) return bad(`has unknown field(s) ${extra.slice(0, 5).map((k) => k.slice(0, 40)).join(', ')}; allowed: groups, shards, columns`);
  const { groups, shards, columns } = o;
  // Sizes first: a ring holds at most MAX_RING ids, so no row may be longer and there are no more rows.
  if (!Array.isArray(groups) || groups.length < 2 || groups.length > ring.length) return bad(`.groups must be an array of 2..${ring.length} groups`);
  if (!Array.isArray(columns) || columns.length > ring.length) return bad(`.columns must be an array of at most ${ring.length} columns`);
  if (!isIdRows(groups)) return bad('.groups must hold non-empty arrays of peer ids');
  if (!isIdRows(columns)) return bad('.columns must hold non-empty arrays of peer ids');
  if (typeof shards !== 'number' || !Number.isInteger(shards)) return bad('.shards must be an integer');
  const flat = groups.flat();
  if (flat.length !== ring.length || flat.some((id, i) => id !== ring[i])) return bad('.groups, one after the other, must be the ring in its order');
  // Copies: the caller's input stays the caller's.
  const t: Topology = { groups: groups.map((g) => [...g]), shards, columns: columns.map((c) => [...c]) };
  try {
    checkTopology(t);
  } catch (e) {
    if (!(e instanceof RingError)) throw e;
    return { ok: false, problem: e.message };
  }
  return { ok: true, value: t };
}
