// This peer's presence on the PeerJS signaling server, and the forming of ring links: one
// DataConnection opened to next, one accepted from prev, both tagged with (job, generation).
// Connections from anyone else, or for an older generation, are refused (closed). Each job has
// at most one formation running per ring tag (link-formation.ts): a newer generation's ends the
// older ones' at once, so nothing of an abandoned generation (dials, timers, error routing)
// outlives it. The tag keeps two rings of one generation apart (a two-level all-reduce's group
// ring and column ring: src/client/step-rings.ts); the flat ring has none ('').
//
// Links outlive their ring when they can (link-pool.ts): a ring released by its owner (the
// coordinator moved on, or the ring failed for a reason other than that neighbour) hands its
// links to this endpoint's pool, and the next formation of the same job and tag keeps a link
// whose two ends agree in a handshake on it, instead of dialing a new connection. After one
// peer leaves a ring of n, n - 2 of its links stay as they were.
//
// Make before break (preDial): told of the ring the coordinator is about to switch to, a peer
// dials its new successors while its current ring still trains; such a connection carries `pre`
// in its metadata, is accepted only from the prev that ring gives us (one that comes before we
// heard of the ring waits PRE_DIAL_WAIT_MS for it: the announcement reaches each peer on its
// own socket, so a neighbour's dial can come first), and both ends park it in
// the pool once open, so the new generation's formation keeps it like any kept link.

import { RingError } from './errors.ts';
import { LinkFormation, MAX_DIALS, type FormedLinks, type FormingLink } from './link-formation.ts';
import { LinkLease } from './link-lease.ts';
import { LinkPool } from './link-pool.ts';
import { PeerJsLink, type DataConnectionLike } from './peerjs-link.ts';
import { ringMetadata, type PeerCtor, type PeerLike, type RingMetadata, type SignalingAddress } from './peerjs-peer.ts';
import { Ring, type RingSettings } from './ring.ts';
import { isRingTag } from '../protocol/frames.ts';
import { RING_FORM_TIMEOUT_MS, type DirectRoutes } from '../protocol/messages.ts';

export interface EndpointOptions {
  Peer: PeerCtor;
  /** Id and token issued by the coordinator (signaling refuses ids it did not issue). */
  id: string;
  token: string;
  server: SignalingAddress;
  /** iceServers: [] on a LAN/loopback; Node adds bindAddress: '127.0.0.1'. */
  rtcConfig?: RTCConfiguration;
  openTimeoutMs?: number;
  /** Wraps the PeerJS Peer (a Node volunteer's direct links: direct-peer.ts). */
  wrap?: (peer: PeerLike) => PeerLike;
}

const withTimeout = <T>(p: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(onTimeout()), ms);
    p.then((v) => { clearTimeout(t); resolve(v); }, (e: unknown) => { clearTimeout(t); reject(e); });
  });

/** Registers `id` with the signaling server; resolves once the server has accepted it. */
export async function openEndpoint(o: EndpointOptions): Promise<PeerEndpoint> {
  const signaling = new o.Peer(o.id, {
    host: o.server.host,
    port: o.server.port,
    path: o.server.path,
    secure: o.server.secure ?? false,
    token: o.token,
    config: o.rtcConfig ?? { iceServers: [] },
    debug: 0,
  });
  const peer = o.wrap ? o.wrap(signaling) : signaling;
  const endpoint = new PeerEndpoint(peer);
  const opened = new Promise<void>((resolve, reject) => {
    peer.on('open', () => resolve());
    peer.on('error', (e) => reject(new RingError('connect-failed', o.id, `signaling server refused ${o.id}: ${e.message}`, o.id)));
  });
  try {
    await withTimeout(opened, o.openTimeoutMs ?? 10_000, () => new RingError(
      'connect-failed', o.id, `no answer from the signaling server at ${o.server.host}:${o.server.port}${o.server.path}`, o.id,
    ));
  } catch (e) {
    peer.destroy();
    throw e;
  }
  return endpoint;
}

export interface FormRingOptions {
  ids: readonly string[];
  job: number;
  generation: number;
  settings?: Partial<RingSettings>;
  /** Both links must be open within this time, or the ring fails 'connect-failed'. */
  connectTimeoutMs?: number;
  /**
   * Which ring of the generation this is, when a peer takes part in two (a two-level
   * all-reduce: 'group' and 'column'); each forms apart. Default: none (the flat ring).
   */
  tag?: string;
}

