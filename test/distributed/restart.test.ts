// The coordinator process is SIGKILLed mid-job and started again on the same job folder: it
// resumes from the newest checkpoint, the volunteers (separate processes) rejoin by
// themselves, and the job finishes. No checkpoint file is lost or damaged by the kill. npm
// start's own local volunteers do not outlive it: killed outright, it takes them with it.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { descendants, ROOT, type LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import { latestPerStep } from '../../coordinator/metrics.ts';
import { decodeCheckpoint } from '../../src/checkpoint/format.ts';
import { buildTestData, metricsOf, stopAll, tempRoot, until, volunteer } from '../../testbed/jobs.ts';

const STEPS = 16;
let root: { dir: string; remove(): Promise<void> };
let dataDir = '';
const spawned: LocalVolunteer[] = [];
const coordinators: ChildProcess[] = [];

beforeAll(async () => {
  root = await tempRoot('restart');
  ({ dataDir } = await buildTestData(root.dir));
});
afterAll(async () => {
  await stopAll(spawned);
  for (const c of coordinators) c.kill('SIGKILL');
  await root?.remove();
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

interface Coord { child: ChildProcess; out: string[]; err: string[]; exited: Promise<number | null> }

function startCoordinator(jobDir: string, port: number, volunteers = 0): Coord {
  const child = spawn(process.execPath, [
    '--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'coordinator/cli.ts', 'start',
    '--dataset', 'mnist', '--cache', dataDir, '--job-dir', jobDir, '--port', String(port), '--volunteers', String(volunteers),
    '--steps', String(STEPS), '--batch', '24', '--warmup', '2', '--checkpoint-every', '2', '--eval-every', '0', '--min-peers', '2', '--seed', '5',
    '--exit-when-done', ...(volunteers ? ['--backend', 'wasm', '--threads', '1'] : []),
  ], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  coordinators.push(child);
  const out: string[] = [];
  const err: string[] = [];
  child.stdout!.setEncoding('utf8').on('data', (d: string) => out.push(d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => err.push(d));
  return { child, out, err, exited: new Promise((r) => child.once('exit', (code) => r(code))) };
}

async function checkpointFiles(dir: string): Promise<{ name: string; step: number }[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => /^step-\d{10}\.vtck$/.test(n)).map((name) => ({ name, step: Number(name.slice(5, 15)) })).sort((a, b) => a.step - b.step);
}

async function expectAllReadable(dir: string): Promise<number[]> {
  const files = await checkpointFiles(dir);
  for (const f of files) {
    const c = decodeCheckpoint(new Uint8Array(await readFile(join(dir, f.name))), f.name);
    expect(c.step).toBe(f.step);
  }
  return files.map((f) => f.step);
}

describe('coordinator restart', () => {
  it('is killed mid-job and resumes from its newest checkpoint; volunteers rejoin; the job finishes', async () => {
    const jobDir = join(root.dir, 'job');
    const ckptDir = join(jobDir, 'checkpoints');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const first = startCoordinator(jobDir, port);
    await until(() => first.err.join('').includes('coordinator: http'), 60_000, 'the coordinator to listen');
    // On the wasm engine (its subject is the coordinator, not the engine): a step of this job takes ~0.15 s there against ~1 s
    // on Dawn over llvmpipe. The kill still lands mid-job: 10 steps are left when a checkpoint of step 6 is seen (polled every 100 ms).
    const vs = ['a', 'b'].map((n) => volunteer(url, n, 'wasm'));
    spawned.push(...vs);
    let before: number[] = [];
    const deadline = Date.now() + 180_000;
    while ((before = (await checkpointFiles(ckptDir)).map((f) => f.step)).filter((s) => s >= 6).length === 0) {
      if (Date.now() > deadline) throw new Error(`no checkpoint of step >= 6; coordinator said:\n${first.err.join('')}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe(null);
    const afterKill = await expectAllReadable(ckptDir);
    expect(Math.max(...afterKill)).toBeGreaterThanOrEqual(Math.max(...before));
    const resumeFrom = Math.max(...afterKill);
    expect(resumeFrom, 'the kill landed mid-job').toBeLessThan(STEPS);
    console.log(`restart: the coordinator was killed with checkpoints of steps ${afterKill.join(', ')}; resuming from ${resumeFrom}`);

    const second = startCoordinator(jobDir, port);
    expect(await second.exited, second.err.join('')).toBe(0);
    const log = second.err.join('');
    expect(log).toContain(`from the checkpoint of step ${resumeFrom}`);
    const summary = JSON.parse(second.out.join('').trim().split('\n').pop()!) as { steps: number };
    expect(summary.steps).toBe(STEPS);
    for (const v of vs) expect(await v.exited, v.lines.slice(-20).join('\n')).toBe(0);
    // The volunteers lost their sessions and joined the restarted coordinator as new peers.
    for (const v of vs) expect(v.lines.filter((l) => /joined as/.test(l)).length).toBeGreaterThanOrEqual(2);
    const steps = await expectAllReadable(ckptDir);
    expect(steps).toContain(STEPS);
    const records = await metricsOf(jobDir);
    const committed = latestPerStep(records).map((r) => r.step);
    expect(committed).toEqual(Array.from({ length: STEPS }, (_, i) => i + 1));
    // Where the step numbers go back (steps after the checkpoint done before the kill are
    // done again), they go back to the step after the checkpoint: nothing before it re-runs.
    const numbers = records.flatMap((r) => (r.type === 'step' ? [r.step] : []));
    const back = numbers.findIndex((n, i) => i > 0 && n <= numbers[i - 1]!);
    if (back >= 0) expect(numbers[back]).toBe(resumeFrom + 1);
    expect(records.filter((r) => r.type === 'done').length).toBe(1);
    // npm start's LARS job (no recipe) steps each bias at its layer's trust ratio, on every peer of the resumed job too.
    const job = JSON.parse(await readFile(join(jobDir, 'job.json'), 'utf8')) as { config: { optimizer: Record<string, unknown> } };
    expect(job.config.optimizer).toMatchObject({ kind: 'lars', biasTrust: 'layer' });
    expect(log).toMatch(/lars lr \S+, biases at their layer's trust ratio/);
  });

  it('npm start killed outright takes its local volunteers with it (none is left computing as an orphan)', async () => {
    const port = await freePort();
    // A ring of 2 needs both volunteers: they load and wait, each a supervisor and its child.
    const coord = startCoordinator(join(root.dir, 'orphans'), port, 2);
    const pid = coord.child.pid!;
    let kids: number[] = [];
    await until(() => (kids = descendants(pid)).length >= 4 && coord.err.join('').includes('ring generation 1'), 120_000,
      `npm start's 2 volunteers (4 processes) to join; it said:\n${coord.err.join('').slice(-2000)}`);
    coord.child.kill('SIGKILL');
    expect(await coord.exited).toBe(null);
    // A zombie (ended, not yet reaped by its new parent) does not count.
    const alive = (p: number) => { try { return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8')); } catch { return false; } };
    // FOLLOW_POLL_MS (0.5 s) notices; a main thread in a wasm step runs again within that step.
    const end = Date.now() + 20_000;
    while (kids.some(alive) && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    const left = kids.filter(alive);
    for (const p of left) process.kill(p, 'SIGKILL');
    expect(left, 'volunteer processes still running 20 s after npm start was killed').toEqual([]);
  }, 180_000);
});
