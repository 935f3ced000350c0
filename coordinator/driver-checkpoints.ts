// The training driver's (driver.ts) book of the job's checkpoints: the newest one stored, the
// uploads it has asked peers for (only those are accepted: routes.ts asks expects()), and so
// which weights joiners can load now. The checkpoints themselves are on disk (checkpoints.ts).

export class CheckpointBook {
  /** Uploads expected: peer id -> step. */
  private readonly uploads = new Map<string, number>();

  /** Steps of the checkpoints kept on disk, oldest first (the store keeps the newest `keep`): the last is the newest. */
  private kept: number[];

  /**
   * `newest`: step of the newest stored checkpoint that verifies (null: none; the job starts from its seed);
   * `kept`: the steps of every checkpoint on disk (default: the newest alone; any after `newest` did not verify and are
   * left out); `keep`: how many the store keeps.
   */
  constructor(newest: number | null, kept?: readonly number[], private readonly keep = Infinity) {
    const usable = newest === null ? [] : [...(kept ?? []).filter((s) => s < newest), newest];
    this.kept = [...new Set(usable)].sort((a, b) => a - b);
  }

  /** Steps of the checkpoints kept on disk, oldest first. */
  get steps(): readonly number[] {
    return this.kept;
  }

  /**
   * The job goes back to the weights of `step` (a kept checkpoint's, or 0: the seed); checkpoints
   * after it are forgotten (the caller removes their files). Uploads expected are given up.
   */
  rollTo(step: number): void {
    if (step !== 0 && !this.kept.includes(step)) throw new Error(`no kept checkpoint of step ${step} to roll back to (kept: ${this.kept.join(', ')})`);
    this.kept = this.kept.filter((s) => s <= step);
    this.uploads.clear();
  }

  /** Step of the newest stored checkpoint (null: none). */
  get step(): number | null {
    return this.kept.at(-1) ?? null;
  }

  /** Checkpoint uploads still expected (the churn bench's leak check). */
  get pending(): number {
    return this.uploads.size;
  }

  /** Whether joiners can load the weights of `step` now: its checkpoint, or the seed at step 0. */
  loadable(step: number): boolean {
    return this.step === step || (step === 0 && this.step === null);
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
    if (!this.kept.includes(step)) this.kept = [...this.kept, step].sort((a, b) => a - b).slice(-this.keep);
  }
}
