// Charts as SVG text, pure functions of their data: line charts (training curves, scaling),
// a per-peer timeline of stacked bars, and the ring drawn as a circle. The dashboard and the
// benchmarks draw with these; other charts (step-split.ts) build on the same frame and axes
// (chartHead, axesSvg).
export interface LineSeries { name: string; points: [number, number][] }
export interface LineChart {
  title: string; xLabel: string; yLabel: string; series: LineSeries[]; width?: number; height?: number; dashed?: string[];
  /** Series drawn against a second y axis on the right (e.g. peers beside images/s). */
  right?: { label: string; series: string[] };
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd'];
export const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

// Axis ticks. A step is m x 10^k with m in {1, 2, 2.5, 5}; of the steps in the three decades
// around (hi - lo) / (target - 1), the one whose outward-extended range has the tick count
// nearest `target` wins, less a penalty for the range wasted by the extension and a small one
// for m = 2.5 (the least round). Inputs are clamped to +-1e300 so nothing overflows; an empty
// range (lo = hi) is widened to [v/2, 3v/2], or [0, 1] around 0.
export interface Ticks { lo: number; hi: number; step: number; ticks: number[] }

const MANTISSAS = [1, 2, 2.5, 5] as const;
const LIMIT = 1e300;
/** Drops float noise (0.30000000000000004 -> 0.3) and -0. */
const clean = (v: number) => Number(v.toPrecision(15)) + 0;
/** An integer within rounding of x, else x (so floor/ceil of 2.9999999999 give 3). */
const snap = (x: number) => { const r = Math.round(x); return Math.abs(x - r) <= 1e-12 * Math.max(1, Math.abs(x)) ? r : x; };

/** Round ticks covering [lo, hi]; `integer`: steps are whole numbers >= 1 (for counts such as peers). */
export function niceTicks(lo: number, hi: number, target = 5, integer = false): Ticks {
  const fin = (v: number, other: number) => (Number.isFinite(v) ? v : Number.isFinite(other) ? other : 0);
  let a = Math.max(-LIMIT, Math.min(LIMIT, fin(lo, hi))), b = Math.max(-LIMIT, Math.min(LIMIT, fin(hi, lo)));
  if (a > b) [a, b] = [b, a];
  const big = Math.max(Math.abs(a), Math.abs(b));
  if (big < 1e-200) [a, b] = [0, 1];
  else if (b - a < 1e-9 * big) { const c = (a + b) / 2; [a, b] = [c - Math.abs(c) / 2, c + Math.abs(c) / 2]; }
  const t = Number.isFinite(target) && target >= 2 ? target : 5;
  const K = Math.floor(Math.log10((b - a) / (t - 1)));
  const steps: { step: number; m: number }[] = integer ? [{ step: 1, m: 1 }] : [];
  for (let k = K - 1; k <= K + 1; k++) for (const m of MANTISSAS) steps.push({ step: clean(k >= 0 ? m * 10 ** k : m / 10 ** -k), m });
  let best = { step: 1, i0: 0, i1: 1 }, bestScore = Infinity;
  for (const { step, m } of steps) {
    if (integer && (step < 1 || !Number.isInteger(step))) continue;
    const i0 = Math.floor(snap(a / step)), i1 = Math.ceil(snap(b / step));
    const wasted = 1 - (b - a) / ((i1 - i0) * step);
    const score = Math.abs(i1 - i0 + 1 - t) + 2 * wasted + (m === 2.5 ? 0.25 : 0);
    if (score < bestScore) [best, bestScore] = [{ step, i0, i1 }, score];
  }
  const ticks: number[] = [];
  for (let i = best.i0; i <= best.i1; i++) ticks.push(clean(i * best.step));
  return { lo: ticks[0]!, hi: ticks[ticks.length - 1]!, step: best.step, ticks };
}

/** Decimals that show every multiple of `step` exactly (0.25 -> 2, 500 -> 0). */
function decimalsOf(step: number): number {
  for (let d = 0; d < 20; d++) {
    const x = step * 10 ** d;
    if (Math.abs(x - Math.round(x)) <= 1e-9 * x) return d;
  }
  return 20;
}

const fixed = (x: number, d: number) => {
  const s = d > 0 ? x.toFixed(d).replace(/\.?0+$/, '') : x.toFixed(0);
  return /^-0(\.0*)?$/.test(s) ? '0' : s;
};

/** A tick's label at the precision of its axis' step: 0.1 + 0.2 -> "0.3", 12000 -> "12k", 0.0005 -> "0.0005", 2.5e-8. */
export function formatTick(v: number, step: number): string {
  if (!Number.isFinite(v)) return String(v);
  const s = Math.abs(step);
  if (!Number.isFinite(s) || s === 0) return String(clean(v));
  if (v === 0 || Math.abs(v) < s * 1e-9) return '0';
  if (s >= 1e15 || s < 1e-6) return v.toExponential(12).replace(/\.?0+e/, 'e');
  if (s < 1000) return fixed(v, decimalsOf(s));
  const [u, suffix] = s >= 1e12 ? [1e12, 'T'] : s >= 1e9 ? [1e9, 'G'] : s >= 1e6 ? [1e6, 'M'] : [1e3, 'k'];
  return fixed(v / u, decimalsOf(clean(s / u))) + suffix;
}

const finitePoint = ([x, y]: [number, number]) => Number.isFinite(x) && Number.isFinite(y);
/** An axis over some values, including 0 (as the charts always have). */
export const axisOver = (vs: readonly number[], integer = false) =>
  niceTicks(vs.reduce((a, v) => Math.min(a, v), 0), vs.reduce((a, v) => Math.max(a, v), 0), 5, integer);
const longest = (labels: readonly string[]) => labels.reduce((a, l) => Math.max(a, l.length), 0);
/** An axis' tick labels, each at the precision of its step. */
export const tickLabels = (a: Ticks) => a.ticks.map((v) => formatTick(v, a.step));
/** The left margin that fits these y tick labels (about 7 px a character at 12 px) and the rotated axis label. */
export const leftMargin = (yLabels: readonly string[]) => Math.max(70, 30 + 7 * longest(yLabels));

/** A chart of `W` x `H` px whose plot area lies L, R, T, B px inside its edges. */
export interface Frame { W: number; H: number; L: number; R: number; T: number; B: number }
/** A linear scale from an axis' range onto [from, to] px. */
export const scaleOf = (a: { lo: number; hi: number }, from: number, to: number) => (v: number) => from + ((v - a.lo) / (a.hi - a.lo)) * (to - from);

/**
 * The opening of a chart with axes: the svg element, its background, the title, the x label
 * below and the y label rotated on the left; `below` px under the x label are left free (notes).
 */
export function chartHead(f: Frame, title: string, xLabel: string, yLabel: string, below = 0): string[] {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${f.W}" height="${f.H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${f.W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
    `<text x="${f.W / 2}" y="${f.H - 12 - below}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(16 ${(f.T + f.H - f.B) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
  ];
}

/** Grid lines at the y ticks with their labels, the x tick labels, and the two axis lines. */
export function axesSvg(f: Frame, xa: Ticks, X: (x: number) => number, ya: Ticks, Y: (y: number) => number): string[] {
  const out: string[] = [];
  const yl = tickLabels(ya);
  ya.ticks.forEach((v, k) => {
    const y = Y(v).toFixed(1);
    out.push(`<line x1="${f.L}" y1="${y}" x2="${f.W - f.R}" y2="${y}" stroke="#ddd"/>`
      + `<text class="tick-y" x="${f.L - 6}" y="${(Y(v) + 4).toFixed(1)}" text-anchor="end">${yl[k]}</text>`);
  });
  xa.ticks.forEach((v) => out.push(`<text class="tick-x" x="${X(v).toFixed(1)}" y="${f.H - f.B + 16}" text-anchor="middle">${formatTick(v, xa.step)}</text>`));
  out.push(`<line x1="${f.L}" y1="${f.H - f.B}" x2="${f.W - f.R}" y2="${f.H - f.B}" stroke="black"/>`
    + `<line x1="${f.L}" y1="${f.T}" x2="${f.L}" y2="${f.H - f.B}" stroke="black"/>`);
  return out;
}

export function lineChartSvg(c: LineChart): string {
  const W = c.width ?? 720, H = c.height ?? 440, T = 60, B = 60;
  const onRight = (s: LineSeries) => c.right?.series.includes(s.name) ?? false;
  const pointsOf = (ss: LineSeries[]) => ss.flatMap((s) => s.points.filter(finitePoint));
  const xa = axisOver(pointsOf(c.series).map((p) => p[0]));
  const ya = axisOver(pointsOf(c.series.filter((s) => !onRight(s))).map((p) => p[1]));
  const rv = pointsOf(c.series.filter(onRight)).map((p) => p[1]);
  const ra = c.right ? axisOver(rv, rv.every(Number.isInteger)) : null;
  const rl = ra ? tickLabels(ra) : [];
  // Margins fit the tick labels and the rotated axis labels.
  const L = leftMargin(tickLabels(ya)), R = ra ? 36 + 7 * longest(rl) : 20;
  const f: Frame = { W, H, L, R, T, B };
  const X = scaleOf(xa, L, W - R);
  const Y = scaleOf(ya, H - B, T), YR = ra ? scaleOf(ra, H - B, T) : Y;
  const out = [...chartHead(f, c.title, c.xLabel, c.yLabel), ...axesSvg(f, xa, X, ya, Y)];
  if (ra && c.right) {
    out.push(`<line x1="${W - R}" y1="${T}" x2="${W - R}" y2="${H - B}" stroke="black"/>`);
    out.push(`<text transform="translate(${W - 14} ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${esc(c.right.label)}</text>`);
    ra.ticks.forEach((v, k) => {
      const y = YR(v);
      out.push(`<line x1="${W - R}" y1="${y.toFixed(1)}" x2="${W - R + 4}" y2="${y.toFixed(1)}" stroke="black"/>`
        + `<text class="tick-r" x="${W - R + 6}" y="${(y + 4).toFixed(1)}">${rl[k]}</text>`);
    });
  }
  c.series.forEach((s, i) => {
    const col = COLORS[i % COLORS.length], Ys = onRight(s) ? YR : Y;
    const d = s.points.filter(finitePoint).map(([x, y], j) => `${j ? 'L' : 'M'}${X(x).toFixed(1)},${Ys(y).toFixed(1)}`).join(' ');
    out.push(`<path d="${d}" fill="none" stroke="${col}" stroke-width="2"${c.dashed?.includes(s.name) ? ' stroke-dasharray="6 4"' : ''}/>`);
    out.push(`<rect x="${L + 10 + i * 210}" y="${T - 22}" width="12" height="12" fill="${col}"/>`
      + `<text x="${L + 26 + i * 210}" y="${T - 12}">${esc(s.name)}</text>`);
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
  (['compute', 'comm', 'wait'] as const).forEach((k, i) => out.push(`<rect x="${L + i * 120}" y="30" width="12" height="12" fill="${PART_COLORS[k]}"/>`
    + `<text x="${L + 16 + i * 120}" y="40">${k === 'comm' ? 'all-reduce' : k}</text>`));
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
  link?: 'direct' | 'relayed' | 'tcp';
  /** Its group in a two-level ring (from 0): nodes are coloured and labelled by group. Absent: flat. */
  group?: number;
  /** The node its ring link goes to (a two-level ring's group successor); absent: the next one. Itself: none. */
  next?: number;
}

const EDGE_STYLE = {
  direct: 'stroke="#2ca02c" stroke-width="3"',
  tcp: 'stroke="#1f77b4" stroke-width="3"',
  relayed: 'stroke="#d62728" stroke-width="3" stroke-dasharray="8 6"',
  unknown: 'stroke="#bbb" stroke-width="2"',
} as const;
const EDGE_LEGEND = {
  direct: 'direct link', tcp: 'direct TLS link (Node to Node)', relayed: 'relayed (through TURN)', unknown: 'not reported yet',
} as const;
// Group colours leave out the edges' green and red.
const GROUP_COLORS = ['#1f77b4', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];

/**
 * The ring as a circle of peers, each with its label, device and share of the batch; in a
 * two-level ring each group in its colour, labelled, its links closing its own ring. `subtitle`
 * goes under the title (the ring's shape).
 */
export function ringSvg(title: string, nodes: readonly RingNode[], size = 420, subtitle = ''): string {
  const c = size / 2, r = size / 2 - 90;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${c}" y="20" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  if (subtitle) out.push(`<text class="subtitle" x="${c}" y="38" text-anchor="middle" fill="#444">${esc(subtitle)}</text>`);
  const at = (i: number) => {
    const a = (2 * Math.PI * i) / Math.max(1, nodes.length) - Math.PI / 2;
    return [c + r * Math.cos(a), c + 10 + r * Math.sin(a)] as const;
  };
  if (nodes.length < 2) out.push(`<circle cx="${c}" cy="${c + 10}" r="${r}" fill="none" stroke="#ccc" stroke-width="2"/>`);
  // Each node's link to the next: solid green for direct, dashed red and labelled "relay" for
  // through a TURN relay, thin grey when not reported.
  const succ = (i: number) => nodes[i]!.next ?? (i + 1) % nodes.length;
  nodes.forEach((n, i) => {
    const j = succ(i);
    if (nodes.length < 2 || j === i || !(j >= 0 && j < nodes.length)) return;
    const [x1, y1] = at(i), [x2, y2] = at(j);
    // A ring of two has two edges on one chord: each bows to its own side to stay visible.
    const len = Math.hypot(x2 - x1, y2 - y1) || 1, px = -(y2 - y1) / len, py = (x2 - x1) / len;
    const bow = succ(j) === i ? 0.3 * len : 0;
    const mx = (x1 + x2) / 2, my = (y1 + y2) / 2;
    out.push(`<path class="edge-${n.link ?? 'unknown'}" d="M${x1.toFixed(1)},${y1.toFixed(1)} `
      + `Q${(mx + bow * px).toFixed(1)},${(my + bow * py).toFixed(1)} ${x2.toFixed(1)},${y2.toFixed(1)}" fill="none" ${EDGE_STYLE[n.link ?? 'unknown']}/>`);
    if (n.link === 'relayed') {
      // The label sits just outside the edge's middle (away from the centre, or from the chord).
      const [ox, oy] = bow ? [px, py] : [mx - c, my - (c + 10)];
      const d = Math.hypot(ox, oy) || 1, ax = mx + (bow / 2) * px, ay = my + (bow / 2) * py;
      out.push(`<text class="relay-label" x="${(ax + (14 * ox) / d).toFixed(1)}" y="${(ay + (14 * oy) / d + 4).toFixed(1)}" text-anchor="middle" `
        + 'fill="#d62728" font-weight="bold">relay</text>');
    }
  });
  // Direct and relayed always; a direct TLS link and "not reported" only when some edge is one.
  const shown = (['direct', 'tcp', 'relayed', 'unknown'] as const)
    .filter((k) => (k === 'unknown' ? nodes.some((n) => !n.link) : k !== 'tcp' || nodes.some((n) => n.link === 'tcp')));
  if (nodes.length >= 2 && nodes.some((n) => n.link)) {
    shown.forEach((k, j) => {
      const y = size - 12 - 18 * (shown.length - 1 - j);
      out.push(`<line x1="12" y1="${y - 4}" x2="42" y2="${y - 4}" ${EDGE_STYLE[k]}/><text x="48" y="${y}">${EDGE_LEGEND[k]}</text>`);
    });
  }
  // Each group's label inside the circle, at the middle of its members.
  const members = new Map<number, number[]>();
  nodes.forEach((n, i) => { if (n.group !== undefined) members.set(n.group, [...(members.get(n.group) ?? []), i]); });
  if (members.size > 1) {
    for (const [g, idx] of members) {
      // Half way to the centre: clear of the node labels, which hang below the nodes.
      const mid = (idx[0]! + idx[idx.length - 1]!) / 2, a = (2 * Math.PI * mid) / nodes.length - Math.PI / 2;
      out.push(`<text class="group-label" x="${(c + 0.5 * r * Math.cos(a)).toFixed(1)}" y="${(c + 14 + 0.5 * r * Math.sin(a)).toFixed(1)}" `
        + `text-anchor="middle" fill="${GROUP_COLORS[g % GROUP_COLORS.length]}" font-weight="bold">group ${g + 1}</text>`);
    }
  }
  nodes.forEach((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, nodes.length) - Math.PI / 2;
    const x = c + r * Math.cos(a), y = c + 10 + r * Math.sin(a);
    const rad = 8 + 22 * Math.sqrt(Math.max(0, Math.min(1, n.share)));
    const fill = members.size > 1 && n.group !== undefined ? GROUP_COLORS[n.group % GROUP_COLORS.length] : '#2ca02c';
    out.push(`<circle${members.size > 1 ? ` class="group-${n.group ?? 0}"` : ''} cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${rad.toFixed(1)}" `
      + `fill="${fill}" fill-opacity="0.75"/>`);
    out.push(`<text x="${x.toFixed(1)}" y="${(y + rad + 14).toFixed(1)}" text-anchor="middle">`
      + `${esc(n.label.slice(0, 20))} (${(n.share * 100).toFixed(0)}%)</text>`);
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
