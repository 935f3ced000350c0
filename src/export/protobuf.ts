// A small protocol-buffers WRITER (encoding only), enough for ONNX files: varints, 32-bit
// floats, strings, bytes and nested messages (https://protobuf.dev/programming-guides/encoding).
//
// A message is built bottom-up: a child is finished before its parent takes it, so every
// length prefix is known when it is written. Large byte fields (weights) are kept by
// reference, never copied: `chunks()` returns small header runs and the caller's arrays in
// file order, to be written in turn (a 244 MB AlexNet is never assembled in one buffer).
// Repeated scalars are written unpacked (one tag per value), which every parser accepts for
// the proto2 fields of onnx.proto.

const WIRE_VARINT = 0;
const WIRE_I64 = 1;
const WIRE_LEN = 2;
const WIRE_I32 = 5;

/** Bytes at least this long are kept by reference instead of copied into the header run. */
const BY_REFERENCE = 4096;

const utf8 = new TextEncoder();

export class ProtoMessage {
  /** Finished parts in order; `run` collects small writes until the next part is pushed. */
  private readonly parts: Uint8Array[] = [];
  private run: number[] = [];
  private bytes = 0;

  /** Encoded length in bytes. */
  get length(): number {
    return this.bytes + this.run.length;
  }

  private tag(field: number, wire: number): void {
    if (!Number.isInteger(field) || field < 1 || field > 536_870_911) throw new RangeError(`protobuf field number ${field} is out of range`);
    this.varint((field * 8 + wire));
  }

  /** A varint of a non-negative integer up to 2^53 (or a negative int64, as 10 bytes). */
  private varint(v: number): void {
    if (!Number.isInteger(v)) throw new RangeError(`protobuf varint of ${v}: not an integer`);
    if (v < 0) {
      // int64 two's complement: 10 bytes.
      let b = BigInt.asUintN(64, BigInt(v));
      while (b >= 0x80n) {
        this.run.push(Number(b & 0x7fn) | 0x80);
        b >>= 7n;
      }
      this.run.push(Number(b));
      return;
    }
    if (v > Number.MAX_SAFE_INTEGER) throw new RangeError(`protobuf varint of ${v}: beyond 2^53`);
    while (v >= 0x80) {
      this.run.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.run.push(v);
  }

  private flushRun(): void {
    if (this.run.length === 0) return;
    this.parts.push(Uint8Array.from(this.run));
    this.bytes += this.run.length;
    this.run = [];
  }

  private raw(b: Uint8Array): void {
    if (b.length < BY_REFERENCE) {
      for (let i = 0; i < b.length; i++) this.run.push(b[i]!);
      return;
    }
    this.flushRun();
    this.parts.push(b);
    this.bytes += b.length;
  }

  /** int32, int64, uint64, enum, bool (varint). */
  int(field: number, v: number): this {
    this.tag(field, WIRE_VARINT);
    this.varint(v);
    return this;
  }

  /** float (32-bit, little-endian). */
  float(field: number, v: number): this {
    this.tag(field, WIRE_I32);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.raw(b);
    return this;
  }

  /** double (64-bit, little-endian). */
  double(field: number, v: number): this {
    this.tag(field, WIRE_I64);
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, v, true);
    this.raw(b);
    return this;
  }

  string(field: number, s: string): this {
    return this.bytesField(field, utf8.encode(s));
  }

  /** A bytes field; arrays of 4 KiB or more are referenced, not copied (do not change them). */
  bytesField(field: number, b: Uint8Array): this {
    this.tag(field, WIRE_LEN);
    this.varint(b.length);
    this.raw(b);
    return this;
  }

  /** An embedded message (finished: it must not be written to afterwards). */
  message(field: number, m: ProtoMessage): this {
    this.tag(field, WIRE_LEN);
    this.varint(m.length);
    m.flushRun();
    for (const p of m.parts) {
      if (p.length < BY_REFERENCE) this.raw(p);
      else {
        this.flushRun();
        this.parts.push(p);
        this.bytes += p.length;
      }
    }
    return this;
  }

  /** The encoding as parts in order (their concatenation is the message). */
  chunks(): Uint8Array[] {
    this.flushRun();
    return [...this.parts];
  }

  /** The encoding in one new array (for small messages and tests). */
  toBytes(): Uint8Array {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.chunks()) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}
