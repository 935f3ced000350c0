// What a GPU machine's adapter is and offers, for the first lines of scripts/device/gpu.sh's
// report: Dawn's adapter info, its features, every limit it offers, and the limits our device
// was granted (src/gpu/device.ts asks for the ones our kernels use).
import { getDevice } from '../../src/gpu/device.ts';
import { requestNodeAdapter, type NodeBackend } from '../../src/gpu/node-device.ts';

export interface AdapterReport {
  backend: string;
  info: Record<string, string>;
  features: string[];
  limits: Record<string, number>;
  granted: Record<string, number>;
  description: string;
  software: boolean;
}

/** Every numeric own or prototype property of a limits object (Dawn's are getters). */
function numbers(o: object): Record<string, number> {
  const out: Record<string, number> = {};
  for (let p: object | null = o; p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const k of Object.getOwnPropertyNames(p)) {
      const v = (o as Record<string, unknown>)[k];
      if (typeof v === 'number' && !(k in out)) out[k] = v;
    }
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => a.localeCompare(b)));
}

export async function adapterReport(): Promise<AdapterReport> {
  const env = process.env.VT_GPU_BACKEND;
  const wanted = env === 'vulkan' || env === 'opengles' || env === 'swiftshader' ? (env as NodeBackend) : 'auto';
  const { adapter, backend } = await requestNodeAdapter(wanted, 'high-performance');
  const i = adapter.info;
  const info: Record<string, string> = {};
  for (const k of ['vendor', 'architecture', 'device', 'description'] as const) info[k] = String(i?.[k] ?? '');
  const gpu = await getDevice({ powerPreference: 'high-performance' });
  const report = {
    backend, info, features: [...adapter.features].map(String).sort(), limits: numbers(adapter.limits), granted: numbers(gpu.device.limits),
    description: gpu.info.description, software: gpu.info.software,
  };
  gpu.device.destroy();
  return report;
}
