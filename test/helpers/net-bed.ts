// The namespaced-hosts fixture of the network tests: a temporary folder, the test data set built
// in it, and a Testbed of hosts (testbed/net/bed.ts), made before the file's tests and removed
// after them, also when they fail.
import { afterAll, beforeAll } from 'vitest';
import { buildTestData, tempRoot } from '../../testbed/jobs.ts';
import { Testbed, type TestbedOptions } from '../../testbed/net/bed.ts';

export interface NetBed {
  /** The temporary folder (job folders, TLS files). */
  readonly dir: string;
  readonly data: Awaited<ReturnType<typeof buildTestData>>;
  readonly bed: Testbed;
}

/** Registers the fixture for the calling file or describe block; read its fields inside the tests. */
export function netBed(name: string, options: TestbedOptions): NetBed {
  let root: Awaited<ReturnType<typeof tempRoot>> | undefined;
  let data: NetBed['data'] | undefined;
  let bed: Testbed | undefined;
  beforeAll(async () => {
    root = await tempRoot(name);
    data = await buildTestData(root.dir);
    bed = await Testbed.create(options);
  });
  afterAll(async () => {
    await bed?.close();
    await root?.remove();
  });
  const ready = <T>(v: T | undefined, what: string): T => {
    if (v === undefined) throw new Error(`netBed(${name}): ${what} is not made yet (use it inside a test)`);
    return v;
  };
  return {
    get dir() { return ready(root, 'the folder').dir; },
    get data() { return ready(data, 'the data'); },
    get bed() { return ready(bed, 'the testbed'); },
  };
}
