// Dedicated Worker: acquires WebGPU through the same getDevice() the volunteer uses and runs
// every op suite (test/ops/*.cases.ts), posting one result per case.
import { getDevice } from '../../src/gpu/device.ts';
import { allSuites } from '../ops/suite.ts';
import type { WorkerMsg } from './ops-protocol.ts';

const post = (m: WorkerMsg): void => (self as unknown as Worker).postMessage(m);

async function main(): Promise<void> {
  const only = new URL(self.location.href).searchParams.get('only');
  const gpu = await getDevice();
  post({ type: 'device', description: gpu.info.description, software: gpu.info.software });
  let total = 0;
  for (const suite of allSuites()) {
    if (only && !only.split(',').includes(suite.op)) continue;
    for (const c of suite.cases) {
      const t0 = performance.now();
      try {
        await c.run(gpu);
        gpu.checkErrors();
        post({ type: 'result', result: { op: suite.op, name: c.name, ok: true, ms: performance.now() - t0 } });
      } catch (e) {
        post({ type: 'result', result: { op: suite.op, name: c.name, ok: false, error: String((e as Error).stack ?? e), ms: performance.now() - t0 } });
      }
      total++;
    }
  }
  post({ type: 'done', total });
}

main().catch((e: unknown) => post({ type: 'fatal', error: String((e as Error).message ?? e) }));
