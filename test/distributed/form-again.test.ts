// A link that closes in a generation's first step while both its ends stay connected is taken
// for a race of link formation (coordinator/blame.ts formAgain), not a fault: the coordinator
// forms the same ring again once, each member keeping its gradient sum, and evicts nobody.
// End to end: a real coordinator, two volunteer processes and one REAL client (runVolunteer)
// in this process whose PeerJS closes its first data connection right after the first frame
// went out on it (the connection drops in step 1's all-reduce, nobody leaves). Then:
//   - nobody was evicted, and all three trained to the end;
//   - step 1 was aborted once and run again in a new generation of the same three peers, each
//     reusing its kept sum (nothing computed twice);
//   - every step is committed exactly once, with one checksum, and the same samples as one peer;
//   - the final weights equal one peer's run of the same job (the equivalence tolerance).
// Also: a session whose teardown throws (its WebRTC endpoint fails to close) still ends, so the
// volunteer can go on (rejoin, or exit when the job is done) instead of hanging.
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import { runVolunteer, type SocketCtor } from '../../src/client/volunteer.ts';
import type { ConnectOptionsLike, PeerCtor } from '../../src/comm/peerjs-peer.ts';
import type { DataConnectionLike } from '../../src/comm/peerjs-link.ts';
import { NODE_RTC_CONFIG, loadNodePeer } from '../../src/comm/node.ts';
import { nodeDecoder, nodeGunzip } from '../../src/data/decode-node.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { WasmEngine } from '../../src/wasm/engine.ts';
import { isReadyFrame } from '../../src/protocol/frames.ts';
import { buildTestData, finalWeights, metricsOf, onePeerWeights, relDiff, startTestJob, stopAll, tempRoot, testJob, volunteer } from '../../testbed/jobs.ts';

const K = 6;
let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
const spawned: LocalVolunteer[] = [];

beforeAll(async () => {
  root = await tempRoot('form-again');
  data = await buildTestData(root.dir);
}, 120_000);
afterAll(async () => {
  await stopAll(spawned);
  await root?.remove();
});

/**
 * PeerJS that closes the first of its outgoing data connections to carry a ring frame, right after
 * that frame (a fresh link's first frame after its READY is a ring frame; an attempt that failed sent nothing).
 */
function cuttingPeer(Base: PeerCtor, onCut: (to: string) => void): PeerCtor {
  let armed = true;
  return class extends Base {
    override connect(peer: string, options: ConnectOptionsLike): DataConnectionLike | undefined {
      const conn = super.connect(peer, options);
      if (!conn) return conn;
      const send = conn.send.bind(conn);
      conn.send = (d: Uint8Array) => {
        send(d);
        // The READY answering the accepting end's (peerjs-link.ts) belongs to the link: a ring frame is what counts.
        if (!armed || isReadyFrame(d)) return;
        armed = false;
        onCut(peer);
        setTimeout(() => conn.close(), 0);
      };
      return conn;
    }
  };
}

/** What the run left: see the header. */
async function check(jobDir: string, solo: { jobDir: string; weights: Float32Array }, lines: readonly string[]): Promise<number> {
  const records = await metricsOf(jobDir);
  expect(
    records.filter((r) => r.type === 'abort').map((r) => r.type === 'abort' && [r.step, r.formedAgain]), 'step 1 aborted once, the ring formed again',
  ).toEqual([[1, true]]);
  const generations = records.filter((r) => r.type === 'generation');
  expect(generations.map((g) => g.ring.length), 'the same three, formed again').toEqual([3, 3]);
  expect(generations[1]!.ring).toEqual(generations[0]!.ring);
  expect(lines.some((l) => /is still connected, so the ring forms again with it once/.test(l))).toBe(true);
  const done = latestPerStep(records);
  expect(done.map((r) => r.step), 'every step committed exactly once').toEqual(Array.from({ length: K }, (_, i) => i + 1));
  for (const r of done) expect(new Set(r.peers.map((p) => p.checksum)).size, `checksums of step ${r.step}`).toBe(1);
  // The re-run of step 1: every member reused its whole slice and computed nothing more.
  const first = done[0]!;
  expect(first.peers.map((p) => [p.reused, p.images]), JSON.stringify(first.peers)).toEqual(first.peers.map((p) => [p.images, p.images]));
  const soloRecords = latestPerStep(await metricsOf(solo.jobDir));
  expect(done.map((r) => r.samples), 'the samples one peer commits').toEqual(soloRecords.map((r) => r.samples));
  return relDiff((await finalWeights(jobDir)).weights, solo.weights);
}

