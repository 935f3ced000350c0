// Verification of a job's sync steps (its `verify` fraction; issue 46, docs/trust.md): which
// member recomputes whose slice in a step, and what the step's reports say before it commits.
//
// Each step, every member is audited with probability `fraction` (drawn with crypto's random
// numbers after the step is planned, so no member knows ahead whether, or by whom) by another
// member chosen at random, each auditor recomputing at most one slice. The fraction is the job's
// budget of recomputed images: directed audits (below) spend it too, so the draw's chance follows
// how far the audits so far are off it (drawChance), and the job recomputes F of its images. A
// step that carries audits asks every member for sketches (coordinator/trust-check.ts) of its
// contribution and of the ring's sum; before the step commits:
//   - every member's sketch of the ring's sum must be the same (they hold the same bits): a
//     member whose differs reported something it does not hold, and is evicted;
//   - over a flat ring, each member's records of what it received and sent must add up with its
//     contribution, and agree with its neighbours' (hop-check.ts): a member whose records do not
//     add up is evicted; a link whose two ends disagree is evidence against both (hop-evidence.ts),
//     and the step runs again in an order where they are not neighbours the same way round, until
//     one of them has disagreed with enough distinct members to be named (HOP_ATTEMPTS attempts of
//     one step at most; then the job halts with the reason);
//   - the members' sketches must add up to the ring's (sumCheck; judged after the audits below,
//     which may name a member first: a 50x gradient reported as such trips both). Where the hop
//     checks ran it follows from them; without them (a two-level generation) a failure cannot be
//     attributed: the step runs again with every member audited, and a second failure of the
//     same step halts the job with the reason, rather than commit a sum nobody can vouch for;
//   - each audit must agree with the audited member's sketch (auditCheck). A first disagreement
//     accuses nobody: the step runs again and more members recompute the same slice under the
//     first attempt's seed (disputePanel: 5 auditors in all where the ring has them), each
//     compared with what the member reported THEN (a member that cheats once and behaves on the
//     re-run cannot turn the later audits against the first auditor). Their majority decides
//     (settle): the member and any auditor that vouched for it against the others, or the
//     auditors that disagreed. An honest member is never evicted on one peer's word.
// Audits are also directed: a member whose contribution in a verified step strays far from the
// others' (trust-check.ts suspects: its direction against the rest of the sum, its norm per
// image) is audited in the next step for certain, and in each of the WATCH_STEPS after it with
// chance 1/2 (drawn like the others), so a blatant cheater is caught in about two steps at any
// fraction and one that cheats every other step soon after. Suspicion accuses nobody; an honest
// member that looks strange costs one audit, which agrees. And a newcomer is on probation: its
// first verified step in the ring is audited for certain (again in the next attempt until a step
// with its audit commits), so a device or client that is wrong from the start (a broken driver,
// a cheater that does not wait) is caught in its first step, for one audit per member that joins.
// One that behaves for its first step is left to the draw and to suspicion.
// Audits need a ring of 3 (someone to settle a dispute) and no claimed tail ids. A member that
// computes its slice in micro-batches (it said at its join how many images it holds at once) is
// recomputed in the same micro-batches (BN statistics and dropout masks depend on the batch), by an
// auditor that holds that many; a member whose re-run reuses a sum kept from an aborted attempt and
// computes the rest of its slice now is recomputed in the same pieces (AuditTask.pieces).
import { randomInt } from 'node:crypto';
import type { AuditTask, HopSketchesMessage, SketchReport, StepResult, VerificationTally } from '../src/protocol/messages.ts';
export { HOP_ATTEMPTS } from './hop-judge.ts';
import { sketchSeed, type GradientSketch } from '../src/trust/sketch.ts';
import { sketchFromReport } from '../src/trust/hop-sketch.ts';
import { auditCheck, sumCheck, suspects, type CheckedWire } from './trust-check.ts';
import { HopJudge, type HopJudgement } from './hop-judge.ts';

