// getDevice(): one way to get a GPU runtime in a browser (main thread or dedicated Worker)
// and in Node (the 'webgpu' package). Picks the adapter as RECIPES.md found best and asks
// for the limits our kernels need (compatibility adapters default to low ones).
import { VtError } from '../errors.ts';
import { Gpu, type GpuInfo } from './runtime.ts';
import type { NodeBackend } from './node-device.ts';

export interface DeviceOptions {
  /** Node only: which Dawn backend; default from VT_GPU_BACKEND or 'auto'. */
  nodeBackend?: NodeBackend | 'auto';
  /** Browser: ask for a compatibility-level adapter first (needed for llvmpipe in Chromium). */
  compatibilityFirst?: boolean;
  powerPreference?: GPUPowerPreference;
}

/** Node (or Node-like) without a browser WebGPU: use the 'webgpu' package. */
function runningInNode(): boolean {
  const hasNavigatorGpu = typeof navigator !== 'undefined' && 'gpu' in navigator && !!navigator.gpu;
  return typeof process !== 'undefined' && typeof process.versions?.node === 'string' && !hasNavigatorGpu;
}

export const WEBGPU_HELP =
  'WebGPU is not available in this browser. Use Chrome or Edge 113+ (on Linux start it with ' +
  '--enable-unsafe-webgpu, or enable chrome://flags/#enable-unsafe-webgpu), Safari 26+, or Firefox 141+ on Windows; ' +
  'make sure hardware acceleration is on. The page can still donate with the CPU (WASM) path when it exists.';

/** Limits worth raising above the defaults when the adapter offers more. */
const WANTED_LIMITS = [
  'maxComputeInvocationsPerWorkgroup',
  'maxComputeWorkgroupSizeX',
  'maxComputeWorkgroupSizeY',
  'maxComputeWorkgroupSizeZ',
  'maxComputeWorkgroupStorageSize',
  'maxStorageBuffersPerShaderStage',
  'maxStorageBufferBindingSize',
  'maxBufferSize',
] as const;

async function browserAdapter(opts: DeviceOptions): Promise<GPUAdapter> {
  const gpu = typeof navigator !== 'undefined' ? navigator.gpu : undefined;
  if (!gpu) throw new VtError('webgpu-unavailable', WEBGPU_HELP);
  const tries: GPURequestAdapterOptions[] = [];
  // On a CPU-only Chromium the fast llvmpipe path answers only a compatibility request;
  // on machines with a real GPU the same request returns the normal adapter.
  if (opts.compatibilityFirst ?? true) tries.push({ featureLevel: 'compatibility', powerPreference: opts.powerPreference });
  tries.push({ powerPreference: opts.powerPreference });
  for (const t of tries) {
    const a = await gpu.requestAdapter(t);
    if (a) return a;
  }
  throw new VtError(
    'webgpu-unavailable', `${WEBGPU_HELP} (navigator.gpu exists but no adapter was found: the GPU may be blocklisted; chrome://gpu tells why.)`,
  );
}

function envBackend(): NodeBackend | 'auto' {
  const v = typeof process !== 'undefined' ? process.env.VT_GPU_BACKEND : undefined;
  if (v === undefined || v === '' || v === 'auto') return 'auto';
  if (v === 'opengles' || v === 'swiftshader' || v === 'vulkan') return v;
  throw new VtError('webgpu-unavailable', `VT_GPU_BACKEND=${v} is not one of auto, opengles, swiftshader, vulkan`);
}

/** Acquires a device and wraps it in the runtime. Each call makes a new device. */
export async function getDevice(opts: DeviceOptions = {}): Promise<Gpu> {
  let adapter: GPUAdapter;
  let info: GpuInfo;
  if (runningInNode()) {
    const { requestNodeAdapter } = await import('./node-device.ts');
    const r = await requestNodeAdapter(opts.nodeBackend ?? envBackend(), opts.powerPreference);
    adapter = r.adapter;
    info = { platform: 'node', backend: r.backend, software: r.backend !== 'vulkan' || isSoftware(adapter), description: describe(adapter, r.backend) };
  } else {
    adapter = await browserAdapter(opts);
    info = { platform: 'browser', backend: 'webgpu', software: isSoftware(adapter), description: describe(adapter, 'webgpu') };
  }
  const requiredLimits: Record<string, number> = {};
  for (const k of WANTED_LIMITS) {
    const v = adapter.limits[k];
    if (typeof v === 'number') requiredLimits[k] = v;
  }
  let device: GPUDevice;
  try {
    device = await adapter.requestDevice({ requiredLimits, label: 'volunteer-trainer' });
  } catch (e) {
    throw new VtError('webgpu-unavailable', `The GPU adapter refused a device (${(e as Error).message}). Close other GPU-heavy tabs and retry.`);
  }
  return new Gpu(device, info);
}

/**
 * Software adapters: SwiftShader reports itself; llvmpipe through ANGLE/GL often reports
 * nothing (Chromium masks adapter.info), so an empty vendor on a compatibility adapter counts too.
 */
function isSoftware(adapter: GPUAdapter): boolean {
  const i = adapter.info;
  const text = `${i?.vendor ?? ''} ${i?.architecture ?? ''} ${i?.device ?? ''} ${i?.description ?? ''}`.toLowerCase();
  if (/swiftshader|llvmpipe|lavapipe|software|cpu/.test(text)) return true;
  return (i?.vendor ?? '') === '' && (adapter.features.has('core-features-and-limits') === false);
}

function describe(adapter: GPUAdapter, backend: string): string {
  const i = adapter.info;
  const parts = [i?.vendor, i?.architecture, i?.device, i?.description].filter((s) => s && s.length > 0);
  return `${backend}${parts.length ? `: ${parts.join(' ')}` : ''}`;
}
