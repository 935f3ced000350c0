// The ban list of convicted peers (coordinator/bans.ts): who it refuses, what it tells them, and
// that a restarted coordinator reads it back from the job folder.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BANS_FILE, BanList, banOf, refusalText, type Ban } from '../../coordinator/bans.ts';

const ban = (over: Partial<Ban>): Ban => ({ time: 1, peerId: 'p1', name: 'bad', step: 7, reason: 'its gradient of step 7 differs', ...over });
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-bans-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('bans', () => {
  it('refuses the same donor id anywhere, or the same address with the same name; never a different peer at that address', () => {
    const bans = [ban({ donor: 'donor-abcdef12', address: '10.0.0.5' }), ban({ peerId: 'p2', name: 'desk-3', address: '10.0.0.9' })];
    expect(banOf(bans, { name: 'renamed', donor: 'donor-abcdef12', address: '10.0.0.77' })?.peerId).toBe('p1');
    expect(banOf(bans, { name: 'desk-3', address: '10.0.0.9' })?.peerId).toBe('p2');
    expect(banOf(bans, { name: 'desk-4', address: '10.0.0.9' })).toBeNull();
    expect(banOf(bans, { name: 'desk-3', address: '10.0.0.10' })).toBeNull();
    expect(banOf(bans, { name: null })).toBeNull();
  });

  it('tells the refused peer why, and what to do when its device computes wrongly', () => {
    const text = refusalText(ban({ donor: 'donor-abcdef12' }));
    expect(text).toMatch(/^refused: a peer with this donor id was caught in step 7 of this job \(its gradient of step 7 differs\)/);
    expect(text).toContain('--backend wasm');
    expect(text).toContain(BANS_FILE);
    expect(refusalText(ban({ address: '10.0.0.9' }))).toContain('this address and name');
  });

  it('keeps its bans in the job folder: a list opened again refuses them; unreadable lines are skipped and said', async () => {
    const logs: string[] = [];
    const first = await BanList.open(dir, (l) => logs.push(l));
    expect(first.size).toBe(0);
    first.add(ban({ address: '127.0.0.1' }));
    expect(first.refusal({ name: 'bad', address: '127.0.0.1' })).toMatch(/^refused:/);
    // The write is in the background: wait for it, then add a torn line as a crash would leave.
    const written = async () => (await readFile(join(dir, BANS_FILE), 'utf8').catch(() => '')).includes('"p1"');
    for (let i = 0; i < 50 && !(await written()); i++) await new Promise((r) => setTimeout(r, 20));
    await writeFile(join(dir, BANS_FILE), `${await readFile(join(dir, BANS_FILE), 'utf8')}{"peerId":"p9","na\n`);
    const again = await BanList.open(dir, (l) => logs.push(l));
    expect(again.size).toBe(1);
    expect(again.refusal({ name: 'bad', address: '127.0.0.1' })).toMatch(/caught in step 7/);
    expect(again.refusal({ name: 'good', address: '127.0.0.1' })).toBeNull();
    expect(logs.some((l) => l.includes('is not JSON, skipped'))).toBe(true);
  });
});
