// HTTPS for the coordinator, so that browsers on other machines get WebGPU: a page from
// http://10.0.0.5:8080 is not a secure context (no navigator.gpu, no SharedArrayBuffer); only
// https:// (or localhost) is. Either a real certificate (--cert/--key), or a local certificate
// authority made once and kept in the settings folder (.cache/tls: CA key mode 0600, never
// served) that signs a server certificate for every LAN address and name of this machine,
// renewed before it expires or when the machine's addresses change. People trust the CA once
// per device (docs/networks.md: "HTTPS and WebGPU on other machines"); `openssl` makes the keys and
// certificates (Node has no X.509 writer).
import { execFile } from 'node:child_process';
import { X509Certificate, createPrivateKey, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { isIP } from 'node:net';
import { lanAddresses } from './addresses.ts';
import { DEFAULT_TLS_DIR, extraCaFile, normalizeFingerprint } from '../src/client/ca-files.ts';

export { DEFAULT_TLS_DIR, extraCaFile, normalizeFingerprint };

export class TlsError extends Error {
  readonly kind = 'tls';
  constructor(message: string) {
    super(message);
    this.name = 'TlsError';
  }
}

export interface TlsMaterial {
  key: string;
  cert: string;
  /** The local CA (absent with --cert/--key). */
  ca?: { certPath: string; pem: string; sha256: string };
  /** The names and addresses the server certificate covers. */
  names: ServerNames;
  /** When the server certificate expires. */
  validTo: Date;
}

export interface ServerNames { ips: string[]; dns: string[] }

export const CA_CERT = 'ca.crt';
export const CA_KEY = 'ca.key';
const SERVER_CERT = 'server.crt';
const SERVER_KEY = 'server.key';
const DAY = 86_400_000;
/** A server certificate lives this long and is renewed when fewer than RENEW_DAYS remain. */
export const SERVER_DAYS = 90;
export const RENEW_DAYS = 30;

function openssl(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('openssl', args, { timeout: 30_000 }, (err, _out, stderr) => {
      if (!err) return resolve();
      const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
      reject(new TlsError(missing
        ? 'HTTPS with a local certificate authority needs the openssl command: run `npm run setup` (installs Debian\'s openssl), or pass --cert FILE --key FILE'
        : `openssl ${args[0]} failed: ${String(stderr).trim() || err.message}`));
    });
  });
}

/** SHA-256 fingerprint as openssl prints it (AB:CD:...). */
export function fingerprintOf(pem: string): string {
  return new X509Certificate(pem).fingerprint256;
}


/** Every name and address this machine can be reached by (with loopback). */
export function serverNames(addrs: string[] = lanAddresses(), name = hostname()): ServerNames {
  const ips = [...new Set(['127.0.0.1', '::1', ...addrs])];
  const dns = ['localhost'];
  if (/^[A-Za-z0-9-]{1,63}$/.test(name)) dns.push(name, `${name}.local`);
  return { ips, dns };
}

const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

/** Why a server certificate must be made again (null: it is good). Pure. */
export function renewalReason(cert: { validTo: Date; names: ServerNames } | null, wanted: ServerNames, now: Date): string | null {
  if (!cert) return 'there is none yet';
  const left = (cert.validTo.getTime() - now.getTime()) / DAY;
  if (left < RENEW_DAYS) return `it expires in ${Math.max(0, Math.floor(left))} days`;
  if (!sameSet(cert.names.ips, wanted.ips) || !sameSet(cert.names.dns, wanted.dns)) return `this machine's addresses changed (now ${wanted.ips.join(', ')})`;
  return null;
}

/** The names and addresses in a certificate's subjectAltName. */
export function namesOf(pem: string): ServerNames {
  const san = new X509Certificate(pem).subjectAltName ?? '';
  const ips: string[] = [];
  const dns: string[] = [];
  for (const part of san.split(/,\s*/)) {
    const [k, ...v] = part.split(':');
    const value = v.join(':');
    if (k === 'IP Address') ips.push(normalizeIp(value));
    else if (k === 'DNS') dns.push(value);
  }
  return { ips, dns };
}


/** openssl prints IPv6 in full (0:0:...:1); compare addresses in one form. */
function normalizeIp(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}

/** The local CA in `dir`, made when the folder has none. Never replaces a CA half there. */
export async function ensureLocalCa(dir: string): Promise<{ certPath: string; keyPath: string; pem: string; sha256: string }> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const certPath = join(dir, CA_CERT);
  const keyPath = join(dir, CA_KEY);
  const hasCert = existsSync(certPath), hasKey = existsSync(keyPath);
  if (hasCert !== hasKey) {
    throw new TlsError(`${dir} holds ${hasCert ? CA_CERT : CA_KEY} without ${hasCert ? CA_KEY : CA_CERT}: the local CA is incomplete. `
      + 'Restore the missing file, or move the folder away to make a new CA (devices that trusted the old one must then trust the new one)');
  }
  if (!hasCert) {
    const work = join(dir, `.new-ca-${randomBytes(4).toString('hex')}`);
    await mkdir(work, { mode: 0o700 });
    try {
      const name = hostname().replace(/[^A-Za-z0-9 .-]/g, '').slice(0, 40) || 'this machine';
      await openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(work, CA_KEY),
        '-out', join(work, CA_CERT),
        '-days', '3650', '-subj', `/CN=volunteer-trainer local CA (${name})/O=volunteer-trainer`,
        '-addext', 'basicConstraints=critical,CA:TRUE,pathlen:0', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
      await chmod(join(work, CA_KEY), 0o600);
      // The key first: a crash between the two renames leaves a key without a cert, which the
      // check above reports instead of silently replacing.
      await rename(join(work, CA_KEY), keyPath);
      await rename(join(work, CA_CERT), certPath);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }
  await chmod(keyPath, 0o600);
  const pem = await readFile(certPath, 'utf8');
  let sha256: string;
  try {
    sha256 = fingerprintOf(pem);
  } catch {
    throw new TlsError(`${certPath} is not a certificate: restore it, or move ${dir} away to make a new CA`);
  }
  return { certPath, keyPath, pem, sha256 };
}

