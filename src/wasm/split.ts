// How the wasm engine's ops split work between threads (src/wasm/threads.ts runs the parts).

/** Below this many multiply-adds an op runs on one thread (a dispatch costs tens of µs). */
export const MIN_SPLIT_MACS = 1 << 18;

/** Part t of [0, total) cut into `parts` contiguous ranges whose inner bounds are multiples of `align`. */
export function splitRange(total: number, parts: number, t: number, align = 1): [number, number] {
  const blocks = Math.ceil(total / align);
  const at = (i: number) => Math.min(total, Math.floor((blocks * i) / parts) * align);
  return [at(t), at(t + 1)];
}
