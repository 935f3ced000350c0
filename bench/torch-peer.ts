// PyTorch on this machine's CPU as a peer of `npm run bench -- cpu` (bench/torch_cpu.py). Found
// in a python3 that has it, or installed on demand from Debian's packages (python3-torch, and
// libopenblas0-pthread: without it Debian's torch multiplies matrices with the reference BLAS,
// 5 GFLOP/s here against OpenBLAS's ~200, which would make the anchor a straw man). Never by
// `npm run setup`: only this bench needs it.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { specsJson, type StepModel } from './step-models.ts';

const PACKAGES = ['python3-torch', 'libopenblas0-pthread'];
const PYTHONS = ['python3', '/usr/bin/python3'];

export interface TorchRow { model: string; ms: number; ips: number; loss: number[] }
export interface TorchRun { torch_version: string; threads: number; blas: string; mkldnn: boolean; rows: TorchRow[] }

const hasTorch = (py: string) => spawnSync(py, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0;
const installed = (pkg: string) => spawnSync('dpkg', ['-s', pkg], { stdio: 'ignore' }).status === 0;

/** A python3 with torch (and OpenBLAS beside it), installing them when `install`; else why not. */
export function torchPython(install: boolean): { python: string } | { why: string } {
  const missing = PACKAGES.filter((p) => !installed(p));
  const found = PYTHONS.find(hasTorch);
  if (found && (missing.length === 0 || !install)) return { python: found };
  if (!install) return { why: `no python3 here has torch (install ${PACKAGES.join(' ')} with apt-get, or drop --no-install)` };
  if (process.getuid?.() !== 0) return { why: `torch is missing and installing it needs root: apt-get install ${missing.join(' ')}` };
  console.error(`cpu: installing ${missing.join(' ')} from Debian's packages for the PyTorch peer`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const apt = (args: string[]) => spawnSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env }).status === 0;
  if (!apt(['install', '-y', '-q', ...missing]) && !(apt(['update', '-qq']) && apt(['install', '-y', '-q', ...missing]))) {
    return { why: `apt-get install ${missing.join(' ')} failed (see above)` };
  }
  const now = PYTHONS.find(hasTorch);
  return now ? { python: now } : { why: `${PACKAGES[0]} installed, but no python3 imports torch` };
}

/** The environment of a bench/torch_cpu.py process at `threads` threads: the thread variables must be set before torch loads. */
export function torchEnv(threads: number): NodeJS.ProcessEnv {
  const n = String(threads);
  return { ...process.env, OMP_NUM_THREADS: n, OPENBLAS_NUM_THREADS: n, MKL_NUM_THREADS: n };
}

/** One bench/torch_cpu.py process with `threads` threads over `models`. */
export function runTorchCpu(python: string, models: StepModel[], threads: number, steps: number, dir = '.cache/bench/cpu'): TorchRun {
  mkdirSync(dir, { recursive: true });
  const specs = join(dir, 'specs.json'), out = join(dir, `torch-${threads}t.json`);
  writeFileSync(specs, specsJson(models));
  const r = spawnSync(python, ['bench/torch_cpu.py', '--specs', specs, '--threads', String(threads), '--steps', String(steps), '--out', out], {
    stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', env: torchEnv(threads),
  });
  if (r.status !== 0) throw new Error(`bench/torch_cpu.py with ${threads} thread(s) failed (exit ${r.status}): ${r.stdout.slice(-500)}`);
  return JSON.parse(readFileSync(out, 'utf8')) as TorchRun;
}
