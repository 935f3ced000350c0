// What the donate view says of a device's credit and what the dashboard's board shows
// (src/ui/credit.ts), from GET /api/credit answers.
import { describe, expect, it } from 'vitest';
import { creditBoardHtml, isCreditBoard, yourCredit, type CreditBoard } from '../../src/ui/credit.ts';

const line = (rank: number, name: string | null, images: number) => ({ rank, name, images, share: images / 12_000, computeS: images / 10, steps: 3 });
const BOARD: CreditBoard = {
  images: 12_000, donors: 3, board: [line(1, 'desk <3>', 7000), line(2, null, 4000), line(3, 'Zoë', 1000)], you: line(3, 'Zoë', 1000),
};

describe('credit on the page', () => {
  it('tells a donor what its device computed, its share and rank', () => {
    expect(yourCredit(BOARD)).toBe('Your device computed 1,000 images (8.3% of this job) in 3 steps, 100 s of compute: rank 3 of 3.');
    expect(yourCredit({ ...BOARD, you: null })).toBe('This device has not computed a committed step of this job yet (12,000 images so far, by 3 donors).');
    expect(yourCredit({ images: 0, donors: 0, board: [], you: null })).toBe('');
  });

  it('the dashboard lists the donors by name (escaped), the anonymous as such, with the total', () => {
    const html = creditBoardHtml(BOARD);
    expect(html).toContain('12,000 images computed by 3 donors in committed steps.');
    expect(html).toContain('<li><b>desk &lt;3&gt;</b> 7,000 images (58%), 700 s</li>');
    expect(html).toContain('<li><b>anonymous</b> 4,000 images (33%), 400 s</li>');
    expect(html).not.toContain('<3>');
    expect(creditBoardHtml({ images: 0, donors: 0, board: [], you: null })).toMatch(/No committed step yet/);
  });

  it('reads an answer defensively', () => {
    expect(isCreditBoard(BOARD)).toBe(true);
    for (const bad of [null, 'x', {}, { images: 1, donors: 1 }, { images: '1', donors: 1, board: [] }]) expect(isCreditBoard(bad)).toBe(false);
  });
});
