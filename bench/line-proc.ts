// A process on a test-bed host that speaks JSON lines (commands on stdin, one answer per
// command on stdout, in order), as the multi-host benches' peers do (bench/network-peer.ts,
// bench/transport-peer.ts). An answer of type 'failed' rejects the command that asked for it.
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export class LineProc<To extends { type: string }, From extends { type: string }> {
  private readonly waiting: ((m: From) => void)[] = [];
  readonly errors: string[] = [];
  constructor(readonly name: string, readonly child: ChildProcess) {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!line.startsWith('{')) return;
      const m = JSON.parse(line) as From;
      this.waiting.shift()?.(m);
    });
    child.stderr!.on('data', (b: Buffer) => { this.errors.push(b.toString()); if (this.errors.length > 50) this.errors.shift(); });
  }
  ask(m: To, timeoutMs = 60_000): Promise<From> {
    return new Promise((resolve, reject) => {
      const late = () => new Error(`${this.name}: no answer to ${m.type} within ${timeoutMs} ms; stderr: ${this.errors.join('').slice(-800)}`);
      const t = setTimeout(() => reject(late()), timeoutMs);
      this.waiting.push((r) => {
        clearTimeout(t);
        if (r.type === 'failed') reject(new Error(`${this.name}: ${m.type} failed: ${(r as { message?: string }).message ?? ''}`));
        else resolve(r);
      });
      this.child.stdin!.write(`${JSON.stringify(m)}\n`);
    });
  }
}
