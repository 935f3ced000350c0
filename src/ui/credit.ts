// The credit a donor sees (the donate view) and the board the dashboard shows, from
// GET /api/credit (coordinator/credit.ts): pure text and HTML, tested without a browser.
import { esc } from './charts.ts';

export interface CreditLine { rank: number; name: string | null; images: number; share: number; computeS: number; steps: number }
export interface CreditBoard { images: number; donors: number; board: CreditLine[]; you: CreditLine | null }

const count = (n: number): string => n.toLocaleString('en-US');
const percent = (x: number): string => `${(x * 100).toFixed(x >= 0.1 ? 0 : x >= 0.01 ? 1 : 2)}%`;

/** "Your device computed N images (x% of this job), rank r of d", or what it means to have none yet. */
export function yourCredit(c: CreditBoard): string {
  if (!c.you || c.you.images === 0) {
    if (c.images === 0) return '';
    const by = `${c.donors} donor${c.donors === 1 ? '' : 's'}`;
    return `This device has not computed a committed step of this job yet (${count(c.images)} images so far, by ${by}).`;
  }
  const y = c.you;
  return `Your device computed ${count(y.images)} images (${percent(y.share)} of this job) in ${count(y.steps)} step${y.steps === 1 ? '' : 's'}, `
    + `${count(Math.round(y.computeS))} s of compute: rank ${y.rank} of ${c.donors}.`;
}

/** The dashboard's board: the top donors and the total, as an HTML list. */
export function creditBoardHtml(c: CreditBoard): string {
  if (c.images === 0) return '<p>No committed step yet: the board fills as the donors compute.</p>';
  const row = (l: CreditLine) =>
    `<li><b>${esc(l.name ?? 'anonymous')}</b> ${count(l.images)} images (${percent(l.share)}), ${count(Math.round(l.computeS))} s</li>`;
  const rows = c.board.map(row).join('');
  return `<p>${count(c.images)} images computed by ${c.donors} donor${c.donors === 1 ? '' : 's'} in committed steps.</p><ol>${rows}</ol>`;
}

/** Whether a GET /api/credit body is a board (an older coordinator has none). */
export function isCreditBoard(x: unknown): x is CreditBoard {
  const o = x as Partial<CreditBoard> | null;
  return typeof o === 'object' && o !== null && typeof o.images === 'number' && typeof o.donors === 'number' && Array.isArray(o.board);
}
