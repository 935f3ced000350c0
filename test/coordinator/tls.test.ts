// HTTPS for the coordinator: a local CA made once (key 0600) and a server certificate for every
// address, renewed near expiry or when the addresses change; --cert/--key checked; a real TLS
// coordinator answers HTTPS and WebSocket upgrades for a client trusting the CA, serves the
// CA certificate, redirects plain HTTP; the headless volunteer refuses a wrong fingerprint.
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { request } from 'node:https';
import { statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { certFiles, ensureLocalCa, localTls, namesOf, normalizeFingerprint, renewalReason, resolveTls, serverNames, TlsError } from '../../coordinator/tls.ts';
import { buildTestData, startTestJob, tempRoot, testJob, type TestJob } from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
beforeAll(async () => { root = await tempRoot('tls'); });
afterAll(async () => root?.remove());

const names = { ips: ['127.0.0.1', '::1', '10.77.0.1'], dns: ['localhost', 'labpc', 'labpc.local'] };

describe('local CA and server certificate', () => {
  it('makes the CA once, keeps its key private, and covers every address', async () => {
    const dir = join(root.dir, 'ca1');
    const a = await localTls(dir, { names });
    const b = await localTls(dir, { names });
    expect(b.ca!.sha256).toBe(a.ca!.sha256);
    expect(b.cert).toBe(a.cert); // still good: not issued again
    expect(statSync(join(dir, 'ca.key')).mode & 0o777).toBe(0o600);
    expect(namesOf(a.cert).ips.sort()).toEqual([...names.ips].sort());
    expect(namesOf(a.cert).dns.sort()).toEqual([...names.dns].sort());
    const x = new X509Certificate(a.cert);
    expect(x.verify(new X509Certificate(a.ca!.pem).publicKey)).toBe(true);
    expect(x.ca).toBe(false);
    expect(new X509Certificate(a.ca!.pem).ca).toBe(true);
    // New addresses (the machine moved): a new server certificate from the same CA.
    const moved = await localTls(dir, { names: { ...names, ips: ['127.0.0.1', '::1', '192.168.5.9'] } });
    expect(moved.ca!.sha256).toBe(a.ca!.sha256);
    expect(namesOf(moved.cert).ips).toContain('192.168.5.9');
  });
  it('renews before expiry and when addresses change (pure)', () => {
    const now = new Date('2026-11-23T00:00:00Z');
    const day = 86_400_000;
    expect(renewalReason(null, names, now)).toMatch(/none/);
    expect(renewalReason({ validTo: new Date(now.getTime() + 60 * day), names }, names, now)).toBeNull();
    expect(renewalReason({ validTo: new Date(now.getTime() + 10 * day), names }, names, now)).toMatch(/expires in 10 days/);
    expect(renewalReason({ validTo: new Date(now.getTime() + 60 * day), names }, { ...names, ips: ['127.0.0.1'] }, now)).toMatch(/addresses changed/);
  });
  it('lists loopback, LAN addresses and the .local name', () => {
    expect(serverNames(['10.0.0.5'], 'pc1')).toEqual({ ips: ['127.0.0.1', '::1', '10.0.0.5'], dns: ['localhost', 'pc1', 'pc1.local'] });
  });
  it('refuses half a CA instead of replacing it', async () => {
    const dir = join(root.dir, 'half');
    await ensureLocalCa(dir);
    await writeFile(join(dir, 'ca.crt'), 'not a cert');
    await expect(ensureLocalCa(dir)).rejects.toThrow(/not a certificate/);
  });
  it('checks --cert and --key', async () => {
    const a = await localTls(join(root.dir, 'ca2'), { names });
    const b = await localTls(join(root.dir, 'ca3'), { names });
    await writeFile(join(root.dir, 'a.crt'), a.cert);
    await writeFile(join(root.dir, 'b.key'), b.key);
    await writeFile(join(root.dir, 'a.key'), a.key);
    await expect(certFiles(join(root.dir, 'a.crt'), join(root.dir, 'b.key'))).rejects.toThrow(/does not belong/);
    await expect(certFiles(join(root.dir, 'a.key'), join(root.dir, 'a.key'))).rejects.toThrow(/not a PEM certificate/);
    await expect(certFiles(join(root.dir, 'nope.crt'), join(root.dir, 'a.key'))).rejects.toThrow(/cannot read/);
    expect((await certFiles(join(root.dir, 'a.crt'), join(root.dir, 'a.key'))).cert).toBe(a.cert);
    await expect(resolveTls({ cert: 'x' }, '0.0.0.0')).rejects.toBeInstanceOf(TlsError);
    expect(await resolveTls(undefined, '127.0.0.1')).toBeNull();
    expect(normalizeFingerprint('ab'.repeat(32))).toBe(Array(32).fill('AB').join(':'));
    expect(normalizeFingerprint('xyz')).toBeNull();
  });
});

describe('a coordinator over TLS', () => {
  let job: TestJob;
  let ca: string;
  beforeAll(async () => {
    const data = await buildTestData(root.dir);
    // Loopback listens plain by default; a lab coordinator (beyond loopback) gets TLS: force it.
    job = await startTestJob(root.dir, 'tlsjob', data, testJob(4), { tls: { mode: 'on', dir: join(root.dir, 'coord-tls') } });
    ca = job.tls!.ca!.pem;
  });
  afterAll(async () => job?.close());

  it('serves HTTPS and the session WebSocket to a client that trusts the CA', async () => {
    expect(job.url).toMatch(/^https:\/\/127\.0\.0\.1:/);
    const body = await new Promise<string>((resolve, reject) => {
      request(`${job.url}/api/job`, { ca }, (res) => {
        let t = '';
        res.on('data', (c) => { t += c; });
        res.on('end', () => resolve(t));
      }).on('error', reject).end();
    });
    expect(JSON.parse(body)).toMatchObject({ job: { name: 'test' } });
    // Without the CA: refused.
    await expect(
      new Promise((resolve, reject) => request(`${job.url}/api/job`, (res) => resolve(res.statusCode)).on('error', reject).end()),
    ).rejects.toThrow(/self.signed|unable to verify|certificate/i);
    const caBody = await new Promise<string>((resolve, reject) => {
      request(`${job.url}/ca.crt`, { ca }, (res) => {
        let t = '';
        res.on('data', (c) => { t += c; });
        res.on('end', () => resolve(t));
      }).on('error', reject).end();
    });
    expect(caBody).toBe(ca);
    expect(caBody).not.toMatch(/PRIVATE KEY/);
    const ws = new WebSocket(`${job.url.replace('https', 'wss')}/signal/peerjs?id=x&token=y&key=peerjs`, { ca });
    const opened = await new Promise<string>((resolve) => {
      ws.on('open', () => resolve('open'));
      ws.on('unexpected-response', (_q, r) => resolve(`http ${r.statusCode}`));
      ws.on('error', (e) => resolve(`error ${e.message}`));
    });
    ws.close();
    expect(opened).not.toMatch(/^error/); // the TLS handshake and HTTP upgrade went through (signaling may refuse the id)
  });

  it('redirects plain HTTP on the same port to https://', async () => {
    const port = new URL(job.url).port;
    const res = await new Promise<{ status?: number; location?: string }>((resolve, reject) => {
      httpRequest(`http://127.0.0.1:${port}/some/page?x=1`, (r) => {
        r.resume();
        resolve({ status: r.statusCode, location: r.headers.location });
      }).on('error', reject).end();
    });
    expect(res).toEqual({ status: 308, location: `https://127.0.0.1:${port}/some/page?x=1` });
  });

  it('the headless volunteer refuses a CA whose fingerprint is not the one given', async () => {
    const child = spawn(
      process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'src/client/node-cli.ts', '--url', job.url, '--ca-sha256', 'AB'.repeat(32)],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let err = '';
    child.stderr.on('data', (b: Buffer) => { err += b.toString(); });
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code).not.toBe(0);
    expect(err).toMatch(/offers a CA with SHA-256 .* not AB:AB/);
  }, 60_000);
});
