// Messages from the op-suite worker to its page.
export interface CaseResult { op: string; name: string; ok: boolean; error?: string; ms: number }
export type WorkerMsg =
  | { type: 'device'; description: string; software: boolean }
  | { type: 'result'; result: CaseResult }
  | { type: 'done'; total: number }
  | { type: 'fatal'; error: string };