/** Steps after the first that a suspect stays watched (audited with chance 1/2 in each). */
export const WATCH_STEPS = 4;

/** What the audit plan needs to know of a member (AuditBook.plan). */
export interface AuditMember {
  /** The most images it computes at once (JoinRequest.microBatch); absent: it said nothing (as many as it is given). */
  microBatch?: number;
  /** The most images it is asked to compute at once (a round's largest inner slice); default: its slice. */
  oneBatch?: number;
  /** Its slice reuses a sum kept from an aborted attempt whose pieces are not known (slice-rerun.ts): not audited now. */
  reusing?: boolean;
  /** Its sum is computed in these runs of its slice's ids apart (a re-run: the kept sum's pieces, then the ids computed now). */
  pieces?: number[];
  /** The ids at the start of its slice it reuses a kept sum of (a re-run; default 0). */
  reused?: number;
}

/** Which audits a book gives beyond the draw: to suspects, and to newcomers on probation. */
export interface DirectedAudits { suspects: boolean; newcomers: boolean }

/** What a verified step's results call for. */
export type AuditVerdict =
  /** `audited`: the members whose slice an audit recomputed and found the same. */
  | { kind: 'ok'; audited: string[] }
  /** Members caught: evicted, and the step runs again without them. */
  | { kind: 'evict'; ids: string[]; reason: string }
  /**
   * Nobody can be blamed yet: the step runs again (with the audits that settle it), in `order` when it says (hop evidence, or
   * a two-level generation's sum that did not add up): a ring in an order is one flat ring, whose hops are checked.
   */
  | { kind: 'again'; reason: string; order?: string[] }
  /** The same step failed its sum check twice: the job pauses with this reason. */
  | { kind: 'halt'; reason: string };

/** What verification did over the job (the dashboard's and the log's figures). */
export interface AuditTally {
  steps: number; audits: number; auditedImages: number; computedImages: number; caught: number; disputes: number;
  /** Audits given to suspects and newcomers on probation (counted in audits too). */
  directed: number;
}

/**
 * Auditors a dispute hears in all, the first included, where the ring has them: a majority of 5
 * is honest with up to 2 colluders among them (2f + 1). Smaller rings hear every other member, at
 * least 2 (a ring of 3: the second auditor decides, and a colluder there can frame).
 */
export const DISPUTE_AUDITORS = 5;
/** How many auditors a dispute in a ring of `n` hears (an odd number where it can: a majority decides). */
export function disputePanel(n: number): number {
  const others = n - 1;
  if (others >= DISPUTE_AUDITORS) return DISPUTE_AUDITORS;
  return Math.max(2, others % 2 === 1 ? others : others - 1);
}

/** A disagreement being settled: the member's report of the first attempt, and each auditor's recomputation of it so far. */
interface Dispute {
  step: number;
  target: string;
  seed: number;
  reported: SketchReport;
  /** By auditor, in the order heard: whether its recomputation agrees with the report, and how far off it is (sigma). */
  opinions: Map<string, { agrees: boolean; z: number }>;
  /** Attempts run again to hear more (bounded by DISPUTE_ATTEMPTS). */
  again: number;
}
/** Attempts a dispute may run again to hear its panel; then it is settled with the auditors heard. */
const DISPUTE_ATTEMPTS = 3;
/**
 * The share of the budget F the draw aims at: directed audits of the job's last steps (newcomers, suspects) come after
 * the draw could make up for them, so it aims a little under F for the job to end under it.
 */
export const DRAW_AIM = 0.95;
/**
 * The draw's resolution: a member is audited when a uniform integer below this is under chance times it. A million made every
 * chance below 1e-6 one of 1e-6: a job at F = 1e-9 audited ~1e-6 of its members, and the suspects test, which makes ~5,800 such
 * draws, failed in about 1 run in 170 (once, in a clean-clone suite).
 */
