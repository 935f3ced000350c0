// Line charts (x, y series) as SVG, for training curves and scaling plots.
export interface LineSeries { name: string; points: [number, number][] }
export interface LineChart { title: string; xLabel: string; yLabel: string; series: LineSeries[] }

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd'];
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function lineChartSvg(c: LineChart): string {
  const W = 720, H = 440, L = 70, R = 20, T = 60, B = 60;
  const pts = c.series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  const [x0, x1] = [Math.min(0, ...pts.map((p) => p[0])), Math.max(1e-9, ...pts.map((p) => p[0]))];
  const [y0, y1] = [Math.min(0, ...pts.map((p) => p[1])), Math.max(1e-9, ...pts.map((p) => p[1]))];
  const X = (x: number) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - R);
  const Y = (y: number) => T + (1 - (y - y0) / (y1 - y0 || 1)) * (H - T - B);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(c.title)}</text>`,
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle">${esc(c.xLabel)}</text>`,
    `<text transform="translate(16 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(c.yLabel)}</text>`,
  ];
  for (let k = 0; k <= 4; k++) {
    const yv = y0 + ((y1 - y0) * k) / 4, xv = x0 + ((x1 - x0) * k) / 4;
    out.push(`<line x1="${L}" y1="${Y(yv)}" x2="${W - R}" y2="${Y(yv)}" stroke="#ddd"/><text x="${L - 6}" y="${Y(yv) + 4}" text-anchor="end">${yv.toPrecision(3)}</text>`);
    out.push(`<text x="${X(xv)}" y="${H - B + 16}" text-anchor="middle">${xv.toPrecision(3)}</text>`);
  }
  out.push(`<line x1="${L}" y1="${H - B}" x2="${W - R}" y2="${H - B}" stroke="black"/><line x1="${L}" y1="${T}" x2="${L}" y2="${H - B}" stroke="black"/>`);
  c.series.forEach((s, i) => {
    const col = COLORS[i % COLORS.length];
    const d = s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)).map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Y(y).toFixed(1)}`).join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${col}" stroke-width="2"/>`);
    out.push(`<rect x="${L + 10 + i * 210}" y="${T - 22}" width="12" height="12" fill="${col}"/><text x="${L + 26 + i * 210}" y="${T - 12}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}
