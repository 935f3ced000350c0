// Typed errors of the exporter: callers branch on `kind`; the message is one line that says
// what to do next. The command line (coordinator/export-cli.ts) exits 2 on any of them.
export type ExportErrorKind =
  | 'usage' // a missing or bad option
  | 'no-job' // the job folder or its job.json is missing or unreadable
  | 'no-data' // the data set's manifest (input size, classes, normalisation) is missing
  | 'no-checkpoint' // no checkpoint at all, or none of the step asked for
  | 'bad-checkpoint' // damaged, or of another model (fingerprint), or the wrong sizes
  | 'unsupported' // a layer ONNX cannot express exactly
  | 'bad-output'; // --out cannot be written (its folder is missing)

export class ExportError extends Error {
  readonly kind: ExportErrorKind;
  constructor(kind: ExportErrorKind, message: string) {
    super(message);
    this.name = 'ExportError';
    this.kind = kind;
  }
}
