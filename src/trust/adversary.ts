// Adversarial volunteers for the attack tests and bench (issue 46 part 5): what a dishonest donor
// does to the gradient it puts into the ring. Reached only through the Node volunteer's
// `--adversary KIND`, which its usage does not show. Consistent kinds report the sketch of what
// they send (caught by audits); `lie` sends its gradient sign-flipped and reports the honest
// one's sketch (caught by the sum check).
import { makeRng } from '../rng.ts';

export const ADVERSARY_KINDS = ['sign-flip', 'scale', 'zeros', 'noise', 'lie'] as const;
export type AdversaryKind = (typeof ADVERSARY_KINDS)[number];

/** What a tampering peer does to each bucket of its contribution: before the kept copy (consistent) or after it (a lie). */
export interface Tamper { consistent: boolean; apply(part: Float32Array): void }

export function tamperOf(kind: AdversaryKind, seed = 1): Tamper {
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
    case 'lie': return { consistent: false, apply: (p) => { for (let i = 0; i < p.length; i++) p[i] = -p[i]!; } };
  }
}
