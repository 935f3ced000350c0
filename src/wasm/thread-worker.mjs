// One extra thread of a threaded WasmEngine (src/wasm/threads.ts starts threads-1 of them):
// a Node worker_threads Worker or a Web Worker (also inside the volunteer's dedicated worker).
// Plain JavaScript with no imports, so Node loads it without a TypeScript loader and vite
// bundles it as a worker. It instantiates the threaded kernels (kernels-mt.wasm or kernels-mt-fma.wasm) on the
// engine's SHARED memory, says 'ready', then serves jobs until told to quit:
//   mailbox (Int32 words at `mailbox`): SEQ job number posted (-1: quit), DONE job number
//   finished, CMD byte address of the job's commands (f64), LEN their count, ERR 1 after a
//   failure, PARTS threads taking part (for barriers).
//   commands: CMD_WORDS words each, [kernel index, argc, args padded with zeros to 16]; index -1 is a barrier of PARTS threads
//   on the control words at `ctl` (COUNT, GEN). After a failure the kernels are skipped but the
//   barriers are still kept, so no other thread waits forever.
// The same protocol is run by the calling thread's side in src/wasm/threads.ts.
const SEQ = 0, DONE = 1, CMD = 2, LEN = 3, ERR = 4, PARTS = 5;
const COUNT = 0, GEN = 1;
const SPIN = 4000;
const CMD_WORDS = 18;

/** Command `p`'s kernel called with plain arguments (a spread from the array cost about 1 us a call). */
function call(fn, c, p) {
  const a = p + 2;
  return fn(c[a], c[a + 1], c[a + 2], c[a + 3], c[a + 4], c[a + 5], c[a + 6], c[a + 7],
    c[a + 8], c[a + 9], c[a + 10], c[a + 11], c[a + 12], c[a + 13], c[a + 14], c[a + 15]);
}

function barrier(i32, ctl, parts) {
  const g = Atomics.load(i32, ctl + GEN);
  if (Atomics.add(i32, ctl + COUNT, 1) === parts - 1) {
    Atomics.store(i32, ctl + COUNT, 0);
    Atomics.add(i32, ctl + GEN, 1);
    Atomics.notify(i32, ctl + GEN);
    return;
  }
  for (let s = 0; s < SPIN; s++) if (Atomics.load(i32, ctl + GEN) !== g) return;
  while (Atomics.load(i32, ctl + GEN) === g) Atomics.wait(i32, ctl + GEN, g);
}

function serve(memory, fns, mailbox, ctl, post) {
  const box = mailbox >> 2, c = ctl >> 2;
  let seen = 0;
  for (;;) {
    let i32 = new Int32Array(memory.buffer);
    let seq = Atomics.load(i32, box + SEQ);
    for (let s = 0; s < SPIN && seq === seen; s++) seq = Atomics.load(i32, box + SEQ);
    while (seq === seen) {
      Atomics.wait(i32, box + SEQ, seen);
      seq = Atomics.load(i32, box + SEQ);
    }
    if (seq < 0) return;
    seen = seq;
    i32 = new Int32Array(memory.buffer); // the memory may have grown since
    const parts = i32[box + PARTS];
    const cmd = new Float64Array(memory.buffer, i32[box + CMD], i32[box + LEN]);
    let failed = false;
    for (let p = 0; p < cmd.length; p += CMD_WORDS) {
      const f = cmd[p];
      if (f < 0) barrier(i32, c, parts);
      else if (!failed) {
        try {
          call(fns[f], cmd, p);
        } catch (e) {
          failed = true;
          post({ type: 'error', message: `kernel ${f}: ${e instanceof Error ? e.message : String(e)}` });
        }
      }
    }
    Atomics.store(i32, box + ERR, failed ? 1 : 0);
    Atomics.store(i32, box + DONE, seq);
    Atomics.notify(i32, box + DONE);
  }
}

async function start(init, post) {
  const instance = await WebAssembly.instantiate(init.module, { env: { memory: init.memory } });
  const fns = init.names.map((n) => instance.exports[n]);
  const missing = init.names.filter((n, i) => typeof fns[i] !== 'function');
  if (missing.length) throw new Error(`the threaded kernels lack ${missing.join(', ')}`);
  post({ type: 'ready' });
  serve(init.memory, fns, init.mailbox, init.ctl, post);
}

const isNode = typeof process !== 'undefined' && typeof process.versions?.node === 'string';
if (isNode) {
  const name = 'node:worker_threads'; // a variable: bundlers must not follow it
  const { parentPort } = await import(/* @vite-ignore */ name);
  const post = (m) => parentPort.postMessage(m);
  parentPort.once('message', (init) => start(init, post).catch((e) => post({ type: 'error', message: String(e?.message ?? e) })));
} else {
  const post = (m) => self.postMessage(m);
  self.onmessage = (ev) => {
    self.onmessage = null;
    start(ev.data, post).then(() => self.close(), (e) => post({ type: 'error', message: String(e?.message ?? e) }));
  };
}
