// A volunteer that hangs at a chosen point, for the fault tests (`--freeze-at REGEX`, a flag the
// usage does not show): at the first log line that matches, its main thread stops for up to
// FREEZE_MS, as a process stuck there would, and the test kills it while it hangs. The kill then
// lands inside that phase (the all-reduce of step 3, the compute of a slice) on any engine, where
// before a test read the line and killed a WebGPU volunteer in the time its slow step left.
// Its WebRTC threads (node-datachannel) run on, as they do in a busy process: only the kill closes
// its links. Written to stderr before it stops (a pipe: written at once).

/** The line a volunteer writes as it freezes: what a test waits for before it kills it. */
export const FROZEN_LINE = /\(--freeze-at\)$/;

/** How long a frozen volunteer waits before it goes on, if nothing kills it. */
export const FREEZE_MS = 60_000;

/** A log hook that freezes the main thread at the first line matching `pattern`; later lines pass. */
export function freezeAt(pattern: RegExp, ms = FREEZE_MS, write: (s: string) => void = (s) => process.stderr.write(s)): (line: string) => void {
  let frozen = false;
  return (line) => {
    if (frozen || !pattern.test(line)) return;
    frozen = true;
    write(`volunteer: frozen for up to ${ms / 1000} s after "${line.slice(0, 100)}" (--freeze-at)\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  };
}
