// Formation's hedge (src/comm/link-formation.ts): a dial whose ICE is up but whose channel stays
// shut (libdatachannel drops an early DTLS ClientHello and resends it only after 1 s) is closed
// and dialed again once it is HEDGE_FACTOR times its ICE time late (at least HEDGE_MIN_MS), at
// most MAX_HEDGES times; a dial that opens in time, or one whose ICE state is unknown, is left
// alone.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HEDGE_FACTOR, HEDGE_MIN_MS, LinkFormation, MAX_HEDGES, type FormingLink } from '../../src/comm/link-formation.ts';

/** A dial or an incoming attempt whose ICE and channel the test opens by hand. */
class HandLink implements FormingLink {
  readonly remoteId: string;
  closed = false;
  readonly opened: Promise<void>;
  readonly iceConnected?: Promise<void>;
  openChannel: () => void = () => undefined;
  upIce: () => void = () => undefined;
  private failOpen: (e: Error) => void = () => undefined;
  constructor(remoteId: string, withIce: boolean) {
    this.remoteId = remoteId;
    this.opened = new Promise<void>((resolve, reject) => {
      this.openChannel = resolve;
      this.failOpen = reject;
    });
    this.opened.catch(() => undefined);
    if (withIce) this.iceConnected = new Promise<void>((resolve) => { this.upIce = resolve; });
  }
  get bufferedAmount(): number { return 0; }
  setLowWater(): void {}
  send(): void {}
  listen(): void {}
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.failOpen(new Error('closed locally'));
  }
}

/** A formation whose dials are HandLinks (kept in `dials`), with an incoming link from prev already open. */
function forming(withIce = true) {
  const dials: HandLink[] = [];
  const f = new LinkFormation<HandLink>({
    selfId: 'me', job: 1, generation: 1, nextId: 'n', prevId: 'p', timeoutMs: 60_000,
    dial: () => {
      const l = new HandLink('n', withIce);
      dials.push(l);
      return l;
    },
  });
  const incoming = new HandLink('p', false);
  incoming.openChannel();
  f.offer(incoming);
  return { f, dials };
}

const flush = async () => { for (let i = 0; i < 5; i++) await Promise.resolve(); };

describe('a dial whose channel stays shut after its ICE is up', () => {
  afterEach(() => vi.useRealTimers());

  it('is closed and dialed again HEDGE_FACTOR times its ICE time later; the new dial forms the ring', async () => {
    vi.useFakeTimers();
    const { f, dials } = forming();
    expect(dials).toHaveLength(1);
    vi.advanceTimersByTime(200); // ICE takes 200 ms: the hedge comes 400 ms after it
    dials[0]!.upIce();
    await flush();
    vi.advanceTimersByTime(HEDGE_FACTOR * 200 - 1);
    await flush();
    expect(dials[0]!.closed, 'not yet').toBe(false);
    vi.advanceTimersByTime(2);
    await flush();
    expect(dials[0]!.closed).toBe(true);
    expect(dials).toHaveLength(2);
    dials[1]!.upIce();
    dials[1]!.openChannel();
    const links = await f.done;
    expect(links.next).toBe(dials[1]);
    expect(links.attempts.dials).toBe(2);
  });

  it('waits at least HEDGE_MIN_MS after a fast ICE', async () => {
    vi.useFakeTimers();
    const { dials } = forming();
    dials[0]!.upIce();
    await flush();
    vi.advanceTimersByTime(HEDGE_MIN_MS - 1);
    await flush();
    expect(dials[0]!.closed).toBe(false);
    vi.advanceTimersByTime(2);
    await flush();
    expect(dials[0]!.closed).toBe(true);
  });

  it(`hedges at most ${MAX_HEDGES} times, then waits for the dial as before`, async () => {
    vi.useFakeTimers();
    const { f, dials } = forming();
    for (let i = 0; i <= MAX_HEDGES; i++) {
      dials[i]!.upIce();
      await flush();
      vi.advanceTimersByTime(10 * HEDGE_MIN_MS);
      await flush();
    }
    expect(dials).toHaveLength(MAX_HEDGES + 1);
    expect(dials[MAX_HEDGES]!.closed, 'the last dial is left to open late').toBe(false);
    dials[MAX_HEDGES]!.openChannel();
    expect((await f.done).attempts.dials).toBe(MAX_HEDGES + 1);
  });

  it('a dial that opens in time is not hedged', async () => {
    vi.useFakeTimers();
    const { f, dials } = forming();
    dials[0]!.upIce();
    await flush();
    vi.advanceTimersByTime(HEDGE_MIN_MS / 2);
    dials[0]!.openChannel();
    const links = await f.done;
    vi.advanceTimersByTime(10 * HEDGE_MIN_MS);
    await flush();
    expect(links.next).toBe(dials[0]);
    expect(dials[0]!.closed).toBe(false);
    expect(dials).toHaveLength(1);
  });

  it('a dial whose ICE state is unknown (a page-relayed link) is never hedged', async () => {
    vi.useFakeTimers();
    const { dials } = forming(false);
    vi.advanceTimersByTime(30_000);
    await flush();
    expect(dials).toHaveLength(1);
    expect(dials[0]!.closed).toBe(false);
  });
});
