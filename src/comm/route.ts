// Which way a WebRTC link runs: straight between the two peers, or through a TURN relay.
// Read from the connection's stats (browsers and node-datachannel's polyfill both report the
// selected candidate pair and its two candidates' types).
import type { LinkKind } from '../protocol/messages.ts';

/** A stats entry as both implementations report it (only the fields used here). */
export interface StatLike {
  type?: string;
  id?: string;
  candidateType?: string;
  selectedCandidatePairId?: string;
  localCandidateId?: string;
  remoteCandidateId?: string;
  state?: string;
  nominated?: boolean;
  selected?: boolean;
  /** Candidate address (browsers: `address`, older ones and node-datachannel: `ip`). */
  address?: string;
  ip?: string;
}

/** Anything iterable as [id, stat] pairs (RTCStatsReport, Map). */
export type StatsLike = { forEach(cb: (value: StatLike, key: string) => void): void };

/**
 * The route of the selected candidate pair: 'relayed' when either end is a relay candidate or
 * the remote end is one of `relayHosts` (the TURN servers' addresses: libdatachannel reports a
 * relayed remote learned from a connectivity check as 'prflx'), 'direct' otherwise; null when
 * no pair is selected yet.
 */
export function routeOfStats(stats: StatsLike, relayHosts: readonly string[] = []): LinkKind | null {
  const byId = new Map<string, StatLike>();
  let selectedId: string | undefined;
  const pairs: StatLike[] = [];
  stats.forEach((v, k) => {
    byId.set(v.id ?? k, v);
    if (v.type === 'transport' && v.selectedCandidatePairId) selectedId = v.selectedCandidatePairId;
    if (v.type === 'candidate-pair') pairs.push(v);
  });
  const pair = (selectedId ? byId.get(selectedId) : undefined)
    ?? pairs.find((p) => p.selected)
    ?? pairs.find((p) => p.nominated && p.state === 'succeeded');
  if (!pair) return null;
  const local = pair.localCandidateId ? byId.get(pair.localCandidateId) : undefined;
  const remote = pair.remoteCandidateId ? byId.get(pair.remoteCandidateId) : undefined;
  if (!local && !remote) return null;
  const remoteIp = remote?.address ?? remote?.ip;
  const viaRelay = local?.candidateType === 'relay' || remote?.candidateType === 'relay' || (remoteIp !== undefined && relayHosts.includes(remoteIp));
  return viaRelay ? 'relayed' : 'direct';
}

export interface StatsSource { getStats(): Promise<StatsLike> }

/** The route of a peer connection, or null when it cannot tell (no stats, nothing selected, timeout). */
export async function routeOf(pc: unknown, relayHosts: readonly string[] = [], timeoutMs = 1000): Promise<LinkKind | null> {
  if (typeof pc !== 'object' || pc === null || typeof (pc as Partial<StatsSource>).getStats !== 'function') return null;
  const stats = (pc as StatsSource).getStats().then((s) => routeOfStats(s, relayHosts), () => null);
  return Promise.race([stats, new Promise<null>((r) => setTimeout(() => r(null), timeoutMs))]);
}

/** The hosts of the TURN servers among `servers` (their relayed addresses live there). */
export function relayHostsOf(servers: readonly { urls: readonly string[] }[]): string[] {
  const hosts = servers.flatMap((s) => s.urls).filter((u) => u.startsWith('turn'))
    .map((u) => u.replace(/^turns?:/, '').replace(/\?.*$/, '').replace(/^.*@/, '').replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1'));
  return [...new Set(hosts)];
}
