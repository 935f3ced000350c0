// The checkpoint store on real files: round trip, pruning to the newest N, a crash mid-write
// (a temporary file left behind), a corrupted or truncated newest file (falls back to the
// previous one, with the reason logged) and a failed write that must not cost a good file.
import { mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeCheckpoint, encodeCheckpoint, PREFIX_BYTES } from '../../src/checkpoint/format.ts';
import { layoutFingerprint, openCheckpointStore, type Checkpoint } from '../../coordinator/checkpoints.ts';
import { layoutOf } from '../../src/nn/layout.ts';
import { smallCnn, resnet20 } from '../../src/nn/models.ts';
import { makeRng, uniformF32 } from '../../src/rng.ts';

let dir = '';
let logs: string[] = [];
const log = (l: string): void => void logs.push(l);
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vt-ckpt-'));
  logs = [];
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

function sample(step: number, n = 1000): Checkpoint {
  const rng = makeRng(step + 1);
  return {
    step, generation: step % 7, fingerprint: 'small-cnn:0123456789abcdef',
    weights: uniformF32(rng, n), bnState: uniformF32(rng, 64),
    optimizer: { momentum: uniformF32(rng, n) },
    metadata: { job: 'test', loss: 1.5 + step },
  };
}

function expectSame(a: Checkpoint, b: Checkpoint): void {
  expect(a.step).toBe(b.step);
  expect(a.generation).toBe(b.generation);
  expect(a.fingerprint).toBe(b.fingerprint);
  expect(a.metadata).toEqual(b.metadata);
  expect(
    Buffer.from(a.weights.buffer, a.weights.byteOffset, a.weights.byteLength).equals(Buffer.from(b.weights.buffer, b.weights.byteOffset, b.weights.byteLength)),
  ).toBe(true);
  expect([...a.bnState]).toEqual([...b.bnState]);
  expect(Object.keys(a.optimizer)).toEqual(Object.keys(b.optimizer));
  expect([...a.optimizer.momentum!]).toEqual([...b.optimizer.momentum!]);
}

describe('checkpoint format', () => {
  it('round-trips bit-exactly, NaN and -0 included', () => {
    const c = sample(3);
    c.weights[0] = Number.NaN;
    c.weights[1] = -0;
    const bytes = Buffer.concat(encodeCheckpoint(c));
    const back = decodeCheckpoint(bytes, 'mem');
    expectSame(back, c);
    expect(Object.is(back.weights[1], -0)).toBe(true);
  });

  it('refuses every single flipped byte and every truncation', () => {
    const bytes = Buffer.concat(encodeCheckpoint(sample(1, 100)));
    const rng = makeRng(5);
    for (let i = 0; i < 200; i++) {
      const bad = Buffer.from(bytes);
      const at = i < 56 ? i : rng.int(bad.length);
      bad[at] ^= 1 + rng.int(255);
      expect(() => decodeCheckpoint(bad, `flip@${at}`)).toThrow(/is unusable/);
    }
    for (const len of [0, 10, PREFIX_BYTES, bytes.length - 1])
      expect(() => decodeCheckpoint(bytes.subarray(0, len), 'cut')).toThrow(/cut-off write|shorter than/);
  });

  it('fingerprints the model and its layout', () => {
    const a = layoutFingerprint('small-cnn', layoutOf(smallCnn()));
    expect(a).toBe(layoutFingerprint('small-cnn', layoutOf(smallCnn())));
    expect(a).not.toBe(layoutFingerprint('small-cnn', layoutOf(smallCnn([1, 28, 28]))));
    expect(a).not.toBe(layoutFingerprint('resnet20', layoutOf(resnet20())));
  });
});

