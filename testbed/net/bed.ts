// A multi-host test bed: hosts are network namespaces on one LAN, each with its own address and
// a default route (Chromium gathers no ICE candidates without one). The LAN is a kernel bridge
// in its own namespace, or (for shaped links, linkemu.py) a userspace switch that delays and
// rate-limits frames, because this kernel has no netem. Optionally one host sits behind a NAT
// router namespace (iptables MASQUERADE) that lets it reach only the hosts named in `onlyTo`:
// the others it can reach only through a TURN relay on one of those.
//
//   const bed = await Testbed.create({ hosts: ['coord', 'a', 'b'], nat: { host: 'n', onlyTo: ['coord'] } });
//   bed.host('a').ip; bed.spawn('a', 'node', [...]); await bed.exec('a', 'ip', ['addr']);
//   await bed.cut('b'); await bed.close();
//
// Traffic stays inside these namespaces. Everything made here is removed by close(), on
// process exit and signals, and (leftovers of a crashed run, by pid) at the next create().
import { execFile, execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PROFILES, type ProfileName } from './profiles.ts';

export interface BedHost {
  readonly name: string;
  /** The namespace (`ip netns exec <ns> ...`). */
  readonly ns: string;
  /** Its address (the NATed host: its private address). */
  readonly ip: string;
}

export interface TestbedOptions {
  hosts: string[];
  /** One more host behind a NAT router; it may reach only the hosts in `onlyTo` (all when absent). */
  nat?: { host: string; onlyTo?: string[] };
  /** Shape the LAN with a link profile (profiles.ts) through the userspace switch; none: a plain kernel bridge. */
  profile?: ProfileName;
}

export class TestbedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TestbedError';
  }
}

const PREFIX = 'vtb';
const HERE = dirname(fileURLToPath(import.meta.url));
let instances = 0;
const live = new Set<Testbed>();

function run(cmd: string, args: string[], timeoutMs = 15_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

async function must(cmd: string, args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new TestbedError(`${cmd} ${args.join(' ')} failed (${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

/** Fails with what is missing when namespaces cannot be made here. */
export async function checkCapabilities(): Promise<void> {
  if (process.getuid?.() !== 0) {
    throw new TestbedError('the multi-host test bed needs root (network namespaces, veth, iptables): run the tests as root, as CI does');
  }
  for (const bin of ['/usr/sbin/ip', '/usr/sbin/iptables']) {
    if (!existsSync(bin)) throw new TestbedError(`the multi-host test bed needs ${bin}: run \`npm run setup\` (installs iproute2 and iptables)`);
  }
  const probe = `${PREFIX}${process.pid}probe`;
  const r = await run('ip', ['netns', 'add', probe]);
  if (r.code !== 0) {
    throw new TestbedError(`cannot make a network namespace here (${r.stderr.trim()}): `
      + 'the multi-host tests need root with CAP_SYS_ADMIN and CAP_NET_ADMIN');
  }
  await run('ip', ['netns', 'del', probe]);
}

/** Removes namespaces left by test-bed processes that no longer exist. */
async function removeLeftovers(): Promise<void> {
  const list = (await run('ip', ['netns', 'list'])).stdout;
  for (const line of list.split('\n')) {
    const m = new RegExp(`^(${PREFIX}(\\d+)-\\d+-\\S+)`).exec(line.trim());
    if (!m) continue;
    const pid = Number(m[2]);
    let alive = true;
    try { process.kill(pid, 0); } catch { alive = false; }
    if (!alive || pid === process.pid && ![...live].some((b) => b.owns(m[1]!))) await run('ip', ['netns', 'del', m[1]!]);
  }
}

function cleanupAllSync(): void {
  for (const bed of live) bed.closeSync();
}
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', cleanupAllSync);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => { cleanupAllSync(); process.exit(130); });
  }
}

