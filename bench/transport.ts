// `npm run bench -- transport`: what the all-reduce's links cost, against kernel TCP on the same
// link and cores. Two test-bed hosts (network namespaces, testbed/net/bed.ts, profile `lan`: a
// 1 Gbit/s tbf each way per host), one sending peer per host, each pinned to its own core
// (taskset: a on core 0, b on core 1), `--mb` MB (default 200) sent one way:
//   - kernel TCP: Node `net`, 64 KiB writes with back-pressure (the physical anchor);
//   - the links Node volunteers open (bench/transport-peer.ts), each carrying ring frames of 64 KiB
//     through the Link interface: between two Node volunteers a direct link (TLS 1.2 with a
//     pre-shared key over TCP, src/comm/direct-peer.ts; routes and keys from the coordinator's
//     DirectBook), which is `node_*`; and WebRTC (PeerJS signaling on a third host,
//     node-datachannel), what a Node volunteer uses towards a browser, `node_webrtc_*`;
//   - a bare Chromium data channel between a page on each host: browser defaults, 64 KiB
//     messages, no project code (bench/transport-page.ts); CPU of every process of the host;
//   - the link as a donor page opens it: the page relays WebRTC to its worker, which opens the
//     links and streams ring frames (bench/transport-relay-page.ts, served by vite on a third host);
//   - then a ring all-reduce of `--allreduce-mb` MB (default 100, float32 on the wire) across 2
//     and 3 hosts (bench/network-peer.ts), against the line-rate bound of the lan profile: over
//     direct links (`allreduce_lan_eff_*`) and over WebRTC (`allreduce_lan_eff_*_webrtc`).
// Each side's CPU-seconds per GB moved: process.cpuUsage for Node peers (all their threads), the
// host's processes from /proc for Chromium. The wire's bytes per image (bytes_per_image_*) are
// counted, not timed: what each peer sends per image of its slice for ResNet-50 at 224 px in its
// recipe's batch (32,768) over 64 peers, frames included (allReduceSentBytes: the same count the
// volunteers report), bf16 against the int8 wire (src/protocol/codec.ts; its effect on training:
// `npm run bench -- wire`). Writes bench/results/transport.json and transport.svg; the LAST line is the JSON.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from '../coordinator/local-volunteers.ts';
import { DirectBook } from '../coordinator/direct-links.ts';
import { IMAGENET_RECIPES } from '../coordinator/recipes.ts';
import { allReduceSentBytes } from '../src/comm/allreduce.ts';
import type { WireFormat } from '../src/protocol/frames.ts';
import { modelByName } from '../src/nn/models.ts';
import { parameterCount } from './step-models.ts';
import { Testbed } from '../testbed/net/bed.ts';
import { launchChromiumIn } from '../testbed/net/browser.ts';
import { PROFILES, allReduceBoundMs } from '../testbed/net/profiles.ts';
import { LineProc } from './line-proc.ts';
import type { NetFromPeer, NetToPeer } from './network-peer.ts';
import { barChartSvg, writeFileEnsuringDir } from './plot.ts';
import { median } from './timing.ts';
import { connectPages, pageStream } from './transport-page.ts';
import type { RelayCommand } from './transport-relay-worker.ts';
import type { Page } from 'playwright-core';
import type { TransportFromPeer, TransportToPeer } from './transport-peer.ts';

const here = dirname(fileURLToPath(import.meta.url));

/** The mission's model in its recipe (coordinator/recipes.ts) over 64 peers: the wire's bytes per image of a peer's slice. */
const WIRE_CASE = { model: 'resnet50', side: 224, batch: IMAGENET_RECIPES.resnet50.batch, peers: 64 } as const;
function wireBytesPerImage(wire: WireFormat): number {
  const params = parameterCount(modelByName(WIRE_CASE.model, [3, WIRE_CASE.side, WIRE_CASE.side], 1000));
  return Math.round(allReduceSentBytes(0, params, WIRE_CASE.peers, wire) / (WIRE_CASE.batch / WIRE_CASE.peers));
}
const TSX = ['--import', 'tsx', '--import', './scripts/raw-loader.mjs'];
const MSG = 64 << 10;
const CLK_TCK = 100;

interface Moved { bytes: number; ms: number; cpuS: number }
interface StreamResult { mbps: number; recvCpuSPerGb: number; sendCpuSPerGb: number; recvMs: number; sendMs: number; bytes: number }

const arg = (args: string[], k: string, def: number) => Number(args.find((a) => a.startsWith(`--${k}=`))?.slice(k.length + 3) ?? def);

