// The volunteer's watchdog (src/client/stall-watch.ts) on a real process whose main thread blocks:
// it reports the stall with every thread's stack (gdb, attached from the watchdog thread while
// the main thread is stuck), then that the main thread ran again.
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { stallReportMs } from '../../src/client/stall-watch.ts';

const SCRIPT = `
import { watchStalls } from './src/client/stall-watch.ts';
const w = watchStalls(1000);
setTimeout(() => {
  // A native wait that does not return for 4 s: the event loop stops, as in a hang.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 4000);
  setTimeout(() => { w.stop(); }, 2500);
}, 1500);
`;

describe('stall watchdog', () => {
  it('reports a main thread blocked in a native wait with the stacks of its threads, then its return', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', SCRIPT], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => { err += c; });
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code, err).toBe(0);
    expect(err).toMatch(/volunteer: stall: the main thread has not run for [1-4] s; what each thread is doing/);
    // gdb names the main thread's wait (futex, where Atomics.wait sleeps) under "Thread 1".
    expect(err, 'the stacks').toMatch(/volunteer: stall: Thread 1 [^\n]*\n(volunteer: stall: #\d[^\n]*\n)+/);
    expect(err).toMatch(/volunteer: stall: #\d+ .*(futex|pthread_cond|__GI___lll|syscall|Atomics)/i);
    expect(err).toMatch(/volunteer: stall: the main thread runs again after [3-6] s/);
    // Reported once per stall.
    expect(err.match(/has not run for/g)?.length).toBe(1);
  }, 60_000);

  it('reads its bound from VT_STALL_REPORT_S, and refuses a bad one', () => {
    expect(stallReportMs({})).toBe(120_000);
    expect(stallReportMs({ VT_STALL_REPORT_S: '15' })).toBe(15_000);
    expect(stallReportMs({ VT_STALL_REPORT_S: '0' })).toBe(0);
    expect(() => stallReportMs({ VT_STALL_REPORT_S: 'soon' })).toThrow(/VT_STALL_REPORT_S must be a number of seconds/);
  });
});
