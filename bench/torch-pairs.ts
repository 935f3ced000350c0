// Our step and PyTorch's in alternation, so that both meet the same phase of this host's speed:
// a 2-core host here runs two busy threads 20-50% slower a few seconds into a load than right
// after an idle spell (docs/wasm.md, runs 12 and 13), so timing one side for a minute and then
// the other compares two different machines. PyTorch runs in one long-lived bench/torch_cpu.py
// --serve process per thread count, asked for k steps at a time; each round times k steps of
// each side back to back (the order alternating from round to round), and the ratio of the
// round is their images/s; the figure is the median of the rounds' ratios. Each side's steps start
// after an idle gap (GAP_MS), the same for both: a peer's threads may still spin after its last
// step (OpenBLAS's workers poll for up to about 0.1 s), and must not run into the other's turn.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface, type Interface } from 'node:readline';
import { specsJson, type StepModel } from './step-models.ts';
import { type TorchIsa, torchEnv, type TorchMalloc } from './torch-peer.ts';
import { median } from './timing.ts';

/** One bench/torch_cpu.py --serve process: its steps on request. Owns the process: close() ends it. */
export class TorchServer {
  private readonly lines: AsyncIterator<string>;
  private readonly rl: Interface;
  private closed = false;

  private constructor(private readonly child: ChildProcessByStdio<Writable, Readable, null>, readonly threads: number) {
    this.rl = createInterface({ input: child.stdout });
    this.lines = this.rl[Symbol.asyncIterator]();
  }

  /** Starts the process for `models` at `threads` threads (torchEnv, with `malloc` and `isa`) and waits until it is ready. */
  static async start(
    python: string, models: readonly StepModel[], threads: number, malloc: TorchMalloc = 'steady', dir = '.cache/bench/cpu',
    isa: TorchIsa = 'native',
  ): Promise<TorchServer> {
    mkdirSync(dir, { recursive: true });
    const specs = join(dir, `specs-serve-${threads}t.json`);
    writeFileSync(specs, specsJson([...models]));
    const child = spawn(python, ['bench/torch_cpu.py', '--serve', '--specs', specs, '--threads', String(threads)], {
      stdio: ['pipe', 'pipe', 'inherit'], env: torchEnv(threads, malloc, isa),
    });
    const s = new TorchServer(child, threads);
    const first = await s.next('start');
    if (!(first as { ready?: boolean }).ready) {
      s.close();
      throw new Error(`bench/torch_cpu.py --serve did not say it was ready: ${JSON.stringify(first)}`);
    }
    return s;
  }

  private async next(what: string): Promise<unknown> {
    const r = await this.lines.next();
    if (r.done) throw new Error(`bench/torch_cpu.py --serve (${this.threads} threads) ended before answering ${what} (its errors are above)`);
    return JSON.parse(r.value) as unknown;
  }

  /** `k` timed steps of the model labelled `label` (stepLabel): their times in ms. */
  async steps(label: string, k: number): Promise<number[]> {
    if (this.closed) throw new Error('the PyTorch server is closed');
    this.child.stdin.write(`${JSON.stringify({ model: label, steps: k })}\n`);
    const r = (await this.next(`${k} steps of ${label}`)) as { ms?: number[]; error?: string };
    if (r.error || !Array.isArray(r.ms) || r.ms.length !== k) {
      throw new Error(`bench/torch_cpu.py --serve: ${r.error ?? `a bad answer ${JSON.stringify(r)}`}`);
    }
    return r.ms;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.rl.close();
    this.child.stdin.end();
    this.child.kill();
  }
}

/** The idle time before each side's steps in a round. */
export const GAP_MS = 300;

const idle = (ms: number) => new Promise<void>((res) => { setTimeout(res, ms); });

export interface PairedRatio {
  /** Median over the rounds of (our images/s) / (PyTorch's), each side's from the median of its k steps in that round. */
  ratio: number;
  /** Each round's ratio, in order. */
  rounds: number[];
  oursMs: number[];
  torchMs: number[];
}

/**
 * `rounds` rounds of `k` steps of each side, one after the other with `gapMs` of idling before each, ours first in even
 * rounds and PyTorch's first in odd ones (`ours(k)` and `torch(k)` return the steps' times in ms; both warmed up before).
 */
export async function pairedRatio(
  ours: (k: number) => Promise<number[]>, torch: (k: number) => Promise<number[]>, rounds: number, k: number, gapMs = GAP_MS,
): Promise<PairedRatio> {
  if (!(Number.isInteger(rounds) && rounds >= 1 && Number.isInteger(k) && k >= 1)) {
    throw new RangeError(`rounds and steps must be whole numbers >= 1, got ${rounds}, ${k}`);
  }
  const ratios: number[] = [], oursMs: number[] = [], torchMs: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let o: number[] = [], t: number[] = [];
    for (const side of r % 2 === 0 ? ['ours', 'torch'] : ['torch', 'ours']) {
      await idle(gapMs);
      if (side === 'ours') o = await ours(k);
      else t = await torch(k);
    }
    const [om, tm] = [median(o), median(t)];
    oursMs.push(om);
    torchMs.push(tm);
    // Same batch on both sides: images/s over images/s is PyTorch's time over ours.
    ratios.push(tm / om);
  }
  return { ratio: median(ratios), rounds: ratios, oursMs, torchMs };
}