export const DRAW_RESOLUTION = 2 ** 32;

export class AuditBook {
  /** A disagreement, settled over the step's next attempts. */
  private dispute: Dispute | null = null;
  /** A step whose sketches did not add up: its next attempt audits every member; a second failure halts. */
  private sumFailed: number | null = null;
  /** The hop checks of flat rings' steps and hearings, with the evidence of disagreeing links kept for the job. */
  private readonly hops: HopJudge;
  readonly tally: AuditTally = { steps: 0, audits: 0, auditedImages: 0, computedImages: 0, caught: 0, disputes: 0, directed: 0 };
  /** Suspects by id: the first step they are audited in (for certain), then WATCH_STEPS more with chance 1/2. */
  private readonly watch = new Map<string, number>();
  /** Every member ever planned (a member is a newcomer once), and those still on probation (audited for certain). */
  private readonly seen = new Set<string>();
  private readonly probation = new Set<string>();
  /** The members audited as suspects or newcomers in the step planned last (their audits count as directed). */
  private directedIn: { step: number; ids: Set<string> } = { step: -1, ids: new Set() };
  /** How the audits planned for `step` recompute each target's slice: its micro-batch (absent: one batch), the ids it reuses. */
  private splitIn: { step: number; of: Map<string, { cut?: number; reused: number }> } = { step: -1, of: new Map() };
  /** The counts last reported (report()). */
  private reported = '';

  private readonly suspectsOn: boolean;
  private readonly newcomersOn: boolean;

  /** `directed`: audit suspects and newcomers too, or only one of them (tests that fix the draws to leave a cheater unaudited turn it off). */
  constructor(
    private readonly fraction: number, private readonly wire: CheckedWire, private readonly draw: (n: number) => number = (n) => randomInt(n),
    directed: boolean | DirectedAudits = true,
  ) {
    this.suspectsOn = typeof directed === 'boolean' ? directed : directed.suspects;
    this.newcomersOn = typeof directed === 'boolean' ? directed : directed.newcomers;
    this.hops = new HopJudge(wire, draw, (n) => { this.tally.caught += n; });
  }

  /**
   * The chance that the draw audits a member of `ring` in `step` (its `slices`): the job's fraction, corrected by how
   * far the images recomputed so far are from that fraction of those computed, less what this step's directed audits
   * are expected to recompute (newcomers for certain, watched suspects with chance 1/2, each unless drawn): directed
   * audits and disputes spend the same budget, and the job recomputes F of its images. Kept within [F/2, 3F/2] (at most
   * 1): the draw never stops, and its chance is the same for every member.
   */
  private drawChance(step: number, ring: readonly string[], slices: readonly (readonly number[])[]): number {
    const f = this.fraction;
    const images = slices.reduce((n, s) => n + s.length, 0);
    if (f <= 0 || images <= 0) return f;
    const owed = DRAW_AIM * f * (this.tally.computedImages + images) - this.tally.auditedImages;
    const directed = ring.reduce((n, id, i) => n + this.directedWeight(id, step) * slices[i]!.length, 0);
    const p = directed < images ? (owed - directed) / (images - directed) : f / 2;
    return Math.min(1, Math.max(f / 2, Math.min(1.5 * f, p)));
  }

  /** How likely `id` is to be given a directed audit in `step` if the draw leaves it out (probation: 1, watched: 1 then 1/2). */
  private directedWeight(id: string, step: number): number {
    if (this.newcomersOn && (this.probation.has(id) || !this.seen.has(id))) return 1;
    const from = this.watch.get(id);
    if (from === undefined || step < from || step > from + WATCH_STEPS) return 0;
    return step === from ? 1 : 0.5;
  }

