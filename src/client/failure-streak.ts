// A failure that repeats unchanged is not bad luck: a device that cannot take its slice (out of
// memory), a model it cannot build, a bug. Rejoining then only repeats it (358 generations in
// 400 s, and no step, before this existed). The volunteer counts its own failed sessions, the
// coordinator the failed leaves of all peers; either stops after HALT_AFTER failures in a row
// with the same cause and no step committed in between, and says why. Pure: the caller feeds it.

/** The same failure this many times in a row, with no step committed between: stop. */
export const HALT_AFTER = 3;

export interface FailureStreak {
  /** The failure's cause with its numbers taken out (steps, generations, sizes of one attempt). */
  readonly key: string | null;
  readonly count: number;
  /** The last failure's own words. */
  readonly last: string | null;
}

export const noStreak = (): FailureStreak => ({ key: null, count: 0, last: null });

/** The cause of a failure for comparing: digits and peer-like ids folded, so step 3 and step 4 of the same error are one cause. */
export function failureKey(detail: string): string {
  return detail.replace(/[0-9a-f]{8,}/gi, '<id>').replace(/\d+(\.\d+)?/g, '#').trim().slice(0, 300);
}

/** The streak after a failure with `detail`. */
export function failed(s: FailureStreak, detail: string): FailureStreak {
  const key = failureKey(detail);
  return { key, count: s.key === key ? s.count + 1 : 1, last: detail };
}

/** Whether the streak has reached HALT_AFTER. */
export const halts = (s: FailureStreak, after = HALT_AFTER): boolean => s.count >= after;
