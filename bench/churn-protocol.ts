// The messages between the churn benchmark (bench/churn.ts, the parent) and its volunteer host
// processes (bench/churn-host.ts), carried over Node IPC. Each side decodes what it receives
// (a message is data from another process), so a malformed one is a clear error, not a crash.

/** Parent -> host. */
export type HostCommand =
  /** Start a volunteer named `name` on the coordinator at `url`. */
  | { type: 'start'; name: string; url: string }
  /** Stop it the normal way (its abort signal: it says 'leave' and closes its session). */
  | { type: 'leave'; name: string }
  /** Leave with every volunteer still running, then exit. */
  | { type: 'quit' };

/** Host -> parent. */
export type HostReport =
  /** The host has loaded WebRTC and the compute engine module and takes commands. */
  | { type: 'ready'; pid: number }
  | { type: 'joined'; name: string; peerId: string }
  | { type: 'step'; name: string; step: number; ringSize: number }
  /** runVolunteer returned (reason 'done' or 'stopped') or threw (reason 'error'). */
  | { type: 'exit'; name: string; reason: 'done' | 'stopped' | 'error'; step: number | null; error?: string }
  /** Memory of the host process, sent every few seconds. */
  | { type: 'memory'; rssMb: number; heapMb: number; volunteers: number };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (o: Record<string, unknown>, k: string): string | null => (typeof o[k] === 'string' ? (o[k] as string) : null);
const num = (o: Record<string, unknown>, k: string): number | null => (typeof o[k] === 'number' && Number.isFinite(o[k]) ? (o[k] as number) : null);

export class ChurnProtocolError extends Error {
  readonly kind = 'churn-protocol';
  constructor(side: string, detail: string) {
    super(`churn ${side}: ${detail}`);
    this.name = 'ChurnProtocolError';
  }
}

export function decodeCommand(v: unknown): HostCommand {
  const bad = (detail: string): never => {
    throw new ChurnProtocolError('host', `bad command from the parent (${detail}): ${JSON.stringify(v)?.slice(0, 200)}`);
  };
  if (!isObj(v)) return bad('not an object');
  const name = str(v, 'name');
  switch (v.type) {
    case 'start': {
      const url = str(v, 'url');
      if (!name || !url) return bad('start needs name and url');
      return { type: 'start', name, url };
    }
    case 'leave':
      if (!name) return bad('leave needs a name');
      return { type: 'leave', name };
    case 'quit':
      return { type: 'quit' };
    default:
      return bad('unknown type');
  }
}

export function decodeReport(v: unknown): HostReport {
  const bad = (detail: string): never => { throw new ChurnProtocolError('parent', `bad report from a host (${detail}): ${JSON.stringify(v)?.slice(0, 200)}`); };
  if (!isObj(v)) return bad('not an object');
  const name = str(v, 'name');
  switch (v.type) {
    case 'ready': {
      const pid = num(v, 'pid');
      if (pid === null) return bad('ready needs pid');
      return { type: 'ready', pid };
    }
    case 'joined': {
      const peerId = str(v, 'peerId');
      if (!name || !peerId) return bad('joined needs name and peerId');
      return { type: 'joined', name, peerId };
    }
    case 'step': {
      const step = num(v, 'step');
      const ringSize = num(v, 'ringSize');
      if (!name || step === null || ringSize === null) return bad('step needs name, step and ringSize');
      return { type: 'step', name, step, ringSize };
    }
    case 'exit': {
      const reason = v.reason;
      if (!name || (reason !== 'done' && reason !== 'stopped' && reason !== 'error')) return bad('exit needs name and reason');
      const step = v.step === null ? null : num(v, 'step');
      const error = str(v, 'error');
      return { type: 'exit', name, reason, step, ...(error !== null ? { error } : {}) };
    }
    case 'memory': {
      const rssMb = num(v, 'rssMb');
      const heapMb = num(v, 'heapMb');
      const volunteers = num(v, 'volunteers');
      if (rssMb === null || heapMb === null || volunteers === null) return bad('memory needs rssMb, heapMb and volunteers');
      return { type: 'memory', rssMb, heapMb, volunteers };
    }
    default:
      return bad('unknown type');
  }
}
