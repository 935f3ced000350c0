// Typed failures of optimiser set-up. Callers branch on `kind`; the message names the field
// and says what to change. (Shape mismatches of GPU buffers are VtError 'bad-shape'.)

export type OptimErrorKind =
  | 'bad-config' // a job's optimiser config has a missing, unknown or out-of-range field
  | 'bad-layout' // the parameter segments overlap, fall outside the buffers or are malformed
  | 'bad-input'; // a call passed something unusable (a negative or fractional step index)

const NEXT_STEP: Record<OptimErrorKind, string> = {
  'bad-config': "fix the job's optimizer settings",
  'bad-layout': 'build the segments from the model layout (src/nn/layout.ts) and size the buffers by layout.paramFloats',
  'bad-input': 'fix the call',
};

export class OptimError extends Error {
  readonly kind: OptimErrorKind;
  constructor(kind: OptimErrorKind, detail: string) {
    super(`optimizer ${kind}: ${detail}; ${NEXT_STEP[kind]}.`);
    this.name = 'OptimError';
    this.kind = kind;
  }
}
