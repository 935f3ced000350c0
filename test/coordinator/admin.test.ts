// The job owner's admin actions: only with the admin token (constant-time checked, never in a
// log); pause and resume at step boundaries; a private job's join token replaced (the old one
// stops working, peers in the job stay) and kept across a restart; tokens of one volunteer each
// issued, listed and revoked; the schedule changed.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROTOCOL_VERSION } from '../../src/protocol/messages.ts';
import { ADMIN_TOKEN_FILE, JOB_FILE } from '../../coordinator/run.ts';
import { buildTestData, startTestJob, tempRoot, testJob, type TestJob } from '../../testbed/jobs.ts';
import { HandPeer } from './hand-peer.ts';
import { VOLUNTEER_TOKENS_FILE, VolunteerTokens } from '../../coordinator/volunteer-tokens.ts';

const JOIN = 'first-join-token-0123456789';
let root: { dir: string; remove(): Promise<void> };
let job: TestJob;

beforeAll(async () => {
  root = await tempRoot('admin');
  const data = await buildTestData(root.dir);
  job = await startTestJob(root.dir, 'job', data, testJob(6, { access: 'private', joinToken: JOIN, checkpointEvery: 100 }));
});
afterAll(async () => {
  await job?.close();
  await root?.remove();
});

const admin = (action: string, body?: unknown, token = job.adminToken): Promise<Response> => fetch(`${job.url}/api/admin/${action}`, {
  method: 'POST',
  headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
  body: body === undefined ? undefined : JSON.stringify(body),
});
const joinWith = (token: string) => fetch(`${job.url}/api/join`, {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, token }),
});

async function refused(r: Response, status: number, reason: RegExp): Promise<void> {
  const body = (await r.json()) as { message: string };
  expect(r.status, body.message).toBe(status);
  expect(body.message).toMatch(reason);
}

