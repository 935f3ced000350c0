// Adversarial volunteers for the attack tests and bench (issue 46 part 5): what a dishonest donor
// does to the gradient it puts into the ring. Reached only through the Node volunteer's
// `--adversary KIND`, which its usage does not show. Every kind but `lie` is consistent: it
// reports the sketch of what it sends (audits catch it); `lie` sends its gradient sign-flipped
// and reports the honest one's sketch, and the hop records (src/comm/hop-record.ts) an honest
// member would have: its successor's records show what it sent (the hop checks name it).
// `relay` puts its own gradient in honestly but relays the all-gather's sums sign-flipped, and
// reports the records of an honest relay: the members after it hold other weights than those
// before it, and a hearing's hop checks name it (coordinator/audits.ts).
//   gradient kinds (each bucket as it leaves): sign-flip, scale (50x), zeros (skipped work),
//     noise (Gaussian of the bucket's own RMS), stale (the previous step's bucket: work reused);
//   data kinds (what it computes): half (only the first half of its slice), other-images (ids
//     of other images in place of its slice's), flip-labels (each label y trained as y + 1 mod C).
// A colluding adversary (`--collude`) also audits dishonestly: it recomputes an audited slice the
// way it cheats (same ids, labels and tamper), so it vouches for a partner of its kind and
// accuses every honest member it audits (noise, stale and lie cheat unrepeatably: they audit
// honestly).
import { complementRanges, type HopRecord, type RelayTamper } from '../comm/hop-record.ts';
import { decodePayload, encodePayload, payloadBytes } from '../protocol/codec.ts';
import type { WireFormat } from '../protocol/frames.ts';
import { makeRng } from '../rng.ts';

export const ADVERSARY_KINDS = ['sign-flip', 'scale', 'zeros', 'noise', 'stale', 'half', 'other-images', 'flip-labels', 'lie', 'relay'] as const;
export type AdversaryKind = (typeof ADVERSARY_KINDS)[number];

/**
 * What a tampering peer does to each bucket of its contribution (`start`: its offset in the gradient): before the kept copy
 * (consistent) or after it (a lie).
 */
export interface Tamper { consistent: boolean; apply(part: Float32Array, start: number): void }

/** A dishonest volunteer's behaviour, one per volunteer (stale remembers the last step's buckets). */
export interface Adversary {
  readonly kind: AdversaryKind;
  /** What it does to each bucket it sends (null: it sends what it computed). */
  readonly tamper: Tamper | null;
  /** The ids it computes for its slice `ids` (train split of `samples` images). */
  ids(ids: readonly number[], samples: number): number[];
  /** The labels it trains on for a batch's true `labels` (`classes` classes). */
  labels(labels: Int32Array, classes: number): Int32Array;
  /** It audits as it cheats (a colluder). */
  readonly colludes: boolean;
  /** What it does to a recomputation it reports as an audit (null: nothing, an honest audit). */
  readonly auditTamper: Tamper | null;
  /** What it does to the all-gather's sums it relays (null: relays them as received); its records then tell an honest relay. */
  readonly relay: RelayTamper | null;
}

/** The tamper of a gradient kind (null for data kinds); `seed` seeds noise. */
function tamperOf(kind: AdversaryKind, seed: number): Tamper | null {
  const rng = makeRng(seed);
  switch (kind) {
    case 'sign-flip': return { consistent: true, apply: (p) => { for (let i = 0; i < p.length; i++) p[i] = -p[i]!; } };
    case 'scale': return { consistent: true, apply: (p) => { for (let i = 0; i < p.length; i++) p[i] = 50 * p[i]!; } };
    case 'zeros': return { consistent: true, apply: (p) => p.fill(0) };
    case 'noise': return {
      consistent: true,
      apply: (p) => {
        let s = 0;
        for (const x of p) s += x * x;
        const rms = Math.sqrt(s / Math.max(1, p.length));
        for (let i = 0; i < p.length; i++) p[i] = rms * rng.normal();
      },
    };
    case 'stale': {
      // Each bucket is sent as it was last step (the first step's go out as computed).
      const last = new Map<number, Float32Array>();
      return {
        consistent: true,
        apply: (p, start) => {
          const before = last.get(start);
          last.set(start, p.slice());
          if (before && before.length === p.length) p.set(before);
        },
      };
    }
    case 'lie': return { consistent: false, apply: (p) => { for (let i = 0; i < p.length; i++) p[i] = -p[i]!; } };
    default: return null;
  }
}

/** The kinds that cheat the same way every time (a colluder can repeat its partner's cheat in an audit). */
const REPEATABLE: ReadonlySet<AdversaryKind> = new Set(['sign-flip', 'scale', 'zeros', 'half', 'other-images', 'flip-labels']);

export function adversaryOf(kind: AdversaryKind, seed = 1, collude = false): Adversary {
  const tamper = tamperOf(kind, seed);
  const colludes = collude && REPEATABLE.has(kind);
  return {
    kind,
    tamper,
    colludes,
    auditTamper: colludes ? tamperOf(kind, seed) : null,
    relay: kind === 'relay' ? (p) => { for (let i = 0; i < p.length; i++) p[i] = -p[i]!; } : null,
    ids(ids, samples) {
      if (kind === 'half') return ids.slice(0, Math.ceil(ids.length / 2));
      // Other images of the split: each id moved by a fixed odd stride (never the id itself while samples > 1).
      if (kind === 'other-images' && samples > 1) return ids.map((id) => (id + 1 + 2 * Math.floor(samples / 3)) % samples);
      return [...ids];
    },
    labels(labels, classes) {
      if (kind !== 'flip-labels' || classes < 2) return labels;
      return labels.map((y) => (y + 1) % classes);
    },
  };
}

/**
 * A liar's hop records made to read as an honest member's: every value it sent is replaced by what an honest member
 * would have sent, what it received plus its reported contribution `kept`, rounded as float32 and then as `wire`
 * carries it. What it received stays true (its predecessor's records would show a change); its successor's records
 * still show what it did send.
 */
export function disguiseHops(hops: HopRecord, kept: Float32Array, wire: WireFormat): void {
  if (kept.length !== hops.length) throw new RangeError('a disguise needs the reported contribution of the record\'s length');
  const honest = new Float32Array(hops.length);
  for (let i = 0; i < honest.length; i++) honest[i] = hops.received[i]! + kept[i]!;
  const bytes = new Uint8Array(payloadBytes(wire, honest.length));
  encodePayload(honest, bytes, wire, { keepRounded: false });
  decodePayload(bytes, honest, wire, 'set');
  const owned = new Uint8Array(hops.length);
  for (const [a, b] of hops.ownedRanges) owned.fill(1, a, b);
  for (let i = 0; i < honest.length; i++) (owned[i] ? hops.gatherOut : hops.forwarded)[i] = honest[i]!;
}

/**
 * A relay tamperer's hop records made to read as an honest relay's: what it relayed in the all-gather becomes what it
 * received there (but the last chunk, which it keeps). Its successor's records still show what it did relay.
 */
export function disguiseRelays(hops: HopRecord): void {
  for (const [a, b] of complementRanges([...hops.ownedRanges, ...hops.lastRanges], hops.length)) {
    hops.gatherOut.set(hops.gatherIn.subarray(a, b), a);
  }
}
