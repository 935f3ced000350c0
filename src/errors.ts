// Typed errors: callers branch on `kind`, people read `message` (which says what to do next).

export type VtErrorKind =
  | 'webgpu-unavailable' // no navigator.gpu / no 'webgpu' package / no adapter
  | 'device-lost' // the GPU device went away (driver reset, tab in background too long)
  | 'gpu-validation' // WebGPU rejected a pipeline, bind group or dispatch
  | 'bad-shape' // an op was called with shapes or parameters that do not fit
  | 'too-large'; // a tensor does not fit the device's limits even after folding

export class VtError extends Error {
  readonly kind: VtErrorKind;
  constructor(kind: VtErrorKind, message: string) {
    super(message);
    this.name = 'VtError';
    this.kind = kind;
  }
}

/** Throws a 'bad-shape' VtError unless `cond` holds. `what` names the op. */
export function check(cond: boolean, what: string, detail: () => string): asserts cond {
  if (!cond) throw new VtError('bad-shape', `${what}: ${detail()}`);
}