const MAX_PENDING = 16;
/** A link dialed ahead (preDial) that has not opened within this time is closed. */
export const PRE_DIAL_OPEN_MS = 10_000;
/**
 * A dial ahead from a peer we were not told of yet waits this long for our own announcement
 * (its `prepare` may reach us after the dial: two different sockets), then is closed.
 */
export const PRE_DIAL_WAIT_MS = 3_000;
/** A dial ahead that failed within this many ms is made once more (PeerEndpoint.preDial). */
export const PRE_DIAL_RETRY_WITHIN_MS = 2_000;

/** This peer's neighbours in one ring it is about to join (tag '' flat): it dials next ahead and accepts prev's dial ahead. */
export interface PreDial { tag: string; nextId: string; prevId: string }

/** `self`'s successor and predecessor in the ring `ids` (null: not in it). */
export function neighboursOf(ids: readonly string[], self: string): { nextId: string; prevId: string } | null {
  const rank = ids.indexOf(self);
  if (rank < 0) return null;
  return { nextId: ids[(rank + 1) % ids.length]!, prevId: ids[(rank - 1 + ids.length) % ids.length]! };
}

/**
 * Adds `value` under `key` to a map of early arrivals bounded at MAX_PENDING: one already under
 * the key is dropped first (a newer attempt of the same peer wins), and when full the oldest
 * entry goes (its ring most likely failed elsewhere). `drop` closes what leaves.
 */
function putBounded<V>(map: Map<string, V>, key: string, value: V, drop: (v: V) => void): void {
  const older = map.get(key);
  if (older !== undefined) {
    drop(older);
    map.delete(key);
  }
  if (map.size >= MAX_PENDING) {
    const [oldKey, oldest] = map.entries().next().value as [string, V];
    drop(oldest);
    map.delete(oldKey);
  }
  map.set(key, value);
}

/** A formation of formRing (reuse: its links may come from the pool) or of connectLinks (raw). */
interface Forming {
  f: LinkFormation<FormingLink>;
  reuse: boolean;
}

export class PeerEndpoint {
  readonly id: string;
  /** Incoming links that arrived before formRing asked for them, by `job/generation/tag/from`. */
  private readonly pending = new Map<string, PeerJsLink>();
  /** The formation running per `job/tag` (one at a time: the newest generation's). */
  private readonly forming = new Map<string, Forming>();
  /** Ring links kept between generations (see the header). */
  private readonly pool = new LinkPool({
    formation: (job, tag) => {
      const running = this.forming.get(`${job}/${tag}`);
      return running?.reuse ? running.f : undefined;
    },
    newest: (job) => this.newest.get(job) ?? 0,
  });
  /** Newest generation formed per job: connections for older ones are refused. */
  private readonly newest = new Map<number, number>();
  /** Per `job/tag`: the prev whose dial ahead is accepted (the newest preDial's; nobody else's). */
  private readonly expectedPrev = new Map<string, string>();
  /** Dials ahead of ours still opening, by `job/tag/to`. */
  private readonly dialingAhead = new Map<string, Promise<boolean>>();
  /** Dials ahead not expected (yet), by `job/tag/from`: parked if our preDial names them within PRE_DIAL_WAIT_MS, else closed. */
  private readonly earlyAhead = new Map<string, { link: PeerJsLink; timer: ReturnType<typeof setTimeout> }>();
  /** Rings formed here: destroy() closes them first, so neighbours are not blamed for our exit. */
  private readonly rings = new Set<Ring>();

  constructor(readonly peer: PeerLike) {
    this.id = peer.id;
    peer.on('connection', (conn) => this.accept(conn));
    peer.on('error', (e) => {
      // PeerJS reports "Could not connect to peer X" as type 'peer-unavailable'.
      if (e.type !== 'peer-unavailable') return;
      for (const { f } of this.forming.values()) f.unavailable(e.message);
    });
  }