export class Testbed {
  private readonly hosts = new Map<string, BedHost>();
  private readonly namespaces: string[] = [];
  private readonly children = new Set<ChildProcess>();
  /** host name -> its port on the LAN side (in the lan namespace). */
  private readonly ports = new Map<string, string>();
  private switchProc: ChildProcess | null = null;
  private closed = false;
  private readonly tmp: string;
  /** Frames the userspace switch dropped (queue full) and forwarded so far (shaped profiles). */
  switchStats = { dropped: 0, forwarded: 0 };
  /** The NAT router's address on the LAN (what others see as the NATed host's source). */
  natPublicIp: string | null = null;

  private constructor(readonly id: string, readonly subnet: number) {
    this.tmp = mkdtempSync(join(tmpdir(), `${id}-`));
  }

  owns(ns: string): boolean {
    return this.namespaces.includes(ns);
  }

  static async create(o: TestbedOptions): Promise<Testbed> {
    await checkCapabilities();
    await removeLeftovers();
    hookExit();
    const n = instances++;
    const bed = new Testbed(`${PREFIX}${process.pid}-${n}`, 100 + ((process.pid + n * 37) % 150));
    live.add(bed);
    try {
      await bed.build(o);
    } catch (e) {
      await bed.close();
      throw e;
    }
    return bed;
  }

  /**
   * Sets the LAN's MTU (every host's eth0, the switch's ports and bridge): 9000 is a LAN with
   * jumbo frames. Kernel-bridge beds only (the userspace switch reads 1500-byte frames).
   */
  async setMtu(mtu: number): Promise<void> {
    const lan = this.nsName('lan');
    for (const [host, port] of this.ports) {
      await must('ip', ['-n', lan, 'link', 'set', port, 'mtu', String(mtu)]);
      const ns = host === 'router' ? this.nsName('router') : this.host(host).ns;
      await must('ip', ['-n', ns, 'link', 'set', 'eth0', 'mtu', String(mtu)]);
    }
    await must('ip', ['-n', lan, 'link', 'set', 'br0', 'mtu', String(mtu)]);
  }

  private nsName(host: string): string {
    return `${this.id}-${host}`;
  }

  private async addNs(name: string): Promise<string> {
    const ns = this.nsName(name);
    await must('ip', ['netns', 'add', ns]);
    this.namespaces.push(ns);
    // Interfaces that come into this namespace get their IPv6 link-local address at once instead
    // of 'tentative' for the 1-2 s of duplicate address detection: the address change that
    // detection ends with would reach a browser already started on the host, and Chromium takes
    // it for a network change and fails its loads with net::ERR_NETWORK_CHANGED (seen once, in
    // the multihost test's first page load). No two hosts of a test bed share a link-local address.
    await must('ip', ['netns', 'exec', ns, 'sysctl', '-qw', 'net.ipv6.conf.all.accept_dad=0', 'net.ipv6.conf.default.accept_dad=0']);
    await must('ip', ['-n', ns, 'link', 'set', 'lo', 'up']);
    return ns;
  }

  /** A veth pair with one end in `a` (named aName) and the other in `b` (named bName). */
  private async veth(a: string, aName: string, b: string, bName: string): Promise<void> {
    const tag = `${process.pid % 100000}${this.namespaces.length}`;
    const x = `vx${tag}`, y = `vy${tag}`;
    await must('ip', ['link', 'add', x, 'type', 'veth', 'peer', 'name', y]);
    await must('ip', ['link', 'set', x, 'netns', a]);
    await must('ip', ['link', 'set', y, 'netns', b]);
    await must('ip', ['-n', a, 'link', 'set', x, 'name', aName]);
    await must('ip', ['-n', b, 'link', 'set', y, 'name', bName]);
    await must('ip', ['-n', a, 'link', 'set', aName, 'up']);
    await must('ip', ['-n', b, 'link', 'set', bName, 'up']);
  }

