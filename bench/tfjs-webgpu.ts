// TF.js with its WebGPU backend on OUR device (so both run on the same adapter), for
// benchmarks that compare against it. Node has no navigator.gpu; TF.js only checks that it
// exists, then uses the device we hand it.
import * as tf from '@tensorflow/tfjs-core';
import { WebGPUBackend } from '@tensorflow/tfjs-backend-webgpu';
import type { Gpu } from '../src/gpu/runtime.ts';

export { tf };

/**
 * TF.js registers gradients in a separate ESM module whose extension-less imports plain Node
 * cannot resolve; esbuild (already installed with vite) bundles it once into .cache. The
 * registries are process-global, so the bundle's registrations serve the main tfjs-core.
 * Where the bench itself is one bundle (bench/gpu/entry.ts, for a machine without the
 * packages), that bundle registered them already and set GRADIENTS_REGISTERED.
 */
export const GRADIENTS_REGISTERED = Symbol.for('vt.tfjs-gradients-registered');

export async function registerGradients(): Promise<void> {
  if ((globalThis as Record<symbol, unknown>)[GRADIENTS_REGISTERED]) return;
  const { build } = await import('esbuild');
  const { createRequire } = await import('node:module');
  const { pathToFileURL } = await import('node:url');
  const entry = createRequire(import.meta.url).resolve('@tensorflow/tfjs-core/dist/register_all_gradients.js');
  const outfile = '.cache/bench/tfjs-gradients.mjs';
  await build({ entryPoints: [entry], bundle: true, format: 'esm', platform: 'node', outfile, logLevel: 'error' });
  await import(pathToFileURL(outfile).href);
}

export async function tfjsOnDevice(gpu: Gpu): Promise<{ backend: WebGPUBackend; sync(): Promise<void> }> {
  const nav = (globalThis as { navigator?: { gpu?: unknown } }).navigator;
  if (!nav?.gpu) Object.defineProperty(globalThis, 'navigator', { value: { gpu: {}, userAgent: 'node' }, configurable: true });
  await registerGradients();
  const info = { vendor: '', architecture: '' } as unknown as GPUAdapterInfo;
  const backend = new WebGPUBackend(gpu.device, info);
  tf.registerBackend('webgpu', () => backend);
  await tf.setBackend('webgpu');
  await tf.ready();
  // TF.js records into its own encoder and submits lazily: end its pass and submit, then wait.
  // It also submits by itself (every few dispatches, and on a read), leaving no encoder: then
  // there is nothing to submit (submitQueue would fail on the missing encoder).
  const internals = backend as unknown as { commandEncoder: GPUCommandEncoder | null; endComputePassEncoder(): void; submitQueue(): void };
  return {
    backend,
    async sync() {
      internals.endComputePassEncoder();
      if (internals.commandEncoder) internals.submitQueue();
      await gpu.device.queue.onSubmittedWorkDone();
    },
  };
}
