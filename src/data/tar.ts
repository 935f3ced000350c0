// Plain ustar archives (what WebDataset shards are): a pure writer and a push parser that
// streams. Layout: 512-byte headers (name 0/100, mode 100/8, size 124/12 octal, mtime 136/12,
// checksum 148/8, type 156, magic "ustar\0" "00" at 257, prefix 345/155), file data padded to
// 512, two zero blocks at the end. The reader also follows pax ('x') and GNU ('L') long names
// so npm tarballs read too, and skips links and directories.

import { DataError } from './errors.ts';

export interface TarEntry {
  readonly name: string;
  readonly data: Uint8Array;
}

const BLOCK = 512;
const enc = new TextEncoder();
const dec = new TextDecoder();

const padded = (n: number): number => Math.ceil(n / BLOCK) * BLOCK;

function writeOctal(h: Uint8Array, at: number, width: number, value: number): void {
  const s = value.toString(8).padStart(width - 1, '0');
  if (s.length > width - 1) throw new DataError('bad-input', `tar field of ${width} bytes cannot hold ${value}`);
  h.set(enc.encode(s), at); // the last byte stays NUL
}

function splitName(name: string): [prefix: string, rest: string] {
  const bytes = enc.encode(name);
  if (bytes.length <= 100) return ['', name];
  // ustar: prefix (<= 155 bytes) + '/' + name (<= 100 bytes), split at a slash.
  for (let i = name.lastIndexOf('/'); i > 0; i = name.lastIndexOf('/', i - 1)) {
    const p = enc.encode(name.slice(0, i)).length;
    const r = enc.encode(name.slice(i + 1)).length;
    if (p <= 155 && r <= 100 && r > 0) return [name.slice(0, i), name.slice(i + 1)];
  }
  throw new DataError('bad-input', `tar name "${name}" is too long for ustar (100 bytes, or 155/100 split at a slash)`);
}

/** The 512-byte ustar header of a regular file (mode 0644, mtime 0: shards are reproducible). */
export function tarHeader(name: string, size: number): Uint8Array {
  const [prefix, rest] = splitName(name);
  const h = new Uint8Array(BLOCK);
  h.set(enc.encode(rest), 0);
  writeOctal(h, 100, 8, 0o644);
  writeOctal(h, 108, 8, 0);
  writeOctal(h, 116, 8, 0);
  writeOctal(h, 124, 12, size);
  writeOctal(h, 136, 12, 0);
  h[156] = 0x30; // '0': regular file
  h.set(enc.encode('ustar\u000000'), 257);
  h.set(enc.encode(prefix), 345);
  h.fill(0x20, 148, 156);
  writeOctal(h, 148, 7, headerSum(h)); // six digits, NUL, then the space already there
  return h;
}

function headerSum(h: Uint8Array): number {
  let s = 0;
  for (let i = 0; i < BLOCK; i++) s += i >= 148 && i < 156 ? 0x20 : h[i];
  return s;
}

/** One archive holding `entries` in order, ending in two zero blocks. */
export function packTar(entries: readonly TarEntry[]): Uint8Array {
  let total = 2 * BLOCK;
  for (const e of entries) total += BLOCK + padded(e.data.length);
  const out = new Uint8Array(total);
  let at = 0;
  for (const e of entries) {
    out.set(tarHeader(e.name, e.data.length), at);
    out.set(e.data, at + BLOCK);
    at += BLOCK + padded(e.data.length);
  }
  return out;
}

function cString(h: Uint8Array, at: number, width: number): string {
  const end = h.indexOf(0, at);
  return dec.decode(h.subarray(at, end < 0 || end > at + width ? at + width : end));
}

function readNumber(h: Uint8Array, at: number, width: number): number {
  if (h[at] & 0x80) {
    // GNU base-256 for values past the octal range.
    let v = h[at] & 0x7f;
    for (let i = 1; i < width; i++) v = v * 256 + h[at + i];
    return v;
  }
  // Octal digits, possibly led by spaces and ended by NUL or space.
  let v = 0;
  let digits = 0;
  for (let i = at; i < at + width; i++) {
    const b = h[i];
    if (b >= 0x30 && b <= 0x37) {
      v = v * 8 + (b - 0x30);
      digits++;
    } else if (b === 0 || b === 0x20) {
      if (digits > 0) break;
    } else return Number.NaN;
  }
  return v;
}

const isZeroBlock = (h: Uint8Array): boolean => h[0] === 0 && h[148] === 0 && h.every((b) => b === 0);
const USTAR = [0x75, 0x73, 0x74, 0x61, 0x72];

function parsePaxPath(data: Uint8Array): string | undefined {
  // Records "<len> <key>=<value>\n".
  const text = dec.decode(data);
  let path: string | undefined;
  for (let i = 0; i < text.length; ) {
    const sp = text.indexOf(' ', i);
    const len = parseInt(text.slice(i, sp), 10);
    if (sp < 0 || !(len > 0)) break;
    const rec = text.slice(sp + 1, i + len - 1);
    const eq = rec.indexOf('=');
    if (rec.slice(0, eq) === 'path') path = rec.slice(eq + 1);
    i += len;
  }
  return path;
}

