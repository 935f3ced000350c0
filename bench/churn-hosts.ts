// The parent's side of the churn benchmark's host processes (bench/churn-host.ts): spawning
// them, placing volunteers on them, leaves, SIGKILLs, and what each reports.
import { spawn, type ChildProcess } from 'node:child_process';
import { ROOT } from '../coordinator/local-volunteers.ts';
import { decodeReport, type HostCommand, type HostReport } from './churn-protocol.ts';

export type VolunteerFate = 'running' | 'left' | 'killed' | 'done' | 'stopped' | 'error';

export interface SimVolunteer {
  readonly name: string;
  readonly host: Host;
  fate: VolunteerFate;
  /** Peer ids of its sessions (a volunteer rejoins as a new peer after an eviction). */
  readonly peerIds: string[];
  startedAt: number;
  /** When it was asked to leave. */
  leftAt?: number;
  error?: string;
}

/** Keeps the last `max` lines. */
export class Tail {
  readonly lines: string[] = [];
  constructor(private readonly max: number) {}
  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.max) this.lines.shift();
  }
}

export interface HostEvents {
  report(h: Host, r: HostReport): void;
  line(h: Host, line: string): void;
  exit(h: Host, code: number | null, signal: NodeJS.Signals | null): void;
}

export class Host {
  readonly child: ChildProcess;
  readonly volunteers = new Map<string, SimVolunteer>();
  readonly ready: Promise<void>;
  readonly exited: Promise<void>;
  readonly tail = new Tail(300);
  killed = false;
  quitting = false;
  alive = true;
  lastMemory: { rssMb: number; heapMb: number } | null = null;

  constructor(readonly name: string, events: HostEvents) {
    this.child = spawn(process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'bench/churn-host.ts'], {
      cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: process.env,
    });
    let markReady!: () => void;
    let failReady!: (e: Error) => void;
    this.ready = new Promise<void>((res, rej) => { markReady = res; failReady = rej; });
    this.ready.catch(() => undefined);
    let partial = '';
    this.child.stderr!.setEncoding('utf8');
    this.child.stderr!.on('data', (chunk: string) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop() ?? '';
      for (const l of parts) {
        this.tail.push(l);
        events.line(this, l);
      }
    });
    this.child.on('message', (m: unknown) => {
      let r: HostReport;
      try {
        r = decodeReport(m);
      } catch (e) {
        const l = `churn: ${e instanceof Error ? e.message : String(e)}`;
        this.tail.push(l);
        return events.line(this, l);
      }
      if (r.type === 'ready') markReady();
      else if (r.type === 'memory') this.lastMemory = { rssMb: r.rssMb, heapMb: r.heapMb };
      events.report(this, r);
    });
    this.exited = new Promise<void>((res) => {
      this.child.once('exit', (code, signal) => {
        this.alive = false;
        failReady(new Error(`host ${this.name} exited (${code ?? signal}) before it was ready:\n${this.tail.lines.slice(-20).join('\n')}`));
        events.exit(this, code, signal);
        res();
      });
    });
  }

  /** Volunteers of this host that are still running. */
  get running(): SimVolunteer[] {
    return [...this.volunteers.values()].filter((v) => v.fate === 'running');
  }

  private command(c: HostCommand): void {
    if (this.alive && this.child.connected) this.child.send(c);
  }

  start(name: string, url: string): SimVolunteer {
    const v: SimVolunteer = { name, host: this, fate: 'running', peerIds: [], startedAt: Date.now() };
    this.volunteers.set(name, v);
    void this.ready.then(() => this.command({ type: 'start', name, url }), () => undefined);
    return v;
  }

  leave(v: SimVolunteer): void {
    v.fate = 'left';
    v.leftAt = Date.now();
    this.command({ type: 'leave', name: v.name });
  }

  /** A crash of every volunteer on this host, mid-whatever they were doing. */
  kill(): SimVolunteer[] {
    const victims = this.running;
    for (const v of victims) v.fate = 'killed';
    this.killed = true;
    if (this.alive) this.child.kill('SIGKILL');
    return victims;
  }

  quit(): void {
    this.quitting = true;
    this.command({ type: 'quit' });
  }
}