  private accept(conn: DataConnectionLike): void {
    const meta = ringMetadata(conn.metadata);
    if (!meta || meta.from !== conn.peer) return conn.close();
    const tag = meta.tag ?? '';
    // Dialed ahead, from the prev we expect (whatever generation its dialer has formed: a joiner
    // has formed none): parked once open, for the handshake of the formation that will want it.
    if (meta.pre) {
      const link = new PeerJsLink(conn, 'accepted');
      if (this.expectedPrev.get(`${meta.job}/${tag}`) === meta.from) return void this.parkWhenOpen(link, meta.job, tag, 'prev');
      return this.holdAhead(`${meta.job}/${tag}/${meta.from}`, link);
    }
    if (meta.generation < (this.newest.get(meta.job) ?? 0)) return conn.close();
    const key = `${meta.job}/${meta.generation}/${tag}/${meta.from}`;
    const f = this.forming.get(`${meta.job}/${tag}`)?.f;
    if (f && f.generation === meta.generation && f.prevId === meta.from) {
      // Taken while forming, refused (closed unread) once its links were handed over.
      f.offer(new PeerJsLink(conn, 'accepted'));
      return;
    }
    if (meta.generation === this.newest.get(meta.job)) {
      // Not our prev in a ring we know (or a late re-dial of one already formed): closed
      // before anything listens to it, so nothing it sends is read. (The coordinator's
      // signaling already refuses peers that are not our neighbours; this is the second lock.)
      conn.close();
      return;
    }
    // A second connection for the same key is prev re-dialing after a failed attempt: it wins.
    putBounded(this.pending, key, new PeerJsLink(conn, 'accepted'), (l) => l.close());
  }

  /**
   * Takes the link to next and the link from prev, each kept from this job and tag's previous
   * ring where both ends agree (link-pool.ts), else opened anew, and returns this peer's Ring.
   * Release the ring (Ring.release) to let the next generation keep its links; close it to end them.
   */
  async formRing(o: FormRingOptions): Promise<Ring> {
    const { ids, job, generation } = o;
    if (ids.length === 1 && ids[0] === this.id) return new Ring({ selfId: this.id, ids, job, generation, settings: o.settings });
    const tag = o.tag ?? '';
    const { next, prev, attempts } = await this.formLinks(o, true);
    let reused = 0;
    const lease = (l: FormingLink, role: 'next' | 'prev'): LinkLease => {
      if (l instanceof LinkLease) {
        reused++;
        return l;
      }
      if (!(l instanceof PeerJsLink)) throw new Error('formation handed over a link that is neither kept nor a PeerJS connection (a bug in peer-endpoint.ts)');
      return this.pool.keep(l, job, tag, role);
    };
    const [toNext, fromPrev] = [lease(next, 'next'), lease(prev, 'prev')];
    let ring: Ring;
    try {
      ring = new Ring({ selfId: this.id, ids, job, generation, next: toNext, prev: fromPrev, settings: o.settings, reusedLinks: reused, attempts });
    } catch (e) {
      toNext.close();
      fromPrev.close();
      throw e;
    }
    this.pool.formed(job, tag);
    this.rings.add(ring);
    ring.onError(() => this.rings.delete(ring));
    return ring;
  }

