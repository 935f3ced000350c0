// The fault tests' hang (`--freeze-at`, src/client/freeze.ts): the first matching line stops the
// main thread for the time given, says so first, and later lines pass straight through.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { freezeAt } from '../../src/client/freeze.ts';

describe('freezeAt', () => {
  it('stops the main thread once, at the first matching line, after saying so', () => {
    const said: string[] = [];
    const hook = freezeAt(/step 3 all-reduce/, 300, (s) => said.push(s));
    let t = performance.now();
    hook('volunteer: step 2 all-reduce of 10 floats');
    expect(performance.now() - t).toBeLessThan(100);
    expect(said).toEqual([]);
    // A timer due now cannot run while the thread is stopped.
    let timerRan = false;
    setTimeout(() => { timerRan = true; }, 0);
    t = performance.now();
    hook('volunteer: step 3 all-reduce of 10 floats over ring of 3');
    expect(performance.now() - t).toBeGreaterThanOrEqual(290);
    expect(timerRan).toBe(false);
    expect(said).toEqual(['volunteer: frozen for up to 0.3 s after "volunteer: step 3 all-reduce of 10 floats over ring of 3" (--freeze-at)\n']);
    t = performance.now();
    hook('volunteer: step 3 all-reduce of 10 floats over ring of 3');
    expect(performance.now() - t).toBeLessThan(100);
    expect(said).toHaveLength(1);
  });

  it('refuses a pattern that is not a regular expression, saying what it must be', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--import', './scripts/raw-loader.mjs', 'src/client/node-cli.ts',
      '--url', 'http://127.0.0.1:9', '--freeze-at', '(step'], { cwd: ROOT, encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/--freeze-at must be a regular expression over the volunteer's log lines; "\(step": Invalid regular expression/);
  });
});
