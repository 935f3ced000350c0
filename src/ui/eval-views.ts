// What an evaluation looked like, as markup: the confusion matrix as an SVG heat map, and a
// grid of test images with the model's guesses. Pure functions of their data, like charts.ts.
import { esc } from './charts.ts';

/** Text fit for an attribute value in double or single quotes. */
const escAttr = (s: string) => esc(s).replace(/"/g, '&quot;').replace(/'/g, '&#39;');
const clip = (s: string, n: number) => (s.length <= n ? s : `${s.slice(0, Math.max(1, n - 1))}…`);
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/**
 * The confusion matrix as a heat map. `matrix` holds counts row-major: row = true class, column
 * = predicted class, classNames.length^2 of them. A cell's shade is its count over its row's
 * total (where that class went); counts are written in the cells up to 20 classes; each row
 * ends with its class' recall. `size` is the SVG's width; up to 100 classes the cells shrink,
 * names are shortened, then dropped, and recalls become bars (tooltips keep the names and values).
 */
export function confusionSvg(title: string, classNames: readonly string[], matrix: readonly number[], size = 560): string {
  const n = classNames.length;
  if (matrix.length !== n * n) {
    throw new RangeError(`confusionSvg: ${n} classes need a ${n}x${n} matrix of ${n * n} counts (row-major, rows = true class), got ${matrix.length}`);
  }
  const badAt = matrix.findIndex((v) => !Number.isFinite(v) || v < 0);
  if (badAt >= 0) {
    throw new RangeError(`confusionSvg: counts must be finite and >= 0, got ${matrix[badAt]} at row ${Math.floor(badAt / n)}, column ${badAt % n}`);
  }
  // Left: axis title and row names; right: recall; bottom: column names hanging down, axis title.
  const Lm = 120, Rm = 64, Tm = 56, Bm = 120;
  const G = Math.max(n, size - Lm - Rm), cell = G / Math.max(1, n), W = Lm + G + Rm, H = Tm + G + Bm;
  const fs = Math.min(12, Math.floor(cell * 0.8)), named = fs >= 7;
  const chars = Math.floor(88 / (0.6 * Math.max(fs, 1)));
  const rows = Array.from({ length: n }, (_, i) => matrix.slice(i * n, i * n + n));
  const totals = rows.map((r) => r.reduce((a, v) => a + v, 0));
  const all = totals.reduce((a, v) => a + v, 0), hits = rows.reduce((a, r, i) => a + r[i]!, 0);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    `<text x="${W / 2}" y="38" text-anchor="middle" fill="#666">${all ? `accuracy ${pct(hits / all)} of ${all}` : 'no predictions'}</text>`,
    `<rect x="${Lm}" y="${Tm}" width="${G}" height="${G}" fill="none" stroke="#999"/>`,
    `<text transform="translate(16 ${Tm + G / 2}) rotate(-90)" text-anchor="middle">true class</text>`,
    `<text x="${Lm + G / 2}" y="${H - 10}" text-anchor="middle">predicted class</text>`,
    `<text x="${Lm + G + 6}" y="${Tm - 6}" fill="#666">recall</text>`,
  ];
  rows.forEach((r, i) => {
    const y = Tm + i * cell, yc = (y + cell / 2).toFixed(1);
    if (named) {
      out.push(`<text x="${Lm - 6}" y="${yc}" dy="0.35em" text-anchor="end" font-size="${fs}">${esc(clip(classNames[i]!, chars))}</text>`);
      out.push(`<text transform="translate(${(Lm + (i + 0.5) * cell).toFixed(1)} ${Tm + G + 6}) rotate(-90)" dy="0.35em" text-anchor="end" `
        + `font-size="${fs}">${esc(clip(classNames[i]!, chars))}</text>`);
    }
    if (!totals[i]) return;
    const recall = r[i]! / totals[i]!;
    // Too small for text: the recall as a bar, its value in the tooltip.
    out.push(named
      ? `<text class="recall" x="${Lm + G + 6}" y="${yc}" dy="0.35em" font-size="${fs}">${pct(recall)}</text>`
      : `<rect class="recall-bar" x="${Lm + G + 6}" y="${y.toFixed(2)}" width="${(50 * recall).toFixed(1)}" height="${cell.toFixed(2)}" fill="#2ca02c">`
        + `<title>${esc(classNames[i]!)}: recall ${pct(recall)}</title></rect>`);
    r.forEach((v, j) => {
      if (!v) return;
      const f = v / totals[i]!;
      out.push(`<rect class="cell" x="${(Lm + j * cell).toFixed(2)}" y="${y.toFixed(2)}" width="${cell.toFixed(2)}" height="${cell.toFixed(2)}" `
        + `fill="#08519c" fill-opacity="${(0.08 + 0.92 * f).toFixed(3)}"><title>true ${esc(classNames[i]!)}, predicted ${esc(classNames[j]!)}: `
        + `${v} (${pct(f)})</title></rect>`);
      if (n <= 20) {
        out.push(`<text class="count" x="${(Lm + (j + 0.5) * cell).toFixed(1)}" y="${yc}" dy="0.35em" text-anchor="middle" `
          + `font-size="${Math.min(12, Math.floor(cell * 0.4))}" fill="${f > 0.5 ? 'white' : 'black'}">${v}</text>`);
      }
    });
  });
  out.push('</svg>');
  return out.join('\n');
}

export interface PredictionItem { src: string; label: string; predicted: string; confidence: number; correct: boolean }

/** Only same-origin paths and inline images may be loaded ("//host" is another origin). */
const safeSrc = (src: string) => (src.startsWith('/') && !/^.[/\\]/.test(src)) || src.startsWith('data:image/');

/**
 * Test images in a grid, each with the predicted class and its confidence (0..1, shown in %):
 * green when right, red with the true class when wrong. An image whose src is neither a
 * same-origin path nor a data:image/ URL is left out (an empty box stands in its place).
 */
export function predictionGridHtml(items: readonly PredictionItem[], columns = 8): string {
  const cols = Number.isFinite(columns) ? Math.max(1, Math.floor(columns)) : 8;
  if (!items.length) return '<div class="pred-grid" style="color:#888;font:12px sans-serif">no predictions yet</div>';
  const cells = items.map((it) => {
    const conf = Number.isFinite(it.confidence) ? `${(100 * Math.max(0, Math.min(1, it.confidence))).toFixed(0)}%` : '?';
    const img = safeSrc(it.src)
      ? `<img src="${escAttr(it.src)}" width="64" height="64" alt="${escAttr(it.label)}" style="image-rendering:pixelated;display:block;margin:0 auto">`
      : '<div style="width:64px;height:64px;margin:0 auto;background:#eee"></div>';
    const note = it.correct ? '' : ` (true: ${esc(it.label)})`;
    return `<div class="pred-cell ${it.correct ? 'pred-ok' : 'pred-bad'}" style="text-align:center;color:${it.correct ? '#2ca02c' : '#d62728'}">`
      + `${img}<div>${esc(it.predicted)} ${conf}${note}</div></div>`;
  });
  return `<div class="pred-grid" style="display:grid;grid-template-columns:repeat(${cols}, minmax(80px, 1fr));gap:8px;font:12px sans-serif">`
    + `${cells.join('')}</div>`;
}