  private async build(o: TestbedOptions): Promise<void> {
    const net = `10.${this.subnet}.0`;
    const lan = await this.addNs('lan');
    const shaped = o.profile !== undefined && PROFILES[o.profile].emulated;
    if (!shaped) {
      await must('ip', ['-n', lan, 'link', 'add', 'br0', 'type', 'bridge']);
      await must('ip', ['-n', lan, 'link', 'set', 'br0', 'up']);
      await must('ip', ['-n', lan, 'addr', 'add', `${net}.254/24`, 'dev', 'br0']);
    }
    const attach = async (host: string, ns: string, ip: string, gw: string) => {
      const port = `p${this.ports.size}`;
      await this.veth(ns, 'eth0', lan, port);
      this.ports.set(host, port);
      await must('ip', ['-n', ns, 'addr', 'add', `${ip}/24`, 'dev', 'eth0']);
      await must('ip', ['-n', ns, 'route', 'add', 'default', 'via', gw]);
      if (!shaped) await must('ip', ['-n', lan, 'link', 'set', port, 'master', 'br0']);
      else await this.offloadsOff(ns, 'eth0', lan, port);
    };
    let k = 1;
    for (const name of o.hosts) {
      const ns = await this.addNs(name);
      const ip = `${net}.${k++}`;
      await attach(name, ns, ip, `${net}.254`);
      this.hosts.set(name, { name, ns, ip });
    }
    if (o.nat) {
      const rt = await this.addNs('router');
      const pub = `${net}.200`;
      await attach('router', rt, pub, `${net}.254`);
      this.natPublicIp = pub;
      const priv = `192.168.${this.subnet}`;
      const ns = await this.addNs(o.nat.host);
      await this.veth(ns, 'eth0', rt, 'eth1');
      await must('ip', ['-n', rt, 'addr', 'add', `${priv}.1/24`, 'dev', 'eth1']);
      await must('ip', ['-n', ns, 'addr', 'add', `${priv}.2/24`, 'dev', 'eth0']);
      await must('ip', ['-n', ns, 'route', 'add', 'default', 'via', `${priv}.1`]);
      const ipt = (...args: string[]) => must('ip', ['netns', 'exec', rt, 'iptables', ...args]);
      await must('ip', ['netns', 'exec', rt, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
      await ipt('-t', 'nat', '-A', 'POSTROUTING', '-o', 'eth0', '-j', 'MASQUERADE');
      await ipt('-A', 'FORWARD', '-m', 'conntrack', '--ctstate', 'ESTABLISHED,RELATED', '-j', 'ACCEPT');
      if (o.nat.onlyTo) {
        for (const t of o.nat.onlyTo) await ipt('-A', 'FORWARD', '-i', 'eth1', '-d', this.host(t).ip, '-j', 'ACCEPT');
        await ipt('-A', 'FORWARD', '-i', 'eth1', '-j', 'DROP');
      }
      await ipt('-A', 'FORWARD', '-i', 'eth0', '-o', 'eth1', '-j', 'DROP');
      this.hosts.set(o.nat.host, { name: o.nat.host, ns, ip: `${priv}.2` });
    }
    if (shaped) await this.startSwitch(o.profile!);
    else if (o.profile === 'lan') {
      for (const h of this.hosts.values()) {
        await must('ip', ['netns', 'exec', h.ns, 'tc', 'qdisc', 'add', 'dev', 'eth0', 'root', 'tbf', 'rate', '1gbit', 'burst', '512kb', 'latency', '10ms']);
      }
    }
  }

  /** The userspace switch sees frames as sent: no segmentation offloads on its links. */
  private async offloadsOff(ns: string, dev: string, lan: string, port: string): Promise<void> {
    if (!existsSync('/usr/sbin/ethtool')) throw new TestbedError('shaped links need ethtool (to turn off segmentation offloads): run `npm run setup`');
    for (const [n, d] of [[ns, dev], [lan, port]] as const) {
      await run('ip', ['netns', 'exec', n, 'ethtool', '-K', d, 'tso', 'off', 'gso', 'off', 'gro', 'off', 'tx', 'off', 'rx', 'off']);
    }
  }

  private async startSwitch(profile: ProfileName): Promise<void> {
    const p = PROFILES[profile];
    const config = { ports: [...this.ports.values()], ...p.switch };
    const proc = spawn('ip', ['netns', 'exec', this.nsName('lan'), 'python3', join(HERE, 'linkemu.py'), JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'pipe'], detached: true,
    });
    this.switchProc = proc;
    this.children.add(proc);
    const ready = await new Promise<string | null>((resolve) => {
      const t = setTimeout(() => resolve('no "ready" from linkemu.py within 10 s'), 10_000);
      proc.stdout?.on('data', (b: Buffer) => {
        for (const line of b.toString().split('\n')) {
          if (line.startsWith('ready')) { clearTimeout(t); resolve(null); }
          if (line.startsWith('{')) this.switchStats = JSON.parse(line) as { dropped: number; forwarded: number };
        }
      });
      let err = '';
      proc.stderr?.on('data', (b: Buffer) => { err += b.toString(); });
      proc.once('exit', (c) => { clearTimeout(t); resolve(`linkemu.py exited (${c}): ${err.trim()}`); });
    });
    if (ready) throw new TestbedError(ready);
  }

  host(name: string): BedHost {
    const h = this.hosts.get(name);
    if (!h) throw new TestbedError(`no host "${name}" in this test bed (hosts: ${[...this.hosts.keys()].join(', ')})`);
    return h;
  }

  /** Runs a command inside a host (its own process group, killed at close). */
  spawn(host: string, cmd: string, args: readonly string[], opts: SpawnOptions = {}): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', this.host(host).ns, cmd, ...args], { stdio: 'pipe', ...opts, detached: true });
    this.children.add(child);
    child.once('exit', () => this.children.delete(child));
    return child;
  }