describe('checkpoint store', () => {
  it('writes, reads the newest and keeps only the last N', async () => {
    const store = await openCheckpointStore(dir, { keep: 2, log });
    for (const step of [10, 20, 30]) await store.write(sample(step));
    expect((await store.list()).map((s) => s.step)).toEqual([30, 20]);
    expectSame((await store.readNewest())!, sample(30));
    const file = await store.readNewestFile();
    expect(file?.step).toBe(30);
    expect(Buffer.from(file!.bytes).equals(await readFile(join(dir, 'step-0000000030.vtck')))).toBe(true);
    expect(logs).toEqual([]);
  });

  it('discards the checkpoints after a step (undone work): the newest is then the one it went back to', async () => {
    const store = await openCheckpointStore(dir, { keep: 5, log });
    for (const step of [2, 4, 6, 8]) await store.write(sample(step));
    expect(await store.discardAfter(4)).toEqual([6, 8]);
    expect((await store.list()).map((s) => s.step)).toEqual([4, 2]);
    expectSame((await store.readNewest())!, sample(4));
    expect(await store.discardAfter(4)).toEqual([]);
  });

  it('is empty at first', async () => {
    const store = await openCheckpointStore(dir, { keep: 3, log });
    expect(await store.readNewest()).toBeNull();
    expect(await store.readNewestFile()).toBeNull();
  });

  it('survives a crash mid-write: the partial temp file is ignored, then removed on open', async () => {
    const store = await openCheckpointStore(dir, { keep: 3, log });
    await store.write(sample(10));
    // What a process killed during write() leaves: half of step 20 under a temporary name.
    const half = Buffer.concat(encodeCheckpoint(sample(20))).subarray(0, 3000);
    await writeFile(join(dir, '.step-0000000020.vtck.tmp-99999-abcd'), half);
    expectSame((await store.readNewest())!, sample(10));
    const reopened = await openCheckpointStore(dir, { keep: 3, log });
    expect(await readdir(dir)).toEqual(['step-0000000010.vtck']);
    expect(logs.join('\n')).toContain('removed .step-0000000020.vtck.tmp-99999-abcd');
    expectSame((await reopened.readNewest())!, sample(10));
  });

  it('falls back to the previous checkpoint when the newest is corrupted or cut off, and says why', async () => {
    const store = await openCheckpointStore(dir, { keep: 3, log });
    for (const step of [10, 20, 30]) await store.write(sample(step));
    const newest = join(dir, 'step-0000000030.vtck');
    const bytes = await readFile(newest);
    bytes[bytes.length - 5] ^= 0xff;
    await writeFile(newest, bytes);
    expectSame((await store.readNewest())!, sample(20));
    expect(logs.join('\n')).toMatch(/step-0000000030\.vtck is unusable: sha256 mismatch/);
    await truncate(join(dir, 'step-0000000020.vtck'), 4000);
    expect((await store.readNewestFile())?.step).toBe(10);
    expect(logs.join('\n')).toMatch(/step-0000000020\.vtck is unusable: .*cut-off write/);
  });

  it('a failed write keeps every good checkpoint and leaves no temporary file', async () => {
    const store = await openCheckpointStore(dir, { keep: 2, log });
    await store.write(sample(10));
    await store.write(sample(20));
    const bad = { ...sample(30), metadata: { big: 10n } }; // JSON.stringify throws on a BigInt
    await expect(store.write(bad)).rejects.toThrow(/BigInt/);
    expect((await readdir(dir)).sort()).toEqual(['step-0000000010.vtck', 'step-0000000020.vtck']);
    expectSame((await store.readNewest())!, sample(20));
  });
});

describe('checkpoint format: hostile headers', () => {
  it('refuses a correctly hashed file whose header is not ours', async () => {
    const { createHash } = await import('node:crypto');
    // Builds a file with a valid prefix and hash around any header text: what a peer could upload.
    const forge = (headerText: string): Buffer => {
      const padded = headerText + ' '.repeat((4 - (Buffer.byteLength(headerText) % 4)) % 4);
      const body = Buffer.from(padded);
      const prefix = Buffer.alloc(PREFIX_BYTES);
      prefix.writeUInt32LE(0x4b435456, 0);
      prefix.writeUInt32LE(1, 4);
      prefix.writeUInt32LE(body.length, 8);
      prefix.writeBigUInt64LE(0n, 16);
      createHash('sha256').update(body).digest().copy(prefix, 24);
      return Buffer.concat([prefix, body]);
    };
    for (const [text, reason] of [
      ['null', /no tensor list/],
      ['{"tensors": [null]}', /outside the payload/],
      ['{"tensors": [{"name": "weights", "offset": 0, "length": 1}]}', /outside the payload/],
      ['{"tensors": []}', /weights or BN state tensor is missing/],
      ['{"tensors"', /header is not JSON/],
    ] as const) expect(() => decodeCheckpoint(forge(text), 'forged')).toThrow(reason);
  });
});
