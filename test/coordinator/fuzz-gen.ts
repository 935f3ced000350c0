// Seeded generators for the fuzz tests (fuzz.test.ts): random JSON values, mutations of valid
// messages and bodies, mangled JSON text and bytes, hostile URL paths, methods and headers.
// Everything comes from one seeded stream, so a failure replays with VT_FUZZ_SEED=<seed>.
import { makeRng, type Rng } from '../../src/rng.ts';

/** The seed: VT_FUZZ_SEED when set (a failure prints it), else the test's default. */
export function fuzzSeed(fallback: number): number {
  const env = process.env.VT_FUZZ_SEED;
  if (env === undefined || env === '') return fallback;
  const n = Number(env);
  if (!Number.isInteger(n) || n < 0 || n > 0xffffffff) throw new Error(`VT_FUZZ_SEED must be an integer in [0, 2^32), got ${JSON.stringify(env)}`);
  return n;
}

export class Gen {
  private readonly rng: Rng;
  constructor(readonly seed: number) {
    this.rng = makeRng(seed);
  }
  int(n: number): number {
    return this.rng.int(n);
  }
  chance(p: number): boolean {
    return this.rng.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.rng.int(items.length)]!;
  }
  bytes(n: number): Uint8Array {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = this.rng.int(256);
    return b;
  }

  // ---- values ----

  /** A string meant to break things: empty, huge, control characters, lone surrogates, RTL, emoji, prototype names. */
  nastyString(): string {
    switch (this.int(12)) {
      case 0: return '';
      case 1: return 'x'.repeat(this.pick([64, 65, 256, 257, 1000, 1001, 20_000]));
      case 2: return '\u0000\u0001\u001f\u007f';
      case 3: return '\ud800'; // a lone surrogate: not valid UTF-16
      case 4: return '\u202e\u0645\u0631\u062d\u0628\u0627 \ud83d\ude00 \u00e9\u0301';
      case 5: return this.pick(['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf']);
      case 6: return this.pick(['NaN', 'Infinity', '-Infinity', '1e999', '-0', '0x10', ' 1', '1 ', '']);
      case 7: return this.pick(['../../etc/passwd', '..\\..\\win.ini', '%2e%2e%2f', '/', '\\']);
      case 8: return '<script>alert(1)</script>';
      case 9: return 'a'.repeat(this.int(70));
      case 10: return String.fromCharCode(...Array.from({ length: 1 + this.int(20) }, () => this.int(0x10000)));
      default: return this.pick(['p-1', 'deadbeef', 'join', 'heartbeat', 'true', 'null']);
    }
  }

  /** A number meant to break range checks. */
  nastyNumber(): number {
    return this.pick([
      Number.NaN, Infinity, -Infinity, -0, 0, 1, -1, 0.5, -0.5, 1.5, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53, 2 ** 53 + 2,
      -(2 ** 53), Number.MAX_VALUE, Number.MIN_VALUE, 1e-320, 65_536, 65_537, 1e30, 1e31, this.int(1000), (this.rng.next() - 0.5) * 10 ** this.int(40),
    ]);
  }

  /** Nested arrays/objects `depth` deep (deep JSON is a classic stack-overflow vector). */
  deep(depth: number): unknown {
    let v: unknown = this.chance(0.5) ? 1 : 'x';
    for (let i = 0; i < depth; i++) v = this.chance(0.5) ? [v] : { a: v };
    return v;
  }

  /** Any JSON-ish value (undefined included: an absent field). */
  value(depth = 0): unknown {
    switch (this.int(depth > 2 ? 8 : 12)) {
      case 0: return null;
      case 1: return this.chance(0.5);
      case 2: case 3: return this.nastyNumber();
      case 4: case 5: return this.nastyString();
      case 6: return undefined;
      case 7: return this.int(100);
      case 8: return Array.from({ length: this.int(5) }, () => this.value(depth + 1));
      case 9: return Object.fromEntries(Array.from({ length: this.int(4) }, () => [this.key(), this.value(depth + 1)]));
      case 10: return this.deep(10 + this.int(500));
      default: return new Array(this.pick([1025, 65_537])).fill(this.int(3));
    }
  }

  key(): string {
    return this.pick([
      'type', 'peerId', 'step', 'generation', 'token', 'name', 'protocol', 'extra', '__proto__', 'constructor', 'prototype', 'toString', '', ' type', 'TYPE',
      'a'.repeat(100),
    ]);
  }

  // ---- mutations of a valid message ----

  /**
   * One named edit of a plain object (nested objects and arrays may be edited instead):
   * drop a field, wrong type, nasty number, nasty string, extra or prototype key, deep nesting...
   */
  mutate(msg: Record<string, unknown>): { value: Record<string, unknown>; op: string } {
    const m: Record<string, unknown> = structuredClone(msg);
    const keys = Object.keys(m);
    const key = keys.length ? this.pick(keys) : 'type';
    const cur = m[key];
    const op = this.pick(['drop', 'wrong-type', 'number', 'string', 'extra-key', 'proto-key', 'deep', 'nested', 'array-edit', 'null', 'type']);
    switch (op) {
      case 'drop': delete m[key]; break;
      case 'wrong-type': m[key] = typeof cur === 'string' ? this.nastyNumber() : typeof cur === 'number' ? String(cur) : this.value(); break;
      case 'number': m[key] = typeof cur === 'number' ? this.pick([cur + 1, cur - 1, -cur - 1, cur + 0.5, cur * 2 ** 32, -0]) : this.nastyNumber(); break;
      case 'string': m[key] = this.nastyString(); break;
      case 'extra-key': m[this.key()] = this.value(); break;
      case 'proto-key':
        // A real own "__proto__" key, as JSON.parse produces it (an assignment would set the prototype).
        Object.defineProperty(
          m, this.pick(['__proto__', 'constructor', 'prototype']), { value: this.value(), enumerable: true, configurable: true, writable: true },
        );
        break;
      case 'deep': m[key] = this.deep(100 + this.int(900)); break;
      case 'nested':
        if (typeof cur === 'object' && cur !== null && !Array.isArray(cur)) m[key] = this.mutate(cur as Record<string, unknown>).value;
        else m[key] = this.value();
        break;
      case 'array-edit':
        if (Array.isArray(cur)) {
          const a = [...(cur as unknown[])];
          a.splice(this.int(a.length + 1), this.int(2), this.value());
          m[key] = a;
        } else m[key] = [cur];
        break;
      case 'null': m[key] = null; break;
      default: m.type = this.pick(['', 'JOIN', 'join ', 'leave', 'heartbeat', 'error', 'step-assignment', '__proto__', 'hasOwnProperty', this.nastyString()]);
    }
    return { value: m, op };
  }

  /** 1-3 mutations in a row. */
  mutateMany(msg: Record<string, unknown>): { value: Record<string, unknown>; ops: string[] } {
    let v = msg;
    const ops: string[] = [];
    for (let k = 1 + this.int(3); k > 0; k--) {
      const r = this.mutate(v);
      v = r.value;
      ops.push(r.op);
    }
    return { value: v, ops };
  }

  // ---- text and bytes ----

  /** JSON text broken the ways a wire breaks it: cut off, garbage spliced in, braces unbalanced, BOM, comments, NaN literals. */
  mangleText(text: string): string {
    switch (this.int(10)) {
      case 0: return text.slice(0, this.int(text.length + 1));
      case 1: { const at = this.int(text.length + 1); return text.slice(0, at) + Buffer.from(this.bytes(1 + this.int(8))).toString('latin1') + text.slice(at); }
      case 2: return `${text}${this.pick(['}', ']', ',', ' x', '\u0000', '{}'])}`;
      case 3: return `\ufeff${text}`;
      case 4: return text.replace(/:\s*(-?\d+(\.\d+)?)/, `:${this.pick(['NaN', 'Infinity', '-Infinity', '1e999', '01', '.5', '+1', '0x1f', '1_000'])}`);
      case 5: return `/* c */${text}`;
      case 6: return text.replace(/"/g, "'");
      case 7: return '['.repeat(1 + this.int(100_000));
      case 8: return `${'{"a":'.repeat(1 + this.int(20_000))}1${'}'.repeat(this.int(20_000))}`;
      default: return Buffer.from(this.bytes(this.int(200))).toString(this.pick(['utf8', 'latin1'] as const));
    }
  }

  // ---- HTTP ----

  /** A path mangled from a valid one: traversal in its spellings, encodings, NUL, doubled slashes, very long, queries. */
  path(valid: readonly string[]): string {
    const base = this.pick(valid);
    const segs = base.split('/');
    switch (this.int(16)) {
      case 0: return base;
      case 1: return `${base}/..`;
      case 2: return `${base}/../../${this.pick(['etc/passwd', 'job.json', 'admin-token', 'checkpoints'])}`;
      case 3: return base.replace(/\//g, this.pick(['%2f', '%2F', '%5c', '\\', '//', '/./', '/%2e/']));
      case 4: return `${base}/${this.pick(['%2e%2e', '%2E%2E', '%252e%252e', '..%2f..%2f', '.%2e', '%c0%ae%c0%ae', '%00', '%zz', '%', '%u002e'])}/job.json`;
      case 5: return `${base}${this.pick(['%00', '%00.json', '\u0000'.replace('\u0000', '%00'), '.', '/', '//', '~', ';', '#x'])}`;
      case 6: return `${base}/${'a'.repeat(this.pick([129, 1000, 8000]))}`;
      case 7: return `/${'../'.repeat(1 + this.int(10))}${base.slice(1)}`;
      case 8: return `${base}?${this.pick(['peer=../../x', 'peer=%00', 'a=' + 'b'.repeat(5000), '&&&', '=', 'peer=a&peer=b', '%zz'])}`;
      case 9: return `//${base.slice(1)}`;
      case 10: return base.toUpperCase();
      case 11: { segs.splice(1 + this.int(segs.length), 0, this.nastyPathSegment()); return segs.join('/'); }
      case 12: return `${base}/${this.nastyPathSegment()}`;
      case 13: return `/${this.nastyPathSegment()}`;
      case 14: return `${base}/${Buffer.from(this.nastyString()).toString('hex').replace(/(..)/g, '%$1').slice(0, 3000)}`;
      default: return segs.slice(0, 1 + this.int(segs.length)).join('/') || '/';
    }
  }

  nastyPathSegment(): string {
    return this.pick([
      '__proto__', 'constructor', 'hasOwnProperty', 'toString', '..', '.', '%2e', '%2e%2e', 'latest', '0', '-1', '1.5', '4294967296', '99999999999',
      '00000000001', 'manifest.json', '.manifest.json', 'index.html', 'assets', 'admin-token', 'job.json', '%E2%80%AE', '%F0%9F%98%80', '%ff', 'nul', 'CON',
      ' ', '%20', '+', '*',
    ]);
  }

  method(): string {
    return this.pick(['GET', 'GET', 'POST', 'POST', 'HEAD', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT']);
  }

  contentType(): string | undefined {
    return this.pick([
      undefined, 'application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/json;', ' application/json ', 'text/plain',
      'application/octet-stream', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/json\t', '*/*', '',
    ]);
  }

  authorization(secrets: readonly string[]): string | undefined {
    const s = this.pick(secrets);
    return this.pick([
      undefined, '', 'Bearer', 'Bearer ', `Bearer  ${s}`, `bearer ${s}`, `Basic ${Buffer.from(`a:${s}`).toString('base64')}`, `Bearer ${s}x`, `Bearer x${s}`,
      `Bearer ${s.slice(0, -1)}`, `Bearer ${'t'.repeat(257)}`, `Bearer ${'t'.repeat(10_000)}`, `Bearer ${s} extra`, 'Bearer \u00e9\u00e9',
      `Bearer ${this.nastyString().replace(/[^\x21-\x7e]/g, 'x') || 'x'}`,
    ]);
  }
}