  /**
   * The `verify` part of each member's assignment for `step` (ring order), its slices and epoch given; `members` (ring
   * order): what each computes at once, and whether its slice reuses a kept sum (default: one batch each, none reused).
   */
  plan(
    step: number, ring: readonly string[], slices: readonly (readonly number[])[], epoch: number, members: readonly AuditMember[] = [],
  ): { audit?: AuditTask }[] {
    const out: { audit?: AuditTask }[] = ring.map(() => ({}));
    // Member i's slice is recomputed in micro-batches of split[i] (undefined: one batch of oneBatch[i] images), by a member that holds that many.
    const oneBatch = ring.map((_, i) => members[i]?.oneBatch ?? slices[i]!.length);
    const split = ring.map((_, i) => {
      const m = members[i]?.microBatch;
      return m !== undefined && m < oneBatch[i]! ? m : undefined;
    });
    const holds = (auditor: number, target: number): boolean => (members[auditor]?.microBatch ?? Infinity) >= (split[target] ?? oneBatch[target]!);
    const reusing = (i: number): boolean => members[i]?.reusing === true;
    this.splitIn = { step, of: new Map() };
    for (const id of ring) {
      if (this.seen.has(id)) continue;
      this.seen.add(id);
      if (this.newcomersOn) this.probation.add(id);
    }
    if (ring.length < 3) return out;
    const busy = new Set<number>();
    const task = (target: number, auditor: number): void => {
      const cut = split[target];
      const pieces = members[target]?.pieces;
      const how = { ...(cut !== undefined ? { microBatch: cut } : {}), ...(pieces ? { pieces } : {}) };
      out[auditor] = { audit: { peer: ring[target]!, sampleIds: [...slices[target]!], epoch, ...how } };
      this.splitIn.of.set(ring[target]!, { ...(cut !== undefined ? { cut } : {}), reused: members[target]?.reused ?? 0 });
      busy.add(auditor);
    };
    const others = (target: number, not: ReadonlySet<number>): number[] => ring.map((_, i) => i)
      .filter((i) => i !== target && !busy.has(i) && !not.has(i) && holds(i, target));
    const d = this.dispute?.step === step ? this.dispute : null;
    if (d) {
      // The auditors still to be heard, at random among those not heard yet, all under the first attempt's seed.
      const target = ring.indexOf(d.target);
      const heard = new Set([...d.opinions.keys()].map((id) => ring.indexOf(id)).filter((i) => i >= 0));
      const free = target >= 0 ? others(target, heard) : [];
      for (let k = d.opinions.size; k < disputePanel(ring.length) && free.length; k++) {
        const auditor = free.splice(this.draw(free.length), 1)[0]!;
        task(target, auditor);
        out[auditor]!.audit!.seed = d.seed;
      }
    }
    // Each drawn member's auditor is the next free member after it in a random cyclic order of the ring: a random auditor
    // (never itself), and when every member is drawn each audits exactly one and nobody is left out (a free auditor picked
    // at random left a 3-member ring's last member unaudited in a quarter of the steps: the suite's honest test once saw 18 of 24).
    const order = ring.map((_, i) => i);
    for (let k = order.length - 1; k > 0; k--) {
      const j = this.draw(k + 1);
      [order[k], order[j]] = [order[j]!, order[k]!];
    }
    const pos = new Array<number>(ring.length);
    order.forEach((member, k) => { pos[member] = k; });
    const nextFree = (target: number): number | null => {
      if (reusing(target)) return null;
      for (let s = 1; s < ring.length; s++) {
        const j = order[(pos[target]! + s) % ring.length]!;
        if (!busy.has(j) && holds(j, target)) return j;
      }
      return null;
    };
    const everyone = this.sumFailed === step;
    const drawn = new Set<number>();
    const chance = this.drawChance(step, ring, slices);
    for (let i = 0; i < ring.length; i++) {
      if (d && ring[i] === d.target) continue;
      if (!everyone && !(chance > 0 && this.draw(DRAW_RESOLUTION) < chance * DRAW_RESOLUTION)) continue;
      const auditor = nextFree(i);
      if (auditor !== null) task(i, auditor);
      drawn.add(i);
    }
    // Newcomers and suspects the draw left out (drawn after it, so a job without either draws exactly as before).
    const directed = new Set<string>();
    if (this.probation.size > 0) {
      const rank = new Map(ring.map((id, i) => [id, i]));
      for (const id of this.probation) {
        const i = rank.get(id);
        if (i === undefined || drawn.has(i) || (d && id === d.target)) continue;
        const auditor = nextFree(i);
        if (auditor === null) continue;
        task(i, auditor);
        drawn.add(i);
        directed.add(id);
      }
    }
    for (const [id, from] of this.watch) {
      if (step > from + WATCH_STEPS) {
        this.watch.delete(id);
        continue;
      }
      const i = ring.indexOf(id);
      if (i < 0 || step < from || drawn.has(i) || (d && id === d.target)) continue;
      if (step > from && this.draw(2) !== 0) continue;
      const auditor = nextFree(i);
      if (auditor === null) continue;
      task(i, auditor);
      directed.add(id);
    }
    this.directedIn = { step, ids: directed };
    return out;
  }