interface OpenEntry {
  readonly name: string;
  readonly type: number;
  readonly size: number;
  /** Allocated when the file spans chunks; a view of the chunk when it fits in one. */
  data: Uint8Array | null;
  filled: number;
}

/**
 * Push parser: feed chunks in order with `push` (returns the regular files completed by that
 * chunk), then call `finish` to check the archive was complete. `source` names the archive
 * in error messages. A file that lies inside one chunk is handed out as a view of it, so do
 * not reuse a chunk's memory after pushing it.
 */
export class TarParser {
  private readonly head = new Uint8Array(BLOCK);
  private headFill = 0;
  private entry: OpenEntry | null = null;
  private skip = 0;
  private ended = false;
  private pushed = 0;
  private consumed = 0;
  private longName: string | undefined;
  private count = 0;

  constructor(private readonly source = 'tar') {}

  push(chunk: Uint8Array): TarEntry[] {
    const out: TarEntry[] = [];
    let p = 0;
    while (p < chunk.length && !this.ended) {
      const left = chunk.length - p;
      if (this.skip > 0) {
        const n = Math.min(this.skip, left);
        this.skip -= n;
        p += n;
        this.consumed += n;
      } else if (this.entry) {
        const e = this.entry;
        if (e.filled === 0 && e.size <= left) {
          // The whole file is in this chunk: hand out a view, no copy.
          e.data = chunk.subarray(p, p + e.size);
          e.filled = e.size;
          p += e.size;
          this.consumed += e.size;
          this.closeEntry(out);
          continue;
        }
        e.data ??= new Uint8Array(e.size);
        const n = Math.min(e.size - e.filled, left);
        e.data.set(chunk.subarray(p, p + n), e.filled);
        e.filled += n;
        p += n;
        this.consumed += n;
        if (e.filled === e.size) this.closeEntry(out);
      } else {
        const n = Math.min(BLOCK - this.headFill, left);
        this.head.set(chunk.subarray(p, p + n), this.headFill);
        this.headFill += n;
        p += n;
        this.consumed += n;
        if (this.headFill === BLOCK) {
          this.headFill = 0;
          this.openEntry(out);
        }
      }
    }
    this.pushed += chunk.length;
    return out;
  }

  /** Throws a 'bad-tar' DataError if the archive stopped before its end blocks. */
  finish(): void {
    if (this.ended) return;
    const where = this.entry
      ? `inside "${this.entry.name}" (${this.entry.filled} of ${this.entry.size} bytes)`
      : this.headFill > 0 ? 'inside a header' : 'before the end-of-archive blocks';
    throw new DataError('bad-tar', `${this.source} is truncated after ${this.pushed} bytes, ${where}`);
  }

  private openEntry(out: TarEntry[]): void {
    const h = this.head;
    if (isZeroBlock(h)) {
      this.ended = true;
      return;
    }
    const at = this.consumed - BLOCK;
    // POSIX writes "ustar\0" + "00", GNU "ustar  \0": both start with "ustar".
    if (USTAR.some((b, i) => h[257 + i] !== b)) {
      throw new DataError('bad-tar', `${this.source}: entry ${this.count} (header at byte ${at}) has no ustar magic`);
    }
    const sum = readNumber(h, 148, 8);
    if (sum !== headerSum(h)) {
      throw new DataError('bad-tar', `${this.source}: header checksum mismatch at entry ${this.count} (header at byte ${at})`);
    }
    const size = readNumber(h, 124, 12);
    if (!Number.isFinite(size)) throw new DataError('bad-tar', `${this.source}: entry ${this.count} has a bad size field`);
    const prefix = h[345] === 0 ? '' : cString(h, 345, 155);
    const base = cString(h, 0, 100);
    const name = this.longName ?? (prefix ? `${prefix}/${base}` : base);
    this.longName = undefined;
    this.count++;
    this.entry = { name, type: h[156], size, data: size === 0 ? new Uint8Array(0) : null, filled: 0 };
    if (size === 0) this.closeEntry(out);
  }

  private closeEntry(out: TarEntry[]): void {
    const e = this.entry;
    if (!e?.data) return;
    this.entry = null;
    this.skip = padded(e.size) - e.size;
    const type = String.fromCharCode(e.type);
    if (type === '0' || e.type === 0 || type === '7') out.push({ name: e.name, data: e.data });
    else if (type === 'x') this.longName = parsePaxPath(e.data);
    else if (type === 'L') this.longName = cString(e.data, 0, e.data.length);
    // directories, links, global pax headers: nothing to hand out
  }
}

/** Every regular file of a whole archive held in memory. */
export function readTar(bytes: Uint8Array, source = 'tar'): TarEntry[] {
  const p = new TarParser(source);
  const out = p.push(bytes);
  p.finish();
  return out;
}

/** The regular files of an archive arriving in chunks, as they complete. */
export async function* streamTar(chunks: AsyncIterable<Uint8Array>, source = 'tar'): AsyncGenerator<TarEntry> {
  const p = new TarParser(source);
  for await (const c of chunks) yield* p.push(c);
  p.finish();
}