  /**
   * Make before break: dials each successor of a ring this peer is about to join (the
   * coordinator's `prepare`) unless a link to it in that role and tag is kept already, and parks
   * the new links in the pool at both ends; the formation of that ring then keeps them by the
   * REUSE handshake instead of dialing. Resolves with how many were dialed and opened once each
   * has opened or failed (PRE_DIAL_OPEN_MS at most); never rejects. Dials ahead from each ring's
   * prev are accepted from now on (from nobody else: the second lock after signaling's).
   */
  async preDial(job: number, links: readonly PreDial[]): Promise<{ dialed: number; opened: number }> {
    const generation = this.newest.get(job) ?? 0;
    for (const l of links) {
      this.expectedPrev.set(`${job}/${l.tag}`, l.prevId);
      // Our prev's dial ahead may have come before this announcement did.
      const early = this.earlyAhead.get(`${job}/${l.tag}/${l.prevId}`);
      if (early) {
        clearTimeout(early.timer);
        this.earlyAhead.delete(`${job}/${l.tag}/${l.prevId}`);
        void this.parkWhenOpen(early.link, job, l.tag, 'prev');
      }
    }
    const dials = links.filter((l) => l.nextId !== this.id && !this.pool.has(job, l.tag, 'next', l.nextId)).map((l) => {
      if (l.tag !== '' && !isRingTag(l.tag)) return Promise.resolve(false);
      // A dial ahead to the same peer still opening (an announcement made again) is not made twice.
      const key = `${job}/${l.tag}/${l.nextId}`;
      const inFlight = this.dialingAhead.get(key);
      if (inFlight) return inFlight;
      const label = `vt/${job}/pre${l.tag ? `/${l.tag}` : ''}`;
      const meta: RingMetadata = { vt: 'ring', job, generation, from: this.id, ...(l.tag ? { tag: l.tag } : {}), pre: true };
      // No dial from an endpoint destroyed meanwhile (the retry below comes a while later).
      const dial = (): Promise<boolean> => {
        const conn = this.peer.destroyed ? undefined : this.peer.connect(l.nextId, { label, metadata: meta, serialization: 'raw', reliable: true });
        return conn ? this.parkWhenOpen(new PeerJsLink(conn, 'dialed'), job, l.tag, 'next') : Promise.resolve(false);
      };
      // A dial that failed fast is made again, up to MAX_DIALS in all as formation does: a busy
      // machine meets libdatachannel's fingerprint race (node.ts offerAsDtlsClient: the handshake
      // lands before the answer's fingerprint, "unknown CA") on about one attempt in four, and two
      // attempts were not enough (test/comm/webrtc-node.test.ts failed 2 runs in 10 beside a busy
      // loop). One that timed out is not (the announcement's wait is over by then), unless it was a
      // direct link that failed (the NAT a direct dial met: WebRTC is tried now).
      let late = false;
      const lateTimer = setTimeout(() => { late = true; }, PRE_DIAL_RETRY_WITHIN_MS);
      const attempt = (made: number): Promise<boolean> => dial().then((ok) => {
        if (ok || made >= MAX_DIALS) return ok;
        if (late) return made === 1 && this.peer.fellBack?.(l.nextId) ? attempt(made + 1) : ok;
        return attempt(made + 1);
      });
      const parked = attempt(1)
        .finally(() => {
          clearTimeout(lateTimer);
          this.dialingAhead.delete(key);
        });
      this.dialingAhead.set(key, parked);
      return parked;
    });
    const opened = (await Promise.all(dials)).filter(Boolean).length;
    return { dialed: dials.length, opened };
  }

  /** Keeps a dial ahead we were not told of (yet) for PRE_DIAL_WAIT_MS (a second one from the same peer replaces it; at most MAX_PENDING). */
  private holdAhead(key: string, link: PeerJsLink): void {
    const timer = setTimeout(() => {
      if (this.earlyAhead.get(key)?.link !== link) return;
      this.earlyAhead.delete(key);
      link.close();
    }, PRE_DIAL_WAIT_MS);
    putBounded(this.earlyAhead, key, { link, timer }, (e) => {
      clearTimeout(e.timer);
      e.link.close();
    });
  }

