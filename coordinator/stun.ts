// A STUN binding server (RFC 8489, the part ICE uses) on UDP, and a small client for it. The
// coordinator answers binding requests on UDP at its own port number, so peers on one LAN learn
// an address the others can reach (a server-reflexive candidate) without mDNS, and peers behind
// a NAT learn their public mapping. A binding answer is no larger than its request (no
// amplification) and carries only the sender's own address.
import { createSocket, type Socket } from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';

const MAGIC = 0x2112a442;
const BINDING_REQUEST = 0x0001;
const BINDING_SUCCESS = 0x0101;
const XOR_MAPPED_ADDRESS = 0x0020;
const FINGERPRINT = 0x8028;
const HEADER = 20;

export interface StunAddress { family: 4 | 6; address: string; port: number }

/** True when `msg` is a well-formed STUN binding request (RFC 8489 section 6). */
export function isBindingRequest(msg: Uint8Array): boolean {
  if (msg.length < HEADER || msg.length > 1024) return false;
  const v = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  return v.getUint16(0) === BINDING_REQUEST && v.getUint16(2) === msg.length - HEADER && (v.getUint16(2) & 3) === 0 && v.getUint32(4) === MAGIC;
}

/** A binding request with a fresh transaction id. */
export function bindingRequest(): Uint8Array {
  const m = new Uint8Array(HEADER);
  const v = new DataView(m.buffer);
  v.setUint16(0, BINDING_REQUEST);
  v.setUint16(2, 0);
  v.setUint32(4, MAGIC);
  m.set(randomBytes(12), 8);
  return m;
}