/** CPU seconds of every process in a host's namespace (Chromium's browser, GPU, network and renderer processes). */
function nsCpuS(ns: string): number {
  const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split('\n').filter((p) => /^\d+$/.test(p.trim()));
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid.trim()}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]); // utime, stime (fields 14 and 15 of stat)
    } catch { /* exited */ }
  }
  return ticks / CLK_TCK;
}

/** Pins every process of a host's namespace (and their threads) to one core. */
function pinNs(ns: string, core: number): void {
  const pids = execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split('\n').map((p) => p.trim()).filter((p) => /^\d+$/.test(p));
  for (const pid of pids) {
    try { execFileSync('taskset', ['-a', '-p', '-c', String(core), pid], { stdio: 'ignore' }); } catch { /* exited */ }
  }
}

const result = (recv: Moved, send: Moved): StreamResult => ({
  bytes: recv.bytes, recvMs: recv.ms, sendMs: send.ms, mbps: recv.bytes / recv.ms / 1e3,
  recvCpuSPerGb: recv.cpuS / (recv.bytes / 1e9), sendCpuSPerGb: send.cpuS / (recv.bytes / 1e9),
});

type TPeer = LineProc<TransportToPeer, TransportFromPeer>;
const moved = (r: TransportFromPeer): Moved => {
  if (r.type !== 'moved') throw new Error(`expected bytes moved, got ${r.type}`);
  return r;
};

interface Signal { server: { host: string; port: number; path: string }; issued: { id: string; token: string }[] }

/** Streams `bytes` from a to b over their links (8 MB of warm-up first: windows, JIT). */
async function linkStream(a: TPeer, b: TPeer, bytes: number): Promise<StreamResult> {
  const warm = 8e6;
  const w = b.ask({ type: 'dc-recv', bytes: warm }, 120_000);
  await a.ask({ type: 'dc-send', bytes: warm, msg: MSG }, 120_000);
  await w;
  const recv = b.ask({ type: 'dc-recv', bytes }, 600_000);
  const send = moved(await a.ask({ type: 'dc-send', bytes, msg: MSG }, 600_000));
  return result(moved(await recv), send);
}

const listeningPort = (r: TransportFromPeer | NetFromPeer): number => {
  if (r.type !== 'listening') throw new Error(`expected a direct listener's port, got ${r.type}`);
  return r.port;
};

async function streams(bed: Testbed, bytes: number, signal: Signal) {
  const spawnPeer = (host: string, core: number): TPeer =>
    new LineProc(host, bed.spawn(host, 'taskset', ['-c', String(core), process.execPath, ...TSX, join(here, 'transport-peer.ts')], { cwd: ROOT }));
  let pair = [spawnPeer('a', 0), spawnPeer('b', 1)] as const;
  try {
    const [a, b] = pair;
    const listen = await b.ask({ type: 'tcp-listen' });
    if (listen.type !== 'listening') throw new Error('tcp-listen: no port');
    const tcpRecv = b.ask({ type: 'tcp-recv', bytes }, 300_000);
    const tcpSend = moved(await a.ask({ type: 'tcp-send', host: bed.host('b').ip, port: listen.port, bytes, msg: MSG }, 300_000));
    const tcp = result(moved(await tcpRecv), tcpSend);
    console.error(`tcp: ${tcp.mbps.toFixed(1)} MB/s, receiver ${tcp.recvCpuSPerGb.toFixed(2)} CPU-s/GB, sender ${tcp.sendCpuSPerGb.toFixed(2)}`);
    const [ia, ib] = signal.issued;
    await Promise.all([a.ask({ type: 'open', ...ia!, server: signal.server }), b.ask({ type: 'open', ...ib!, server: signal.server })]);
    const ids = [ia!.id, ib!.id];
    await Promise.all([a.ask({ type: 'links', ids, job: 1 }), b.ask({ type: 'links', ids, job: 1 })]);
    const webrtc = await linkStream(a, b, bytes);
    console.error(`node data channel: ${webrtc.mbps.toFixed(1)} MB/s, receiver ${webrtc.recvCpuSPerGb.toFixed(2)} CPU-s/GB, ` +
      `sender ${webrtc.sendCpuSPerGb.toFixed(2)}`);
    for (const p of pair) p.child.kill('SIGKILL');
    // The direct link between two Node volunteers, in fresh processes: routes and keys from the coordinator's own book.
    pair = [spawnPeer('a', 0), spawnPeer('b', 1)] as const;
    const [da, db] = pair;
    const [ja, jb] = [signal.issued[7]!, signal.issued[8]!];
    const book = new DirectBook();
    const secrets = [
      book.register(ja.id, bed.host('a').ip, listeningPort(await da.ask({ type: 'listen-direct' }))),
      book.register(jb.id, bed.host('b').ip, listeningPort(await db.ask({ type: 'listen-direct' }))),
    ];
    await Promise.all([da.ask({ type: 'open', ...ja, server: signal.server, directSecret: secrets[0] }),
      db.ask({ type: 'open', ...jb, server: signal.server, directSecret: secrets[1] })]);
    const dids = [ja.id, jb.id];
    await Promise.all([da.ask({ type: 'links', ids: dids, job: 3, routes: book.routesFor(ja.id, dids)! }),
      db.ask({ type: 'links', ids: dids, job: 3, routes: book.routesFor(jb.id, dids)! })]);
    const node = await linkStream(da, db, bytes);
    console.error(`node direct link (TLS over TCP): ${node.mbps.toFixed(1)} MB/s, receiver ${node.recvCpuSPerGb.toFixed(2)} CPU-s/GB, ` +
      `sender ${node.sendCpuSPerGb.toFixed(2)}`);
    return { tcp, node, webrtc };
  } finally {
    for (const p of pair) p.child.kill('SIGKILL');
  }
}

