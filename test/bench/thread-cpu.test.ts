import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ThreadCpuSampler, commOfStat, sumThreads, threadKind } from '../../bench/thread-cpu.ts';

describe('CPU by thread (bench/thread-cpu.ts)', () => {
  it('names threads by kind: main, libdatachannel, the rest of a host; everything of this process', () => {
    expect(threadKind(true, true, 'node')).toBe('hostMain');
    for (const n of ['RTC worker', 'juice poll', 'SCTP timer', 'RTC poll', 'SCTP iterator']) expect(threadKind(true, false, n), n).toBe('hostWebRtc');
    for (const n of ['node', 'libuv-worker', 'V8 DefaultWorke']) expect(threadKind(true, false, n), n).toBe('hostHelpers');
    expect(threadKind(false, false, 'RTC worker')).toBe('bench');
    expect(threadKind(false, true, 'node')).toBe('bench');
  });

  it('reads the name of a stat line whose name holds spaces and parentheses', () => {
    expect(commOfStat('123 (RTC worker) S 1 2 3')).toBe('RTC worker');
    expect(commOfStat('9 (a (b) c) R 1')).toBe('a (b) c');
    expect(commOfStat('garbage')).toBe('');
    expect(sumThreads(new Map([
      ['1/1', { kind: 'hostMain', seconds: 2 }], ['1/2', { kind: 'hostMain', seconds: 1.5 }], ['3/3', { kind: 'bench', seconds: 1 }],
    ])))
      .toEqual({ hostMain: 3.5, hostHelpers: 0, hostWebRtc: 0, bench: 1 });
  });

  it.runIf(process.platform === 'linux')('counts a busy host process, also after it is killed, and not what it spent before begin()', async () => {
    // A child that burns 0.3 s of its CPU at once, then 0.6 s more once told to go on.
    const child = spawn(process.execPath, ['-e', `
      const burn = (ms) => { const t = process.cpuUsage(); for (let u = process.cpuUsage(t); u.user + u.system < ms * 1000; u = process.cpuUsage(t)); };
      burn(300); process.stdout.write('ready\\n');
      process.stdin.once('data', () => { burn(600); process.stdout.write('burnt\\n'); setInterval(() => {}, 1000); });
    `], { stdio: ['pipe', 'pipe', 'inherit'] });
    const line = (what: string) => new Promise<void>((res) => child.stdout!.on('data', (d: Buffer) => { if (d.toString().includes(what)) res(); }));
    try {
      await line('ready');
      const s = new ThreadCpuSampler(() => [child.pid!]);
      s.begin(100);
      const burnt = line('burnt');
      child.stdin!.write('go\n');
      await burnt;
      await new Promise((r) => setTimeout(r, 250));
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const cpu = s.end()!;
      expect(cpu.hostMain).toBeGreaterThan(0.4);
      expect(cpu.hostMain).toBeLessThan(0.85); // not the 0.3 s before begin()
      expect(cpu.hostWebRtc).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
