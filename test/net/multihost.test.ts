// Peers on different hosts train one job: a coordinator (HTTPS with its local CA, STUN, coturn)
// on host `coord`, Node volunteers on hosts `a` and `b`, one on host `n` behind a NAT that lets
// it reach only `coord` (so its links can only run through the TURN relay), and a Chromium page
// on host `page` opened by the coordinator's LAN address over HTTPS, with the CA imported into
// its certificate store as a person would: it must have WebGPU and train on it. Every committed
// step has the full ring and one checksum; `n`'s links are reported relayed (its direct TLS dials
// fail behind the NAT and fall back to WebRTC), a's and b's to each other direct TLS links, the
// page's direct WebRTC ones.
// Then `b`'s link is cut in the middle of training: it is noticed within seconds, the step runs
// again without it, no step is lost or doubled, and the final weights equal one peer's.
// Make before break across hosts: a ring of 8 (on a, b and n) takes a 9th volunteer; the change
// is announced, the members dial their new links ahead (n's through the relay) while the ring
// trains on, and the ring of 9 forms from those links alone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestPerStep } from '../../coordinator/metrics.ts';
import type { MetricRecord } from '../../src/protocol/messages.ts';
import {
  buildTestData, checkpointOf, checkpointSteps, finalWeights, metricsOf, onePeerWeights, peerNames, relDiff, tempRoot, testJob,
} from '../../testbed/jobs.ts';
import { checkOnePeer } from '../../testbed/one-peer.ts';
import { readFile } from 'node:fs/promises';
import { weightChecksum } from '../../src/client/checksum.ts';
import { join } from 'node:path';
import { extraCaFile } from '../../coordinator/tls.ts';
import { buildPage } from '../../coordinator/main.ts';
import { Testbed } from '../../testbed/net/bed.ts';
import { launchChromiumIn, type HostBrowser } from '../../testbed/net/browser.ts';
import { firefoxIn, jobDirOf, startCoordinatorIn, volunteerIn, type CoordinatorProcOptions } from '../../testbed/net/scenario.ts';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { stacksOfRunning } from '../helpers/stacks.ts';
import { onceMoreAfterNativeDeadlock, restartedOfDeadlock, type Attempt } from '../../testbed/native-deadlock.ts';

const K = 10;
const CUT_AFTER = 5;
let root: { dir: string; remove(): Promise<void> };
let data: Awaited<ReturnType<typeof buildTestData>>;
let bed: Testbed;
let pageDir: string;
let chrome: HostBrowser | null = null;

beforeAll(async () => {
  root = await tempRoot('multihost');
  data = await buildTestData(root.dir);
  pageDir = await buildPage(join(root.dir, 'page'));
  bed = await Testbed.create({ hosts: ['coord', 'a', 'b', 'page', 'ff'], nat: { host: 'n', onlyTo: ['coord'] } });
});
afterAll(async () => {
  await chrome?.close();
  await bed?.close();
  await root?.remove();
});

type StepRecord = Extract<MetricRecord, { type: 'step' }>;

/** The K-step job of the two K-step tests below (their rings mix WebGPU and wasm peers: GENTLE_LARS keeps them near one peer). */
const kJob = (extra: Record<string, unknown> = {}): Record<string, unknown> => testJob(K, extra);

/**
 * The same K-step job (kJob()) trained by one peer here (loopback, wasm): the reference of both
 * K-step tests below, run once for the file (the engine and job are the same, so are its weights).
 */
let soloRun: ReturnType<typeof onePeerWeights> | null = null;
const soloOfK = (): ReturnType<typeof onePeerWeights> => (soloRun ??= onePeerWeights(root.dir, 'solo', data, kJob(), 'wasm'));

/**
 * A job `name` on MNIST whose coordinator runs on host `coord` over HTTPS with its own CA (in
 * the root's folder `tls`) and its coturn: the coordinator, its https URL by LAN address, the CA
 * (PEM and file) and the environment a Node volunteer trusts it with.
 */