async function barePage(bed: Testbed, bytes: number): Promise<StreamResult> {
  const ba = await launchChromiumIn(bed, 'a', null), bb = await launchChromiumIn(bed, 'b', null);
  try {
    const [pa, pb] = [await ba.browser.newPage(), await bb.browser.newPage()];
    await connectPages(pa, pb);
    pinNs(bed.host('a').ns, 0);
    pinNs(bed.host('b').ns, 1);
    await pageStream(pa, pb, 8e6, MSG); // warm-up
    const c0 = [nsCpuS(bed.host('a').ns), nsCpuS(bed.host('b').ns)];
    const t0 = performance.now();
    const r = await pageStream(pa, pb, bytes, MSG);
    const sendMs = performance.now() - t0;
    const c1 = [nsCpuS(bed.host('a').ns), nsCpuS(bed.host('b').ns)];
    const res = result({ ...r, cpuS: c1[1]! - c0[1]! }, { bytes, ms: sendMs, cpuS: c1[0]! - c0[0]! });
    console.error(`bare Chromium data channel: ${res.mbps.toFixed(1)} MB/s, receiving host ${res.recvCpuSPerGb.toFixed(2)} CPU-s/GB, ` +
      `sending host ${res.sendCpuSPerGb.toFixed(2)}`);
    return res;
  } finally {
    await ba.close();
    await bb.close();
  }
}

/** The link as a donor page opens it: the page's relay to its worker (bench/transport-relay-page.ts). */
async function relayPage(bed: Testbed, bytes: number, signal: Signal): Promise<StreamResult> {
  const serve = bed.spawn('coord', process.execPath, [...TSX, join(here, 'transport-serve.ts')], { cwd: ROOT });
  const ba = await launchChromiumIn(bed, 'a', null), bb = await launchChromiumIn(bed, 'b', null);
  try {
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: serve.stdout! }).once('line', resolve);
      serve.once('exit', (c) => reject(new Error(`the page server exited (${c})`)));
    });
    const url = `http://${bed.host('coord').ip}:${(JSON.parse(line) as { port: number }).port}/bench/transport-relay.html`;
    const [pa, pb] = [await ba.browser.newPage(), await bb.browser.newPage()];
    for (const p of [pa, pb]) {
      await p.goto(url);
      await p.waitForFunction(() => typeof window.vtAsk === 'function', undefined, { timeout: 60_000 });
    }
    const ask = (p: Page, c: RelayCommand) => p.evaluate((cmd) => window.vtAsk!(cmd), c);
    const [ia, ib] = [signal.issued[5]!, signal.issued[6]!];
    await Promise.all([ask(pa, { type: 'open', ...ia, server: signal.server }), ask(pb, { type: 'open', ...ib, server: signal.server })]);
    const ids = [ia.id, ib.id];
    await Promise.all([ask(pa, { type: 'links', ids, job: 2 }), ask(pb, { type: 'links', ids, job: 2 })]);
    pinNs(bed.host('a').ns, 0);
    pinNs(bed.host('b').ns, 1);
    const stream = async (n: number) => {
      const recv = ask(pb, { type: 'recv', bytes: n });
      const sent = await ask(pa, { type: 'send', bytes: n, msg: MSG });
      return { recv: await recv, sent };
    };
    await stream(8e6); // warm-up
    const c0 = [nsCpuS(bed.host('a').ns), nsCpuS(bed.host('b').ns)];
    const { recv, sent } = await stream(bytes);
    const c1 = [nsCpuS(bed.host('a').ns), nsCpuS(bed.host('b').ns)];
    if (recv.type !== 'moved' || sent.type !== 'moved') throw new Error('the relay page moved nothing');
    const res = result({ bytes: recv.bytes, ms: recv.ms, cpuS: c1[1]! - c0[1]! }, { bytes, ms: sent.ms, cpuS: c1[0]! - c0[0]! });
    console.error(`donor page link (relay to a worker): ${res.mbps.toFixed(1)} MB/s, receiving host ${res.recvCpuSPerGb.toFixed(2)} CPU-s/GB, ` +
      `sending host ${res.sendCpuSPerGb.toFixed(2)}`);
    return res;
  } finally {
    await ba.close();
    await bb.close();
    serve.kill('SIGKILL');
  }
}

