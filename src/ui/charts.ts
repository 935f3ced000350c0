// Charts as SVG text, pure functions of their data: line charts (training curves, scaling),
// a per-peer timeline of stacked bars, and the ring drawn as a circle. The dashboard and the
// benchmarks draw with these.
export interface LineSeries { name: string; points: [number, number][] }
export interface LineChart { title: string; xLabel: string; yLabel: string; series: LineSeries[]; width?: number; height?: number; dashed?: string[] }

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd'];
export const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function lineChartSvg(c: LineChart): string {
  const W = c.width ?? 720, H = c.height ?? 440, L = 70, R = 20, T = 60, B = 60;
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
    out.push(`<path d="${d}" fill="none" stroke="${col}" stroke-width="2"${c.dashed?.includes(s.name) ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<rect x="${L + 10 + i * 210}" y="${T - 22}" width="12" height="12" fill="${col}"/><text x="${L + 26 + i * 210}" y="${T - 12}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

export interface TimelineRow { label: string; parts: { value: number; kind: 'compute' | 'comm' | 'wait' }[] }
const PART_COLORS = { compute: '#1f77b4', comm: '#ff7f0e', wait: '#bbbbbb' } as const;

/** Stacked horizontal bars, one row per peer (e.g. its compute / all-reduce / wait ms). */
export function timelineSvg(title: string, rows: readonly TimelineRow[], unit = 'ms', width = 720): string {
  const L = 150, R = 20, T = 50, rowH = 26;
  const H = T + rows.length * rowH + 40;
  const max = Math.max(1e-9, ...rows.map((r) => r.parts.reduce((a, p) => a + p.value, 0)));
  const X = (v: number) => (v / max) * (width - L - R);
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  (['compute', 'comm', 'wait'] as const).forEach((k, i) => out.push(`<rect x="${L + i * 120}" y="30" width="12" height="12" fill="${PART_COLORS[k]}"/><text x="${L + 16 + i * 120}" y="40">${k === 'comm' ? 'all-reduce' : k}</text>`));
  rows.forEach((r, i) => {
    const y = T + i * rowH;
    out.push(`<text x="${L - 6}" y="${y + 16}" text-anchor="end">${esc(r.label.slice(0, 22))}</text>`);
    let x = L;
    for (const p of r.parts) {
      const w = X(p.value);
      out.push(`<rect x="${x.toFixed(1)}" y="${y + 4}" width="${Math.max(0, w).toFixed(1)}" height="${rowH - 8}" fill="${PART_COLORS[p.kind]}"/>`);
      x += w;
    }
    const total = r.parts.reduce((a, p) => a + p.value, 0);
    out.push(`<text x="${Math.min(x + 4, width - R - 40).toFixed(1)}" y="${y + 16}">${total.toFixed(0)} ${unit}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

export interface RingNode {
  label: string;
  detail: string;
  share: number;
  /** How its link to the next node runs (the newest step's report); absent: unknown. */
  link?: 'direct' | 'relayed';
}

const EDGE_STYLE = {
  direct: 'stroke="#2ca02c" stroke-width="3"',
  relayed: 'stroke="#d62728" stroke-width="3" stroke-dasharray="8 6"',
  unknown: 'stroke="#bbb" stroke-width="2"',
} as const;
const EDGE_LEGEND = { direct: 'direct link', relayed: 'relayed (through TURN)', unknown: 'not reported yet' } as const;

/** The ring as a circle of peers, each with its label, device and share of the batch. */
export function ringSvg(title: string, nodes: readonly RingNode[], size = 420): string {
  const c = size / 2, r = size / 2 - 90;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${c}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  const at = (i: number) => {
    const a = (2 * Math.PI * i) / Math.max(1, nodes.length) - Math.PI / 2;
    return [c + r * Math.cos(a), c + 10 + r * Math.sin(a)] as const;
  };
  if (nodes.length < 2) out.push(`<circle cx="${c}" cy="${c + 10}" r="${r}" fill="none" stroke="#ccc" stroke-width="2"/>`);
  // Each node's link to the next: solid green for direct, dashed red and labelled "relay" for
  // through a TURN relay, thin grey when not reported.
  nodes.forEach((n, i) => {
    if (nodes.length < 2) return;
    const [x1, y1] = at(i), [x2, y2] = at((i + 1) % nodes.length);
    // A ring of two has two edges on one chord: each bows to its own side to stay visible.
    const len = Math.hypot(x2 - x1, y2 - y1) || 1, px = -(y2 - y1) / len, py = (x2 - x1) / len;
    const bow = nodes.length === 2 ? 0.3 * len : 0;
    const mx = (x1 + x2) / 2, my = (y1 + y2) / 2;
    out.push(`<path class="edge-${n.link ?? 'unknown'}" d="M${x1.toFixed(1)},${y1.toFixed(1)} Q${(mx + bow * px).toFixed(1)},${(my + bow * py).toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}" fill="none" ${EDGE_STYLE[n.link ?? 'unknown']}/>`);
    if (n.link === 'relayed') {
      // The label sits just outside the edge's middle (away from the centre, or from the chord).
      const [ox, oy] = bow ? [px, py] : [mx - c, my - (c + 10)];
      const d = Math.hypot(ox, oy) || 1, ax = mx + (bow / 2) * px, ay = my + (bow / 2) * py;
      out.push(`<text class="relay-label" x="${(ax + (14 * ox) / d).toFixed(1)}" y="${(ay + (14 * oy) / d + 4).toFixed(1)}" text-anchor="middle" fill="#d62728" font-weight="bold">relay</text>`);
    }
  });
  const shown = (['direct', 'relayed', 'unknown'] as const).filter((k) => k !== 'unknown' || nodes.some((n) => !n.link));
  if (nodes.length >= 2 && nodes.some((n) => n.link)) {
    shown.forEach((k, j) => {
      const y = size - 12 - 18 * (shown.length - 1 - j);
      out.push(`<line x1="12" y1="${y - 4}" x2="42" y2="${y - 4}" ${EDGE_STYLE[k]}/><text x="48" y="${y}">${EDGE_LEGEND[k]}</text>`);
    });
  }
  nodes.forEach((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, nodes.length) - Math.PI / 2;
    const x = c + r * Math.cos(a), y = c + 10 + r * Math.sin(a);
    const rad = 8 + 22 * Math.sqrt(Math.max(0, Math.min(1, n.share)));
    out.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${rad.toFixed(1)}" fill="#2ca02c" fill-opacity="0.75"/>`);
    out.push(`<text x="${x.toFixed(1)}" y="${(y + rad + 14).toFixed(1)}" text-anchor="middle">${esc(n.label.slice(0, 20))} (${(n.share * 100).toFixed(0)}%)</text>`);
    out.push(`<text x="${x.toFixed(1)}" y="${(y + rad + 28).toFixed(1)}" text-anchor="middle" fill="#666">${esc(n.detail.slice(0, 28))}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}

/** A chart's frame with a note instead of data. */
export function placeholderSvg(title: string, note: string, width = 720, height = 440): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="13">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    `<text x="${width / 2}" y="${height / 2}" text-anchor="middle" fill="#888">${esc(note)}</text>`,
    '</svg>',
  ].join('\n');
}