  /** Parks `link` in the pool as `role` once it opens (true); closes it if it fails or takes over PRE_DIAL_OPEN_MS (false). */
  private parkWhenOpen(link: PeerJsLink, job: number, tag: string, role: 'next' | 'prev'): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => { link.close(); resolve(false); }, PRE_DIAL_OPEN_MS);
      link.opened.then(() => {
        clearTimeout(timer);
        if (link.closed || this.peer.destroyed) return resolve(false);
        this.pool.park(link, job, tag, role);
        resolve(true);
      }, () => { clearTimeout(timer); resolve(false); });
    });
  }

  /** Direct routes to the successors of a ring this peer is told of (before it forms or dials ahead). */
  learnRoutes(routes: DirectRoutes): void {
    this.peer.learn?.(routes);
  }

  /** Kept links: tests and logs count them (`idle`: held by no ring). */
  get keptLinks(): { open: number; idle: number } {
    return { open: this.pool.size, idle: this.pool.idle };
  }

  /**
   * The two open links of this peer's place in the ring, always new connections (benchmarks of
   * raw links; formRing keeps links across generations). A newer generation of the same job ends
   * this call with a 'closed' RingError (blaming nobody), as does another call for the same
   * generation and tag; so does a generation older than one already formed here.
   */
  async connectLinks(o: FormRingOptions): Promise<{ next: PeerJsLink; prev: PeerJsLink }> {
    const { next, prev } = await this.formLinks(o, false);
    if (!(next instanceof PeerJsLink) || !(prev instanceof PeerJsLink)) throw new Error('a raw formation handed over a kept link (a bug in peer-endpoint.ts)');
    return { next, prev };
  }

  private async formLinks(o: FormRingOptions, reuse: boolean): Promise<FormedLinks<FormingLink>> {
    const { ids, job, generation } = o;
    const tag = o.tag ?? '';
    if (tag !== '' && !isRingTag(tag)) throw new RingError('bad-input', this.id, `ring tag ${JSON.stringify(tag)} must be 1..16 characters [a-z0-9-]`);
    const around = neighboursOf(ids, this.id);
    if (!around || ids.length < 2) throw new RingError('bad-input', this.id, `${this.id} is not in the ring [${ids.join(', ')}] of 2 or more peers`);
    const newest = this.newest.get(job) ?? 0;
    if (generation < newest) {
      throw new RingError(
        'closed', this.id, `generation ${generation} of job ${job} is older than generation ${newest}, already formed here: it was abandoned`, this.id,
      );
    }
    this.newest.set(job, generation);
    const fkey = `${job}/${tag}`;
    // Older generations' formations (every tag) and this tag's own are over.
    for (const [k, { f: running }] of this.forming) {
      if (running.job === job && (running.generation < generation || k === fkey)) {
        running.cancel(`generation ${generation} of job ${job} is forming now: this formation of generation ${running.generation} was abandoned`);
      }
    }
    const { nextId, prevId } = around;
    const key = `${job}/${generation}/${tag}/${prevId}`;
    // Refuse strangers and older generations now that we know the ring (another tag of this
    // generation keeps its early arrivals: its formation may start in the same tick).
    for (const [k, link] of this.pending) {
      if (k === key) continue;
      const [j, g, t] = k.split('/');
      if (Number(j) === job && (Number(g) < generation || (Number(g) === generation && t === tag))) { link.close(); this.pending.delete(k); }
    }
    const dial = (): FormingLink => {
      const label = `vt/${job}/${generation}${tag ? `/${tag}` : ''}`;
      const conn = this.peer.connect(nextId, {
        label, metadata: { vt: 'ring', job, generation, from: this.id, ...(tag ? { tag } : {}) }, serialization: 'raw', reliable: true,
      });
      if (!conn) throw new RingError('connect-failed', nextId, 'PeerJS could not start a connection (peer destroyed or disconnected from signaling)', this.id);
      return new PeerJsLink(conn, 'dialed');
    };
    const f = new LinkFormation<FormingLink>({
      selfId: this.id, job, generation, nextId, prevId, dial, timeoutMs: o.connectTimeoutMs ?? RING_FORM_TIMEOUT_MS,
      ...(reuse ? { reuseNext: (formation: LinkFormation<FormingLink>) => this.pool.reuseNext(formation, tag) } : {}),
    });
    this.forming.set(fkey, { f, reuse });
    const early = this.pending.get(key);
    this.pending.delete(key);
    if (early) f.offer(early);
    // A REUSE from prev may have come before this formation started.
    if (reuse) this.pool.expectPrev(f, tag);
    try {
      return await f.done;
    } finally {
      if (this.forming.get(fkey)?.f === f) this.forming.delete(fkey);
      this.pool.ended(f);
    }
  }

  /** Leaves the signaling server and closes every connection (call on pagehide). */
  destroy(): void {
    for (const { f } of this.forming.values()) f.cancel(`${this.id} left the signaling server`);
    this.forming.clear();
    for (const r of [...this.rings]) r.close();
    // Kept links too, idle or held by a ring that failed: neighbours notice our exit at once.
    this.pool.closeAll();
    for (const l of this.pending.values()) l.close();
    this.pending.clear();
    for (const { link, timer } of this.earlyAhead.values()) {
      clearTimeout(timer);
      link.close();
    }
    this.earlyAhead.clear();
    this.peer.destroy();
  }
}
