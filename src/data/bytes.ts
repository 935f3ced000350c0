// Byte-stream helpers that run the same in browsers, Workers and Node 20 (all have
// DecompressionStream and Response): gzip detection, gunzip, reading a stream in chunks.

/** The parts back to back in one new array. */
export function concatBytes(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

export function isGzip(b: Uint8Array): boolean {
  return b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;
}

/** Yields the chunks of a byte stream (ReadableStream is not async-iterable in every browser). */
export async function* chunksOf(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  let done = false;
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) {
        done = true;
        return;
      }
      yield r.value;
    }
  } finally {
    // Stopped early: tell the source, so a fetch or decompressor does not keep running.
    if (!done) await reader.cancel();
    reader.releaseLock();
  }
}

/** The decompressed stream when `gzip`, else `stream` itself. */
export function maybeGunzipStream(stream: ReadableStream<Uint8Array<ArrayBuffer>>, gzip: boolean): ReadableStream<Uint8Array> {
  return gzip ? stream.pipeThrough(new DecompressionStream('gzip')) : stream;
}

/** Gunzips a whole buffer; Node passes a node:zlib one (5x faster than Node's web streams). */
export type Gunzip = (b: Uint8Array) => Promise<Uint8Array>;

/** Gunzips a whole buffer with DecompressionStream (errors from a corrupt stream are thrown, not truncated). */
export async function gunzip(b: Uint8Array): Promise<Uint8Array> {
  const out = new Response(new Blob([b as Uint8Array<ArrayBuffer>]).stream().pipeThrough(new DecompressionStream('gzip')));
  return new Uint8Array(await out.arrayBuffer());
}
