// The session sockets (SESSION_PATH in src/protocol/messages.ts): one WebSocket per joined peer,
// authenticated by the (peer id, token) that POST /api/join issued. Each text message is one
// PeerMessage, decoded at the boundary: a malformed one gets an ErrorMessage back with the
// reason and changes nothing; a peer that keeps sending bad or oversized messages is cut off.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { refuseSocket, requestUrl } from './http.ts';
import { RateLimiter } from './rate-limit.ts';
import { MAX_MESSAGE_BYTES, SESSION_PATH, type CoordinatorMessage, type ErrorMessage, type PeerMessage } from '../src/protocol/messages.ts';
import { decodePeerMessage } from '../src/protocol/decode.ts';
import { describe, parseJsonText } from '../src/protocol/fields.ts';
import { ShapeSender } from '../src/client/ring-shape.ts';

export interface SessionHandlers {
  /** Whether (id, token) was issued by a join and may open a session. */
  authenticate(id: string, token: string): boolean;
  opened(id: string): void;
  message(id: string, m: PeerMessage): void;
  closed(id: string, reason: string): void;
}

export interface SessionServer {
  /** Takes the upgrade if it is for the session path; returns whether it did. */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean;
  /** Sends to a peer's open session; false when it has none. */
  send(id: string, m: CoordinatorMessage): boolean;
  /** Closes a peer's session (it gets the reason in the close frame). */
  close(id: string, reason: string): void;
  readonly open: number;
  closeAll(): void;
}

/** Bad messages tolerated per session before it is closed (a confused peer, or a flood). */
const MAX_BAD = 20;
/**
 * Unsolicited messages (heartbeats, leaves, stray or malformed ones) a session may send. The
 * answers the coordinator asked for (a step result per assignment, an evaluation per request,
 * a ready per load) do not count: a fast honest peer on a tiny model answers 50 steps a second.
 */
const SESSION_RATE = { perSecond: 20, burst: 100 };
/** Coordinator messages that ask for one answer, and the answers. */
const REQUESTS: ReadonlySet<string> = new Set(['step-assignment', 'evaluate', 'load-state']);
const ANSWERS: ReadonlySet<string> = new Set(['step-result', 'collective-failure', 'eval-result', 'ready']);
/** Answers owed to a session at most (more requests unanswered than this is not a state the driver reaches). */
const MAX_OWED = 8;
/**
 * Claims of a step's tail (tail-pool.ts) are asked for too: an assignment with `steal` invites
 * one, and so does every non-empty grant (the claim that follows it). Such claims do not count
 * against the rate either: a fast peer on a tiny model claims several times a step.
 */
const invitesClaim = (m: CoordinatorMessage): boolean =>
  (m.type === 'step-assignment' && m.steal !== undefined) || (m.type === 'grant' && m.ids.length > 0 && m.last !== true);

export function createSessionServer(h: SessionHandlers): SessionServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  const live = new Map<string, WebSocket>();
  /** Per session: answers the coordinator has asked for and not yet received. */
  const owed = new Map<string, number>();
  /** Per session: claims the coordinator has invited and not yet received. */
  const invited = new Map<string, number>();
  /** Per session: the last ring it was sent (assignments and prepares carry an edit of it). */
  const shapes = new Map<string, ShapeSender>();

  const reply = (ws: WebSocket, e: ErrorMessage) => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(e));
  };

  function attach(id: string, ws: WebSocket): void {
    live.set(id, ws);
    shapes.set(id, new ShapeSender());
    let bad = 0;
    const rate = new RateLimiter(SESSION_RATE, 1);
    const strike = (e: ErrorMessage) => {
      reply(ws, e);
      if (++bad >= MAX_BAD) ws.close(1008, 'too many malformed messages');
    };
    ws.on('message', (data: RawData, isBinary: boolean) => {
      const parsed = isBinary ? null : parseJsonText(data.toString());
      const d = parsed === null ? null : parsed.ok ? decodePeerMessage(parsed.value) : parsed;
      const due = owed.get(id) ?? 0;
      const claims = invited.get(id) ?? 0;
      if (d?.ok && ANSWERS.has(d.value.type) && due > 0) owed.set(id, due - 1);
      else if (d?.ok && d.value.type === 'claim' && claims > 0) invited.set(id, claims - 1);
      else if (!rate.take(id)) {
        ws.close(1008, 'flooding: too many messages');
        return;
      }
      if (d === null) return strike({ type: 'error', kind: 'unsupported-media-type', message: 'session messages are JSON text, not binary' });
      if (!d.ok) return strike({ type: 'error', kind: d.error.kind === 'too-large' ? 'too-large' : 'bad-request', message: describe(d.error).slice(0, 900) });
      const m = d.value;
      if (m.type === 'join') return strike({ type: 'error', kind: 'bad-request', message: 'join with POST /api/join, not over the session' });
      if (m.peerId !== id) {
        return strike({ type: 'error', kind: 'forbidden', message: `this session belongs to ${id}; a message for ${m.peerId.slice(0, 64)} is refused` });
      }
      h.message(id, m);
    });
    // On a protocol error (an oversized or invalid frame) ws has already sent the close frame
    // with its code (1009, 1007...): let that reach the peer, ws ends the socket within its
    // close timeout. Terminating at once could drop the frame (the peer saw 1006, no reason).
    ws.on('error', () => { if (ws.readyState !== ws.CLOSING) ws.terminate(); });
    ws.on('close', (code: number, reason: Buffer) => {
      if (live.get(id) !== ws) return;
      live.delete(id);
      owed.delete(id);
      invited.delete(id);
      shapes.delete(id);
      h.closed(id, `session closed (${code}${reason.length ? ` ${reason.toString().slice(0, 200)}` : ''})`);
    });
    h.opened(id);
  }

  return {
    get open() {
      return live.size;
    },
    handleUpgrade(req, socket, head) {
      const url = requestUrl(req);
      if (url.pathname !== SESSION_PATH) return false;
      const id = url.searchParams.get('peer') ?? '';
      const token = url.searchParams.get('token') ?? '';
      if (!h.authenticate(id, token)) {
        refuseSocket(socket, '403 Forbidden', 'unknown peer or wrong token: join with POST /api/join first');
        return true;
      }
      if (live.has(id)) {
        refuseSocket(socket, '409 Conflict', 'this peer already has a session');
        return true;
      }
      wss.handleUpgrade(req, socket, head, (ws) => attach(id, ws));
      return true;
    },
    send(id, m) {
      const ws = live.get(id);
      if (!ws || ws.readyState !== ws.OPEN) return false;
      if (REQUESTS.has(m.type)) owed.set(id, Math.min(MAX_OWED, (owed.get(id) ?? 0) + 1));
      if (invitesClaim(m)) invited.set(id, Math.min(MAX_OWED, (invited.get(id) ?? 0) + 1));
      const shape = shapes.get(id);
      ws.send(shape && (m.type === 'step-assignment' || m.type === 'prepare') ? shape.encode(m) : JSON.stringify(m));
      return true;
    },
    close(id, reason) {
      const ws = live.get(id);
      if (ws) ws.close(1000, reason.slice(0, 120));
    },
    closeAll() {
      for (const ws of live.values()) ws.terminate();
      live.clear();
      wss.close();
    },
  };
}