describe('admin actions', () => {
  it('need the admin token, kept in the job folder readable by its owner only', async () => {
    const file = join(job.jobDir, ADMIN_TOKEN_FILE);
    expect((await readFile(file, 'utf8')).trim()).toBe(job.adminToken);
    expect((await stat(file)).mode & 0o077).toBe(0);
    await refused(await fetch(`${job.url}/api/admin/pause`, { method: 'POST' }), 401, /Authorization: Bearer/);
    await refused(await admin('pause', undefined, 'x'.repeat(32)), 403, /wrong admin token/);
    await refused(await admin('pause', undefined, JOIN), 403, /wrong admin token/);
    await refused(await admin('format-disk'), 404, /pause\|resume/);
    await refused(await fetch(`${job.url}/api/admin/pause`), 405, /POST/);
    await refused(await admin('schedule', { evalEvery: -1 }), 400, /evalEvery/);
    await refused(await admin('schedule', { everything: 1 }), 400, /unknown field/);
    expect(job.lines.join('\n')).not.toContain(job.adminToken);
  });

  it('pause holds the job at the next step boundary; resume goes on', async () => {
    const p = await HandPeer.join(job.url, JOIN);
    const load = await p.next('load-state');
    p.send({ type: 'ready', peerId: p.id, step: load.step, checksum: '00', device: 'hand' });
    const a = await p.next('step-assignment');
    expect((await admin('pause')).status).toBe(200);
    p.send(p.result(a));
    await new Promise((r) => setTimeout(r, 600));
    expect(p.inbox.some((m) => m.type === 'step-assignment'), 'no step while paused').toBe(false);
    expect(job.driver.status()).toMatchObject({ step: 1, phase: 'paused', paused: true });
    // The page reads it from GET /api/job (a donor who opens it then waits with a message).
    const info = (await (await fetch(`${job.url}/api/job`, { headers: { authorization: `Bearer ${JOIN}` } })).json()) as { paused?: boolean; step: number };
    expect(info).toMatchObject({ paused: true, step: 1 });
    expect((await admin('resume')).status).toBe(200);
    expect((await p.next('step-assignment')).step).toBe(1);
    expect(((await (await fetch(`${job.url}/api/job`, { headers: { authorization: `Bearer ${JOIN}` } })).json()) as { paused?: boolean }).paused).toBe(false);
    p.ws.close();
  });

  it('replaces the join token: the old one stops working, the new one is kept in job.json', async () => {
    expect((await joinWith(JOIN)).status).toBe(200);
    const r = await admin('join-token');
    expect(r.status).toBe(200);
    const { joinToken } = (await r.json()) as { joinToken: string };
    expect(joinToken).not.toBe(JOIN);
    await refused(await joinWith(JOIN), 403, /wrong join token/);
    expect((await joinWith(joinToken)).status).toBe(200);
    const stored = JSON.parse(await readFile(join(job.jobDir, JOB_FILE), 'utf8')) as { config: { joinToken: string } };
    expect(stored.config.joinToken).toBe(joinToken);
    await refused(await admin('join-token', { token: 'short' }), 400, /printable characters/);
    expect((await admin('join-token', { token: 'chosen-by-the-owner-42' })).status).toBe(200);
    expect((await joinWith('chosen-by-the-owner-42')).status).toBe(200);
  });

  it('issues tokens of one volunteer each: each opens the job, a revoked one is refused with its reason, all kept in the job folder', async () => {
    const r = await admin('volunteer-token', { label: 'desk 12' });
    expect(r.status).toBe(200);
    const { token } = (await r.json()) as { token: string };
    expect((await joinWith(token)).status).toBe(200);
    const manifest = `${job.url}/data/mnist/manifest.json`;
    expect((await fetch(manifest, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    // Labels are unique and readable; the list never shows a token.
    await refused(await admin('volunteer-token', { label: 'desk 12' }), 400, /exists already/);
    await refused(await admin('volunteer-token', { label: ' lead' }), 400, /label must be a label of 1 to 40/);
    await refused(await admin('volunteer-token', { label: 'a', token: 'x' }), 400, /unknown field/);
    expect((await admin('volunteer-token', { label: 'desk-13' })).status).toBe(200);
    const listed = (await (await admin('volunteer-tokens')).json()) as { tokens: { label: string; revoked?: unknown }[] };
    expect(listed.tokens.map((t) => t.label)).toEqual(['desk 12', 'desk-13']);
    expect(JSON.stringify(listed)).not.toContain(token);
    // Revoked: the join and every route refuse it, saying why; the job's own token still works.
    expect(await (await admin('revoke-token', { label: 'desk 12', reason: 'the desktop was stolen' })).json()).toEqual({ label: 'desk 12', revoked: true });
    await refused(await joinWith(token), 403, /the token "desk 12" was revoked \(the desktop was stolen\)/);
    await refused(await fetch(manifest, { headers: { authorization: `Bearer ${token}` } }), 403, /revoked/);
    await refused(await admin('revoke-token', { label: 'desk 99' }), 404, /no volunteer token is labelled "desk 99"/);
    const access = job.job.access;
    expect(access.kind === 'private' && (await joinWith(access.joinToken)).status).toBe(200);
    // On disk, readable by the owner only; a restarted coordinator reads the same.
    const file = join(job.jobDir, VOLUNTEER_TOKENS_FILE);
    expect((await stat(file)).mode & 0o077).toBe(0);
    const again = await VolunteerTokens.open(job.jobDir);
    expect(again.holder(token)).toEqual({ label: 'desk 12', revoked: 'the desktop was stolen' });
    expect(again.holder('not-a-token-of-this-job')).toBeNull();
    expect(job.lines.join('\n')).not.toContain(token);
  });

  it('changes how often the job evaluates and checkpoints', async () => {
    const r = await admin('schedule', { evalEvery: 3, checkpointEvery: 2 });
    expect(await r.json()).toEqual({ evalEvery: 3, checkpointEvery: 2 });
    expect(job.job).toMatchObject({ evalEvery: 3, checkpointEvery: 2 });
    const stored = JSON.parse(await readFile(join(job.jobDir, JOB_FILE), 'utf8')) as { config: Record<string, unknown> };
    expect(stored.config).toMatchObject({ evalEvery: 3, checkpointEvery: 2 });
  });
});
