// Messages over a byte stream (a direct link's TLS socket, direct-conn.ts): each message is a
// 4-byte big-endian length, then that many bytes. A data channel keeps message boundaries
// itself; a stream does not, so the receiving end cuts the bytes back into the messages sent.
// Whole messages that arrive inside one read are handed on as views of it (no copy); one that
// spans reads is gathered into its own buffer.

/** Bytes before each message on a stream. */
export const STREAM_HEADER_BYTES = 4;
/**
 * The largest message a stream carries. Ring frames are a chunk of a gradient (at most a few MiB:
 * RingSettings), the hello a few hundred bytes; a length above this is a broken or hostile sender.
 */
export const MAX_STREAM_MESSAGE = 64 << 20;

/** The header that goes before a message of `length` bytes. */
export function streamHeader(length: number): Uint8Array {
  if (!Number.isInteger(length) || length < 0 || length > MAX_STREAM_MESSAGE) {
    throw new RangeError(`a stream message is 0..${MAX_STREAM_MESSAGE} bytes, got ${length}`);
  }
  const h = new Uint8Array(STREAM_HEADER_BYTES);
  new DataView(h.buffer).setUint32(0, length);
  return h;
}

/** The receiving end: bytes in, in the order read; whole messages out. */
export class StreamSplitter {
  private readonly header = new Uint8Array(STREAM_HEADER_BYTES);
  private headerHave = 0;
  /** The message being gathered across reads (null: between messages). */
  private body: Uint8Array | null = null;
  private bodyHave = 0;
  private broken: string | null = null;

  constructor(private readonly maxMessage = MAX_STREAM_MESSAGE) {}

  /**
   * The messages `chunk` completes, in order; or the reason the stream cannot be read (a length
   * over the limit), after which every later call returns the same reason.
   */
  push(chunk: Uint8Array): Uint8Array[] | { error: string } {
    if (this.broken) return { error: this.broken };
    const out: Uint8Array[] = [];
    let at = 0;
    while (at < chunk.length) {
      if (this.body) {
        const take = Math.min(this.body.length - this.bodyHave, chunk.length - at);
        this.body.set(chunk.subarray(at, at + take), this.bodyHave);
        this.bodyHave += take;
        at += take;
        if (this.bodyHave === this.body.length) {
          out.push(this.body);
          this.body = null;
        }
        continue;
      }
      if (this.headerHave < STREAM_HEADER_BYTES) {
        const take = Math.min(STREAM_HEADER_BYTES - this.headerHave, chunk.length - at);
        this.header.set(chunk.subarray(at, at + take), this.headerHave);
        this.headerHave += take;
        at += take;
        if (this.headerHave < STREAM_HEADER_BYTES) break;
      }
      const length = new DataView(this.header.buffer).getUint32(0);
      this.headerHave = 0;
      if (length > this.maxMessage) {
        this.broken = `a message of ${length} bytes announced, more than the ${this.maxMessage} a stream carries`;
        return { error: this.broken };
      }
      if (chunk.length - at >= length) {
        out.push(chunk.subarray(at, at + length));
        at += length;
      } else {
        this.body = new Uint8Array(length);
        this.bodyHave = 0;
      }
    }
    return out;
  }

  /** Whether the stream stopped between two messages (an end anywhere else cut one short). */
  get atBoundary(): boolean {
    return this.body === null && this.headerHave === 0;
  }
}
