// The test bed itself: hosts reach each other, the NATed host reaches only what it may (and
// appears as the router), a cut host is cut, shaped profiles have their rate and delay, and
// nothing is left behind.
import { execFile } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { Testbed } from '../../testbed/net/bed.ts';
import { PROFILES } from '../../testbed/net/profiles.ts';

const NODE = process.execPath;
const beds: Testbed[] = [];
afterAll(async () => { for (const b of beds) await b.close(); });

/** A TCP server in `host` on port 7000 that answers every connection with its peer's address. */
function echoServer(bed: Testbed, host: string) {
  const code = `require('net').createServer((s)=>{s.end(s.remoteAddress.replace('::ffff:',''))}).listen(7000,()=>console.log('up'))`;
  const p = bed.spawn(host, NODE, ['-e', code]);
  return new Promise<void>((resolve, reject) => {
    p.stdout!.once('data', () => resolve());
    p.once('exit', (c) => reject(new Error(`echo server exited ${c}`)));
  });
}
async function ask(bed: Testbed, from: string, to: string): Promise<string> {
  const code = `const s=require('net').connect(7000,'${bed.host(to).ip}');let d='';s.on('data',(b)=>d+=b);s.on('end',()=>{console.log(d)});` +
    `s.on('error',(e)=>{console.log('ERR '+e.code)});setTimeout(()=>{console.log('TIMEOUT');process.exit(0)},1500)`;
  return (await bed.exec(from, NODE, ['-e', code])).stdout.trim().split('\n')[0]!;
}

describe('test bed', () => {
  it('hosts on a bridge; a NATed host that may reach only coord, and appears there as the router', async () => {
    const bed = await Testbed.create({ hosts: ['coord', 'a', 'b'], nat: { host: 'n', onlyTo: ['coord'] } });
    beds.push(bed);
    // Every address is final once the bed is made (no IPv6 duplicate address detection still to
    // end, which a browser started on the host would take for a network change).
    for (const h of ['coord', 'a', 'b', 'n']) {
      const addrs = (await bed.exec(h, 'ip', ['-6', 'addr'])).stdout;
      expect(addrs, h).toContain('inet6 fe80::');
      expect(addrs, h).not.toContain('tentative');
    }
    await echoServer(bed, 'coord');
    await echoServer(bed, 'b');
    expect(await ask(bed, 'a', 'coord')).toBe(bed.host('a').ip);
    expect(await ask(bed, 'a', 'b')).toBe(bed.host('a').ip);
    expect(await ask(bed, 'n', 'coord')).toBe(bed.natPublicIp);
    expect(await ask(bed, 'n', 'b')).toBe('TIMEOUT');
    for (const h of ['coord', 'a', 'n']) expect((await bed.exec(h, 'ip', ['route'])).stdout).toContain('default via');
    await bed.cut('a');
    expect(await ask(bed, 'a', 'coord')).toMatch(/^ERR|TIMEOUT/);
    await bed.heal('a');
    expect(await ask(bed, 'a', 'coord')).toBe(bed.host('a').ip);
    await bed.close();
    const left = await new Promise<string>((r) => execFile('ip', ['netns', 'list'], (_e, out) => r(String(out))));
    expect(left.includes(bed.id), left).toBe(false);
  }, 60_000);

  it.each(['home', 'wifi'] as const)('the %s profile has its delay and its rate', async (name) => {
    const bed = await Testbed.create({ hosts: ['a', 'b'], profile: name });
    beds.push(bed);
    const p = PROFILES[name];
    // Round trip: a ping of a small packet sees twice the one-way latency. The first ping also
    // resolves the address (ARP: one more round trip) and is not counted; the median of 11 is: a
    // sleeping process here wakes up to ~8 ms late now and then (the machine's timers), which
    // skewed an average of 5 (CI once measured 9.91 ms against the bound of 9.8 for Wi-Fi's 6).
    const warm = await bed.exec('a', 'ping', ['-c', '1', bed.host('b').ip]);
    expect(warm.code, `ping failed (is iputils-ping installed? npm run setup installs it): ${warm.stdout}${warm.stderr}`).toBe(0);
    const ping = (await bed.exec('a', 'ping', ['-c', '11', '-i', '0.05', bed.host('b').ip])).stdout;
    const times = [...ping.matchAll(/time=([\d.]+) ms/g)].map((m) => Number(m[1])).sort((x, y) => x - y);
    expect(times.length, ping).toBeGreaterThanOrEqual(9);
    const avg = times[Math.floor(times.length / 2)]!;
    expect(avg, ping).toBeGreaterThan(2 * p.bound.oneWayMs * 0.9);
    expect(avg, ping).toBeLessThan(2 * p.bound.oneWayMs * 1.3 + 2);
    // Throughput a -> b over TCP for ~3 s: within 15% of the sender's limit.
    const bytes = Math.round(3 * Math.min(p.bound.upBytesPerS, p.bound.sharedBytesPerS || Infinity));
    const recv = bed.spawn('b', NODE, ['-e', `let n=0,t0=0;require('net').createServer((s)=>{s.on('data',(d)=>{if(!t0)t0=Date.now();n+=d.length});` +
      `s.on('end',()=>{console.log(JSON.stringify({n,ms:Date.now()-t0}));process.exit(0)})}).listen(7001,()=>console.log('up'))`]);
    await new Promise((r) => recv.stdout!.once('data', r));
    const out = new Promise<string>((r) => recv.stdout!.once('data', (b: Buffer) => r(b.toString())));
    await bed.exec('a', NODE, ['-e', `const s=require('net').connect(7001,'${bed.host('b').ip}',()=>{const b=Buffer.alloc(${bytes});s.end(b)});`], 60_000);
    const { n, ms } = JSON.parse(await out) as { n: number; ms: number };
    const rate = n / (ms / 1000);
    const limit = p.bound.sharedBytesPerS || p.bound.upBytesPerS;
    console.log(`${name}: ping median ${avg} ms, TCP ${(rate * 8 / 1e6).toFixed(1)} Mbit/s (limit ${(limit * 8 / 1e6).toFixed(0)})`);
    expect(n).toBe(bytes);
    expect(rate).toBeGreaterThan(0.8 * limit);
    expect(rate).toBeLessThan(1.1 * limit);
    await bed.close();
  }, 90_000);
});
