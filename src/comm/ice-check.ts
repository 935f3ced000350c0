// What this device can offer WebRTC with the job's ICE servers: a short candidate gathering
// (no peer needed) that tells which addresses it found (host, server-reflexive from STUN,
// relayed from TURN) and which servers failed, then a diagnosis in words a person can act on
// ("TURN at 10.0.0.1:3478 refused the credentials", "no answer from STUN at ...: open UDP ...").
import type { IceServer } from '../protocol/messages.ts';

export interface IceServerError { url: string; code: number; text: string }

export interface IceReport {
  host: string[];
  srflx: string[];
  relay: string[];
  /** icecandidateerror events (browsers); node-datachannel reports none. */
  errors: IceServerError[];
  /** True when gathering ended on its own (else the timeout stopped it). */
  complete: boolean;
}

/** The RTCPeerConnection surface used here (browsers, node-datachannel's polyfill). */
export interface GatherPc {
  onicecandidate: ((e: { candidate: { candidate: string } | null }) => void) | null;
  addEventListener(type: string, cb: (e: unknown) => void): void;
  createDataChannel(label: string): unknown;
  createOffer(): Promise<RTCSessionDescriptionInit>;
  setLocalDescription(d: RTCSessionDescriptionInit): Promise<void>;
  close(): void;
}
export type GatherPcCtor = new (config: RTCConfiguration) => GatherPc;

/** Parses "candidate:... typ host|srflx|relay ..." into its type and address. */
export function candidateOf(line: string): { type: string; address: string } | null {
  const m = /candidate:\S+ \d+ \S+ \d+ (\S+) (\d+) typ (\w+)/.exec(line);
  return m ? { type: m[3]!, address: `${m[1]}:${m[2]}` } : null;
}

/** Gathers this device's candidates with `config` for up to `timeoutMs` (bounded; always closes). */
export async function gatherCandidates(Pc: GatherPcCtor, config: RTCConfiguration, timeoutMs = 5000): Promise<IceReport> {
  const report: IceReport = { host: [], srflx: [], relay: [], errors: [], complete: false };
  const pc = new Pc(config);
  try {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      pc.onicecandidate = (e) => {
        if (!e.candidate) { report.complete = true; clearTimeout(timer); resolve(); return; }
        const c = candidateOf(e.candidate.candidate);
        if (!c) return;
        const list = c.type === 'host' ? report.host : c.type === 'srflx' || c.type === 'prflx' ? report.srflx : c.type === 'relay' ? report.relay : null;
        if (list && !list.includes(c.address)) list.push(c.address);
      };
      pc.addEventListener('icecandidateerror', (ev) => {
        const e = ev as { url?: string; errorCode?: number; errorText?: string };
        if (report.errors.length < 16) report.errors.push({ url: e.url ?? '', code: e.errorCode ?? 0, text: e.errorText ?? '' });
      });
      pc.createDataChannel('ice-check');
      pc.createOffer().then((o) => pc.setLocalDescription(o)).catch(() => { clearTimeout(timer); resolve(); });
    });
  } finally {
    pc.close();
  }
  return report;
}

const hostPort = (url: string): string => url.replace(/^(stuns?|turns?):/, '').replace(/\?.*$/, '');

/**
 * Says what the report means for joining a ring across networks, one finding per line, each
 * naming the server (host and port) and what to check. Empty when nothing looks wrong.
 */
export function diagnoseIce(servers: readonly IceServer[], r: IceReport): string[] {
  const out: string[] = [];
  const stun = servers.flatMap((s) => s.urls).filter((u) => u.startsWith('stun'));
  const turn = servers.filter((s) => s.urls.some((u) => u.startsWith('turn')));
  if (r.host.length === 0 && r.srflx.length === 0 && r.relay.length === 0) {
    out.push('this device gathered no WebRTC addresses at all: it needs a network interface with a default route (browsers use only that one); '
      + 'check the network connection');
  }
  for (const e of r.errors) {
    if (e.code === 401) {
      out.push(`the TURN server at ${hostPort(e.url)} refused this device's credentials (401${e.text ? ` ${e.text}` : ''}): `
        + "the coordinator's TURN secret and the server's differ, or the clocks differ by hours; ask the job owner");
    } else if (e.code === 701) {
      out.push(`no answer from ${e.url} (${e.text || 'timeout'}): check that UDP port ${hostPort(e.url).split(':').pop()} `
        + `on ${hostPort(e.url).replace(/:\d+$/, '')} is open from this network`);
    } else if (e.code) out.push(`${e.url}: error ${e.code} ${e.text}`.trim());
  }
  if (stun.length && r.srflx.length === 0 && !r.errors.some((e) => e.url.startsWith('stun'))) {
    out.push(`no answer from STUN at ${stun.map(hostPort).join(', ')}: check that UDP to that port is open from this network `
      + '(the coordinator answers STUN on UDP at its own port)');
  }
  if (turn.length && r.relay.length === 0 && !r.errors.some((e) => e.url.startsWith('turn'))) {
    out.push(`the TURN relay at ${turn.flatMap((s) => s.urls).map(hostPort).filter((v, i, a) => a.indexOf(v) === i).join(', ')} gave no relayed address: `
      + 'UDP/TCP to it is blocked, or it refused the credentials; check its port (3478 by default) and the relay ports (49160-49359 UDP) in the firewall');
  }
  if (servers.length === 0) {
    out.push('the job has no STUN or TURN server: peers behind NAT or on isolated Wi-Fi cannot reach each other; '
      + 'the job owner can start the coordinator with --turn, or give --ice URLs');
  }
  return out;
}

/** One-line summary of what was gathered (for logs). */
export function summarizeIce(r: IceReport): string {
  const part = (name: string, xs: string[]) => `${name} ${xs.length ? xs.slice(0, 4).join(' ') : 'none'}`;
  return [part('host', r.host), part('stun', r.srflx), part('relay', r.relay)].join('; ');
}
