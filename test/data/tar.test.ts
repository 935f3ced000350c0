import { execFileSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { DataError } from '../../src/data/errors.ts';
import { parseShard, packShard, streamShard } from '../../src/data/shard.ts';
import { packTar, readTar, streamTar, tarHeader, type TarEntry } from '../../src/data/tar.ts';
import { makeRng } from '../../src/rng.ts';
import { bytesOf, expectSameBytes, tempDir } from './helpers.ts';

function randomBytes(seed: number, n: number): Uint8Array {
  const rng = makeRng(seed);
  return Uint8Array.from({ length: n }, () => rng.int(256));
}

const name100 = `${'d'.repeat(40)}/${'n'.repeat(55)}.bin`; // exactly 100 bytes
const longName = `${'p'.repeat(120)}/${'q'.repeat(90)}.png`; // needs the ustar prefix field
const entries: TarEntry[] = [
  { name: 'empty.txt', data: new Uint8Array(0) },
  { name: 'one.bin', data: randomBytes(1, 1) },
  { name: 'block.bin', data: randomBytes(2, 512) },
  { name: 'odd.bin', data: randomBytes(3, 1237) },
  { name: name100, data: randomBytes(4, 513) },
  { name: longName, data: randomBytes(5, 70_001) },
];

async function* inPieces(b: Uint8Array, sizes: number[]): AsyncGenerator<Uint8Array> {
  for (let at = 0, i = 0; at < b.length; i++) {
    const n = sizes[i % sizes.length];
    yield b.subarray(at, at + n);
    at += n;
  }
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

function expectDataError(f: () => unknown, kind: string, text: RegExp): void {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(DataError);
  expect((err as DataError).kind).toBe(kind);
  expect((err as DataError).message).toMatch(text);
}

describe('tar', () => {
  it('round-trips odd sizes, empty files, 100-byte and prefixed names', () => {
    expect(name100.length).toBe(100);
    const tar = packTar(entries);
    expect(tar.length % 512).toBe(0);
    const back = readTar(tar);
    expect(back.map((e) => e.name)).toEqual(entries.map((e) => e.name));
    back.forEach((e, i) => expectSameBytes(e.data, entries[i].data));
  });

  it('streams the same entries whatever the chunking (1, 7, 511, 4096 bytes)', async () => {
    const small = packTar(entries.slice(0, 5));
    const back1 = await collect(streamTar(inPieces(small, [1])));
    expect(back1.map((e) => e.name)).toEqual(entries.slice(0, 5).map((e) => e.name));
    back1.forEach((e, i) => expectSameBytes(e.data, entries[i].data));
    const tar = packTar(entries);
    for (const sizes of [[7, 511], [4096], [tar.length]]) {
      const back = await collect(streamTar(inPieces(tar, sizes)));
      expect(back.map((e) => e.data.length)).toEqual(entries.map((e) => e.data.length));
      expectSameBytes(back[5].data, entries[5].data);
    }
  });

  it('is read by GNU tar, and reads what GNU tar wrote', async () => {
    const dir = await tempDir('tar');
    const ours = join(dir, 'ours.tar');
    await writeFile(ours, packTar(entries));
    const listed = execFileSync('tar', ['-tf', ours], { encoding: 'utf8' }).trim().split('\n');
    expect(listed).toEqual(entries.map((e) => e.name));
    // GNU tar writes a long name with a GNU 'L' record or pax header: both must be followed.
    await writeFile(join(dir, 'a.txt'), 'hello');
    execFileSync('tar', ['-cf', join(dir, 'theirs.tar'), '-C', dir, 'a.txt', 'ours.tar']);
    const theirs = readTar(new Uint8Array(execFileSync('cat', [join(dir, 'theirs.tar')])));
    expect(theirs.map((e) => e.name)).toEqual(['a.txt', 'ours.tar']);
    expect(new TextDecoder().decode(theirs[0].data)).toBe('hello');
  });

  it('refuses names ustar cannot hold', () => {
    expectDataError(() => tarHeader('x'.repeat(101), 0), 'bad-input', /too long for ustar/);
  });

  it('reports a truncated archive, saying where it stopped', async () => {
    const tar = packTar(entries);
    expectDataError(() => readTar(tar.subarray(0, 2300), 'a.tar'), 'bad-tar', /a\.tar is truncated after 2300 bytes, inside "block\.bin" \(252 of 512 bytes\)/);
    expectDataError(() => readTar(tar.subarray(0, tar.length - 1024)), 'bad-tar', /before the end-of-archive/);
    expectDataError(() => readTar(tar.subarray(0, 700)), 'bad-tar', /inside "one.bin"|inside a header/);
    await expect(collect(streamTar(inPieces(tar.subarray(0, 3000), [100])))).rejects.toThrow(/truncated/);
  });

  it('reports a corrupt header (checksum, magic)', () => {
    const tar = packTar(entries);
    const bad = tar.slice();
    bad[512 + 3] ^= 0x20; // second header's name
    expectDataError(() => readTar(bad, 'b.tar'), 'bad-tar', /checksum mismatch at entry 1 \(header at byte 512\)/);
    const noMagic = tar.slice();
    noMagic.set(bytesOf('junk!'), 257);
    expectDataError(() => readTar(noMagic), 'bad-tar', /no ustar magic/);
  });
});

describe('shards', () => {
  const samples = [0, 1, 2].map((i) => ({ key: `00000000${i}`, encoding: 'png' as const, bytes: randomBytes(10 + i, 100 + 37 * i), label: 7 - i }));

  it('pack, gzip and parse back; stream the same', async () => {
    const tar = packShard(samples);
    expect(readTar(tar).map((e) => e.name)).toEqual(['000000000.png', '000000000.cls', '000000001.png', '000000001.cls', '000000002.png', '000000002.cls']);
    const gz = new Uint8Array(gzipSync(tar));
    for (const b of [tar, gz]) {
      const back = await parseShard(b, 's', { firstId: 0, samples: 3, classes: 10 });
      expect(back).toEqual(samples);
    }
    const streamed = await collect(streamShard(new Blob([gz]).stream(), true, 's', { firstId: 0, samples: 3 }));
    expect(streamed).toEqual(samples);
  });

  it('checks keys, counts, labels and gzip integrity against the manifest', async () => {
    const tar = packShard(samples);
    await expect(parseShard(tar, 's', { firstId: 5 })).rejects.toThrow(/key "000000000", expected "000000005"/);
    await expect(parseShard(tar, 's', { samples: 4 })).rejects.toThrow(/holds 3 samples, the manifest says 4/);
    await expect(parseShard(tar, 's', { classes: 6 })).rejects.toThrow(/not a class index below 6/);
    const noCls = packTar([{ name: '000000000.png', data: samples[0].bytes }]);
    await expect(parseShard(noCls, 's')).rejects.toThrow(/has no \.cls/);
    const gz = new Uint8Array(gzipSync(tar));
    await expect(parseShard(gz.subarray(0, gz.length - 20), 'cut.tar.gz')).rejects.toMatchObject({
      kind: 'bad-tar', message: expect.stringMatching(/cut\.tar\.gz: gzip stream is corrupt or truncated/),
    });
  });
});