type AllReduceResult = Record<number, { ms: number; times: number[]; boundMs: number; efficiency: number }>;

/** Ring all-reduces of `mb` MB across 2 and 3 hosts: over WebRTC, then over direct links (what Node volunteers use between each other). */
async function allReduce(bed: Testbed, mb: number, signal: Signal): Promise<{ webrtc: AllReduceResult; direct: AllReduceResult }> {
  const hosts = ['a', 'b', 'c'];
  const peers = hosts.map((h, i) => new LineProc<NetToPeer, NetFromPeer>(h,
    bed.spawn(h, 'taskset', ['-c', String(i % 2), process.execPath, ...TSX, join(here, 'network-peer.ts')], { cwd: ROOT })));
  const issued = signal.issued.slice(2);
  const elems = Math.round((mb * 1e6) / 4);
  const book = new DirectBook();
  const out = { webrtc: {} as AllReduceResult, direct: {} as AllReduceResult };
  try {
    const ports = await Promise.all(peers.map(async (p) => listeningPort(await p.ask({ type: 'listen-direct' }))));
    const secrets = peers.map((_, i) => book.register(issued[i]!.id, bed.host(hosts[i]!).ip, ports[i]!));
    await Promise.all(peers.map((p, i) => p.ask({ type: 'open', ...issued[i]!, server: signal.server, directSecret: secrets[i]! })));
    for (const [kind, n] of [['webrtc', 2], ['webrtc', 3], ['direct', 2], ['direct', 3]] as const) {
      const ring = peers.slice(0, n), ids = issued.slice(0, n).map((x) => x.id);
      const generation = kind === 'direct' ? 10 + n : n;
      await Promise.all(ring.map((p, i) => p.ask({
        type: 'ring', ids, job: 1, generation, ...(kind === 'direct' ? { routes: book.routesFor(issued[i]!.id, ids)! } : {}),
      })));
      let step = 0;
      const round = async (e: number) => {
        const s = step++;
        const done = await Promise.all(ring.map((p) => p.ask({ type: 'go', elems: e, step: s, wire: 'f32' }, 600_000)));
        return Math.max(...done.map((d) => (d.type === 'done' ? d.ms : 0)));
      };
      await round(elems >> 3); // warm-up
      const times = [await round(elems), await round(elems)];
      const boundMs = allReduceBoundMs(PROFILES.lan, n, 4 * elems);
      const ms = median(times);
      out[kind][n] = { ms, times, boundMs, efficiency: boundMs / ms };
      console.error(`all-reduce of ${mb} MB across ${n} hosts (${kind}): ${ms.toFixed(0)} ms, line-rate bound ${boundMs.toFixed(0)} ms ` +
        `-> efficiency ${(boundMs / ms).toFixed(3)}`);
      await Promise.all(ring.map((p) => p.ask({ type: 'close-ring' })));
    }
    return out;
  } finally {
    for (const p of peers) p.child.kill('SIGKILL');
  }
}

