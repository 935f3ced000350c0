// Reading untrusted JSON, field by field: the errors decoders return, a reader that records a
// problem per bad field (and never throws), and the size-checked parse of message text. The
// messages themselves are messages.ts's; their decoders are decode.ts.
import { MAX_ID_LENGTH, MAX_MESSAGE_BYTES } from './messages.ts';

export interface DecodeError {
  kind: 'malformed' | 'unknown-type' | 'too-large';
  /** Every problem found, each naming the field ("ring[3]: ..."). */
  problems: string[];
}
export type Decoded<T> = { ok: true; value: T } | { ok: false; error: DecodeError };

export function describe(e: DecodeError): string {
  return `${e.kind} message: ${e.problems.join('; ')}`;
}

export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const show = (v: unknown): string => {
  const s = typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : Array.isArray(v) ? `an array of ${v.length}` : isObj(v) ? 'an object' : String(v);
  return s.length > 60 ? `${s.slice(0, 60)}...` : s;
};

/**
 * Reads fields of one object, recording a problem per bad field. Getters return a
 * placeholder on failure; the caller discards the value when `problems` is non-empty.
 */
export class FieldReader {
  readonly problems: string[] = [];
  constructor(readonly o: Obj, private readonly at = '') {}

  private name(key: string): string {
    return this.at ? `${this.at}.${key}` : key;
  }
  fail(key: string, rule: string): void {
    this.problems.push(`${this.name(key)} must be ${rule}, got ${show(this.o[key])}`);
  }
  /** Records fields outside `allowed`. */
  only(allowed: readonly string[]): void {
    const extra = Object.keys(this.o).filter((k) => !allowed.includes(k));
    if (extra.length) {
      this.problems.push(`unknown field(s) ${extra.slice(0, 5).map((k) => this.name(k.slice(0, 40))).join(', ')}; allowed: ${allowed.join(', ')}`);
    }
  }
  has(key: string): boolean {
    return this.o[key] !== undefined;
  }
  int(key: string, min: number, max: number): number {
    const v = this.o[key];
    if (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max) return v + 0; // -0 -> 0
    this.fail(key, `an integer in [${min}, ${max}]`);
    return min;
  }
  num(key: string, min: number, max: number): number {
    const v = this.o[key];
    if (typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max) return v + 0; // -0 -> 0
    this.fail(key, `a finite number in [${min}, ${max}]`);
    return min;
  }
  bool(key: string): boolean {
    const v = this.o[key];
    if (typeof v === 'boolean') return v;
    this.fail(key, 'true or false');
    return false;
  }
  str(key: string, max: number, pattern?: RegExp, rule?: string): string {
    const v = this.o[key];
    if (typeof v === 'string' && v.length > 0 && v.length <= max && (!pattern || pattern.test(v))) return v;
    this.fail(key, rule ?? `a non-empty string of at most ${max} characters`);
    return '';
  }
  id(key: string): string {
    return this.str(key, MAX_ID_LENGTH, ID_PATTERN, `an id of 1..${MAX_ID_LENGTH} characters [A-Za-z0-9_-]`);
  }
  oneOf<T extends string>(key: string, options: readonly T[]): T {
    const found = options.find((x) => x === this.o[key]);
    if (found !== undefined) return found;
    this.fail(key, `one of ${options.join(', ')}`);
    return options[0]!;
  }
  /** An array of at most `max` items, each checked by `item` (which returns a problem or null). */
  array<T>(key: string, max: number, item: (v: unknown) => string | null): T[] {
    const v = this.o[key];
    if (!Array.isArray(v) || v.length > max) {
      this.fail(key, `an array of at most ${max} items`);
      return [];
    }
    for (let i = 0; i < v.length; i++) {
      const problem = item(v[i]);
      if (problem) {
        this.problems.push(`${this.name(key)}[${i}] ${problem}, got ${show(v[i])}`);
        break; // one bad item says enough; a 65k-item array must not yield 65k problems
      }
    }
    // A copy (the caller's input stays the caller's), with -0 read as 0 like int() does; by
    // index, not v.map: an array whose prototype was replaced has none.
    const out: unknown[] = [];
    for (let i = 0; i < v.length; i++) out.push(typeof v[i] === 'number' ? (v[i] as number) + 0 : v[i]);
    return out as T[];
  }
}

export const ID_PATTERN = /^[A-Za-z0-9_-]+$/;

/** JSON text (from a socket or a body) to `unknown`, refusing oversized or unparsable text. */
export function parseJsonText(text: string, maxBytes = MAX_MESSAGE_BYTES): Decoded<unknown> {
  // UTF-16 length <= UTF-8 bytes, so this is a cheap lower bound checked before parsing.
  if (text.length > maxBytes) return { ok: false, error: { kind: 'too-large', problems: [`message is over ${maxBytes} bytes`] } };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    if (!(e instanceof SyntaxError)) throw e;
    return { ok: false, error: { kind: 'malformed', problems: [`not JSON: ${e.message.slice(0, 200)}`] } };
  }
}
