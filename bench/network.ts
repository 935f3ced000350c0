// `npm run bench -- network`: rings of 2-4 Node peers, EACH ON ITS OWN HOST (a network
// namespace of the test bed, testbed/net/bed.ts), under the link profiles lan, wifi and home
// (testbed/net/profiles.ts), measured against the ring all-reduce bound of the same profile:
//   per-host links: 2(N-1) steps x (bytes/N / min(up, down) + one-way latency)
//   shared Wi-Fi medium: 2(N-1) steps x (bytes / medium rate + one-way latency) (a step moves
//   every peer's chunk through the one medium)
// plus the time to form a ring across hosts and the communication share of a small-CNN step.
// The peers link as Node volunteers do between each other: direct links (TLS over TCP,
// src/comm/direct-peer.ts) by default; `--links=webrtc` measures their WebRTC links instead.
// Then the multi-host scenario (bench/network-scenario.ts): does a peer behind a NAT train
// through TURN, and does a page opened by LAN address over HTTPS on another host get WebGPU.
// Writes bench/results/network.json and network.svg; the LAST line is the JSON summary.
import { createInterface } from 'node:readline';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../coordinator/local-volunteers.ts';
import { DirectBook } from '../coordinator/direct-links.ts';
import { Testbed } from '../testbed/net/bed.ts';
import { PROFILES, allReduceBoundMs, type ProfileName } from '../testbed/net/profiles.ts';
import type { NetFromPeer, NetToPeer } from './network-peer.ts';
import { runNetworkScenario, type ScenarioResult } from './network-scenario.ts';
import { LineProc as GenericLineProc } from './line-proc.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { median } from './timing.ts';

const here = dirname(fileURLToPath(import.meta.url));
const MAX_N = Number(process.env.VT_MAXN ?? 4);
/** 1M floats (4 MB): about 5 s on home at N = 4, long enough that start-up noise is small. */
const ELEMS = 1 << 20;
const REPS = Number(process.env.VT_REPS ?? 3);
const TSX = ['--import', 'tsx', '--import', './scripts/raw-loader.mjs'];

/** A network-peer.ts process in a host. */
class LineProc extends GenericLineProc<NetToPeer, NetFromPeer> {}

interface Case {
  profile: ProfileName; n: number; bytes: number; measuredMs: number; times: number[];
  /** From the profile's nominal rates and latency (profiles.ts): no protocol overhead counted (IP/UDP/DTLS/SCTP headers take 7-10% here). */
  boundMs: number; efficiency: number;
  /** Frames the emulated links dropped / forwarded so far in this profile's test bed (queue overflow). */
  switch: { dropped: number; forwarded: number };
}

type Links = 'direct' | 'webrtc';

async function measureProfile(
  profile: ProfileName, gen: { next: number }, links: Links,
): Promise<{ cases: Case[]; formMs: number[]; smallCnn: Record<number, number> }> {
  const hosts = Array.from({ length: MAX_N }, (_, i) => `h${i + 1}`);
  const bed = await Testbed.create({ hosts: ['coord', ...hosts], profile });
  try {
    const sig = bed.spawn('coord', process.execPath, [...TSX, join(here, 'network-signal.ts'), String(MAX_N)], { cwd: ROOT });
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: sig.stdout! }).once('line', resolve);
      sig.once('exit', (c) => reject(new Error(`signaling exited (${c})`)));
    });
    const { port, issued } = JSON.parse(first) as { port: number; issued: { id: string; token: string }[] };
    const server = { host: bed.host('coord').ip, port, path: '/signal' };
    const peers = hosts.map((h) => new LineProc(h, bed.spawn(h, process.execPath, [...TSX, join(here, 'network-peer.ts')], { cwd: ROOT })));
    // Direct links: each peer listens, the coordinator's own book makes the secrets and routes.
    const book = new DirectBook();
    const secrets = links === 'direct' ? await Promise.all(peers.map(async (p, i) => {
      const r = await p.ask({ type: 'listen-direct' });
      if (r.type !== 'listening') throw new Error(`listen-direct: ${r.type}`);
      return book.register(issued[i]!.id, bed.host(hosts[i]!).ip, r.port);
    })) : [];
    await Promise.all(peers.map((p, i) => p.ask({ type: 'open', ...issued[i]!, server, ...(secrets[i] ? { directSecret: secrets[i] } : {}) })));
    const cases: Case[] = [];
    const formMs: number[] = [];
    const smallCnn: Record<number, number> = {};
    for (let n = 2; n <= MAX_N; n++) {
      const ring = peers.slice(0, n);
      const ids = issued.slice(0, n).map((x) => x.id);
      const generation = gen.next++;
      const formed = await Promise.all(ring.map((p, i) => p.ask({
        type: 'ring', ids, job: 1, generation, ...(links === 'direct' ? { routes: book.routesFor(issued[i]!.id, ids) ?? {} } : {}),
      })));
      formMs.push(Math.max(...formed.map((f) => (f.type === 'formed' ? f.ms : 0))));
      const round = async (elems: number, step: number) => {
        const done = await Promise.all(ring.map((p) => p.ask({ type: 'go', elems, step, wire: 'f32' }, 120_000)));
        return Math.max(...done.map((d) => (d.type === 'done' ? d.ms : 0)));
      };
      let step = 0;
      await round(ELEMS >> 2, step++); // warm-up: JIT, SCTP windows
      const times: number[] = [];
      for (let r = 0; r < REPS; r++) times.push(await round(ELEMS, step++));
      const boundMs = allReduceBoundMs(PROFILES[profile], n, 4 * ELEMS);
      const measuredMs = median(times);
      cases.push({ profile, n, bytes: 4 * ELEMS, measuredMs, times, boundMs, efficiency: boundMs / measuredMs, switch: { ...bed.switchStats } });
      console.error(`${profile} N=${n}: all-reduce ${measuredMs.toFixed(0)} ms, bound ${boundMs.toFixed(0)} ms `
        + `-> efficiency ${(boundMs / measuredMs).toFixed(3)}; ring formed in ${formMs.at(-1)!.toFixed(0)} ms`);
      const cnn: number[] = [];
      for (let r = 0; r < REPS; r++) cnn.push(await round(SMALL_CNN_FLOATS, step++));
      smallCnn[n] = median(cnn);
      await Promise.all(ring.map((p) => p.ask({ type: 'close-ring' })));
    }
    for (const p of peers) p.child.stdin!.write(`${JSON.stringify({ type: 'exit' })}\n`);
    sig.stdin!.end();
    return { cases, formMs, smallCnn };
  } finally {
    await bed.close();
  }
}

