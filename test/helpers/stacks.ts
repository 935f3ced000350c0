// What a process that stopped answering is doing: the native stack of each of its threads, read
// with gdb (attached for a moment, then detached; the process runs on), JIT frames (gdb's ??) left out. A hung volunteer whose
// main thread waits in node-datachannel shows it here, where its own log has nothing more to say.
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { descendants, ROOT } from '../../coordinator/local-volunteers.ts';

/** The volunteer process under `pid`: its supervised child when it has one, else `pid` itself. */
export function volunteerPid(pid: number): number {
  return descendants(pid)[0] ?? pid;
}

/** Every thread's stack of `pid` (gdb's `thread apply all bt`), or why none could be read. */
export function nativeStacks(pid: number, timeoutMs = 30_000): Promise<string> {
  const args = ['-p', String(pid), '-batch', '-nx', '-ex', 'set pagination off', '-ex', 'thread apply all bt 30'];
  return new Promise((resolve) => {
    execFile('gdb', args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err && !stdout) {
        const why = (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'gdb is not installed (npm run setup installs it)' : err.message;
        resolve(`no stacks of process ${pid}: ${why}\n${stderr}`);
      } else resolve(stdout.split('\n').filter((l) => /^(Thread |#\d)/.test(l) && !/ in \?\? \(\)$/.test(l)).join('\n'));
    });
  });
}

/** The main thread's frames of `stacks` (nativeStacks), its first `n`: where a blocked event loop waits. */
export function mainThreadTop(stacks: string, n = 12): string {
  const lines = stacks.split('\n');
  // gdb numbers threads from 1 in order of creation: the main thread is "Thread 1".
  const at = lines.findIndex((l) => /^Thread 1 /.test(l));
  if (at < 0) return stacks.split('\n').slice(0, n).join('\n');
  const end = lines.findIndex((l, i) => i > at && l.startsWith('Thread '));
  return lines.slice(at, end < 0 ? undefined : end).slice(0, n + 1).join('\n');
}

/**
 * The stacks of each named process that still runs, written to test-output/stacks/<label>-<name>.txt,
 * and a summary (each one's main thread) for a failure message.
 */
export async function stacksOfRunning(label: string, procs: ReadonlyArray<{ name: string; pid: number | undefined; running: boolean }>): Promise<string> {
  const dir = join(ROOT, 'test-output', 'stacks');
  await mkdir(dir, { recursive: true });
  const parts: string[] = [];
  for (const p of procs) {
    if (!p.running || p.pid === undefined) continue;
    // A Node volunteer is the child of its supervising parent (src/client/supervise.ts): its stacks are the child's.
    const pid = volunteerPid(p.pid);
    const stacks = await nativeStacks(pid);
    const file = join(dir, `${label}-${p.name}.txt`);
    await writeFile(file, stacks);
    parts.push(`${p.name} (pid ${pid}, all threads in ${file}):\n${mainThreadTop(stacks)}`);
  }
  return parts.join('\n');
}
