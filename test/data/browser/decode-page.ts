// Runs requests in a dedicated Worker (where volunteers decode) and hands back the replies.
import type { WorkerReply, WorkerRequest } from './protocol.ts';

const worker = new Worker(new URL('./decode-worker.ts', import.meta.url), { type: 'module' });

function run(req: WorkerRequest): Promise<WorkerReply> {
  return new Promise((resolve) => {
    worker.onmessage = (e: MessageEvent<WorkerReply>) => resolve(e.data);
    worker.onerror = (e) => resolve({ kind: 'error', message: e.message });
    worker.postMessage(req);
  });
}

(window as unknown as { runInWorker: typeof run }).runInWorker = run;
