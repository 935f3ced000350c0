// A distributed test file's hooks (vitest): kept out of helpers.ts, which benches import
// outside the test runner.
import { afterAll, beforeAll } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { buildTestData, stopAll, tempRoot } from '../../testbed/jobs.ts';

/** A test file's temporary folder with the test data, and the volunteers it started (stopped at the end). */
export interface DistributedFixture {
  readonly dir: string;
  readonly data: { dataDir: string; manifest: Manifest };
  readonly spawned: LocalVolunteer[];
}

/** Registers a file's hooks: the folder and its test data before its tests; every volunteer stopped and the folder removed after. */
export function distributedFixture(prefix: string): DistributedFixture {
  let root: { dir: string; remove(): Promise<void> } | null = null;
  let data: { dataDir: string; manifest: Manifest } | null = null;
  const ready = <T>(v: T | null): T => {
    if (v === null) throw new Error('the distributed fixture is used before its beforeAll ran');
    return v;
  };
  const spawned: LocalVolunteer[] = [];
  beforeAll(async () => {
    root = await tempRoot(prefix);
    data = await buildTestData(root.dir);
  });
  afterAll(async () => {
    await stopAll(spawned);
    await root?.remove();
  });
  return { get dir() { return ready(root).dir; }, get data() { return ready(data); }, spawned };
}
