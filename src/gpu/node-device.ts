// WebGPU in Node through the 'webgpu' npm package (Google's Dawn). Loaded only in Node:
// browser code never reaches this file (see device.ts).
import { mkdirSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VtError } from '../errors.ts';

export type NodeBackend = 'opengles' | 'swiftshader' | 'vulkan';

interface DawnModule {
  create(flags: string[]): GPU;
  globals: Record<string, unknown>;
}

const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';
let dawn: DawnModule | undefined;
const gpus = new Map<string, GPU>();

/** Dawn's Vulkan loader insists on a private runtime dir; EGL needs a platform without a display. */
function prepareEnvironment(backend: NodeBackend): void {
  const rt = process.env.XDG_RUNTIME_DIR;
  if (!rt || !existsSync(rt)) {
    const dir = mkdtempSync(join(tmpdir(), 'vt-xdg-'));
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    process.env.XDG_RUNTIME_DIR = dir;
  }
  if (backend === 'opengles') process.env.EGL_PLATFORM ??= 'surfaceless';
  if (backend === 'swiftshader' && !process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) {
    process.env.VK_ICD_FILENAMES = SWIFTSHADER_ICD;
  }
}

async function loadDawn(): Promise<DawnModule> {
  if (dawn) return dawn;
  const name = 'webgpu';
  try {
    dawn = (await import(/* @vite-ignore */ name)) as DawnModule;
  } catch (e) {
    throw new VtError(
      'webgpu-unavailable',
      `Cannot load the 'webgpu' npm package (Dawn for Node): ${(e as Error).message}. Run 'npm run setup' (it installs the package and libEGL).`,
    );
  }
  Object.assign(globalThis, dawn.globals);
  return dawn;
}

/**
 * Returns a GPUAdapter in Node. Order tried for 'auto': llvmpipe over OpenGL ES (2-3x faster
 * than SwiftShader here, RECIPES.md), then SwiftShader (Vulkan), then any Vulkan driver.
 */
export async function requestNodeAdapter(
  backend: NodeBackend | 'auto',
  powerPreference: GPUPowerPreference | undefined,
): Promise<{ adapter: GPUAdapter; backend: NodeBackend }> {
  const mod = await loadDawn();
  const order: NodeBackend[] = backend === 'auto' ? ['opengles', 'vulkan', 'swiftshader'] : [backend];
  const tried: string[] = [];
  for (const b of order) {
    prepareEnvironment(b);
    let gpu = gpus.get(b);
    if (!gpu) {
      // Dawn instance flags: the backend to use. One instance per backend, kept for the process.
      gpu = mod.create(b === 'opengles' ? ['backend=opengles'] : []);
      gpus.set(b, gpu);
    }
    const adapter = await gpu.requestAdapter(
      b === 'opengles' ? { featureLevel: 'compatibility', powerPreference } : { powerPreference },
    );
    if (adapter) return { adapter, backend: b };
    tried.push(b);
  }
  throw new VtError(
    'webgpu-unavailable',
    `No WebGPU adapter in Node (tried ${tried.join(', ')}). `
      + "Install Mesa and libEGL ('npm run setup' installs libegl-dev, libegl-mesa0, mesa-vulkan-drivers) or Chromium's SwiftShader, "
      + 'or set VT_GPU_BACKEND.',
  );
}