  /**
   * The verdict on a verified step's results (ring order) before it commits; `flat`: the ring was one flat ring (its hops are
   * checked); `oneBatch`: per member, the most images it was asked to compute at once (a round's largest inner slice; default
   * its images), which a member must have computed as one batch for an audit to recompute the same.
   */
  verdict(step: number, results: readonly StepResult[], flat = false, oneBatch?: ReadonlyMap<string, number>): AuditVerdict {
    const hopped = flat && results.length >= 3;
    const missing = results.filter((r) => !r.sketch || !r.total || (hopped && !r.hops)).map((r) => r.peerId);
    if (missing.length) {
      return {
        kind: 'evict', ids: missing,
        reason: `it reported no verification sketches for step ${step + 1} (this job verifies its steps: update the volunteer)`,
      };
    }
    const seed = sketchSeed(results[0]!.checksum);
    const of = (s: SketchReport, under = seed): GradientSketch => sketchFromReport(s, under);
    // The ring's sum: every member holds the same bits, so every sketch of it is the same.
    const key = (r: StepResult) => JSON.stringify(r.total);
    const counts = new Map<string, number>();
    for (const r of results) counts.set(key(r), (counts.get(key(r)) ?? 0) + 1);
    const major = [...counts.entries()].sort((a, b) => b[1] - a[1])[0]![0];
    const liars = results.filter((r) => key(r) !== major).map((r) => r.peerId);
    if (liars.length && liars.length < results.length / 2) {
      this.tally.caught += liars.length;
      return {
        kind: 'evict', ids: liars,
        reason: `its sketch of the ring's sum in step ${step + 1} differs from the other members' (it reported something it does not hold)`,
      };
    }
    this.tally.steps++;
    this.tally.computedImages += results.reduce((a, r) => a + r.images, 0);
    const total = of(results[0]!.total!);
    const parts = results.map((r) => ({ sketch: of(r.sketch!), images: r.images }));
    const hop = hopped ? this.hops.ofResults(step, results, parts.map((p) => p.sketch), of) : null;
    if (hop?.kind === 'evict' || hop?.kind === 'halt') return hop;
    const sum = sumCheck(parts, total, this.wire, results.length);
    const byId = new Map(results.map((r) => [r.peerId, r]));
    const d = this.dispute?.step === step ? this.dispute : null;
    if (d) {
      // A dispute's further audits: each compared, under the first attempt's seed, with what the member reported then.
      for (const r of results) {
        if (!r.audit || r.audit.peer !== d.target || r.peerId === d.target || d.opinions.has(r.peerId)) continue;
        this.tally.audits++;
        const v = auditCheck(of(d.reported, d.seed), of(r.audit, d.seed));
        d.opinions.set(r.peerId, { agrees: v.ok, z: v.z });
      }
      const settled = this.settle(d, step, results.length);
      if (settled) return settled.kind === 'again' && hop ? { ...settled, order: hop.order } : settled;
    }
    const audited: string[] = [];
    for (const r of results) {
      if (!r.audit) continue;
      const target = byId.get(r.audit.peer);
      if (!target || target.peerId === r.peerId || r.audit.peer === d?.target) continue;
      // Only a slice computed in the micro-batches the audit used (one batch where it named none), with nothing claimed
      // from the tail, is recomputed the same (a member whose kept sum came in pieces was not made a target: plan).
      const most = oneBatch?.get(target.peerId) ?? target.images;
      const cut = (m: number | undefined): number => Math.min(m ?? most, most);
      // A member that had no kept sum to reuse computes its whole slice at once (it says so: reused 0), not in the planned pieces.
      const planned = this.splitIn.step === step ? this.splitIn.of.get(target.peerId) : undefined;
      if ((target.claimed ?? 0) > 0 || cut(target.microBatch) !== cut(planned?.cut) || (target.reused ?? 0) !== (planned?.reused ?? 0)) continue;
      this.tally.audits++;
      this.tally.auditedImages += target.images;
      if (this.directedIn.step === step && this.directedIn.ids.has(target.peerId)) this.tally.directed++;
      const v = auditCheck(of(target.sketch!), of(r.audit));
      if (v.ok) {
        audited.push(target.peerId);
        continue;
      }
      this.dispute = { step, target: target.peerId, seed, reported: target.sketch!, opinions: new Map([[r.peerId, { agrees: false, z: v.z }]]), again: 0 };
      this.tally.disputes++;
      const more = disputePanel(results.length) - 1;
      return {
        kind: 'again',
        reason: `${r.peerId}'s recomputation of ${target.peerId}'s slice disagrees with it (${v.z.toFixed(0)} sigma): `
          + `${more === 1 ? 'another member recomputes' : `${more} other members recompute`} it before anyone is accused`,
        ...(hop ? { order: hop.order } : {}),
      };
    }
    // A dispute that could not be settled (its member gone, nobody free to audit it) ends with the step.
    if (d) this.dispute = null;
    if (hop) return hop;
    // The audits came first: a consistent cheater whose gradient also trips the sum check (50x too large, its rounding
    // beyond the capped tolerance) is named by them, where the sum check alone would halt the job.
    if (!sum.ok) {
      const why = `the members' sketches of step ${step + 1} do not add up to the ring's sum `
        + `(bucket ${sum.bucket} is ${sum.z.toFixed(1)} sigma of the wire's rounding off)`;
      if (this.sumFailed === step) {
        this.sumFailed = null;
        return { kind: 'halt', reason: `${why}, twice: a member sends other than it reports, and hop-by-hop checks that would name it are not built yet` };
      }
      this.sumFailed = step;
      if (!flat && results.length >= 3) {
        // A two-level generation's hops are not checked: the same members in one flat ring, whose hop checks name who lies.
        return {
          kind: 'again', order: results.map((r) => r.peerId),
          reason: `${why}: somebody sent other than it reports; the step runs again in one flat ring (its hops are checked), every member audited`,
        };
      }
      return { kind: 'again', reason: `${why}: somebody sent other than it reports; the step runs again with every member audited` };
    }
    if (this.sumFailed === step) this.sumFailed = null;
    // Whose contribution looks strange: audited in the next step, then watched (a suspect already watched is watched afresh).
    if (this.suspectsOn) {
      for (const i of suspects(parts)) this.watch.set(results[i]!.peerId, step + 1);
    }
    for (const id of audited) this.probation.delete(id);
    return { kind: 'ok', audited };
  }

