// Test page: one browser peer of a ring. The same src/comm code as Node, over Chromium's
// RTCDataChannel. Every page generates all peers' inputs (deterministic seeds) so it can check
// its own result against the float64 sum without shipping megabytes through playwright.
import { allReduceSum, loadBrowserPeer, openEndpoint } from '../../../src/comm/index.ts';
import { randomGrad, sum64, worstError } from '../helpers.ts';

export interface RunArgs {
  id: string;
  token: string;
  ids: string[];
  signalPort: number;
  length: number;
}
export interface RunResult {
  hash: number;
  worstRel: number;
  worstIndex: number;
  changed: boolean;
  ms: number;
}

declare global {
  interface Window {
    runRing(a: RunArgs): Promise<RunResult>;
    ready: boolean;
  }
}

/** FNV-1a over the float bits: equal hashes on all pages stand for bitwise-equal results. */
function hashBits(a: Float32Array): number {
  const u = new Uint32Array(a.buffer, a.byteOffset, a.length);
  let h = 0x811c9dc5;
  for (let i = 0; i < u.length; i++) h = Math.imul(h ^ u[i], 0x01000193) >>> 0;
  return h;
}

window.runRing = async (a: RunArgs): Promise<RunResult> => {
  const Peer = await loadBrowserPeer();
  const ep = await openEndpoint({
    Peer, id: a.id, token: a.token, server: { host: '127.0.0.1', port: a.signalPort, path: '/signal' }, rtcConfig: { iceServers: [] },
  });
  addEventListener('pagehide', () => ep.destroy());
  // The inputs first: generating them blocks the page's main thread (no heartbeats), which must
  // not happen while a ring is up. A loaded CI machine can still stall a page, or its loopback
  // data channel, for many seconds (seen: 15-25 s with 3 pages on 2 cores): this test is about
  // the sum, so a neighbour counts as dead only after a minute.
  const inputs = a.ids.map((_, i) => randomGrad(a.length, 500 + i));
  const ring = await ep.formRing({ ids: a.ids, job: 3, generation: 1, settings: { deadAfterMs: 60_000 } });
  const mine = inputs[ring.rank].slice();
  const t0 = performance.now();
  await allReduceSum(mine, { ring, step: 0 });
  const ms = performance.now() - t0;
  const err = worstError(mine, sum64(inputs), inputs);
  const changed = mine.some((v, i) => v !== inputs[ring.rank][i]);
  return { hash: hashBits(mine), worstRel: err.rel, worstIndex: err.index, changed, ms };
};
window.ready = true;