/** Parameters of the small CNN on CIFAR-10 (the default job): its gradient is what a step sends. */
const SMALL_CNN_FLOATS = await (async () => {
  const { modelByName } = await import('../src/nn/models.ts');
  const { layoutOf } = await import('../src/nn/layout.ts');
  return layoutOf(modelByName('small-cnn', [3, 32, 32], 10)).paramFloats;
})();

export async function main(args: string[]): Promise<void> {
  const t0 = performance.now();
  // Compute per step for the communication share: --compute-ms=N, default 160 ms (batch 32 at the
  // ~200 images/s one local volunteer reaches on this machine with wasm, docs/running.md), not measured here.
  const computeMs = Number(args.find((a) => a.startsWith('--compute-ms='))?.slice(13) ?? 160);
  if (!(computeMs > 0)) throw new Error('--compute-ms=N wants a positive number of milliseconds');
  const gen = { next: 1 };
  // --profiles=home,wifi and --no-scenario run a part (for investigating one profile).
  const only = args.find((a) => a.startsWith('--profiles='))?.slice(11).split(',') as ProfileName[] | undefined;
  const profiles: ProfileName[] = only ?? ['lan', 'wifi', 'home'];
  for (const p of profiles) if (!(p in PROFILES)) throw new Error(`--profiles: unknown profile "${p}" (lan, wifi, home)`);
  const links = (args.find((a) => a.startsWith('--links='))?.slice(8) ?? 'direct') as Links;
  if (links !== 'direct' && links !== 'webrtc') throw new Error(`--links must be direct or webrtc; got "${String(links)}"`);
  const all: Case[] = [];
  const form: Record<string, number[]> = {};
  const cnn: Record<string, Record<number, number>> = {};
  for (const p of profiles) {
    const r = await measureProfile(p, gen, links);
    all.push(...r.cases);
    form[p] = r.formMs;
    cnn[p] = r.smallCnn;
  }
  const scenario: ScenarioResult = args.includes('--no-scenario')
    ? { hosts: 0, natRelayed: false, lanPageWebGpu: null, lanPageNote: 'skipped (--no-scenario)', ringFormMs: null, steps: 0 }
    : await runNetworkScenario();
  const at = (p: ProfileName) => all.find((x) => x.profile === p && x.n === MAX_N);
  const eff = (p: ProfileName) => { const c = at(p); return c ? +c.efficiency.toFixed(3) : null; };
  // The step's communication share for the small CNN at N = 4: all-reduce / (compute + all-reduce).
  const share = Object.fromEntries(profiles.map((p) => [p, +(cnn[p]![MAX_N]! / (computeMs + cnn[p]![MAX_N]!)).toFixed(3)]));
  const result = {
    setup: {
      hostsPerRing: `2-${MAX_N}`, links, bytes: 4 * ELEMS, reps: REPS, wire: 'f32', smallCnnFloats: SMALL_CNN_FLOATS, computeMsPerStep: computeMs,
      seconds: (performance.now() - t0) / 1000, profiles: PROFILES,
    },
    cases: all, ringFormMs: form, smallCnnAllReduceMs: cnn, commShareSmallCnn: share, scenario,
  };
  writeFileEnsuringDir(join(here, 'results', 'network.json'), JSON.stringify(result, null, 2));
  writeFileEnsuringDir(join(here, 'results', 'network.svg'), barChartSvg({
    title: 'Ring all-reduce of 4 MB across hosts (namespaces) per link profile: measured vs bound',
    yLabel: 'seconds',
    categories: all.map((c) => `${c.profile} N=${c.n}`),
    series: [
      { name: 'measured', values: all.map((c) => c.measuredMs / 1000) },
      { name: 'bound 2(N-1)(bytes/N / rate + latency)', values: all.map((c) => c.boundMs / 1000) },
    ],
  }));
  const formAll = Object.values(form).flat();
  console.log(JSON.stringify({
    bench: 'network', links, hosts: Math.max(MAX_N + 1, scenario.hosts), nat_relayed: scenario.natRelayed, lan_page_webgpu: scenario.lanPageWebGpu,
    ring_form_ms: +median(formAll).toFixed(1), efficiency_wifi: eff('wifi'), efficiency_home: eff('home'), efficiency_lan: eff('lan'),
    comm_share_small_cnn: share, scenario_ring_form_ms: scenario.ringFormMs,
  }));
}