  exec(host: string, cmd: string, args: readonly string[], timeoutMs = 15_000): Promise<{ code: number; stdout: string; stderr: string }> {
    return run('ip', ['netns', 'exec', this.host(host).ns, cmd, ...args], timeoutMs);
  }

  /** Cuts a host off the LAN (its link goes down): what a pulled cable or a dead Wi-Fi does. */
  async cut(host: string): Promise<void> {
    await must('ip', ['-n', this.host(host).ns, 'link', 'set', 'eth0', 'down']);
  }

  async heal(host: string): Promise<void> {
    const h = this.host(host);
    await must('ip', ['-n', h.ns, 'link', 'set', 'eth0', 'up']);
    const gw = h.ip.startsWith('192.168.') ? h.ip.replace(/\.\d+$/, '.1') : `10.${this.subnet}.0.254`;
    await run('ip', ['-n', h.ns, 'route', 'add', 'default', 'via', gw]);
  }

  /**
   * Drops every packet between hosts `a` and `b` (both ways, in both namespaces), while each still
   * reaches every other host: a link cut between two hosts only (a broken switch port, a firewall
   * rule). The rules go with the namespaces.
   */
  async partition(a: string, b: string): Promise<void> {
    for (const [self, other] of [[a, b], [b, a]] as const) {
      const ns = this.host(self).ns, ip = this.host(other).ip;
      await must('ip', ['netns', 'exec', ns, 'iptables', '-w', '-I', 'INPUT', '-s', ip, '-j', 'DROP']);
      await must('ip', ['netns', 'exec', ns, 'iptables', '-w', '-I', 'OUTPUT', '-d', ip, '-j', 'DROP']);
    }
  }

  /** An executable that runs Chromium inside `host` (playwright-core's executablePath). */
  chromiumIn(host: string, chromium = '/usr/bin/chromium'): string {
    const path = join(this.tmp, `chromium-${host}.sh`);
    writeFileSync(path, `#!/bin/sh\nexec ip netns exec ${this.host(host).ns} ${chromium} "$@"\n`);
    chmodSync(path, 0o755);
    return path;
  }

  /** Kills what was spawned and removes every namespace (idempotent). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closeSync();
  }

  closeSync(): void {
    if (this.closed) return;
    this.closed = true;
    live.delete(this);
    for (const c of this.children) {
      try { if (c.pid) process.kill(-c.pid, 'SIGKILL'); } catch { /* already gone */ }
    }
    for (const ns of this.namespaces.reverse()) {
      try { execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore', timeout: 10_000 }); } catch { /* gone already */ }
    }
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
