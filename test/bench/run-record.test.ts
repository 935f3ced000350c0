// `npm run bench -- NAME --record` (bench/run-record.ts): the summary line kept with the run's
// settings, machine, date and commit; runs append, and a file of another kind is never overwritten.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../coordinator/local-volunteers.ts';
import { appendRecord, lastJsonLine, recordOf } from '../../bench/run-record.ts';

describe('bench --record', () => {
  it('reads the last line as the summary, and nothing else', () => {
    expect(lastJsonLine('progress\n{"bench":"x","a":1}\n\n')).toEqual({ bench: 'x', a: 1 });
    expect(lastJsonLine('{"bench":"x"}\ndone')).toBeNull();
    expect(lastJsonLine('')).toBeNull();
  });

  it('appends each run with its arguments, date, commit and machine; refuses a file that is no record of the bench', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'vt-record-'));
    try {
      const file = join(dir, 'results', 'wire.json');
      const run = recordOf(ROOT, ['--epochs', '3'], 712.4, { bench: 'wire', top1_i8: 66.61 }, new Date('2026-11-28T20:00:00Z'));
      expect(run).toMatchObject({ date: '2026-11-28T20:00:00.000Z', args: ['--epochs', '3'], seconds: 712, summary: { top1_i8: 66.61 } });
      expect(run.commit).toMatch(/^[0-9a-f]{40}$/);
      expect(typeof run.dirty).toBe('boolean');
      expect(run.machine.cores).toBeGreaterThan(0);
      expect(appendRecord(file, 'wire', run)).toBe(1);
      expect(appendRecord(file, 'wire', { ...run, seconds: 700 })).toBe(2);
      const kept = JSON.parse(await readFile(file, 'utf8')) as { bench: string; runs: { seconds: number }[] };
      expect(kept.bench).toBe('wire');
      expect(kept.runs.map((r) => r.seconds)).toEqual([712, 700]);
      await writeFile(join(dir, 'other.json'), JSON.stringify({ bench: 'cpu', runs: [] }));
      expect(() => appendRecord(join(dir, 'other.json'), 'wire', run)).toThrow(/is not a record of the wire bench: move it away/);
      expect(JSON.parse(await readFile(join(dir, 'other.json'), 'utf8'))).toEqual({ bench: 'cpu', runs: [] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
