// Node-only: WebRTC for Node (node-datachannel's polyfill) and a WebSocket for PeerJS, set as
// globals BEFORE peerjs is imported (PeerJS reads them at import and construction time).
import type { PeerCtor } from './peer-endpoint.ts';
import { peerClassOf } from './peer-endpoint.ts';

/** RTC configuration for Node peers on one machine or a LAN without STUN/TURN. */
export const NODE_RTC_CONFIG = { iceServers: [], bindAddress: '127.0.0.1' } as RTCConfiguration;

let loaded: Promise<PeerCtor> | null = null;

export function loadNodePeer(): Promise<PeerCtor> {
  loaded ??= (async () => {
    const poly = await import('node-datachannel/polyfill');
    const ws = await import('ws');
    Object.assign(globalThis, {
      RTCPeerConnection: poly.RTCPeerConnection,
      RTCSessionDescription: poly.RTCSessionDescription,
      RTCIceCandidate: poly.RTCIceCandidate,
      WebSocket: BrowserLikeWebSocket(ws.WebSocket),
    });
    return peerClassOf(await import('peerjs'));
  })();
  return loaded;
}

/**
 * `ws` throws an 'error' event nobody listens to (PeerJS only sets onclose/onmessage), which
 * kills the process on e.g. a 403 from the signaling server. A browser WebSocket fires 'error'
 * and then 'close', and PeerJS turns that close into a Peer 'error' event that openEndpoint
 * reports: give `ws` the same behaviour by ending the socket on error, so 'close' follows.
 */
function BrowserLikeWebSocket(Base: typeof import('ws').WebSocket): unknown {
  return class extends Base {
    constructor(...args: ConstructorParameters<typeof Base>) {
      super(...args);
      this.on('error', () => this.terminate());
    }
  };
}
