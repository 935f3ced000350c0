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
export interface TorchRun {
  torch_version: string; threads: number; blas: string; mkldnn: boolean;
  /** The kernel oneDNN runs the convolutions with (bench/torch_cpu.py conv_isa: jit:avx512_core on the EPYC host). */
  conv_isa: string;
  /** The kernels OpenBLAS chose (openblas_get_corename: Cooperlake on the EPYC host, Haswell when held); absent in runs before it. */
  blas_core?: string;
  rows: TorchRow[];
}

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

/**
 * How the PyTorch peer's process allocates memory. 'default' is glibc's as it comes: PyTorch frees each step's
 * tensors and glibc hands the larger blocks back to the kernel (munmap, and trimming the heap's top), so the next
 * step takes page faults again. On this 2-core host that made its CPU step 1x-4x slower from step to step: the small
 * CNN at batch 64 on one thread took 48-226 ms a step as it comes and a steady 46-61 ms with the settings below
 * (docs/wasm.md, 2026-12-02). 'steady' keeps the memory in the process: glibc's mmap threshold at its 64-bit
 * maximum (32 MiB, so a step's tensors come from the heap) and a trim threshold no heap reaches (16 GiB). Both are
 * needed: the trim threshold alone fixes the mmap threshold at its 128 KiB default, and the step took 480 ms. This is
 * what PyTorch's own CPU tuning advice does with jemalloc or tcmalloc: the anchor a lab that tunes would run.
 */
export type TorchMalloc = 'steady' | 'default';
export const STEADY_MALLOC: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: String(32 << 20), MALLOC_TRIM_THRESHOLD_: String(16 * 2 ** 30) };

/**
 * The instructions PyTorch's kernels may use. 'native': all this CPU has (on the EPYC host oneDNN runs the convolutions
 * on jit:avx512_core, 16 float lanes, where wasm SIMD has 4). 'avx2': held to AVX2 (8 lanes), the widest most lab desktops
 * have: oneDNN through ONEDNN_MAX_CPU_ISA (its convolutions then report jit:avx2), OpenBLAS through OPENBLAS_CORETYPE
 * (Haswell: its AVX2 kernels; on the EPYC host it picks Cooperlake, AVX-512, by itself). 'native' drops both variables
 * from what this process was started with: this machine's shell sets OPENBLAS_CORETYPE=Haswell, which runs 1-18 of
 * docs/results/cpu.json inherited. A desktop without AVX-512 differs in more than its lanes (clock, caches, memory), so
 * against 'avx2' the ratios predict such a desktop; they do not measure one.
 */
export type TorchIsa = 'native' | 'avx2';
export const AVX2_ENV: Readonly<Record<string, string>> = { ONEDNN_MAX_CPU_ISA: 'AVX2', DNNL_MAX_CPU_ISA: 'AVX2', OPENBLAS_CORETYPE: 'Haswell' };

/**
 * The environment of a bench/torch_cpu.py process at `threads` threads: the thread variables must be set before torch loads.
 * Variables of `malloc` and `isa` this process was started with are dropped unless asked for.
 */
export function torchEnv(threads: number, malloc: TorchMalloc = 'steady', isa: TorchIsa = 'native'): NodeJS.ProcessEnv {
  const n = String(threads);
  const env: NodeJS.ProcessEnv = { ...process.env, OMP_NUM_THREADS: n, OPENBLAS_NUM_THREADS: n, MKL_NUM_THREADS: n };
  for (const k of [...Object.keys(STEADY_MALLOC), ...Object.keys(AVX2_ENV)]) delete env[k];
  return { ...env, ...(malloc === 'steady' ? STEADY_MALLOC : {}), ...(isa === 'avx2' ? AVX2_ENV : {}) };
}

/** `--torch-isa=native|avx2` (default native). */
export function parseTorchIsa(args: readonly string[]): TorchIsa {
  const raw = args.find((a) => a.startsWith('--torch-isa='))?.slice('--torch-isa='.length);
  if (raw === undefined) return 'native';
  if (raw === 'native' || raw === 'avx2') return raw;
  throw new Error(`--torch-isa must be native (all this CPU has) or avx2 (PyTorch held to AVX2, as on most lab desktops); got "${raw}"`);
}

/** `--torch-malloc=steady|default` (default steady). */
export function parseTorchMalloc(args: readonly string[]): TorchMalloc {
  const raw = args.find((a) => a.startsWith('--torch-malloc='))?.slice('--torch-malloc='.length);
  if (raw === undefined) return 'steady';
  if (raw === 'steady' || raw === 'default') return raw;
  throw new Error(`--torch-malloc must be steady (glibc keeps PyTorch's freed memory) or default (glibc as it comes); got "${raw}"`);
}

/** One bench/torch_cpu.py process with `threads` threads over `models`; held to AVX2 (`isa`), refused if oneDNN still reports AVX-512. */
export function runTorchCpu(
  python: string, models: StepModel[], threads: number, steps: number, malloc: TorchMalloc = 'steady', dir = '.cache/bench/cpu',
  isa: TorchIsa = 'native',
): TorchRun {
  mkdirSync(dir, { recursive: true });
  const specs = join(dir, 'specs.json'), out = join(dir, `torch-${threads}t.json`);
  writeFileSync(specs, specsJson(models));
  const r = spawnSync(python, ['bench/torch_cpu.py', '--specs', specs, '--threads', String(threads), '--steps', String(steps), '--out', out], {
    stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', env: torchEnv(threads, malloc, isa),
  });
  if (r.status !== 0) throw new Error(`bench/torch_cpu.py with ${threads} thread(s) failed (exit ${r.status}): ${r.stdout.slice(-500)}`);
  const run = JSON.parse(readFileSync(out, 'utf8')) as TorchRun;
  if (isa === 'avx2' && /avx512|amx/.test(run.conv_isa)) {
    throw new Error(`--torch-isa=avx2: ONEDNN_MAX_CPU_ISA=AVX2 was set, but oneDNN still runs ${run.conv_isa}; this PyTorch cannot be held to AVX2`);
  }
  return run;
}
