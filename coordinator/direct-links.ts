// Direct ring links between Node volunteers (src/comm/direct-peer.ts): who offered them, and the
// routes each step assignment and make-before-break announcement carries. A Node volunteer that
// listens for direct links says on which port when it joins; it is reached at the address its
// join came from (what the coordinator sees is what a peer on the same network sees; a volunteer
// behind a NAT is not reachable there, its dialers fail fast and use WebRTC through TURN). Its
// join answer carries a secret; a dialer gets, for each of its successors that listens, the
// address and its key to that listener (direct-key.ts). Only successors in the ring the message
// names get routes, the rule signaling keeps for WebRTC offers.
import type { CoordinatorMessage, DirectRoutes } from '../src/protocol/messages.ts';
import { directKey, newDirectSecret } from '../src/comm/direct-key.ts';
import type { Topology } from '../src/comm/topology.ts';
import { aheadLinks } from '../src/client/volunteer-ring.ts';

/**
 * A listening volunteer, and the keys of its dialers so far (an HMAC each, made once per dialer).
 * `reachable`: its join came from one of its own addresses (no NAT between it and the coordinator),
 * so others are routed to it; otherwise it only dials out.
 */
interface Listening { host: string; port: number; secret: string; keys: Map<string, string>; reachable: boolean }

/** An address in one form for comparing: IPv4-mapped as IPv4, IPv6 lower case without its scope. */
const sameForm = (a: string): string => dialableHost(a).toLowerCase().replace(/%.*$/, '');

/** An address as a dialer gives it to TLS: an IPv4-mapped IPv6 address as IPv4, an IPv6 scope kept. */
export function dialableHost(address: string): string {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return v4 ? v4[1]! : address;
}

/**
 * `id`'s successors in the rings of `ring` (its group and column rings when `topology` cuts it):
 * the peers it dials, as the volunteer itself finds them (aheadLinks). A step assignment's
 * `rank` gives the flat successor without searching the ring (every member, every step).
 */
export function successorsOf(ring: readonly string[], topology: Topology | undefined, id: string, rank?: number): string[] {
  if (!topology && rank !== undefined && ring[rank] === id) return ring.length < 2 ? [] : [ring[(rank + 1) % ring.length]!];
  return (aheadLinks({ ring: [...ring], ...(topology ? { topology } : {}) }, id) ?? []).map((l) => l.nextId);
}

export class DirectBook {
  private readonly listening = new Map<string, Listening>();

  /**
   * `id` listens for direct links on `port`; its join came from `address`. With the addresses it
   * listens on (`own`), it is routed to only when `address` is one of them (else a NAT stands
   * between: dials to it would only time out). Returns the secret its join answer carries.
   */
  register(id: string, address: string, port: number, own?: readonly string[]): string {
    const secret = newDirectSecret();
    const reachable = own === undefined || own.map(sameForm).includes(sameForm(address));
    this.listening.set(id, { host: dialableHost(address), port, secret, keys: new Map(), reachable });
    return secret;
  }

  forget(id: string): void {
    this.listening.delete(id);
  }

  get size(): number {
    return this.listening.size;
  }

  /** The direct routes of `id` to its successors in `ring` that listen, when `id` listens too (a Node volunteer); null: none. */
  routesFor(id: string, ring: readonly string[], topology?: Topology, rank?: number): DirectRoutes | null {
    if (this.listening.size < 2 || !this.listening.has(id)) return null;
    let out: DirectRoutes | null = null;
    for (const next of successorsOf(ring, topology, id, rank)) {
      const l = this.listening.get(next);
      if (!l?.reachable) continue;
      out ??= {};
      let key = l.keys.get(id);
      if (key === undefined) {
        key = directKey(l.secret, id).toString('base64url');
        l.keys.set(id, key);
      }
      out[next] = { host: l.host, port: l.port, key };
    }
    return out;
  }

  /** `m` as it goes to `id`: a step assignment or announcement with its direct routes added (others unchanged). */
  routed(id: string, m: CoordinatorMessage): CoordinatorMessage {
    if (m.type !== 'step-assignment' && m.type !== 'prepare') return m;
    const direct = this.routesFor(id, m.ring, m.topology, m.type === 'step-assignment' ? m.rank : undefined);
    return direct ? { ...m, direct } : m;
  }
}
