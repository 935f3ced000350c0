// What the two collectives over a ring (allreduce.ts, group-chain.ts) share on their receiving
// side: a promise for "every frame from prev has been applied", one waiter woken by each frame,
// drain or failure, and the first failure, which rejects the promise and wakes the waiter.
import type { RingError } from './errors.ts';

export abstract class ReceiveWaits {
  /** Resolves when every frame from prev has been applied; rejects with the first failure. */
  readonly received: Promise<void>;
  protected error: RingError | null = null;
  private waiter: (() => void) | null = null;
  private resolve!: () => void;
  private reject!: (e: RingError) => void;

  constructor() {
    this.received = new Promise<void>((res, rej) => {
      this.resolve = res;
      this.reject = rej;
    });
    // Promise.all subscribes later; do not let an early failure count as unhandled.
    this.received.catch(() => undefined);
  }

  /** Every frame from prev has been applied. */
  protected resolveReceived(): void {
    this.resolve();
  }

  /** Wakes whoever waits for the next event (a frame applied, a drain, a failure). */
  wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** The first failure wins: it rejects `received` and wakes the waiter. */
  fail(err: RingError): void {
    if (this.error) return;
    this.error = err;
    this.reject(err);
    this.wake();
  }

  /** Resolves at the next wake; throws once failed. */
  protected async next(): Promise<void> {
    if (this.error) throw this.error;
    await new Promise<void>((res) => { this.waiter = res; });
    if (this.error) throw this.error;
  }
}
