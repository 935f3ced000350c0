// Issue 42's device path, checked here on llvmpipe: scripts/device/gpu-pack.sh packs node,
// Dawn, the bench bundle and Debian's Vulkan loader; scripts/device/gpu.sh --check unpacks them
// into a folder of their own and runs the adapter report, the kernels bench (ours against TF.js
// on one adapter) and a step from there alone, with the packed Vulkan loader proven to be the
// one Dawn opened. Also the step bench's model lists, which both sides of the GPU run read.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parameterCount, parseStepModels, stepLabel } from '../../bench/step-models.ts';

describe('step bench model lists', () => {
  it('parses NAME@SIDE:BATCH items with ImageNet classes for the ImageNet models', () => {
    const m = parseStepModels('small-cnn, resnet50@64:32,resnet50@224', 16);
    expect(m.map(stepLabel)).toEqual(['small-cnn@32 b16', 'resnet50@64 b32', 'resnet50@224 b16']);
    expect(m[0]!.spec.classes).toBe(10);
    expect(m[1]!.spec.input).toEqual([3, 64, 64]);
    expect(parameterCount(m[2]!.spec)).toBe(25_557_032);
  });

  it('refuses what it cannot run, naming the form', () => {
    expect(() => parseStepModels('')).toThrow(/NAME@SIDE:BATCH/);
    expect(() => parseStepModels('resnet51@64')).toThrow(/unknown model "resnet51".*resnet50/);
    expect(() => parseStepModels('resnet50@64x64')).toThrow(/not NAME@SIDE:BATCH/);
    expect(() => parseStepModels('resnet50@4:8')).toThrow(/side must be/);
    expect(() => parseStepModels('small-cnn@32:0')).toThrow(/batch must be/);
  });
});

describe('GPU device script', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vt-gpu-check-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('packs, and runs the benches from the unpacked folder alone on llvmpipe', { timeout: 420_000 }, () => {
    const env = { ...process.env, PACK_DIR: join(dir, 'pack'), GPU_WORK: join(dir, 'work'), OUT: join(dir, 'out'), XZ_LEVEL: '0' };
    const pack = spawnSync('bash', ['scripts/device/gpu-pack.sh'], { env, encoding: 'utf8', timeout: 180_000 });
    expect(pack.status, pack.stderr + pack.stdout).toBe(0);
    for (const f of ['node.xz', 'dawn.tar.xz', 'bench.mjs']) expect(existsSync(join(dir, 'pack', f))).toBe(true);
    const run = spawnSync('bash', ['scripts/device/gpu.sh', '--check'], { env, encoding: 'utf8', timeout: 360_000 });
    const log = run.stdout + run.stderr;
    expect(run.status, log.slice(-4000)).toBe(0);
    // The folder's own node ran everything.
    expect(log).toContain(`from ${join(dir, 'work', 'bin', 'node')}`);
    if (existsSync('/usr/lib/chromium/vk_swiftshader_icd.json')) {
      expect(log).toMatch(new RegExp(`packed Vulkan loader: Dawn loaded ${join(dir, 'work', 'lib')}/\\S*libvulkan\\.so\\.1`));
    }
    const adapter = JSON.parse(readFileSync(join(dir, 'out', 'adapter.json'), 'utf8')) as { limits: Record<string, number>; granted: Record<string, number> };
    expect(adapter.limits.maxStorageBufferBindingSize).toBeGreaterThan(0);
    expect(adapter.granted.maxComputeInvocationsPerWorkgroup).toBeGreaterThan(0);
    // Every kernel was checked against TF.js (or a float64 product) before it was timed.
    type KernelRow = { name: string; maxRelDiff: number; oursGflops: number };
    const kernels = JSON.parse(readFileSync(join(dir, 'out', 'kernels.json'), 'utf8')) as { complete: boolean; results: KernelRow[] };
    expect(kernels.complete, log.slice(-4000)).toBe(true);
    // The check's set (gpu.sh): a GEMM, fc6, and each convolution pass once or more.
    expect(kernels.results.map((r) => r.name)).toEqual(expect.arrayContaining([
      'gemm 512', 'resnet 3x3 64->64 56x56 b1 fwd', 'resnet 3x3 64->64 56x56 b1 bwd-input', 'resnet 1x1 s2 64->128 b1 bwd-filter']));
    expect(kernels.results.length).toBe(7);
    for (const r of kernels.results) {
      expect(r.maxRelDiff, r.name).toBeLessThan(1e-3);
      expect(r.oursGflops, r.name).toBeGreaterThan(0);
    }
    const step = JSON.parse(readFileSync(join(dir, 'out', 'step.json'), 'utf8')) as { rows: { error?: string; hostShare: number }[] };
    expect(step.rows.filter((r) => r.error)).toEqual([]);
    expect(step.rows[0]!.hostShare).toBeGreaterThan(0);
    // The PyTorch anchor, where this machine has torch: the same model built from our spec.
    if (existsSync(join(dir, 'out', 'torch.json'))) {
      const torch = JSON.parse(readFileSync(join(dir, 'out', 'torch.json'), 'utf8')) as { steps: { error?: string }[]; kernels: { error?: string }[] };
      expect([...torch.steps, ...torch.kernels].filter((s) => s.error)).toEqual([]);
    }
    const last = JSON.parse(log.trim().split('\n').filter((l) => l.startsWith('{')).pop()!) as Record<string, unknown>;
    expect(last.report).toBe('gpu');
    expect(last.kernels_vs_tfjs).toBeGreaterThan(0);
  });
});