async function httpsJob(name: string, tls: string, o: Omit<CoordinatorProcOptions, 'jobDir' | 'dataDir' | 'dataset' | 'tlsDir'>) {
  const jobDir = jobDirOf(root.dir, name);
  const tlsDir = join(root.dir, tls);
  const coord = await startCoordinatorIn(bed, 'coord', { jobDir, dataDir: data.dataDir, dataset: 'mnist', tlsDir, heartbeatMs: 1000, ...o });
  const caFile = join(tlsDir, 'ca.crt');
  const caPem = await readFile(caFile, 'utf8');
  const env = { NODE_EXTRA_CA_CERTS: await extraCaFile(tlsDir, caPem) };
  return { jobDir, coord, url: `https://${bed.host('coord').ip}:${coord.port}`, caPem, caFile, env };
}

/**
 * Where a multi-peer job's weights left one peer's: each checkpoint step both kept, with its
 * difference; the first step whose loss (computed on the weights before it) differs from one
 * peer's by more than float rounding, so the update before it went astray; and what the steps
 * and aborts around it did (generation, ring, each member's images with those reused from a
 * kept sum (r) and claimed from the tail (c)).
 */
async function divergence(
  multiDir: string, soloDir: string, done: readonly StepRecord[], records: readonly MetricRecord[], solo: readonly StepRecord[],
): Promise<string> {
  const soloSteps = new Set(await checkpointSteps(soloDir));
  const rows: string[] = [];
  for (const step of (await checkpointSteps(multiDir)).filter((k) => soloSteps.has(k))) {
    // A checkpoint that does not verify is left out of the report, as before: it must not hide the failure.
    const [a, b] = await Promise.all([checkpointOf(multiDir, step), checkpointOf(soloDir, step)].map((p) => p.catch(() => null)));
    if (!a || !b) continue;
    rows.push(`step ${step}: ${relDiff(a.weights, b.weights).toExponential(2)}`);
  }
  const soloLoss = new Map(solo.map((r) => [r.step, r.loss]));
  const lossDiff = (r: StepRecord): number => {
    const l = soloLoss.get(r.step);
    return r.loss === null || l === null || l === undefined ? Number.POSITIVE_INFINITY : Math.abs(r.loss - l) / Math.max(1e-12, Math.abs(l));
  };
  const first = done.find((r) => lossDiff(r) > 1e-5)?.step ?? null;
  const near = (step: number) => first !== null && step >= first - 4 && step <= first;
  const member = (p: StepRecord['peers'][number]) => `${p.images}${p.reused ? `r${p.reused}` : ''}${p.claimed ? `c${p.claimed}` : ''}`;
  const lines = records.filter((r) => (r.type === 'step' || r.type === 'abort') && near(r.step)).map((r) =>
    r.type === 'step'
      ? `step ${r.step} generation ${r.generation} ring ${r.ring}: loss ${r.loss} (one peer ${soloLoss.get(r.step)}), images ${r.peers.map(member).join(' ')}`
      : r.type === 'abort' ? `abort of step ${r.step} in generation ${r.generation}: ${r.reason.slice(0, 200)}${r.formedAgain ? ' (formed again)' : ''}` : '');
  return `checkpoints against one peer's: ${rows.join(', ')}\n` +
    `first step whose loss differs from one peer's by more than 1e-5: ${first ?? 'none'}\n${lines.join('\n')}`;
}

