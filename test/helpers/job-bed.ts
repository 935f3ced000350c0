// The set-up most end-to-end job tests share: a temporary folder with the test data set built in
// it, and the volunteers the tests spawn, stopped (and the folder removed) after the file's tests.
import { afterAll, beforeAll } from 'vitest';
import type { LocalVolunteer } from '../../coordinator/local-volunteers.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { buildTestData, stopAll, tempRoot } from '../../testbed/jobs.ts';

export interface JobBed {
  /** The temporary folder (jobs go in folders below it). */
  readonly dir: string;
  /** The test data set built in it. */
  readonly data: { dataDir: string; manifest: Manifest };
  /** Volunteers to stop after the file's tests (push what a test spawns). */
  readonly spawned: LocalVolunteer[];
}

/** Registers the bed's set-up and tear-down for this test file; its fields are readable once beforeAll ran. */
export function jobBed(name: string): JobBed {
  let root: { dir: string; remove(): Promise<void> } | null = null;
  let data: JobBed['data'] | null = null;
  const spawned: LocalVolunteer[] = [];
  beforeAll(async () => {
    root = await tempRoot(name);
    data = await buildTestData(root.dir);
  });
  afterAll(async () => {
    await stopAll(spawned);
    await root?.remove();
  });
  const ready = <T>(v: T | null, what: string): T => {
    if (v === null) throw new Error(`the job bed's ${what} is read before its beforeAll ran`);
    return v;
  };
  return {
    get dir() { return ready(root, 'folder').dir; },
    get data() { return ready(data, 'data set'); },
    spawned,
  };
}
