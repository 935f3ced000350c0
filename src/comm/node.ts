// Node-only: WebRTC for Node (node-datachannel's polyfill) and a WebSocket for PeerJS, set as
// globals BEFORE peerjs is imported (PeerJS reads them at import and construction time).
import { peerClassOf, type PeerCtor } from './peerjs-peer.ts';

/**
 * RTC configuration for single-host tests and benchmarks ONLY: every peer on loopback. Across
 * hosts a peer bound to 127.0.0.1 never connects (RECIPES.md): real volunteers use nodeRtcConfig.
 */
export const NODE_RTC_CONFIG = { iceServers: [], bindAddress: '127.0.0.1' } as RTCConfiguration;

/**
 * RTC configuration for a Node volunteer on a real network: the job's ICE servers (from the
 * join answer), host candidates on every interface unless `bindAddress` names the one facing
 * the peers. libdatachannel takes TURN credentials inside the URL (turn:user:pass@host), so
 * they are percent-encoded here (TURN REST usernames hold ':' and credentials '/', '+', '=').
 */
export function nodeRtcConfig(iceServers: readonly IceServerLike[], bindAddress?: string): RTCConfiguration {
  const servers = iceServers.map((s) => ({
    urls: [...s.urls],
    ...(s.username !== undefined ? { username: encodeURIComponent(s.username) } : {}),
    ...(s.credential !== undefined ? { credential: encodeURIComponent(s.credential) } : {}),
  }));
  return { iceServers: servers, ...(bindAddress ? { bindAddress } : {}) } as RTCConfiguration;
}

export interface IceServerLike { urls: readonly string[]; username?: string; credential?: string }

let loaded: Promise<PeerCtor> | null = null;

export type SctpSettings = import('node-datachannel').SctpSettings;

/**
 * Loads PeerJS for Node. `sctp` is applied to node-datachannel's SCTP stack (process-wide,
 * before the first connection); only the first call's settings count.
 */
export function loadNodePeer(sctp?: SctpSettings): Promise<PeerCtor> {
  loaded ??= (async () => {
    if (sctp) (await import('node-datachannel')).setSctpSettings(sctp);
    const poly = await import('node-datachannel/polyfill');
    const ws = await import('ws');
    Object.assign(globalThis, {
      RTCPeerConnection: offeringAsDtlsClient(poly.RTCPeerConnection),
      RTCSessionDescription: poly.RTCSessionDescription,
      RTCIceCandidate: poly.RTCIceCandidate,
      WebSocket: BrowserLikeWebSocket(ws.WebSocket),
    });
    return peerClassOf(await import('peerjs'));
  })();
  return loaded;
}

/**
 * Makes the dialing side the DTLS client: our offer says `a=setup:active` instead of
 * `actpass`, so the answerer takes `passive` (DTLS server).
 *
 * Why: by default the answerer is the DTLS client and sends its ClientHello the moment its own
 * ICE is up, which on loopback is before our answer has crossed the signaling server. The
 * offerer (libdatachannel, node-datachannel 0.33) has no DTLS transport yet and drops it; the
 * client retransmits after 1 s, so on an idle machine nearly every link took ~1 s to open.
 * Worse, when the answer and the handshake land together, libdatachannel checks the peer's
 * certificate before it has stored the answer's fingerprint ("DTLS alert: unknown CA ...
 * certificate verify failed"): the PeerConnection goes to `failed` on both sides and PeerJS,
 * which only watches ICE, never closes the DataConnection, so formation hung until its
 * timeout (2-3 rings in 40 on a loaded machine).
 * As client the offerer starts the handshake once its ICE is up, i.e. while applying the
 * answer, so no 1 s retransmit: links open in 10-30 ms. The same fingerprint race still fails
 * about 1 attempt in 4 here, at once and visibly (`failed` state), and PeerJsLink reports it
 * and connectLinks re-dials (MAX_DIALS): measured 0 failures in 120 rings, median 25 ms.
 *
 * Only the SDP we send changes: libdatachannel ignores the SDP given to setLocalDescription
 * and takes its role from the answer's `a=setup` (RFC 8842 section 5); PeerJS sends `type`
 * and `sdp` of what createOffer returns as JSON. A browser answering this offer answers
 * `passive` in the same way.
 */
export function offerAsDtlsClient(sdp: string): string {
  return sdp.replace(/^a=setup:actpass\r?$/gm, (line) => line.replace('actpass', 'active'));
}

type PolyfillPeerConnection = typeof import('node-datachannel/polyfill').RTCPeerConnection;

function offeringAsDtlsClient(Base: PolyfillPeerConnection): PolyfillPeerConnection {
  return class extends Base {
    override async createOffer(): Promise<RTCSessionDescriptionInit> {
      const offer = await super.createOffer();
      return { type: offer.type, sdp: offerAsDtlsClient(offer.sdp ?? '') };
    }
  };
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