describe('across hosts', () => {
  it(`a, b, n (behind NAT, TURN only) and a WebGPU page train ${K} steps; b's link is cut after step ${CUT_AFTER}`, async () => {
    // n's links run through the TURN relay, where node-datachannel's own deadlock is most often met: a volunteer restarted
    // of it is a new peer, and the test runs once more (testbed/native-deadlock.ts).
    await onceMoreAfterNativeDeadlock('across hosts', acrossHosts);
  }, 1_500_000);

  it(`Firefox, Chromium and Node donors train ${K} steps in one ring: every step with all three and one checksum`, async () => {
    const { jobDir, coord, url, caPem, caFile, env } = await httpsJob('firefox', 'tls-firefox', {
      config: kJob({ minPeers: 3 }), port: 8445, pageDir,
      turn: { port: 3480, relayPorts: [49560, 49759] },
      timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 6000 },
    });
    let firefox: ReturnType<typeof firefoxIn> | null = null;
    let node: LocalVolunteer | null = null;
    try {
      // Firefox on Linux has no WebGPU (its WebGPU ships on Windows and macOS): it donates through
      // wasm, as the page chooses for it. Chromium's page runs wasm too here (the test above has
      // its WebGPU), so that the three donors differ by browser and WebRTC stack only.
      firefox = firefoxIn(bed, 'ff', url, caFile, 'firefox');
      const ffPage = await firefox.next((e) => e.event === 'page', 240_000, 'the Firefox page probed its device');
      expect({ secure: ffPage.secure, isolated: ffPage.isolated, backend: ffPage.backend }, 'Firefox: a secure, isolated page that donates through wasm')
        .toEqual({ secure: true, isolated: true, backend: 'wasm' });
      chrome = await launchChromiumIn(bed, 'page', caPem);
      const page = await (await chrome.browser.newContext()).newPage();
      await page.goto(`${url}/?name=chromium&backend=wasm`);
      await page.waitForFunction(
        () => document.getElementById('donate')?.dataset.probing === '' && document.getElementById('donate')?.dataset.device !== undefined, undefined,
        { timeout: 180_000 },
      );
      await page.click('#toggle');
      node = volunteerIn(bed, 'a', url, [], env, 'node');
      const t0 = Date.now();
      const tails = (e: unknown) => new Error(
        `${e instanceof Error ? e.message : String(e)}\nfirefox: ${firefox?.lines.slice(-8).join(' | ')}\nnode: ${node?.lines.slice(-4).join(' | ')}`,
      );
      const formed = await coord.waitFor(
        (e) => e.type === 'step' && e.peers === 3, 240_000, 'a first step with all three',
      ).catch((e: unknown) => { throw tails(e); });
      await coord.finished;
      console.log(`firefox: first full ring ${formed.at - t0} ms after the Node volunteer started; ` +
        `Firefox ${firefox.version ?? '?'} computing with ${String(ffPage.device)}`);

      const records = await metricsOf(jobDir);
      const steps = latestPerStep(records) as StepRecord[];
      expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
      const names = peerNames(records);
      for (const r of steps) {
        expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
        expect(r.peers.map((p) => names.get(p.peerId)).sort(), `ring of step ${r.step}`).toEqual(['chromium', 'firefox', 'node']);
      }
      const links = steps.map((r) => r.peers.map((p) => `${names.get(p.peerId)}:${p.link ?? '?'}`).join(',')).join(' ');
      console.log(`firefox: links per step ${links}`);
      console.log(JSON.stringify({
        firefox_in_ring: steps.every((r) => r.peers.some((p) => names.get(p.peerId) === 'firefox')), firefox_version: firefox.version,
      }));
      // Three browsers' and WebRTC stacks' steps are one peer's steps.
      const multi = await finalWeights(jobDir);
      const ref = await soloOfK();
      const d = relDiff(multi.weights, ref.weights);
      console.log(`firefox: mixed ring vs one peer after ${K} steps: max |dw| / max |w| = ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-4);
    } finally {
      node?.kill('SIGKILL');
      await firefox?.stop();
      await chrome?.close();
      chrome = null;
      await coord.stop();
    }
  }, 900_000);

  it('a ring of 8 on three hosts takes a 9th by make before break: its links are dialed ahead, nothing at the change', async () => {
    // A volunteer restarted of node-datachannel's own deadlock rejoins as a new peer, a ring change of its own: the test runs
    // once more then (testbed/native-deadlock.ts). CI's suite met it twice, in sessions 27 and 52, both times in this test.
    await onceMoreAfterNativeDeadlock('make before break', makeBeforeBreak);
  }, 1_500_000);
});

/** The make-before-break test's run; a second attempt (`a.run` 2) runs in folders of its own. */
async function makeBeforeBreak(a: Attempt): Promise<void> {
  // Enough steps for the ring of 9 (from about step 10) to settle and begin probing work stealing: its probe's first
  // steps with a tail (about 30, 33 and 34) cross the hosts; its verdict (about step 46) is left out.
  const steps = 36;
  // At testJob's rate (GENTLE_LARS): on the chaotic trajectory of LARS at 0.5 a ring's rounding differences grew from
  // 1e-7 of the loss at step 10 to 1e-3 by step 36 (final weights 3% apart in 1 run of 3); at 0.1 they stay near 1e-7.
  // A checkpoint of every step, every one kept, so that a weights failure can be traced back to its step.
  const config = (extra: Record<string, unknown>) => testJob(steps, { checkpointEvery: 1, keepCheckpoints: 100, ...extra });
  await bed.heal('b'); // the test before cut it
  const at = a.run === 1 ? '' : `-${a.run}`;
  const { jobDir, coord, url, env } = await httpsJob(`ahead${at}`, `tls-ahead${at}`, {
    config: config({ minPeers: 8 }), port: 8444,
    turn: { port: 3479, relayPorts: [49360, 49559] },
    // All members answer `prepared` well within this here; the deadline is for members that never do.
    timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 6000, prepareMs: 30_000 },
  });
  const spawnIn = (host: string, name: string): LocalVolunteer => volunteerIn(bed, host, url, [], env, name);
  const vols = a.vols;
  try {
    vols.push(...['a', 'a', 'a', 'b', 'b', 'b', 'n', 'n'].map((h, i) => spawnIn(h, `${h}${i}`)));
    const t0 = Date.now();
    // A wait that fails says what each volunteer was doing, and whether its process still runs.
    const state = (v: LocalVolunteer) => (v.child.exitCode !== null ? `exited ${v.child.exitCode}`
      : v.child.signalCode !== null ? `killed by ${v.child.signalCode}` : 'running');
    // Those still running are also read with gdb: a volunteer whose event loop blocked (in step 1,
    // 1 run in about 10 of the suite) says nothing more itself.
    const tails = async (e: unknown): Promise<Error> => {
      // A restart of node-datachannel's deadlock has its stacks in the log already, and the attempt runs again.
      if (restartedOfDeadlock(vols).length > 0) return e instanceof Error ? e : new Error(String(e));
      const running = vols.map((v) => ({ name: v.name, pid: v.child.pid, running: state(v) === 'running' }));
      const stacks = await stacksOfRunning('make-before-break', running);
      // A volunteer's own watchdog (stall-watch.ts) reported a stuck main thread with its stacks.
      const stalls = (v: LocalVolunteer) => v.lines.filter((l) => l.includes('volunteer: stall:')).slice(0, 60);
      const lines = vols.map((v) => `${v.name} (${state(v)}): ${v.lines.slice(-4).join(' | ')}${stalls(v).length ? `\n${stalls(v).join('\n')}` : ''}`)
        .join('\n');
      return new Error(`${e instanceof Error ? e.message : String(e)}\nvolunteers:\n${lines}${stacks ? `\nmain threads of those running:\n${stacks}` : ''}`);
    };
    await a.guard(coord.waitFor((e) => e.type === 'step' && e.peers === 8, 240_000, 'a first step with all 8'))
      .catch(async (e: unknown) => { throw await tails(e); });
    vols.push(spawnIn('b', 'b8'));
    const nine = await a.guard(coord.waitFor(
      (e) => e.type === 'generation' && e.ring.length === 9, 120_000, 'the ring of 9',
    )).catch(async (e: unknown) => { throw await tails(e); });
    await a.guard(coord.finished);
    const generation = nine.e.type === 'generation' ? nine.e.generation : -1;
    console.log(`make before break across hosts: ring of 9 (generation ${generation}) ${nine.at - t0} ms after the first volunteer started`);
    expect(coord.lines.some((l) => /a ring of 9 announced ahead \(1 joining, 0 leaving\)/.test(l)), 'the change was announced').toBe(true);
    const formed = vols.map((v) => {
      const line = v.lines.find((l) => l.includes(`ring of generation ${generation}:`));
      const m = line ? /(\d+) links reused, (\d+) new .*; (\d+) dials, (\d+) offers/.exec(line) : null;
      return { name: v.name, line, reused: Number(m?.[1] ?? -1), fresh: Number(m?.[2] ?? -1), dials: Number(m?.[3] ?? -1) };
    });
    console.log(formed.map((f) => `${f.name}: ${f.line ?? 'no line'}`).join('\n'));
    // A failure says what each member did about the change (its dials ahead, its rings).
    const story = vols.map((v) => `${v.name}: ${v.lines.filter((l) => /ahead|ring of|generation/.test(l)).join(' | ')}`).join('\n');
    for (const f of formed) expect(
      { name: f.name, fresh: f.fresh, dials: f.dials }, `${f.name} formed generation ${generation} from links dialed ahead or kept\n${story}`,
    ).toEqual({ name: f.name, fresh: 0, dials: 0 });
    const dialedAhead = vols.filter((v) => v.lines.some((l) => /dialed \d+ links? ahead for the coming ring/.test(l))).map((v) => v.name);
    expect(dialedAhead.length, `members that dialed ahead: ${dialedAhead.join(', ')}`).toBeGreaterThanOrEqual(1);

    const records = await metricsOf(jobDir);
    const done = latestPerStep(records) as StepRecord[];
    expect(done.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: steps }, (_, i) => i + 1));
    for (const r of done) expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
    expect(done.some((r) => r.peers.length === 9), 'steps ran with the ring of 9').toBe(true);
    // A job of the defaults steals "auto": once the ring of 9 has settled, its probe runs steps with a tail across the hosts.
    console.log(`make before break: steps that stole (step/ring): ${done.filter((r) => r.peers.some((p) => (p.claimed ?? 0) > 0))
      .map((r) => `${r.step}/${r.peers.length}`).join(' ') || 'none'}; ` +
      `${coord.lines.filter((l) => /work stealing/.test(l)).join(' | ') || 'no verdict'}`);
    const ref = await onePeerWeights(root.dir, `solo-ahead${at}`, data, config({}), 'wasm');
    // Against one peer: every step's samples, and the final weights to float rounding.
    const solo = latestPerStep(await metricsOf(ref.jobDir)) as StepRecord[];
    expect(done.map((r) => r.samples), 'every step committed the samples one peer commits').toEqual(solo.map((r) => r.samples));
    // Each image computed once: the members' images (their own and those granted from the
    // tail) add up to one peer's, step by step.
    const imagesOf = (rs: StepRecord[]) => rs.map((r) => `${r.step}: ${r.peers.reduce((n, p) => n + p.images, 0)}`);
    expect(imagesOf(done), 'images computed per step').toEqual(imagesOf(solo));
    const multi = await finalWeights(jobDir);
    // The newest checkpoint is the last step's and holds the weights committed for it.
    expect([multi.step, ref.step], 'the newest checkpoints are of the last step').toEqual([steps, steps]);
    expect(weightChecksum(multi.weights), "the last checkpoint holds the weights whose checksum the ring committed").toBe(done.at(-1)!.peers[0]!.checksum);
    expect(weightChecksum(ref.weights), "one peer's last checkpoint likewise").toBe(solo.at(-1)!.peers[0]!.checksum);
    // In about 1 run in 5 the two runs parted (by 9.33e-4, every time the same way: checkpoints 1.2e-7 apart at step 16
    // and 1.4e-5 at step 20, then growing); replayed on one peer from the ring's checkpoints, every 4 steps landed
    // 1e-9 to 5e-8 from the ring's, the interval where they parted too. Once (1 run in about 10) the near-tie fell
    // inside an interval: 12 -> 16 replayed 1.6e-4 from the ring's, and step by step 16 -> 20 at 9.3e-6, the others
    // at 2e-9 to 5e-8. checkOnePeer (testbed/one-peer.ts) replays that way where the final weights part.
    const check = await checkOnePeer(root.dir, `replay-ahead${at}`, data, config({}), jobDir, ref.jobDir, steps, 1e-4);
    console.log(`make before break vs one peer after ${steps} steps: max |dw| / max |w| = ${check.final.toExponential(2)}` +
      `${check.replays.length > 0 ? `; replayed on one peer from the ring's checkpoints: ${check.replays.join(', ')}` : ''}`);
    if (check.failures.length > 0) {
      // What the steps around the parting did, for the failure's message.
      const why = await divergence(jobDir, ref.jobDir, done, records, solo);
      expect(check.failures, why).toEqual([]);
    }
  } finally {
    for (const v of vols) v.kill('SIGKILL');
    await coord.stop();
  }
}

/** Each step's ring by host, and what the coordinator and the volunteers printed from `since` on: a ring assertion's message. */
function ringTrail(steps: readonly StepRecord[], names: ReadonlyMap<string, string>, coordLines: readonly string[],
  vols: readonly { name: string; lines: readonly string[] }[], since: number): string {
  const rings = steps.map((s) => `${s.step}: ${s.peers.map((p) => names.get(p.peerId) ?? p.peerId.slice(0, 8)).join(',')}`).join('; ');
  const tail = (who: string, lines: readonly string[]) => `${who}:\n  ${lines.slice(-15).map((l) => l.slice(0, 300)).join('\n  ')}`;
  return [`\nrings by step: ${rings}`, `(the cut at ${new Date(since).toISOString()})`, tail('coordinator', coordLines),
    ...vols.map((v) => tail(v.name, v.lines))].join('\n');
}

/** The NAT/TURN test's run; a second attempt (`a.run` 2) runs in folders of its own. */
async function acrossHosts(a: Attempt): Promise<void> {
  await bed.heal('b'); // an attempt before cut it
  const at = a.run === 1 ? '' : `-${a.run}`;
  const { jobDir, coord, url, caPem, env } = await httpsJob(`multi${at}`, `tls${at}`, {
    config: kJob({ minPeers: 4 }), port: 8443, pageDir,
    turn: { port: 3478, relayPorts: [49160, 49359] },
    timeouts: { stepMs: 60_000, admitMs: 60_000, silentMs: 4000 },
  });
  expect(coord.url).toMatch(/^https:/);
  const peers = a.vols;
  try {
    // The page, on its own host, by the coordinator's LAN address over HTTPS (first, while
    // the cores are free: Chromium's software GPU process starts slowly under load).
    chrome = await launchChromiumIn(bed, 'page', caPem);
    const page = await (await chrome.browser.newContext()).newPage();
    // Chromium, new in its host, could hear that host's interfaces settle (one full suite of
    // six on 2026-11-28 failed the first load with net::ERR_NETWORK_CHANGED; the likely cause,
    // IPv6 duplicate address detection ending, the bed now turns off): a person reloads.
    const open = async (to: string) => {
      try {
        await page.goto(to);
      } catch (e) {
        if (!String(e).includes('ERR_NETWORK_CHANGED')) throw e;
        console.log(`page: the network changed while loading ${to}; loading it again`);
        await page.goto(to);
      }
    };
    // Someone who types http:// lands on the https:// page (the port speaks both).
    await open(`http://${bed.host('coord').ip}:${coord.port}/`);
    expect(page.url()).toBe(`${url}/`);
    const probe = async () => {
      await open(`${url}/?name=page&backend=webgpu`);
      await page.waitForFunction(
        () => document.getElementById('donate')?.dataset.probing === '' && document.getElementById('donate')?.dataset.device !== undefined, undefined,
        { timeout: 180_000 },
      );
      return page.evaluate(() => document.getElementById('donate')!.dataset.backend);
    };
    let backend = await probe();
    if (backend !== 'webgpu') {
      // llvmpipe's GPU process sometimes loses its Dawn instance at start; a person reloads.
      console.log(`page: no WebGPU device on the first load (${await page.textContent('#device')}); reloading once`);
      backend = await probe();
    }
    expect(
      await page.evaluate(() => ({ secure: isSecureContext, gpu: 'gpu' in navigator, isolated: crossOriginIsolated })),
      'a page opened by LAN address over HTTPS is a secure, isolated context with WebGPU',
    ).toEqual({ secure: true, gpu: true, isolated: true });
    expect(backend, (await page.textContent('#device')) ?? '').toBe('webgpu');
    const pageLines: string[] = [];
    page.on('console', (m) => { pageLines.push(m.text()); if (pageLines.length > 200) pageLines.shift(); });
    await page.click('#toggle');
    peers.push(...['a', 'b', 'n'].map((h) => volunteerIn(bed, h, url, [], env)));
    const t0 = Date.now();
    // A ring that never forms says who each id is and what each host printed last.
    const who = () => coord.events.flatMap(({ e }) => (e.type === 'peer-joined' ? [`${e.peerId.slice(0, 8)}=${e.name ?? '?'}`] : [])).join(' ');
    const formed = await a.guard(coord.waitFor((e) => e.type === 'step' && e.peers === 4, 180_000, 'a first step with all 4 hosts')).catch((e: unknown) => {
      const tail = (name: string, lines: readonly string[]) => `${name}:\n  ${lines.slice(-12).map((l) => l.slice(0, 400)).join('\n  ')}`;
      throw new Error([e instanceof Error ? e.message : String(e), `ids: ${who()}`, ...peers.map((p) => tail(p.name, p.lines)), tail('page', pageLines)]
        .join('\n'));
    });
    await a.guard(coord.waitFor((e) => e.type === 'step' && e.step === CUT_AFTER, 120_000, `step ${CUT_AFTER}`));
    const cutAt = Date.now();
    await bed.cut('b');
    const noticed = await a.guard(coord.waitFor(
      (e) => e.type === 'peer-left' || e.type === 'step-aborted' || (e.type === 'generation' && e.ring.length === 3), 30_000,
      "the coordinator noticing b's cut link", cutAt,
    ));
    const noticeMs = noticed.at - cutAt;
    await a.guard(coord.finished);
    console.log(`across hosts: first full ring after ${formed.at - t0} ms; b's cut noticed after ${noticeMs} ms (${noticed.e.type})`);
    expect(noticeMs, 'a cut host is noticed within seconds').toBeLessThan(10_000);

    const records = await metricsOf(jobDir);
    const steps = latestPerStep(records) as StepRecord[];
    expect(steps.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
    const names = peerNames(records);
    // The cut lands after step CUT_AFTER was seen; the step already in flight may still
    // commit with b. From the first step without b on, b is never in a ring again.
    const withB = (r: StepRecord) => r.peers.some((p) => names.get(p.peerId) === 'b');
    const firstWithout = steps.find((r) => !withB(r))?.step ?? K + 1;
    expect(firstWithout, 'b left the ring after its link was cut, before the job ended').toBeGreaterThan(CUT_AFTER);
    expect(firstWithout, 'b left the ring after its link was cut, before the job ended').toBeLessThanOrEqual(CUT_AFTER + 2);
    const lanRelayed: string[] = [];
    for (const r of steps) {
      expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
      const hosts = r.peers.map((p) => names.get(p.peerId)).sort();
      const want = r.step < firstWithout ? ['a', 'b', 'n', 'page'] : ['a', 'n', 'page'];
      // Once in a clean-clone suite (session 59) step 6 committed with n and the page alone: say what led there.
      const why = hosts.join() === want.join() ? '' : ringTrail(steps, names, coord.lines, peers, cutAt);
      expect(hosts, `ring of step ${r.step}${why}`).toEqual(want);
      // n reaches the others only through the relay. Hosts on the LAN have a direct pair, but ICE
      // nominates whichever pair's checks succeed first: on a loaded machine (the whole suite on
      // 2 cores) that can be the relayed one. Whatever it picked must be reported (and is logged).
      for (const [i, p] of r.peers.entries()) {
        const next = r.peers[(i + 1) % r.peers.length]!;
        const edge = [names.get(p.peerId), names.get(next.peerId)];
        const what = `link ${edge.join('->')} in step ${r.step}`;
        // Between the two Node volunteers on the LAN: their direct TLS link (src/comm/direct-peer.ts).
        // n's dials of it fail (the NAT lets n reach only coord) and fall back to WebRTC through the relay.
        if (edge.includes('n')) expect(p.link, what).toBe('relayed');
        else if (!edge.includes('page')) expect(p.link, what).toBe('tcp');
        else expect(['direct', 'relayed'], what).toContain(p.link);
        if (edge.includes('page') && !edge.includes('n') && p.link === 'relayed') lanRelayed.push(what);
      }
    }
    if (lanRelayed.length) console.warn(`across hosts: ICE picked the relayed pair on the LAN (${lanRelayed.join(', ')})`);
    const pageLinks = steps.flatMap((r) => r.peers.filter((p) => names.get(p.peerId) === 'page').map((p) => p.link));
    console.log(`across hosts: the page's link to its successor per step: ${pageLinks.join(' ')}`);
    // The same job on one peer (loopback, this host): the same weights up to float rounding.
    const multi = await finalWeights(jobDir);
    expect(multi.step, 'the job ended at its last step').toBe(K);
    const d = relDiff(multi.weights, (await soloOfK()).weights);
    console.log(`across hosts vs one peer after ${K} steps: max |dw| / max |w| = ${d.toExponential(2)}`);
    expect(d).toBeLessThan(1e-4);
  } finally {
    for (const p of peers) p.kill('SIGKILL');
    await chrome?.close();
    chrome = null;
    await coord.stop();
  }
}