  /**
   * A hearing (protocol 15; hop-judge.ts): the members of a verified flat ring's step hold different weights after it, and each
   * answered a fresh seed with its contribution and all its hop records (`replies` in ring order). Null: every record agrees.
   */
  hearingVerdict(step: number, ring: readonly string[], replies: readonly HopSketchesMessage[], seed: number): HopJudgement {
    return this.hops.ofHearing(step, ring, replies, seed);
  }

  /**
   * The tally for the metrics and the dashboard after `step` (numbered from 1): always with
   * `convicted` (the names of peers just convicted, and why), else only when an audit, a dispute
   * or a conviction changed it since the last report (null).
   */
  report(step: number, convicted?: { names: string[]; reason: string }): VerificationTally | null {
    const t = this.tally;
    const key = `${t.audits}/${t.caught}/${t.disputes}/${t.directed}`;
    if (!convicted && key === this.reported) return null;
    this.reported = key;
    return {
      step, audits: t.audits, caught: t.caught, disputes: t.disputes, auditedImages: t.auditedImages, computedImages: t.computedImages,
      directed: t.directed, ...(convicted ? { convicted: convicted.names, reason: convicted.reason } : {}),
    };
  }

  /**
   * A dispute's verdict once its panel (disputePanel) was heard, or once nobody else can be asked:
   * by majority of the auditors. When more of them disagree with the member's report than agree,
   * the member is convicted, and so is every auditor that agreed with what the others contradict
   * (a colluder vouching for it); otherwise the auditors that disagreed are (a tie of 1 to 1, a
   * ring of 3, goes to the member). Null: the step runs again to hear more, or the dispute ended.
   */
  private settle(d: Dispute, step: number, ringSize: number): AuditVerdict | null {
    const heard = [...d.opinions.entries()];
    const canAsk = ringSize - 1 - heard.length;
    if (heard.length < disputePanel(ringSize) && canAsk > 0 && d.again < DISPUTE_ATTEMPTS) {
      d.again++;
      return { kind: 'again', reason: `${heard.length} of ${disputePanel(ringSize)} recomputations of ${d.target}'s slice heard: more members recompute it` };
    }
    this.dispute = null;
    if (heard.length < 2) return null;
    const against = heard.filter(([, o]) => !o.agrees);
    const with_ = heard.filter(([, o]) => o.agrees);
    const list = (os: typeof heard) => os.map(([id, o]) => `${id}: ${o.z.toFixed(0)} sigma`).join(', ');
    if (against.length > with_.length) {
      const ids = [d.target, ...with_.map(([id]) => id)];
      this.tally.caught += ids.length;
      const vouched = with_.length ? `; ${with_.map(([id]) => id).join(', ')} reported recomputations that agree with it, against the others` : '';
      return {
        kind: 'evict', ids,
        reason: `${d.target}'s gradient of step ${step + 1} differs from ${against.length} of ${heard.length} members' recomputations of its slice `
          + `(${list(against)})${vouched}`,
      };
    }
    this.tally.caught += against.length;
    return {
      kind: 'evict', ids: against.map(([id]) => id),
      reason: `its audit of ${d.target}'s slice in step ${step + 1} disagreed with what ${d.target} reported (${list(against)}), `
        + `and ${with_.length} of ${heard.length} members' recomputations agree with it (${list(with_)})`,
    };
  }

  /** Members left: they are no longer watched, and a dispute about one of them is moot (its opinion as an auditor goes). */
  forget(ids: readonly string[]): void {
    this.hops.forget(ids);
    for (const id of ids) {
      this.watch.delete(id);
      this.probation.delete(id);
    }
    const d = this.dispute;
    if (!d) return;
    // Its member gone: moot. An auditor gone: its opinion goes with it, and with no disagreement left there is nothing to settle.
    if (ids.includes(d.target)) this.dispute = null;
    else {
      for (const id of ids) d.opinions.delete(id);
      if (![...d.opinions.values()].some((o) => !o.agrees)) this.dispute = null;
    }
  }
}
