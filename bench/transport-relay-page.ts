// The page of `npm run bench -- transport`'s donor-page link: as the volunteer page does
// (src/ui/donate.ts), the page keeps the real PeerJS Peer and its data channels and relays them
// to a Web Worker over a MessageChannel (src/comm/relay.ts); the worker opens the links and
// streams ring frames (bench/transport-relay-worker.ts). The bench drives it through
// window.vtAsk(command), which resolves with the worker's answer.
import { loadBrowserPeer } from '../src/comm/peerjs-peer.ts';
import { serveRtcRelay } from '../src/comm/relay.ts';
import type { RelayAnswer, RelayCommand } from './transport-relay-worker.ts';

declare global {
  interface Window { vtAsk?: (c: RelayCommand) => Promise<RelayAnswer> }
}

const worker = new Worker(new URL('./transport-relay-worker.ts', import.meta.url), { type: 'module' });
const channel = new MessageChannel();
serveRtcRelay(channel.port1, await loadBrowserPeer());
worker.postMessage({ rtc: channel.port2 }, [channel.port2]);
const waiting = new Map<number, { ok(a: RelayAnswer): void; fail(e: Error): void }>();
let seq = 0;
worker.onmessage = (e: MessageEvent<{ seq: number; answer?: RelayAnswer; error?: string }>) => {
  const w = waiting.get(e.data.seq);
  waiting.delete(e.data.seq);
  if (e.data.error !== undefined) w?.fail(new Error(e.data.error));
  else w?.ok(e.data.answer!);
};
window.vtAsk = (command) => new Promise((ok, fail) => {
  const s = ++seq;
  waiting.set(s, { ok, fail });
  worker.postMessage({ seq: s, command });
});