describe('a link lost in a generation\'s first step', () => {
  it('forms the same ring again once: nobody evicted, each member reuses its sum, weights as one peer', async () => {
    const config = (extra: Record<string, unknown>) => testJob(K, extra);
    const solo = await onePeerWeights(root.dir, 'single', data, config({}), 'wasm');
    const job = await startTestJob(root.dir, 'again', data, config({ minPeers: 3 }));
    const engine = await WasmEngine.create({ initialMiB: 4 });
    const lines: string[] = [];
    let cutTo: string | null = null;
    try {
      spawned.push(volunteer(job.url, 'v1', 'wasm'), volunteer(job.url, 'v2', 'wasm'));
      const Peer = cuttingPeer(await loadNodePeer(), (to) => { cutTo = to; });
      const exit = await runVolunteer(
        { engine, Peer, rtcConfig: NODE_RTC_CONFIG, WebSocket: WebSocket as unknown as SocketCtor, decoder: nodeDecoder, gunzip: nodeGunzip },
        { url: job.url, name: 'cut', log: (l) => lines.push(l), rejoinForMs: 10_000 },
      );
      await job.driver.finished;
      expect(exit.reason).toBe('done');
      expect(cutTo, 'the link was cut').not.toBeNull();
      expect(job.events.filter((e) => e.type === 'peer-left'), 'nobody evicted, nobody left').toEqual([]);
      const d = await check(job.jobDir, solo, job.lines);
      console.log(`form again: link to ${cutTo} cut in step 1; after ${K} steps max |dw| / max |w| vs one peer = ${d.toExponential(2)}`);
      expect(d).toBeLessThan(1e-4);
    } catch (e) {
      console.log(`form again failed; coordinator:\n${job.lines.join('\n')}\ncut:\n${lines.join('\n')}\n` +
        `${spawned.map((v) => `${v.name}:\n${v.lines.join('\n')}`).join('\n')}`);
      throw e;
    } finally {
      await stopAll(spawned.splice(0));
      await job.close();
      engine.destroy();
    }
  }, 300_000);

  it('a session whose WebRTC endpoint fails to close still ends: the volunteer is not left hanging', async () => {
    const job = await startTestJob(root.dir, 'teardown', data, testJob(3));
    const engine = await WasmEngine.create({ initialMiB: 4 });
    const lines: string[] = [];
    const Base = await loadNodePeer();
    const Peer: PeerCtor = class extends Base {
      override destroy(): void {
        super.destroy();
        throw new Error('destroy failed (test)');
      }
    };
    try {
      const run = runVolunteer(
        { engine, Peer, rtcConfig: NODE_RTC_CONFIG, WebSocket: WebSocket as unknown as SocketCtor, decoder: nodeDecoder, gunzip: nodeGunzip },
        { url: job.url, name: 'teardown', log: (l) => lines.push(l), rejoinForMs: 10_000 },
      );
      const hung = new Promise<'hung'>((r) => { setTimeout(() => r('hung'), 60_000).unref(); });
      const exit = await Promise.race([run, hung]);
      expect(exit === 'hung' ? exit : exit.reason, lines.slice(-10).join('\n')).toBe('done');
      expect(lines.some((l) => /closing the WebRTC endpoint failed \(destroy failed \(test\)\); the session ends anyway/.test(l)), lines.join('\n')).toBe(true);
    } finally {
      await job.close();
      engine.destroy();
    }
  }, 120_000);
});