function ipBytes(a: StunAddress): Uint8Array {
  if (a.family === 4) return Uint8Array.from(a.address.split('.').map(Number));
  // Expand IPv6 (with :: and an optional dotted tail) into 16 bytes.
  let text = a.address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const b = dotted[1]!.split('.').map(Number);
    text = `${text.slice(0, dotted.index)}${((b[0]! << 8) | b[1]!).toString(16)}:${((b[2]! << 8) | b[3]!).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, ''];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = new Uint8Array(16);
  groups.forEach((g, i) => { const n = parseInt(g, 16); out[2 * i] = n >> 8; out[2 * i + 1] = n & 255; });
  return out;
}

/** The success answer to `request` telling the sender its address as seen here. */
export function bindingSuccess(request: Uint8Array, from: StunAddress): Uint8Array {
  const ip = ipBytes(from);
  const attrLen = 4 + ip.length;
  const m = new Uint8Array(HEADER + 4 + attrLen + 8);
  const v = new DataView(m.buffer);
  v.setUint16(0, BINDING_SUCCESS);
  v.setUint16(2, m.length - HEADER);
  m.set(request.subarray(4, 20), 4); // magic cookie and transaction id
  let o = HEADER;
  v.setUint16(o, XOR_MAPPED_ADDRESS); v.setUint16(o + 2, attrLen);
  v.setUint8(o + 5, from.family === 4 ? 1 : 2);
  v.setUint16(o + 6, from.port ^ (MAGIC >>> 16));
  const mask = m.subarray(4, 20); // cookie then transaction id: the XOR key for addresses
  for (let i = 0; i < ip.length; i++) m[o + 8 + i] = ip[i]! ^ mask[i]!;
  o += 4 + attrLen;
  v.setUint16(o, FINGERPRINT); v.setUint16(o + 2, 4);
  v.setUint32(o + 4, (crc32(m.subarray(0, o)) ^ 0x5354554e) >>> 0);
  return m;
}

/** The XOR-MAPPED-ADDRESS of a binding success answering `request`; null otherwise. */
export function parseBindingSuccess(msg: Uint8Array, request: Uint8Array): StunAddress | null {
  if (msg.length < HEADER) return null;
  const v = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  if (v.getUint16(0) !== BINDING_SUCCESS || v.getUint32(4) !== MAGIC) return null;
  for (let i = 8; i < 20; i++) if (msg[i] !== request[i]) return null;
  let o = HEADER;
  while (o + 4 <= msg.length) {
    const type = v.getUint16(o), len = v.getUint16(o + 2);
    if (o + 4 + len > msg.length) return null;
    if (type === XOR_MAPPED_ADDRESS && len >= 8) {
      const family = v.getUint8(o + 5) === 1 ? 4 : 6;
      const port = v.getUint16(o + 6) ^ (MAGIC >>> 16);
      const n = family === 4 ? 4 : 16;
      const b = Array.from(msg.subarray(o + 8, o + 8 + n), (x, i) => x ^ msg[4 + i]!);
      const address = family === 4 ? b.join('.') : Array.from({ length: 8 }, (_, i) => ((b[2 * i]! << 8) | b[2 * i + 1]!).toString(16)).join(':');
      return { family, address, port };
    }
    o += 4 + ((len + 3) & ~3);
  }
  return null;
}

let crcTable: Uint32Array | null = null;
function crc32(data: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (const b of data) c = crcTable[(c ^ b) & 255]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export interface StunServer {
  readonly port: number;
  /** Binding requests answered so far. */
  readonly answered: () => number;
  close(): Promise<void>;
}

/**
 * Answers STUN binding requests on UDP `port` at `host` (IPv4 and, for '::' or '0.0.0.0',
 * IPv6 too where the system has it). Everything else that arrives is ignored.
 */
export async function startStunServer(host: string, port: number): Promise<StunServer> {
  const sockets: Socket[] = [];
  let answered = 0;
  const open = (type: 'udp4' | 'udp6', addr: string) => new Promise<Socket>((resolve, reject) => {
    const s = createSocket({ type, ipv6Only: type === 'udp6' });
    s.once('error', reject);
    s.on('message', (msg, rinfo) => {
      if (!isBindingRequest(msg)) return;
      const family = rinfo.family === 'IPv6' ? 6 : 4;
      // An IPv4-mapped IPv6 sender is reported as the IPv4 address it is.
      const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(rinfo.address);
      const from: StunAddress = mapped ? { family: 4, address: mapped[1]!, port: rinfo.port } : { family, address: rinfo.address, port: rinfo.port };
      answered++;
      s.send(bindingSuccess(msg, from), rinfo.port, rinfo.address);
    });
    s.bind(port, addr, () => {
      s.off('error', reject);
      s.on('error', () => undefined); // ICMP unreachable answers to a gone client: nothing to do
      resolve(s);
    });
  });
  const v6 = isIP(host) === 6;
  sockets.push(await open(v6 ? 'udp6' : 'udp4', host === 'localhost' ? '127.0.0.1' : host));
  if (host === '0.0.0.0') await open('udp6', '::').then((s) => sockets.push(s), () => undefined);
  return {
    port,
    answered: () => answered,
    close: () => Promise.all(sockets.map((s) => new Promise<void>((r) => s.close(() => r())))).then(() => undefined),
  };
}

/**
 * Asks the STUN server at host:port for this socket's mapped address; retransmits every 250 ms
 * (RFC 8489 style, bounded) and gives up after `timeoutMs` with null.
 */
export async function stunQuery(host: string, port: number, timeoutMs = 2000): Promise<StunAddress | null> {
  const s = createSocket(isIP(host) === 6 ? 'udp6' : 'udp4');
  const req = bindingRequest();
  try {
    return await new Promise<StunAddress | null>((resolve) => {
      const done = (a: StunAddress | null) => { clearInterval(resend); clearTimeout(timer); resolve(a); };
      s.on('message', (msg) => { const a = parseBindingSuccess(msg, req); if (a) done(a); });
      s.on('error', () => done(null));
      const send = () => s.send(req, port, host);
      const resend = setInterval(send, 250);
      const timer = setTimeout(() => done(null), timeoutMs);
      send();
    });
  } finally {
    s.close();
  }
}
