// The device check shown on the page: acquires WebGPU the way a volunteer will, measures a
// quick GEMM, and explains what to do when WebGPU is missing (no stack traces).
import { getDevice } from '../gpu/device.ts';
import { VtError } from '../errors.ts';
import { gemm } from '../ops/gemm.ts';
import { autotuneGemm } from '../ops/gemm-tune.ts';

const status = document.getElementById('status')!;

async function check(): Promise<void> {
  const gpu = await getDevice();
  status.textContent = `WebGPU adapter: ${gpu.info.description}${gpu.info.software ? ' (software)' : ''}\nMeasuring…`;
  const tune = await autotuneGemm(gpu);
  const n = 512;
  const a = gpu.zeros([n, n]), b = gpu.zeros([n, n]), c = gpu.empty([n, n]);
  gemm(gpu, a, b, c);
  await gpu.sync();
  const t0 = performance.now();
  for (let i = 0; i < 5; i++) gemm(gpu, a, b, c);
  await gpu.sync();
  const ms = (performance.now() - t0) / 5;
  status.textContent = `WebGPU adapter: ${gpu.info.description}${gpu.info.software ? ' (software)' : ''}\n` +
    `GEMM ${n}x${n}x${n}: ${((2 * n ** 3) / ms / 1e6).toFixed(2)} GFLOP/s (kernel ${tune.config.entry})`;
  gpu.destroy();
}

check().catch((e: unknown) => {
  status.classList.add('bad');
  status.textContent = e instanceof VtError ? e.message : `Could not use this device: ${String((e as Error).message ?? e)}`;
});
