// The training driver's (driver.ts) book of the job's checkpoints: the newest one stored, the
// uploads it has asked peers for (only those are accepted: routes.ts asks expects()), and so
// which weights joiners can load now. The checkpoints themselves are on disk (checkpoints.ts).

export class CheckpointBook {
  /** Uploads expected: peer id -> step. */
  private readonly uploads = new Map<string, number>();

  /** `newest`: step of the newest stored checkpoint (null: none; the job starts from its seed). */
  constructor(private newest: number | null) {}

  /** Step of the newest stored checkpoint (null: none). */
  get step(): number | null {
    return this.newest;
  }

  /** Checkpoint uploads still expected (the churn bench's leak check). */
  get pending(): number {
    return this.uploads.size;
  }

  /** Whether joiners can load the weights of `step` now: its checkpoint, or the seed at step 0. */
  loadable(step: number): boolean {
    return this.newest === step || (step === 0 && this.newest === null);
  }

  /** `peerId` is asked to upload the checkpoint of `step`. */
  expect(peerId: string, step: number): void {
    this.uploads.set(peerId, step);
  }

  /** Whether `peerId` may upload the checkpoint of `step` now. */
  expects(peerId: string, step: number): boolean {
    return this.uploads.get(peerId) === step;
  }

  /** Whether an upload is expected from `peerId` (work whose length nothing has measured). */
  uploading(peerId: string): boolean {
    return this.uploads.has(peerId);
  }

  /** No upload is expected from `peerId` any more (it is gone, or its upload was given up). */
  forget(peerId: string): void {
    this.uploads.delete(peerId);
  }

  /** `peerId`'s checkpoint of `step` is stored. */
  stored(peerId: string, step: number): void {
    if (this.uploads.get(peerId) === step) this.uploads.delete(peerId);
    if (this.newest === null || step > this.newest) this.newest = step;
  }
}
