// A private job end to end on loopback: a Node volunteer with the join token trains it (its job
// info, shards and checkpoints go with the token: coordinator/routes.ts checkAccess), while the
// same job's data, weights, metrics and model stay closed to anyone without a credential, and a
// volunteer without the token is refused at once with what to do.
import { describe, expect, it } from 'vitest';
import { spawnVolunteer } from '../../coordinator/local-volunteers.ts';
import { distributedFixture } from './fixture.ts';
import { metricsOf, startTestJob, testJob } from '../../testbed/jobs.ts';

const f = distributedFixture('private');
const TOKEN = 'private-job-token-0123456789';

describe('a private job', () => {
  it('trains with the token; its routes stay closed without one', async () => {
    const job = await startTestJob(f.dir, 'private', f.data, testJob(4, { access: 'private', joinToken: TOKEN, checkpointEvery: 2 }));
    const outsider = spawnVolunteer({ url: job.url, name: 'outsider', args: ['--no-tune', '--rejoin-for', '5', '--backend', 'wasm'] });
    const member = spawnVolunteer({ url: job.url, name: 'member', token: TOKEN, args: ['--no-tune', '--rejoin-for', '60', '--backend', 'wasm'] });
    f.spawned.push(outsider, member);
    expect(await outsider.exited).not.toBe(0);
    expect(outsider.lines.join('\n')).toMatch(/this job is private: send its join token or its view token/);
    await job.driver.finished;
    for (const path of [
      '/api/job', '/api/metrics', '/api/checkpoints/latest', '/api/model.onnx', '/data/mnist/manifest.json', '/data/mnist/train-000000.tar',
    ]) {
      expect((await fetch(`${job.url}${path}`)).status, path).toBe(401);
    }
    const latest = await fetch(`${job.url}/api/checkpoints/latest`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(latest.status).toBe(200);
    expect(latest.headers.get('x-checkpoint-step')).toBe('4');
    await job.close();
    expect(await member.exited, member.lines.slice(-20).join('\n')).toBe(0);
    const steps = (await metricsOf(job.jobDir)).filter((r) => r.type === 'step');
    expect(steps.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  }, 240_000);
});