/** A server certificate signed by the CA for `names`, valid SERVER_DAYS. */
async function issueServerCert(dir: string, caCert: string, caKey: string, names: ServerNames): Promise<void> {
  const work = join(dir, `.new-server-${randomBytes(4).toString('hex')}`);
  await mkdir(work, { mode: 0o700 });
  try {
    const san = [...names.ips.map((ip) => `IP:${ip}`), ...names.dns.map((d) => `DNS:${d}`)].join(',');
    await writeFile(
      join(work, 'ext.cnf'),
      `subjectAltName=${san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n`,
    );
    await openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(work, SERVER_KEY),
      '-out', join(work, 'server.csr'), '-subj', '/CN=volunteer-trainer coordinator']);
    await openssl(['x509', '-req', '-in', join(work, 'server.csr'), '-CA', caCert, '-CAkey', caKey, '-set_serial', `0x${randomBytes(16).toString('hex')}`,
      '-days', String(SERVER_DAYS), '-extfile', join(work, 'ext.cnf'), '-out', join(work, SERVER_CERT)]);
    await chmod(join(work, SERVER_KEY), 0o600);
    await rename(join(work, SERVER_KEY), join(dir, SERVER_KEY));
    await rename(join(work, SERVER_CERT), join(dir, SERVER_CERT));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function readServerCert(dir: string): Promise<{ cert: string; key: string; validTo: Date; names: ServerNames } | null> {
  try {
    const cert = await readFile(join(dir, SERVER_CERT), 'utf8');
    const key = await readFile(join(dir, SERVER_KEY), 'utf8');
    const x = new X509Certificate(cert);
    if (!x.checkPrivateKey(createPrivateKey(key))) return null;
    return { cert, key, validTo: new Date(x.validTo), names: namesOf(cert) };
  } catch {
    return null; // missing or unreadable: issued again
  }
}

/**
 * The local CA and a current server certificate for this machine's names (issued again when
 * missing, near expiry or when the addresses changed). `log` hears about each new one.
 */
export async function localTls(dir: string, o: { names?: ServerNames; now?: Date; log?: (l: string) => void } = {}): Promise<TlsMaterial> {
  const ca = await ensureLocalCa(dir);
  const names = o.names ?? serverNames();
  let current = await readServerCert(dir);
  const why = renewalReason(current, names, o.now ?? new Date());
  if (why) {
    await issueServerCert(dir, ca.certPath, ca.keyPath, names);
    current = await readServerCert(dir);
    if (!current) throw new TlsError(`the server certificate made in ${dir} does not load: move ${join(dir, SERVER_CERT)} away and start again`);
    o.log?.(`tls: a new server certificate (${why}) for ${[...names.ips, ...names.dns].join(', ')}, valid until ${current.validTo.toISOString().slice(0, 10)}`);
  }
  return { key: current!.key, cert: current!.cert, ca: { certPath: ca.certPath, pem: ca.pem, sha256: ca.sha256 }, names, validTo: current!.validTo };
}

/** A real certificate and key (--cert/--key), checked to belong together. */
export async function certFiles(certPath: string, keyPath: string): Promise<TlsMaterial> {
  const read = async (p: string, what: string) => {
    try {
      return await readFile(p, 'utf8');
    } catch (e) {
      throw new TlsError(`cannot read the ${what} ${p}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
    }
  };
  const cert = await read(certPath, 'certificate (--cert)');
  const key = await read(keyPath, 'private key (--key)');
  let x: X509Certificate;
  try {
    x = new X509Certificate(cert);
  } catch {
    throw new TlsError(`--cert ${certPath} is not a PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  let k;
  try {
    k = createPrivateKey(key);
  } catch {
    throw new TlsError(`--key ${keyPath} is not a PEM private key (or it is encrypted: give an unencrypted key)`);
  }
  if (!x.checkPrivateKey(k)) throw new TlsError(`--key ${keyPath} does not belong to --cert ${certPath}: give the key the certificate was issued for`);
  if (new Date(x.validTo).getTime() < Date.now()) throw new TlsError(`--cert ${certPath} expired on ${x.validTo}: renew it`);
  return { key, cert, names: namesOf(cert), validTo: new Date(x.validTo) };
}



export interface TlsOption {
  /** auto (default): HTTPS whenever the coordinator listens beyond loopback, or --cert is given; on: also on loopback; off: plain HTTP. */
  mode?: 'auto' | 'on' | 'off';
  /** The local CA's folder (default .cache/tls). */
  dir?: string;
  cert?: string;
  key?: string;
}

export const isLoopback = (host: string): boolean => host === 'localhost' || host === '::1' || /^127\./.test(host);

/** What the coordinator serves TLS with for `host`, or null for plain HTTP. */
export async function resolveTls(o: TlsOption | undefined, host: string, log?: (l: string) => void): Promise<TlsMaterial | null> {
  if ((o?.cert === undefined) !== (o?.key === undefined)) {
    throw new TlsError('--cert and --key go together: give both (the certificate and its private key), or neither for the local CA');
  }
  if (o?.cert && o.key) return certFiles(o.cert, o.key);
  if (o?.mode === 'off' || (isLoopback(host) && o?.mode !== 'on')) return null;
  return localTls(o?.dir ?? DEFAULT_TLS_DIR, { log });
}
