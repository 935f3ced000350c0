// The benches' wait for TF.js's WebGPU work (bench/tfjs-webgpu.ts sync): TF.js submits by
// itself every few dispatches and on reads, leaving no command encoder; a sync then must wait,
// not fail. (The kernels bench failed this way once in the suite: its repetition count comes
// from timing, so whether TF.js had just submitted was a matter of chance.)
import { describe, expect, it } from 'vitest';
import { getDevice } from '../../src/gpu/device.ts';
import { tf, tfjsOnDevice } from '../../bench/tfjs-webgpu.ts';

describe('TF.js on our device', () => {
  it('sync waits whether or not TF.js has work recorded', { timeout: 120_000 }, async () => {
    const gpu = await getDevice();
    const t = await tfjsOnDevice(gpu);
    const a = tf.tensor2d([1, 2, 3, 4], [2, 2]);
    const b = tf.matMul(a, a);
    await t.sync();
    await t.sync(); // nothing recorded since: no encoder
    expect(Array.from(await b.data())).toEqual([7, 10, 15, 22]);
    await t.sync(); // a read submitted everything
    tf.dispose([a, b]);
    gpu.device.destroy();
  });
});
