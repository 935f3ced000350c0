// A Node volunteer's parent (src/client/supervise.ts) with real child processes: a child that
// ends of SIGUSR2 (what the watchdog does to a deadlocked volunteer) is started again and the
// parent ends with the second run's code; without restarts it ends at once with 128 + the signal;
// a child follows its parent when the parent is killed outright (its IPC channel closes).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { supervise } from '../../src/client/supervise.ts';

const dir = mkdtempSync(join(tmpdir(), 'vt-supervise-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A child that deadlocks (ends of SIGUSR2) on its first run and exits 7 on its second. */
const ONCE = `
const { existsSync, writeFileSync } = require('node:fs');
const mark = process.argv[1];
if (!existsSync(mark)) { writeFileSync(mark, 'ran'); process.kill(process.pid, 'SIGUSR2'); setTimeout(() => {}, 10000); }
else process.exit(7);
`;

describe('the volunteer supervisor', () => {
  it('starts a child again after a deadlock and ends with its code; without restarts ends with 128 + the signal', async () => {
    const logs: string[] = [];
    const mark = join(dir, 'once');
    expect(await supervise({ command: process.execPath, args: ['-e', ONCE, mark], env: {}, restart: true, log: (l) => logs.push(l) })).toBe(7);
    expect(logs).toEqual(['volunteer: restarting after a deadlock inside node-datachannel (1 in the last 10 minutes)']);
    const mark2 = join(dir, 'twice');
    expect(await supervise({ command: process.execPath, args: ['-e', ONCE, mark2], env: {}, restart: false, log: (l) => logs.push(l) })).toBe(128 + 12);
    expect(logs.length).toBe(1);
  });

  it('a child ends when its parent is killed outright', async () => {
    const pidFile = join(dir, 'child.pid');
    // The parent supervises a child that writes its pid and would otherwise wait a minute.
    const childScript = join(dir, 'child.mjs');
    const parentScript = join(dir, 'parent.mjs');
    const supervisor = join(ROOT, 'src/client/supervise.ts');
    writeFileSync(childScript, `import { followParent } from ${JSON.stringify(supervisor)};
import { writeFileSync } from 'node:fs';
followParent();
writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));
setTimeout(() => {}, 60000);
`);
    writeFileSync(parentScript, `import { supervise } from ${JSON.stringify(supervisor)};
await supervise({ command: process.execPath, args: ['--import', 'tsx', ${JSON.stringify(childScript)}], env: {}, restart: true, log: () => {} });
`);
    const parent = spawn(process.execPath, ['--import', 'tsx', parentScript], { cwd: ROOT, stdio: 'ignore' });
    const until = async (cond: () => boolean, what: string) => {
      const end = Date.now() + 30_000;
      while (!cond()) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    };
    await until(() => existsSync(pidFile), 'the child to start');
    const childPid = Number(readFileSync(pidFile, 'utf8'));
    const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };
    expect(alive(childPid)).toBe(true);
    parent.kill('SIGKILL');
    await until(() => !alive(childPid), 'the child to follow its parent');
  }, 60_000);
});
