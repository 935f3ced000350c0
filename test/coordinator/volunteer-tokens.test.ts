// A private job's tokens of one volunteer each (coordinator/volunteer-tokens.ts) on their own:
// issued, found by their token only, revoked once (the first reason stays), kept whole across a
// reopen; a file that is not a list of them is refused by name and left as it was.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { VOLUNTEER_TOKENS_FILE, VolunteerTokenError, VolunteerTokens, holderOf, parseTokens } from '../../coordinator/volunteer-tokens.ts';

const dirs: string[] = [];
const fresh = async () => {
  const d = await mkdtemp(join(tmpdir(), 'vt-tokens-'));
  dirs.push(d);
  return d;
};
afterAll(async () => { await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))); });

describe('volunteer tokens', () => {
  it('issues, finds by token, revokes once, and reads the same back', async () => {
    const dir = await fresh();
    const t = await VolunteerTokens.open(dir);
    const a = await t.issue('desk 1', 1000);
    const b = await t.issue('Zoë', 2000);
    expect(a).not.toBe(b);
    expect(a.length).toBeGreaterThanOrEqual(24);
    expect(t.holder(a)).toEqual({ label: 'desk 1', revoked: null });
    expect(t.holder(`${a}x`)).toBeNull();
    // Refused at once, before the file is written: a conviction's revocation must not lag behind its log line.
    const revoking = t.revoke('desk 1', 'first', 3000);
    expect(t.holder(a)).toEqual({ label: 'desk 1', revoked: 'first' });
    expect(await revoking).toBe(true);
    expect(await t.revoke('desk 1', 'second', 4000)).toBe(true);
    expect(await t.revoke('nobody', 'x')).toBe(false);
    const again = await VolunteerTokens.open(dir);
    expect(again.holder(a)).toEqual({ label: 'desk 1', revoked: 'first' });
    expect(again.holder(b)).toEqual({ label: 'Zoë', revoked: null });
    expect(again.list()).toEqual([{ label: 'desk 1', issued: 1000, revoked: { time: 3000, reason: 'first' } }, { label: 'Zoë', issued: 2000 }]);
  });

  it('refuses a label in use, an unreadable label, and a file that is not a list of tokens (left as it was)', async () => {
    const dir = await fresh();
    const t = await VolunteerTokens.open(dir);
    await t.issue('lab-3');
    await expect(t.issue('lab-3')).rejects.toThrow(/exists already/);
    for (const bad of ['', ' x', 'a/b', 'x'.repeat(41), '<b>']) await expect(t.issue(bad), bad).rejects.toThrow(VolunteerTokenError);
    const path = join(dir, VOLUNTEER_TOKENS_FILE);
    await writeFile(path, '{"not":"a list"}');
    await expect(VolunteerTokens.open(dir)).rejects.toThrow(new RegExp(`${path} is not a list of volunteer tokens: restore it`));
    expect(await readFile(path, 'utf8')).toBe('{"not":"a list"}');
    expect(parseTokens('[{"label":"a","token":"t","issued":1,"revoked":{"time":"x"}}]')).toBeNull();
    expect(parseTokens('nonsense')).toBeNull();
    expect(holderOf([], 'anything')).toBeNull();
  });
});
