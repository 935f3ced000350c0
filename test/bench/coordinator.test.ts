// The coordinator bench's pure parts (the profile summary, quantiles) and a short run of it: a
// coordinator process on loopback with 20 and then 40 simulated volunteers stepping, one dying.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { COORDINATOR_SEMI_SPACE_MB } from '../../bench/coordinator.ts';
import { summariseProfile } from '../../bench/coordinator-profile.ts';
import { quantile } from '../../src/stats.ts';

describe('coordinator bench', () => {
  it('measures the coordinator as npm start runs it (the same young generation)', () => {
    const start = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }).scripts.start;
    expect(start).toContain(`--max-semi-space-size=${COORDINATOR_SEMI_SPACE_MB} `);
  });

  it('quantile interpolates between ranks', () => {
    expect(quantile([], 0.5)).toBe(0);
    expect(quantile([5], 0.99)).toBe(5);
    expect(quantile([1, 2, 3, 4], 0.5)).toBe(2.5);
    expect(quantile([10, 0, 20], 1)).toBe(20);
    expect(quantile(Array.from({ length: 101 }, (_, i) => i), 0.99)).toBeCloseTo(99);
  });

  it('summariseProfile sums self time by function, largest first', () => {
    const frame = (functionName: string, url: string, lineNumber: number) => ({ functionName, url, lineNumber });
    const profile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', '', 0) }, { id: 2, callFrame: frame('hot', 'file:///repo/coordinator/x.ts', 9) },
        { id: 3, callFrame: frame('(idle)', '', 0) }, { id: 4, callFrame: frame('send', 'file:///repo/node_modules/ws/lib/sender.js', 99) },
      ],
      samples: [2, 2, 3, 4, 2, 3],
      timeDeltas: [1000, 1000, 2000, 500, 1000, 500],
    };
    const lines = summariseProfile(profile, 3, '/repo');
    expect(lines.map((l) => [l.fn, l.at, l.ms])).toEqual([
      ['hot', 'coordinator/x.ts:10', 3], ['(idle)', '', 2.5], ['send', 'node_modules/ws/lib/sender.js:100', 0.5],
    ]);
    expect(lines[0]!.share).toBeCloseTo(0.5);
    expect(summariseProfile({ nothing: true }, 3)).toEqual([]);
  });

  it('a short run holds 20 then 40 simulated volunteers with nobody dropped and prints its keys', async () => {
    const { main } = await import('../../bench/coordinator.ts');
    const lines: string[] = [];
    const log = console.log;
    console.log = (s: unknown) => { lines.push(String(s)); };
    try {
      await main(['--sessions', '20,40', '--steps', '3', '--kill', '1', '--batch', '512', '--compute-ms', '100', '--no-profile', '--no-pin']);
    } finally {
      console.log = log;
    }
    const last = JSON.parse(lines[lines.length - 1]!) as Record<string, unknown>;
    for (const k of ['max_sessions', 'p99_step_overhead_ms_at_max', 'heartbeat_misses', 'cpu_per_session_us']) expect(last).toHaveProperty(k);
    expect(last.heartbeat_misses).toBe(0);
    expect(last.max_sessions).toBe(40);
  }, 240_000);
});
