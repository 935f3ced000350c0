// Creates the engine of each backend the op suites run on, the way the app does: 'webgpu'
// wraps getDevice() (src/gpu/device.ts) in a WebGpuEngine, 'wasm' is WasmEngine.create()
// (src/wasm/engine.ts). No adapter (or no wasm module) is a failure, never a skip.
// The wasm engine's module is imported when first asked for, so a wasm engine that fails to
// load (or build) is reported as that backend's failure and the WebGPU cases still run.
import type { AnyEngine, BackendKind } from '../../src/backend/engine.ts';
import { WebGpuEngine } from '../../src/backend/webgpu.ts';
import { getDevice } from '../../src/gpu/device.ts';

export async function createEngine(backend: BackendKind): Promise<AnyEngine> {
  switch (backend) {
    case 'webgpu':
      return new WebGpuEngine(await getDevice());
    case 'wasm': {
      const { WasmEngine } = await import('../../src/wasm/engine.ts');
      return WasmEngine.create();
    }
  }
}
