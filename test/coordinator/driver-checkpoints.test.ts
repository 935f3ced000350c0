// The driver's book of kept checkpoints (coordinator/driver-checkpoints.ts): the newest is the
// last kept, a file newer than the newest that verifies is never gone back to, and a roll back
// forgets what came after.
import { describe, expect, it } from 'vitest';
import { CheckpointBook } from '../../coordinator/driver-checkpoints.ts';

describe('checkpoint book', () => {
  it('keeps the steps on disk up to the newest that verifies; stores prune to keep; rolls back', () => {
    // Step 12's file is on disk but did not verify (readNewest gave 8): it is no place to go back to.
    const book = new CheckpointBook(8, [4, 12, 8], 3);
    expect(book.steps).toEqual([4, 8]);
    expect(book.step).toBe(8);
    book.stored('a', 16);
    book.stored('a', 20);
    expect(book.steps).toEqual([8, 16, 20]);
    expect(book.step).toBe(20);
    expect(book.loadable(20)).toBe(true);
    book.expect('b', 24);
    book.rollTo(16);
    expect([book.steps, book.step, book.expects('b', 24)]).toEqual([[8, 16], 16, false]);
    expect(() => book.rollTo(12)).toThrow(/no kept checkpoint of step 12/);
    book.rollTo(0);
    expect([book.steps, book.step, book.loadable(0)]).toEqual([[], null, true]);
  });

  it('with no checkpoint that verifies it keeps none, and the seed is loadable', () => {
    const book = new CheckpointBook(null, [6]);
    expect([book.steps, book.step, book.loadable(0)]).toEqual([[], null, true]);
  });
});
