// The worker of the donor-page link of `npm run bench -- transport` (bench/transport-relay-page.ts):
// PeerJS through the page's relay (src/comm/relay.ts), the endpoint and its links as the
// volunteer's worker opens them (src/client/worker.ts: relayPeerClass, no ICE servers on a LAN),
// and ring frames streamed one way (bench/transport-stream.ts).
import { openEndpoint, type PeerEndpoint } from '../src/comm/index.ts';
import { relayPeerClass, type PortLike } from '../src/comm/relay.ts';
import { LinkStream } from './transport-stream.ts';

export type RelayCommand =
  | { type: 'open'; id: string; token: string; server: { host: string; port: number; path: string } }
  | { type: 'links'; ids: string[]; job: number }
  | { type: 'recv'; bytes: number }
  | { type: 'send'; bytes: number; msg: number };
export type RelayAnswer = { type: 'ready' } | { type: 'moved'; bytes: number; ms: number };

let Peer: ReturnType<typeof relayPeerClass> | null = null;
let endpoint: PeerEndpoint | null = null;
let stream: LinkStream | null = null;

async function handle(c: RelayCommand): Promise<RelayAnswer> {
  switch (c.type) {
    case 'open':
      if (!Peer) throw new Error('open before the relay port came');
      endpoint = await openEndpoint({ Peer, id: c.id, token: c.token, server: c.server, rtcConfig: { iceServers: [] } });
      return { type: 'ready' };
    case 'links':
      if (!endpoint) throw new Error('links before open');
      stream = new LinkStream(await endpoint.connectLinks({ ids: c.ids, job: c.job, generation: 1, connectTimeoutMs: 20_000 }));
      return { type: 'ready' };
    case 'recv':
      if (!stream) throw new Error('recv before links');
      return { type: 'moved', ...(await stream.recv(c.bytes)) };
    case 'send': {
      if (!stream) throw new Error('send before links');
      const r = await stream.send(c.bytes, c.msg);
      return { type: 'moved', bytes: c.bytes, ms: r.ms };
    }
  }
}

self.onmessage = (e: MessageEvent<{ rtc?: PortLike; seq?: number; command?: RelayCommand }>) => {
  if (e.data.rtc) {
    Peer = relayPeerClass(e.data.rtc);
    return;
  }
  const seq = e.data.seq!;
  handle(e.data.command!).then(
    (answer) => self.postMessage({ seq, answer }),
    (err: unknown) => self.postMessage({ seq, error: err instanceof Error ? err.message : String(err) }),
  );
};
