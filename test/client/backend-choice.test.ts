// The backend decision (pure): which path a volunteer trains on, and the sentence that says why.
import { describe, expect, it } from 'vitest';
import { BackendError, pickBackend, type BackendMeasure } from '../../src/client/backend-choice.ts';

const m = (backend: 'webgpu' | 'wasm', imagesPerSec: number | null, detail = 'dev'): BackendMeasure =>
  ({ backend, available: imagesPerSec !== null, imagesPerSec, detail });

describe('pickBackend', () => {
  it('auto keeps the faster path and says why', () => {
    const c = pickBackend('auto', [m('wasm', 60), m('webgpu', 11, 'llvmpipe')]);
    expect(c.chosen).toBe('wasm');
    expect(c.reason).toBe('wasm is the faster path on this device: 60 images/s vs webgpu 11 images/s');
    expect(pickBackend('auto', [m('wasm', 60), m('webgpu', 900)]).chosen).toBe('webgpu');
  });
  it('auto without WebGPU falls back to wasm, naming why WebGPU is out', () => {
    const c = pickBackend('auto', [m('wasm', 3.25), m('webgpu', null, 'WebGPU is not available in this browser')]);
    expect(c.chosen).toBe('wasm');
    expect(c.reason).toMatch(/3\.3 images\/s vs webgpu is not available \(WebGPU is not available in this browser\)/);
  });
  it('a forced path is used when available, refused with what to do when not', () => {
    expect(pickBackend('webgpu', [{ backend: 'webgpu', available: true, imagesPerSec: null, detail: 'x' }]).reason).toBe('webgpu was chosen in the settings');
    expect(() => pickBackend('webgpu', [m('webgpu', null, 'no adapter')])).toThrow(BackendError);
    expect(() => pickBackend('webgpu', [m('webgpu', null, 'no adapter')])).toThrow(/asked for but is not available here: no adapter\. Choose 'auto'/);
  });
  it('nothing works: one error naming each path', () => {
    expect(() => pickBackend('auto', [m('wasm', null, 'no SIMD'), m('webgpu', null, 'no adapter')])).toThrow(/wasm: no SIMD; webgpu: no adapter/);
  });
});