export async function main(args: string[]): Promise<void> {
  const bytes = arg(args, 'mb', 200) * 1e6;
  const arMb = arg(args, 'allreduce-mb', 100);
  const bed = await Testbed.create({ hosts: ['coord', 'a', 'b', 'c'], profile: 'lan' });
  try {
    // --lan-mtu=9000: a LAN with jumbo frames (the SCTP path MTU experiments of docs/transport.md).
    const lanMtu = arg(args, 'lan-mtu', 0);
    if (lanMtu) await bed.setMtu(lanMtu);
    const sig = bed.spawn('coord', process.execPath, [...TSX, join(here, 'network-signal.ts'), '9'], { cwd: ROOT });
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: sig.stdout! }).once('line', resolve);
      sig.once('exit', (c) => reject(new Error(`signaling exited (${c})`)));
    });
    const { port, issued } = JSON.parse(first) as { port: number; issued: { id: string; token: string }[] };
    const signal = { server: { host: bed.host('coord').ip, port, path: '/signal' }, issued };
    const { tcp, node, webrtc } = await streams(bed, bytes, signal);
    const bare = args.includes('--no-page') ? null : await barePage(bed, bytes);
    const page = args.includes('--no-page') ? null : await relayPage(bed, bytes, signal);
    const ar = args.includes('--no-allreduce') ? null : await allReduce(bed, arMb, signal);
    sig.kill('SIGKILL');
    const r3 = (v: number | null | undefined) => (v === null || v === undefined ? null : +v.toFixed(3));
    const summary = {
      bench: 'transport',
      tcp_mbps: r3(tcp.mbps), node_mbps: r3(node.mbps), page_mbps: r3(page?.mbps), bare_page_mbps: r3(bare?.mbps),
      node_vs_tcp: r3(node.mbps / tcp.mbps), node_webrtc_mbps: r3(webrtc.mbps), node_webrtc_vs_tcp: r3(webrtc.mbps / tcp.mbps),
      node_webrtc_cpu_s_per_gb: r3(webrtc.recvCpuSPerGb), node_webrtc_send_cpu_s_per_gb: r3(webrtc.sendCpuSPerGb),
      page_vs_tcp: page ? r3(page.mbps / tcp.mbps) : null, page_vs_bare: page && bare ? r3(page.mbps / bare.mbps) : null,
      bare_page_vs_tcp: bare ? r3(bare.mbps / tcp.mbps) : null,
      tcp_cpu_s_per_gb: r3(tcp.recvCpuSPerGb), node_cpu_s_per_gb: r3(node.recvCpuSPerGb), page_cpu_s_per_gb: r3(page?.recvCpuSPerGb),
      bare_page_cpu_s_per_gb: r3(bare?.recvCpuSPerGb),
      tcp_send_cpu_s_per_gb: r3(tcp.sendCpuSPerGb), node_send_cpu_s_per_gb: r3(node.sendCpuSPerGb), bare_page_send_cpu_s_per_gb: r3(bare?.sendCpuSPerGb),
      page_send_cpu_s_per_gb: r3(page?.sendCpuSPerGb),
      allreduce_lan_eff_2: r3(ar?.direct[2]?.efficiency), allreduce_lan_eff_3: r3(ar?.direct[3]?.efficiency),
      allreduce_lan_eff_2_webrtc: r3(ar?.webrtc[2]?.efficiency), allreduce_lan_eff_3_webrtc: r3(ar?.webrtc[3]?.efficiency),
      bytes_per_image_int8: wireBytesPerImage('i8'), bytes_per_image_bf16: wireBytesPerImage('bf16'),
      wire_case: WIRE_CASE, frame_bytes: MSG, mb: bytes / 1e6,
    };
    writeFileEnsuringDir(join(here, 'results', 'transport.json'), JSON.stringify({
      setup: { link: '1 Gbit/s tbf each way per host (testbed/net/bed.ts, profile lan)', pinning: 'sender core 0, receiver core 1', frameBytes: MSG, bytes },
      tcp, node, webrtc, bare, page, allReduce: ar,
      links: { node: 'direct link between two Node volunteers (TLS 1.2 PSK over TCP, src/comm/direct-peer.ts)', webrtc: 'node-datachannel data channel' },
      summary,
    }, null, 2));
    const rows = [['kernel TCP', tcp], ['Node direct link (TLS)', node], ['Node WebRTC link', webrtc],
      ...(bare ? [['bare Chromium channel', bare] as const] : []),
      ...(page ? [['donor page link (relay)', page] as const] : [])] as const;
    writeFileEnsuringDir(join(here, 'results', 'transport.svg'), barChartSvg({
      title: `One-way throughput and receiver CPU between two hosts on a 1 Gbit/s link, ${bytes / 1e6} MB`,
      yLabel: 'MB/s | CPU-s per GB x 10',
      categories: rows.map(([n]) => n),
      series: [
        { name: 'MB/s', values: rows.map(([, r]) => r.mbps) },
        { name: 'receiver CPU-s per GB x 10', values: rows.map(([, r]) => 10 * r.recvCpuSPerGb) },
      ],
    }));
    console.log(JSON.stringify(summary));
  } finally {
    await bed.close();
  }
}
