// CPU by thread for the churn benchmark (bench/churn.ts): where a run's CPU went, in this process
// and its host processes, by kind of thread. Sampled from /proc/<pid>/task/<tid>/stat once a
// second, keeping each thread's last value, so a host process that is SIGKILLed still counts up
// to its last sample (at most a second lost). Linux only: elsewhere it reports nothing.
//
// Kinds: a process's main thread (its JavaScript), node's other threads (V8's compiler and
// garbage-collector helpers, libuv's pool, a loader thread: all named "node"), and
// libdatachannel's (its "RTC worker"s, libjuice's "juice poll", usrsctp's "SCTP timer" and the like).
import { readFileSync, readdirSync } from 'node:fs';
import { cpuSecondsOfStat } from './churn-check.ts';

/** CPU seconds by kind of thread. */
export interface ThreadCpu {
  /** Host processes' main threads (the volunteers' JavaScript). */
  hostMain: number;
  /** Host processes' other threads but libdatachannel's (V8 helpers, libuv pool: named "node"). */
  hostHelpers: number;
  /** Host processes' libdatachannel threads (WebRTC: ICE, DTLS, SCTP). */
  hostWebRtc: number;
  /** This process (coordinator and schedule), all threads. */
  bench: number;
}

/** A thread's kind from its process (host or not), whether it is the main thread, and its name. */
export function threadKind(host: boolean, main: boolean, name: string): keyof ThreadCpu {
  if (!host) return 'bench';
  if (main) return 'hostMain';
  return /^(RTC|juice|SCTP|usrsctp)/.test(name) ? 'hostWebRtc' : 'hostHelpers';
}

/** The thread's name (comm) from a /proc stat line. */
export function commOfStat(stat: string): string {
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  return open >= 0 && close > open ? stat.slice(open + 1, close) : '';
}

/** Sums the last sample of every thread by kind. */
export function sumThreads(last: ReadonlyMap<string, { kind: keyof ThreadCpu; seconds: number }>): ThreadCpu {
  const out: ThreadCpu = { hostMain: 0, hostHelpers: 0, hostWebRtc: 0, bench: 0 };
  for (const t of last.values()) out[t.kind] += t.seconds;
  return out;
}

export class ThreadCpuSampler {
  private readonly last = new Map<string, { kind: keyof ThreadCpu; seconds: number }>();
  private readonly start = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;
  readonly available = process.platform === 'linux';

  /** `hostPids()`: the host processes alive now (called at every sample). */
  constructor(private readonly hostPids: () => readonly number[]) {}

  begin(everyMs = 1000): void {
    if (!this.available || this.timer) return;
    this.sample(true);
    this.timer = setInterval(() => this.sample(false), everyMs);
    this.timer.unref();
  }

  /** Stops sampling (what end() also does), without a last sample: for a run that failed. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The CPU by kind since begin() (threads that existed then count from their value then). */
  end(): ThreadCpu | null {
    if (!this.available) return null;
    this.stop();
    this.sample(false);
    const since = new Map([...this.last].map(([k, t]) => [k, { kind: t.kind, seconds: t.seconds - (this.start.get(k) ?? 0) }]));
    return sumThreads(since);
  }

  private sample(first: boolean): void {
    const pids = [{ pid: process.pid, host: false }, ...this.hostPids().map((pid) => ({ pid, host: true }))];
    for (const { pid, host } of pids) {
      let tids: string[];
      try {
        tids = readdirSync(`/proc/${pid}/task`);
      } catch {
        continue; // gone since: its threads keep their last sample
      }
      for (const tid of tids) {
        let stat: string;
        try {
          stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        } catch {
          continue;
        }
        const cpu = cpuSecondsOfStat(stat);
        if (!cpu) continue;
        const key = `${pid}/${tid}`;
        this.last.set(key, { kind: threadKind(host, tid === String(pid), commOfStat(stat)), seconds: cpu.own });
        if (first) this.start.set(key, cpu.own);
      }
    }
  }
}
