// Batches loaded ahead of the step that needs them: the coordinator tells a peer its slice of
// the next step (a hint), the volunteer loads it (fetch, parse, decode, augment) while the
// current step computes and all-reduces, and the next step takes it ready.
//
// A hint is only a hint: the step's assignment is what counts. take() uses a hinted batch
// only when its epoch and ids are exactly the ones asked for; the hints given before it are
// dropped then, those given after it (further ahead) stay; without a match all are dropped.
// A dropped hint's shards stay in the loader's cache, so a partial overlap still saves the
// fetch. Bounded: at most `maxLoads` hinted loads run or wait at once (dropped ones that are
// still running count too), so memory never grows with the number of hints. A hinted load that
// fails costs nothing but the hint: take() loads the batch itself, and reports that failure.
import type { Batch } from './loader.ts';

/** What the prefetcher needs of a BatchLoader. */
export interface BatchSource {
  load(ids: readonly number[], epoch: number): Promise<Batch>;
}

export interface PrefetchOptions {
  /** Hinted loads running or holding a batch at once (default 2). */
  maxLoads?: number;
  /** A hinted load failed (take() will load the batch again and report its own failure). */
  onError?: (e: unknown, ids: readonly number[], epoch: number) => void;
}

/** The batch a step asked for, and how long it waited for it. */
export interface Taken {
  batch: Batch;
  /** Milliseconds take() waited: 0 when a hint had the batch ready. */
  waitMs: number;
  /** True when the batch came from a hint (ready or still loading). */
  prefetched: boolean;
}

interface Hint {
  readonly ids: readonly number[];
  readonly epoch: number;
  /** The batch, or null when the load failed (onError heard why). */
  readonly result: Promise<Batch | null>;
  settled: boolean;
}

const sameIds = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((v, i) => v === b[i]);

export class Prefetcher {
  /** Hints not taken yet, oldest first. */
  private pending: Hint[] = [];
  /** Hinted loads not settled yet, taken, pending or dropped. */
  private running = 0;
  private readonly maxLoads: number;

  constructor(private readonly loader: BatchSource, private readonly opts: PrefetchOptions = {}) {
    this.maxLoads = opts.maxLoads ?? 2;
    if (!(Number.isInteger(this.maxLoads) && this.maxLoads >= 1)) throw new RangeError(`maxLoads must be an integer >= 1, got ${this.maxLoads}`);
  }

  /** Hints waiting to be taken (for tests and logs). */
  get size(): number {
    return this.pending.length;
  }

  /**
   * Starts loading the batch of (`ids`, `epoch`) in the background. Returns false when it did
   * not: no ids, the same hint already pending, or `maxLoads` loads already under way.
   */
  hint(ids: readonly number[], epoch: number): boolean {
    if (ids.length === 0 || this.find(ids, epoch) >= 0) return false;
    // A hint that finished holds a batch nobody asked for yet: the oldest goes to make room.
    while (this.inUse() >= this.maxLoads && this.pending[0]?.settled) this.pending.shift();
    if (this.inUse() >= this.maxLoads) return false;
    const copy = ids.slice();
    this.running++;
    const hint: Hint = {
      ids: copy, epoch, settled: false,
      result: this.loader.load(copy, epoch).then(
        (batch) => batch,
        (e: unknown) => {
          this.opts.onError?.(e, copy, epoch);
          return null;
        },
      ).finally(() => {
        hint.settled = true;
        this.running--;
      }),
    };
    this.pending.push(hint);
    return true;
  }

  /**
   * The batch of (`ids`, `epoch`): a matching hint's (awaited if it is still loading), else
   * loaded now. Drops the hints given before the match (their steps have come and gone), or
   * every hint when none matches.
   */
  async take(ids: readonly number[], epoch: number): Promise<Taken> {
    const t0 = performance.now();
    const i = this.find(ids, epoch);
    const hint = i >= 0 ? this.pending[i]! : null;
    this.pending = i >= 0 ? this.pending.slice(i + 1) : [];
    if (hint) {
      const ready = hint.settled;
      const batch = await hint.result;
      if (batch) return { batch, waitMs: ready ? 0 : performance.now() - t0, prefetched: true };
    }
    const batch = await this.loader.load(ids, epoch);
    return { batch, waitMs: performance.now() - t0, prefetched: false };
  }

  /** Forgets every pending hint (running loads finish into the loader's shard cache). */
  clear(): void {
    this.pending = [];
  }

  private find(ids: readonly number[], epoch: number): number {
    return this.pending.findIndex((h) => h.epoch === epoch && sameIds(h.ids, ids));
  }

  /** Batches held or being loaded: pending hints, and loads still running that were taken or dropped. */
  private inUse(): number {
    return this.pending.length + this.running - this.pending.filter((h) => !h.settled).length;
  }
}
