// Minimal SVG plots for benchmark results: grouped bars or lines, no dependencies.
import { writeFileSync, mkdirSync } from 'node:fs';
import { dirname } from 'node:path';

export interface Series { name: string; values: number[] }
export interface BarChart { title: string; yLabel: string; categories: string[]; series: Series[] }

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b'];

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** Grouped bar chart as an SVG string. */
export function barChartSvg(c: BarChart): string {
  const W = Math.max(640, 80 + c.categories.length * (30 + 22 * c.series.length));
  const H = 420, L = 70, R = 20, T = 50, B = 110;
  const max = Math.max(1e-12, ...c.series.flatMap((s) => s.values.filter(Number.isFinite)));
  const groupW = (W - L - R) / Math.max(1, c.categories.length);
  const barW = Math.min(40, (groupW - 10) / Math.max(1, c.series.length));
  const y = (v: number) => T + (H - T - B) * (1 - v / max);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="16">${esc(c.title)}</text>`,
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(c.yLabel)}</text>`,
    `<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/>`,
    `<line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="black"/>`,
  ];
  for (let k = 0; k <= 4; k++) {
    const v = (max * k) / 4;
    parts.push(`<text x="${L - 6}" y="${y(v) + 4}" text-anchor="end">${v.toPrecision(3)}</text>`);
    parts.push(`<line x1="${L}" y1="${y(v)}" x2="${W - R}" y2="${y(v)}" stroke="#ddd"/>`);
  }
  c.categories.forEach((cat, i) => {
    const x0 = L + i * groupW + (groupW - barW * c.series.length) / 2;
    c.series.forEach((s, j) => {
      const v = s.values[i] ?? 0;
      if (!Number.isFinite(v)) return;
      parts.push(`<rect x="${x0 + j * barW}" y="${y(v)}" width="${barW - 2}" height="${H - B - y(v)}" fill="${COLORS[j % COLORS.length]}"/>`);
    });
    const cx = L + i * groupW + groupW / 2;
    parts.push(`<text transform="translate(${cx} ${H - B + 12}) rotate(30)" font-size="10">${esc(cat)}</text>`);
  });
  c.series.forEach((s, j) => {
    parts.push(`<rect x="${L + 10 + j * 150}" y="${T - 18}" width="12" height="12" fill="${COLORS[j % COLORS.length]}"/>`);
    parts.push(`<text x="${L + 26 + j * 150}" y="${T - 8}">${esc(s.name)}</text>`);
  });
  parts.push('</svg>');
  return parts.join('\n');
}

export function writeFileEnsuringDir(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, text);
}
