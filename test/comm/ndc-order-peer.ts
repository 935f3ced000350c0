// The accepting end of test/comm/ndc-order.test.ts, in a process of its own (a volunteer's
// event loop is its own): takes every connection as a PeerJsLink, and when a connection's ICE
// comes up it keeps its event loop busy for `blockMs` (as a volunteer computing while its ring
// forms), so the channel, DTLS and SCTP come up natively meanwhile and the dialer may already
// send. Reports per connection (by label) whether the numbered frames came in order:
//   {"label":"t3","received":400,"late":0,"lateFrames":[],"first":-1,"around":[]}
// Run: node --import tsx test/comm/ndc-order-peer.ts ID TOKEN PORT BLOCK_MS FRAMES
import type { DataConnectionLike } from '../../src/comm/peerjs-link.ts';
import { PeerJsLink } from '../../src/comm/peerjs-link.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';

const [id, token, port, blockArg, framesArg] = process.argv.slice(2);
const blockMs = Number(blockArg);
const frames = Number(framesArg);
const say = (o: object): void => void process.stdout.write(`${JSON.stringify(o)}\n`);

const Peer = await loadNodePeer();
const peer = new Peer(id!, { host: '127.0.0.1', port: Number(port), path: '/signal', secure: false, token: token!, config: NODE_RTC_CONFIG, debug: 0 });
peer.on('open', () => say({ open: id }));
peer.on('error', (e) => say({ error: e.message }));
peer.on('connection', (conn: DataConnectionLike & { label?: string }) => {
  const label = String(conn.label ?? '?');
  const link = new PeerJsLink(conn, 'accepted');
  const seqs: number[] = [];
  let reported = false;
  const report = (): void => {
    if (reported) return;
    reported = true;
    // A frame is late when one sent after it came before it.
    let newest = -1;
    const late: number[] = [];
    for (const s of seqs) {
      if (s < newest) late.push(s);
      newest = Math.max(newest, s);
    }
    const first = seqs.findIndex((s, i) => s !== i);
    say({
      label, received: seqs.length, late: late.length, lateFrames: late.slice(0, 8), first,
      around: first < 0 ? [] : seqs.slice(Math.max(0, first - 2), first + 4),
    });
  };
  link.listen({
    frame: (f) => {
      seqs.push(new DataView(f.buffer, f.byteOffset, 4).getUint32(0, true));
      if (seqs.length === frames) report();
    },
    drain: () => undefined,
    close: () => report(),
  });
  const pc = conn.peerConnection;
  let blocked = false;
  pc?.addEventListener('iceconnectionstatechange', () => {
    const state = pc.iceConnectionState;
    if (blocked || (state !== 'connected' && state !== 'completed')) return;
    blocked = true;
    const until = performance.now() + blockMs;
    while (performance.now() < until) { /* busy, as a volunteer's compute */ }
  });
});
process.on('SIGTERM', () => {
  peer.destroy();
  process.exit(0);
});
