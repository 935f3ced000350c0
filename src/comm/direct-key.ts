// The keys of direct ring links (direct-peer.ts), Node only. Each Node volunteer that accepts
// direct links gets a secret from the coordinator when it joins; a dialer's pre-shared TLS key
// to it is an HMAC of that secret and the dialer's peer id. The listener derives the key of
// whoever dials from the secret alone; a dialer gets it only from the coordinator, and only for
// its successors in a ring (coordinator/direct-links.ts), the same rule signaling keeps for
// WebRTC. So the TLS handshake proves both ends: the dialer is the peer it names, the listener
// holds the secret of the peer the coordinator routed to.
import { createHmac, randomBytes } from 'node:crypto';

/** A listener's secret: 32 random bytes, base64url (DIRECT_KEY in src/protocol/messages.ts). */
export function newDirectSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** The pre-shared key with which `dialer` reaches the holder of `secret`. */
export function directKey(secret: string, dialer: string): Buffer {
  return createHmac('sha256', Buffer.from(secret, 'base64url')).update(`vt-direct/${dialer}`).digest();
}
