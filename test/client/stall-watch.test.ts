// The volunteer's watchdog (src/client/stall-watch.ts) on a real process whose main thread blocks:
// it reports the stall with every thread's stack (gdb, attached from the watchdog thread while
// the main thread is stuck), then that the main thread ran again; a stack that is the known
// node-datachannel deadlock ends the process with SIGUSR2 (checked with the signature of the
// real one a suite met, and with a process whose main-thread wait is made to match it).
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { nativeDeadlock, stallReportMs } from '../../src/client/stall-watch.ts';

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

  it('knows the node-datachannel deadlock by the main thread\'s stack, and nothing else', () => {
    // Thread 1 of volunteer b3 in a clean-clone suite (2026-11-28), the make-before-break test's hang.
    const hung = [
      'Thread 1 (Thread 0x7fdd6aa2bc80 (LWP 22144) "node"):',
      '#0  futex_wait (private=0, expected=2, futex_word=0x17af2048) at ../sysdeps/nptl/futex-internal.h:146',
      '#1  __GI___lll_lock_wait (futex=futex@entry=0x17af2048, private=0) at ./nptl/lowlevellock.c:49',
      '#3  ___pthread_mutex_lock (mutex=0x17af2048) at ./nptl/pthread_mutex_lock.c:128',
      '#4  0x00007fd08b88e246 in agent_add_remote_candidate () from target:/tmp/cc1/node_modules/@node-datachannel/linux-x64-gnu/node_datachannel.node',
      '#5  0x00007fd08b5a3cde in rtc::impl::IceTransport::addRemoteCandidate(rtc::Candidate const&) () from node_datachannel.node',
    ].join('\n');
    expect(nativeDeadlock(hung)).toBe(true);
    // A long wait elsewhere (Atomics.wait, a long compute) is reported, not ended.
    expect(
      nativeDeadlock('Thread 1 (LWP 1 "node"):\n#0  futex_wait () at futex-internal.h:146\n#1  0x00000000015b2c35 in v8::internal::FutexEmulation::WaitJs'),
    ).toBe(false);
    expect(nativeDeadlock('Thread 1 (LWP 1 "node"):\n#0  0x00007f in wasm-function[212]\n#1  node_datachannel.node')).toBe(false);
  });

  it('ends a process whose main-thread wait is the deadlock it knows, with SIGUSR2', async () => {
    // The same watchdog, told that this process's own Atomics.wait is the deadlock.
    const script = `
import { watchStalls } from './src/client/stall-watch.ts';
watchStalls(1000, /futex|FutexEmulation|pthread_cond/);
setTimeout(() => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 60000), 500);
`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (c: string) => { err += c; });
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((r) => child.once('exit', (c, sig) => r([c, sig])));
    expect([code, signal], err).toEqual([null, 'SIGUSR2']);
    expect(err).toMatch(/volunteer: stall: the main thread waits on a lock inside node-datachannel .*this process ends \(SIGUSR2\) and starts again/);
  }, 60_000);

  it('reads its bound from VT_STALL_REPORT_S, and refuses a bad one', () => {
    expect(stallReportMs({})).toBe(120_000);
    expect(stallReportMs({ VT_STALL_REPORT_S: '15' })).toBe(15_000);
    expect(stallReportMs({ VT_STALL_REPORT_S: '0' })).toBe(0);
    expect(() => stallReportMs({ VT_STALL_REPORT_S: 'soon' })).toThrow(/VT_STALL_REPORT_S must be a number of seconds/);
  });
});
