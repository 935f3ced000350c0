// The CPU bench's anchors: the FLOP count it reads speeds against, the wasm SIMD peak loop, and
// the PyTorch peer, which builds our models from their specs (where this machine has torch).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fewestFlopsPerImage, trainingFlopsPerImage } from '../../bench/flops.ts';
import { fmaAb } from '../../bench/fma-ab.ts';
import { compilePeak, simdPeakGflops } from '../../bench/simd-peak.ts';
import { parseStepModels } from '../../bench/step-models.ts';
import { parseTorchIsa, parseTorchMalloc, runTorchCpu, torchEnv, torchPython } from '../../bench/torch-peer.ts';
import { pairedRatio, TorchServer } from '../../bench/torch-pairs.ts';
import { resnet20, resnet50, smallCnn } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';
import { relaxedSimd } from '../../src/wasm/kernels.ts';

describe('cpu bench anchors', () => {
  it('counts a training step as forward, filter and data gradients of convs and linears', () => {
    // ResNet-50 at 224: 4.09 G multiply-adds forward (the published figure), x2 FLOPs, x3 passes
    // but the first conv, which needs no data gradient.
    const r50 = trainingFlopsPerImage(resnet50(1000, [3, 224, 224]));
    expect(r50 / 1e9).toBeGreaterThan(24.0);
    expect(r50 / 1e9).toBeLessThan(24.6);
    // The small CNN by hand: conv 3->32 5x5 pad 2 at 32x32, etc. come out of the same rule.
    const spec = smallCnn([3, 32, 32], 10);
    const first = spec.nodes.find((n) => n.op === 'conv')!;
    expect(first.op === 'conv' && first.in).toBe(0);
    expect(trainingFlopsPerImage(spec)).toBeGreaterThan(0);
  });

  it('counts the fewest FLOPs as the 3x3 stride-1 passes at a quarter, every other layer in full', () => {
    // ResNet-50 at 64 pixels: 2.973 GFLOP in 3x3 stride-1 passes of 7.817 (its 1x1 convolutions are 3.548 of the rest).
    const r50 = resnet50(1000, [3, 64, 64]);
    const [all, fewest] = [trainingFlopsPerImage(r50), fewestFlopsPerImage(r50)];
    expect(all / 1e9).toBeCloseTo(7.817, 3);
    expect((all - fewest) / 1e9).toBeCloseTo(0.75 * 2.973, 2);
    // ResNet-20: 94% of its FLOPs are 3x3 stride-1 passes; the first conv reads the images (2 passes, at a quarter too).
    const r20 = resnet20([3, 32, 32], 10);
    expect(fewestFlopsPerImage(r20) / trainingFlopsPerImage(r20)).toBeGreaterThan(0.25);
    expect(fewestFlopsPerImage(r20) / trainingFlopsPerImage(r20)).toBeLessThan(0.32);
  });

  it('measures a positive wasm SIMD peak that two threads do not lower', { timeout: 60_000 }, async () => {
    const binary = await compilePeak();
    const one = await simdPeakGflops(binary, 1);
    const two = await simdPeakGflops(binary, 2);
    expect(one).toBeGreaterThan(0.5);
    expect(two).toBeGreaterThan(one * 0.9);
  });

  it('measures the fused multiply-add peak too, and the fused build against the plain one step for step', { timeout: 60_000 }, async () => {
    expect(await relaxedSimd()).toBe(true);
    expect(await simdPeakGflops(await compilePeak('fma'), 1)).toBeGreaterThan(0.5);
    const spec = smallCnn();
    const rng = makeRng(3);
    const x = uniformF32(rng, 2 * spec.input[0] * spec.input[1] * spec.input[2]);
    const r = await fmaAb(spec, x, Int32Array.of(1, 7), 2, 1, 'auto', 1);
    expect(r.threads).toBe(1);
    expect(r.fusedMs).toBeGreaterThan(0);
    expect(r.speedup).toBeCloseTo(r.plainMs / r.fusedMs, 12);
  });

  it("runs PyTorch with glibc keeping its freed memory unless asked for glibc as it comes", () => {
    const steady = torchEnv(2);
    expect([steady.OMP_NUM_THREADS, steady.MALLOC_MMAP_THRESHOLD_, steady.MALLOC_TRIM_THRESHOLD_]).toEqual(['2', '33554432', '17179869184']);
    // 'default' leaves glibc as it comes, also when this process was started with the variables set.
    const before = process.env.MALLOC_TRIM_THRESHOLD_;
    process.env.MALLOC_TRIM_THRESHOLD_ = '1';
    try {
      const plain = torchEnv(1, 'default');
      expect([plain.OMP_NUM_THREADS, plain.MALLOC_MMAP_THRESHOLD_, plain.MALLOC_TRIM_THRESHOLD_]).toEqual(['1', undefined, undefined]);
    } finally {
      if (before === undefined) delete process.env.MALLOC_TRIM_THRESHOLD_;
      else process.env.MALLOC_TRIM_THRESHOLD_ = before;
    }
    expect([parseTorchMalloc([]), parseTorchMalloc(['--torch-malloc=default'])]).toEqual(['steady', 'default']);
    expect(() => parseTorchMalloc(['--torch-malloc=jemalloc'])).toThrow(/--torch-malloc must be steady .* or default/);
  });

  it('holds PyTorch to AVX2 only when asked, whatever this process was started with', () => {
    const held = torchEnv(2, 'steady', 'avx2');
    expect([held.ONEDNN_MAX_CPU_ISA, held.DNNL_MAX_CPU_ISA, held.OPENBLAS_CORETYPE, held.OMP_NUM_THREADS]).toEqual(['AVX2', 'AVX2', 'Haswell', '2']);
    const before = process.env.ONEDNN_MAX_CPU_ISA;
    process.env.ONEDNN_MAX_CPU_ISA = 'AVX2';
    try {
      const native = torchEnv(1);
      expect([native.ONEDNN_MAX_CPU_ISA, native.OPENBLAS_CORETYPE, native.MALLOC_MMAP_THRESHOLD_]).toEqual([undefined, undefined, '33554432']);
    } finally {
      if (before === undefined) delete process.env.ONEDNN_MAX_CPU_ISA;
      else process.env.ONEDNN_MAX_CPU_ISA = before;
    }
    expect([parseTorchIsa([]), parseTorchIsa(['--torch-isa=avx2']), parseTorchIsa(['--torch-isa=native'])]).toEqual(['native', 'avx2', 'native']);
    expect(() => parseTorchIsa(['--torch-isa=avx512'])).toThrow(/--torch-isa must be native .* or avx2/);
  });

  it('alternates the two sides round by round and takes the median of the rounds\' ratios', async () => {
    const calls: string[] = [];
    // Step times that change from round to round, as this host's speed does: the ratio of each round stays 2.
    let round = 0;
    const side = (name: string, scale: number) => async (k: number) => {
      calls.push(`${name}${k}`);
      const base = 100 + 50 * Math.floor(round++ / 2);
      return Array.from({ length: k }, (_, i) => scale * base + i);
    };
    const r = await pairedRatio(side('ours', 1), side('torch', 2), 4, 3, 1);
    expect(calls).toEqual(['ours3', 'torch3', 'torch3', 'ours3', 'ours3', 'torch3', 'torch3', 'ours3']);
    expect(r.rounds.length).toBe(4);
    for (const v of r.rounds) expect(v).toBeCloseTo(2, 1);
    expect(r.ratio).toBeCloseTo(2, 1);
    await expect(pairedRatio(side('ours', 1), side('torch', 1), 0, 1, 1)).rejects.toThrow(/whole numbers >= 1/);
  });

  it('the PyTorch server times steps on request and says what it cannot run, where torch is here', { timeout: 180_000 }, async (ctx) => {
    const py = torchPython(false);
    if ('why' in py) {
      ctx.skip();
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'vt-torch-'));
    const server = await TorchServer.start(py.python, parseStepModels('tiny-cnn@32:4'), 1, 'steady', dir);
    try {
      const ms = await server.steps('tiny-cnn@32 b4', 2);
      expect(ms.length).toBe(2);
      for (const v of ms) expect(v).toBeGreaterThan(0);
      await expect(server.steps('resnet20@32 b4', 1)).rejects.toThrow(/no model 'resnet20@32 b4' in the specs/);
      expect((await server.steps('tiny-cnn@32 b4', 1)).length).toBe(1);
    } finally {
      server.close();
      rmSync(dir, { recursive: true, force: true });
    }
    await expect(server.steps('tiny-cnn@32 b4', 1)).rejects.toThrow(/closed/);
  });

  it('the PyTorch peer trains our spec with the same parameter count, where torch is here', { timeout: 180_000 }, (ctx) => {
    const py = torchPython(false);
    if ('why' in py) {
      ctx.skip();
      return;
    }
    const dir = mkdtempSync(join(tmpdir(), 'vt-torch-'));
    try {
      const run = runTorchCpu(py.python, parseStepModels('tiny-cnn@32:4,resnet20@16:2'), 1, 1, 'steady', dir);
      expect(run.threads).toBe(1);
      expect(run.rows.map((r) => r.model)).toEqual(['tiny-cnn@32 b4', 'resnet20@16 b2']);
      for (const r of run.rows) expect(r.ips).toBeGreaterThan(0);
      // oneDNN's kernel for the convolutions, read from its verbose line (jit:avx512_core on the EPYC host).
      if (run.mkldnn) expect(run.conv_isa).toMatch(/^(jit|gemm|brgconv|ref)[:_]/);
      else expect(run.conv_isa).toBe('no mkldnn');
      expect(run.blas_core).toMatch(/\S/);
      // Held to AVX2 (--torch-isa=avx2): oneDNN's convolutions on avx2 kernels, OpenBLAS on its Haswell (AVX2) ones.
      const held = runTorchCpu(py.python, parseStepModels('tiny-cnn@32:4'), 1, 1, 'steady', dir, 'avx2');
      if (held.mkldnn) expect(held.conv_isa).not.toMatch(/avx512|amx/);
      if (run.blas === 'openblas') expect(held.blas_core).toBe('Haswell');
      // A spec whose parameter count the builder does not reproduce is refused, not timed.
      const bad = spawnSync(py.python, ['-c', [
        'import sys; sys.path.insert(0, "bench")',
        'from torch_models import train_step_ms',
        'import json, torch',
        `e = json.loads(open("${join(dir, 'specs.json')}").read())[0]`,
        'e["params"] += 1',
        'train_step_ms(e, torch.device("cpu"), 1, 0)',
      ].join('\n')], { encoding: 'utf8' });
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/the models differ/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
