// The job's TURN relay: Debian's coturn (`turnserver`), started and stopped with the
// coordinator (`npm start -- --turn`). It checks TURN REST API credentials against a shared
// secret (`use-auth-secret`): the coordinator derives a short-lived username/password per
// peer (ice.ts), so no fixed password exists anywhere. The secret and the settings go in a
// config file of mode 0600 (not the command line, which `ps` shows to everyone).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stunQuery } from './stun.ts';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

export const TURNSERVER = '/usr/bin/turnserver';

export class TurnError extends Error {
  readonly kind = 'turn';
  constructor(message: string) {
    super(message);
    this.name = 'TurnError';
  }
}

export interface TurnOptions {
  /** UDP and TCP port of the relay (default 3478, the standard one). */
  port?: number;
  /** Where it listens (default every address); the coordinator's --host when not 0.0.0.0. */
  listen?: string;
  /** UDP ports for relayed traffic (default 49160-49359): open them in a firewall with `port`. */
  relayPorts?: [number, number];
  /** Per-session bandwidth cap in bytes/s (0: none). */
  maxBps?: number;
  /** Called with each line coturn logs about errors (auth failures included). */
  log?: (line: string) => void;
  /** Loopback peers are refused by default (a relay into the coordinator's own machine); tests on one host allow them. */
  allowLoopbackPeers?: boolean;
  /** The path of turnserver (tests). */
  binary?: string;
}

export interface TurnRelay {
  readonly port: number;
  readonly secret: string;
  readonly relayPorts: [number, number];
  /** Lines coturn logged that mention failed authentication, newest last (at most 50). */
  readonly authFailures: string[];
  close(): Promise<void>;
}

/** The coturn configuration file for these options (pure). */
export function turnConfig(o: {
  port: number; listen?: string; relayPorts: [number, number]; secret: string; maxBps: number; pidFile: string; allowLoopbackPeers: boolean;
}): string {
  const lines = [
    `listening-port=${o.port}`,
    ...(o.listen && o.listen !== '0.0.0.0' && o.listen !== '::' ? [`listening-ip=${o.listen}`] : []),
    `min-port=${o.relayPorts[0]}`,
    `max-port=${o.relayPorts[1]}`,
    'use-auth-secret',
    `static-auth-secret=${o.secret}`,
    'realm=volunteer-trainer',
    'fingerprint',
    'no-cli',
    'no-tls',
    'no-dtls',
    'no-multicast-peers',
    ...(o.allowLoopbackPeers ? ['allow-loopback-peers'] : []),
    // Peers are other volunteers' browsers: never relay into "this host" or link-local space.
    'denied-peer-ip=0.0.0.0-0.255.255.255',
    'denied-peer-ip=169.254.0.0-169.254.255.255',
    'user-quota=16',
    'total-quota=1200',
    ...(o.maxBps > 0 ? [`max-bps=${o.maxBps}`] : []),
    'stale-nonce=600',
    'no-software-attribute',
    'log-file=stdout',
    'simple-log',
    `pidfile=${o.pidFile}`,
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * Starts coturn and waits until it answers a STUN binding request on its port (bounded: 10 s).
 * Throws a TurnError saying what to do when turnserver is missing, the port is taken, or it
 * exits at start.
 */
export async function startTurnRelay(o: TurnOptions = {}): Promise<TurnRelay> {
  const binary = o.binary ?? TURNSERVER;
  if (!existsSync(binary)) {
    throw new TurnError(`--turn needs coturn (${binary} not found): run \`npm run setup\` (installs the Debian package coturn) or \`apt-get install coturn\``);
  }
  const port = o.port ?? 3478;
  const relayPorts = o.relayPorts ?? [49160, 49359];
  // coturn binds with SO_REUSEPORT, so a second one would silently share the port (and half
  // the credentials would fail): make sure nobody holds it first.
  const busy = await portBusy(port, o.listen);
  if (busy) throw new TurnError(`coturn could not listen on port ${port} (${busy}: another turnserver?): stop it or pass --turn-port N`);
  const secret = randomBytes(24).toString('base64url');
  const dir = await mkdtemp(join(tmpdir(), 'vt-turn-'));
  const conf = join(dir, 'turnserver.conf');
  const pidFile = join(dir, 'turnserver.pid');
  await writeFile(
    conf,
    turnConfig({ port, listen: o.listen, relayPorts, secret, maxBps: o.maxBps ?? 0, pidFile, allowLoopbackPeers: o.allowLoopbackPeers ?? false }),
    { mode: 0o600 },
  );
  const authFailures: string[] = [];
  const tail: string[] = [];
  const child: ChildProcess = spawn(binary, ['-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let exited: { code: number | null; signal: string | null } | null = null;
  const exitPromise = new Promise<void>((resolve) => child.once('exit', (code, signal) => { exited = { code, signal }; resolve(); }));
  const onData = (buf: Buffer) => {
    for (const line of buf.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      tail.push(line); if (tail.length > 40) tail.shift();
      if (/401|unauthori[sz]ed|wrong (user|password|credentials)|cannot find credentials|check_stun_auth/i.test(line)) {
        authFailures.push(line.trim()); if (authFailures.length > 50) authFailures.shift();
        o.log?.(`turn: ${line.trim()}`);
      } else if (/error|cannot|can't|fail/i.test(line)) o.log?.(`turn: ${line.trim()}`);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const close = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      await Promise.race([exitPromise, new Promise((r) => setTimeout(r, 3000))]);
      if (!exited) child.kill('SIGKILL');
      await Promise.race([exitPromise, new Promise((r) => setTimeout(r, 2000))]);
    }
    await rm(dir, { recursive: true, force: true });
  };
  // Ready when it answers STUN on its port (coturn answers binding requests unauthenticated).
  const deadline = Date.now() + 10_000;
  const probeHost = !o.listen || o.listen === '0.0.0.0' ? '127.0.0.1' : o.listen === '::' ? '::1' : o.listen;
  while (Date.now() < deadline) {
    if (exited) break;
    if (await stunQuery(probeHost, port, 500)) {
      return { port, secret, relayPorts, authFailures, close };
    }
  }
  await close();
  const why = tail.slice(-8).join('\n    ');
  if (/address already in use|cannot bind/i.test(why)) {
    throw new TurnError(`coturn could not listen on port ${port} (in use: another turnserver?): stop it or pass --turn-port N\n    ${why}`);
  }
  throw new TurnError(`coturn did not start on port ${port} within 10 s${exited ? ` (it exited: ${JSON.stringify(exited)})` : ''}; `
    + `its last lines:\n    ${why || '(none)'}`);
}

/** Why UDP or TCP `port` cannot be bound here (null: both free). */
async function portBusy(port: number, listen?: string): Promise<string | null> {
  const host = listen && listen !== '::' ? listen : '0.0.0.0';
  const udp = await new Promise<string | null>((resolve) => {
    const s = createSocket('udp4');
    s.once('error', (e: NodeJS.ErrnoException) => { s.close(); resolve(`UDP: ${e.code ?? e.message}`); });
    s.bind(port, host, () => s.close(() => resolve(null)));
  });
  if (udp) return udp;
  return new Promise<string | null>((resolve) => {
    const srv = createServer();
    srv.once('error', (e: NodeJS.ErrnoException) => resolve(`TCP: ${e.code ?? e.message}`));
    srv.listen(port, host, () => srv.close(() => resolve(null)));
  });
}
