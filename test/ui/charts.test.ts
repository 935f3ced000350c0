// Chart axes with round ticks, the line chart's right-hand axis, and the evaluation views
// (confusion matrix, prediction grid).
import { describe, expect, it } from 'vitest';
import { formatTick, lineChartSvg, niceTicks } from '../../src/ui/charts.ts';
import { confusionSvg, predictionGridHtml } from '../../src/ui/eval-views.ts';

/** The texts of the <text class="cls"> elements, in order. */
const texts = (svg: string, cls: string) => [...svg.matchAll(new RegExp(`<text class="${cls}"[^>]*>([^<]*)<`, 'g'))].map((m) => m[1]!);
/** Every path's points as [x, y] pairs, in order. */
const paths = (svg: string) => [...svg.matchAll(/<path d="([^"]*)"/g)]
  .map((m) => [...m[1]!.matchAll(/[ML](-?[\d.]+),(-?[\d.]+)/g)].map((p) => [Number(p[1]), Number(p[2])]));

describe('niceTicks', () => {
  const cases: [number, number, number[]][] = [
    [0, 1, [0, 0.25, 0.5, 0.75, 1]],
    [0, 0.3, [0, 0.1, 0.2, 0.3]],
    [0, 7, [0, 2, 4, 6, 8]],
    [0, 1234, [0, 250, 500, 750, 1000, 1250]],
    [-3, 17, [-5, 0, 5, 10, 15, 20]],
    [0, 0, [0, 0.25, 0.5, 0.75, 1]],
    [5, 5, [2, 4, 6, 8]],
  ];
  it.each(cases)('%d..%d -> %j', (lo, hi, want) => {
    const t = niceTicks(lo, hi);
    expect(t.ticks).toEqual(want);
    expect([t.lo, t.hi]).toEqual([want[0], want.at(-1)]);
  });

  const awkward: [number, number][] = [[0, 1], [0, 0.3], [0, 7], [0, 1234], [-3, 17], [0, 0], [5, 5], [0, 1e-7], [0, 1e300], [-1e308, 1e308],
    [0.1, 0.1 + 0.2], [1e6, 1e6 + 1], [-0.004, -0.001], [17, 3], [NaN, 4], [0, Infinity], [2.5e-9, 2.51e-9]];
  it.each(awkward)('%d..%d: finite multiples of a 1/2/2.5/5 step covering the range, 3 to 10 of them', (lo, hi) => {
    const t = niceTicks(lo, hi);
    expect(t.ticks.length).toBeGreaterThanOrEqual(3);
    expect(t.ticks.length).toBeLessThanOrEqual(10);
    const mantissa = t.step / 10 ** Math.floor(Math.log10(t.step));
    expect([1, 2, 2.5, 5].some((m) => Math.abs(mantissa - m) < 1e-9)).toBe(true);
    t.ticks.forEach((v, i) => {
      expect(Number.isFinite(v)).toBe(true);
      expect(Math.abs(v / t.step - Math.round(v / t.step))).toBeLessThan(1e-6);
      if (i) expect((v - t.ticks[i - 1]!) / t.step).toBeCloseTo(1, 6);
    });
    const [a, b] = [Math.min(lo, hi), Math.max(lo, hi)];
    // Covered up to float noise: 0.1 + 0.2 = 0.30000000000000004 ends on a 0.3 tick, not 0.4.
    if (Number.isFinite(a) && Math.abs(a) <= 1e300) expect(t.lo).toBeLessThanOrEqual(a + 1e-9 * t.step);
    if (Number.isFinite(b) && Math.abs(b) <= 1e300) expect(t.hi).toBeGreaterThanOrEqual(b - 1e-9 * t.step);
  });

  it('integer axes (peers) step by whole numbers', () => {
    expect(niceTicks(0, 3, 5, true).ticks).toEqual([0, 1, 2, 3]);
    expect(niceTicks(0, 1, 5, true).ticks).toEqual([0, 1]);
    for (let hi = 1; hi <= 10; hi++) {
      const t = niceTicks(0, hi, 5, true);
      expect(Number.isInteger(t.step) && t.step >= 1).toBe(true);
      expect(t.hi).toBeGreaterThanOrEqual(hi);
    }
    expect(niceTicks(0, 10).step).toBe(2.5);
  });
});

describe('formatTick', () => {
  it.each([
    [0.1 + 0.2, 0.1, '0.3'], [3 * 0.1, 0.1, '0.3'], [0.75, 0.25, '0.75'], [1, 0.25, '1'], [0.0005, 0.0005, '0.0005'],
    [12000, 1000, '12k'], [12500, 2500, '12.5k'], [1250, 250, '1250'], [-5, 5, '-5'], [-1e-17, 0.1, '0'], [3e6, 1e6, '3M'],
    [7.5e-8, 2.5e-8, '7.5e-8'], [1e300, 2.5e299, '1e+300'], [1000000.25, 0.25, '1000000.25'],
  ])('%d at step %d -> %s', (v, step, want) => expect(formatTick(v, step)).toBe(want));

  it('labels of nice ticks never carry float noise', () => {
    for (const [lo, hi] of [[0, 0.3], [0.1, 0.7], [-0.7, 0.2], [0, 1.1], [0, 3.3e-5], [1e-4, 9e-4]] as const) {
      const t = niceTicks(lo, hi);
      for (const s of t.ticks.map((v) => formatTick(v, t.step))) expect(s).toMatch(/^-?\d+(\.\d{1,6})?(e[-+]\d+)?$/);
    }
  });
});

describe('lineChartSvg', () => {
  const base = { title: 't', xLabel: 'x', yLabel: 'y' };

  it('draws round tick labels on both axes', () => {
    const svg = lineChartSvg({ ...base, series: [{ name: 'a', points: [[0, 0.1], [1234, 0.1 + 0.2]] }] });
    expect(texts(svg, 'tick-y')).toEqual(['0', '0.1', '0.2', '0.3']);
    expect(texts(svg, 'tick-x')).toEqual(['0', '250', '500', '750', '1000', '1250']);
    // The highest y tick sits on the top of the plot area (T = 60), the lowest on the bottom.
    expect(svg).toContain('y="64.0" text-anchor="end">0.3<');
    expect(svg).toContain('y="384.0" text-anchor="end">0<');
  });

  it('no NaN or Infinity with no points, one point, equal values or bad values', () => {
    const charts = [
      lineChartSvg({ ...base, series: [] }),
      lineChartSvg({ ...base, series: [{ name: 'a', points: [] }] }),
      lineChartSvg({ ...base, series: [{ name: 'a', points: [[3, 5]] }] }),
      lineChartSvg({ ...base, series: [{ name: 'a', points: [[0, 0], [0, 0]] }] }),
      lineChartSvg({ ...base, series: [{ name: 'a', points: [[2, 2], [2, 2]] }] }),
      lineChartSvg({ ...base, series: [{ name: 'a', points: [[NaN, 1], [1, Infinity], [2, -1e-12]] }], right: { label: 'r', series: ['b'] } }),
    ];
    for (const svg of charts) {
      expect(svg).not.toMatch(/NaN|Infinity/);
      expect(texts(svg, 'tick-y').length).toBeGreaterThanOrEqual(3);
    }
    expect(texts(charts[2]!, 'tick-y')).toEqual(['0', '1', '2', '3', '4', '5']);
    expect(texts(charts[2]!, 'tick-x')).toEqual(['0', '1', '2', '3']);
  });

  it('a right axis scales its series on its own: the peers maximum lands at the top of the plot', () => {
    const series = [
      { name: 'images/s', points: [[0, 100], [1, 180], [2, 230]] as [number, number][] },
      { name: 'peers', points: [[0, 2], [1, 3], [2, 4]] as [number, number][] },
    ];
    const svg = lineChartSvg({ ...base, series, right: { label: 'peers', series: ['peers'] } });
    expect(texts(svg, 'tick-y')).toEqual(['0', '50', '100', '150', '200', '250']);
    expect(texts(svg, 'tick-r')).toEqual(['0', '1', '2', '3', '4']);
    const [ips, peers] = paths(svg);
    // Plot area: y from 60 (top) to 380 (bottom); x to W - R with R = 36 + 7 * 1 = 43.
    expect(peers).toEqual([[70, 220], [373.5, 140], [677, 60]]);
    expect(ips!.at(-1)).toEqual([677, 85.6]);
    expect(svg).toContain('<line x1="677" y1="60" x2="677" y2="380" stroke="black"/>');
    expect(svg).toMatch(/translate\(706 220\) rotate\(-90\)" text-anchor="middle">peers</);
    // Without the right axis the peers share the images/s scale: 4 of 250 is near the bottom.
    const [, shared] = paths(lineChartSvg({ ...base, series }));
    expect(shared!.at(-1)![1]).toBeCloseTo(380 - (4 / 250) * 320, 1);
  });
});

describe('confusionSvg', () => {
  // Rows = true class, columns = predicted.
  const names = ['cat', 'dog', 'a<b'];
  const m = [8, 2, 0, 1, 9, 0, 0, 0, 0];

  it('draws each non-zero cell with its count, shaded by its row share, and each row\'s recall', () => {
    const svg = confusionSvg('confusion', names, m);
    expect(svg.match(/<rect class="cell"/g)?.length).toBe(4);
    expect(texts(svg, 'count')).toEqual(['8', '2', '1', '9']);
    expect(texts(svg, 'recall')).toEqual(['80.0%', '90.0%']); // the empty row draws no recall
    expect(svg).toContain('fill-opacity="0.816"'); // 8 / 10 of the row: 0.08 + 0.92 * 0.8
    expect(svg).toContain('fill-opacity="0.908"'); // 9 / 10
    expect(svg).toContain('accuracy 85.0% of 20');
    for (const t of ['true class', 'predicted class', 'recall']) expect(svg).toContain(`>${t}<`);
  });

  it('escapes class names and rejects a matrix of the wrong size or with bad counts', () => {
    const svg = confusionSvg('<title>', names, m);
    expect(svg).not.toContain('a<b');
    expect(svg).toContain('a&lt;b');
    expect(svg).toContain('&lt;title&gt;');
    expect(() => confusionSvg('c', names, [1, 2, 3])).toThrow(RangeError);
    expect(() => confusionSvg('c', names, [1, 2, 3])).toThrow(/3 classes need a 3x3 matrix of 9 counts.*got 3/);
    expect(() => confusionSvg('c', names, [1, 2, 3, 4, NaN, 0, 0, 0, 0])).toThrow(/row 1, column 1/);
  });

  it('renders 100 classes: no counts in cells, names dropped, recall as bars', () => {
    const n = 100, big = Array.from({ length: n * n }, (_, k) => (Math.floor(k / n) === k % n ? 7 : (k % 13 === 0 ? 1 : 0)));
    const svg = confusionSvg('cifar-100', Array.from({ length: n }, (_, i) => `class ${i}`), big);
    expect(svg).not.toMatch(/NaN|Infinity/);
    expect(svg).not.toContain('class="count"');
    expect(svg.match(/class="recall-bar"/g)?.length).toBe(n);
    expect(svg.match(/<rect class="cell"/g)?.length).toBe(big.filter((v) => v > 0).length);
  });
});

describe('predictionGridHtml', () => {
  it('shows the guess and its confidence, green when right, red with the true class when wrong', () => {
    const html = predictionGridHtml([
      { src: '/img/0.png', label: 'cat', predicted: 'cat', confidence: 0.934, correct: true },
      { src: 'data:image/png;base64,AAAA', label: 'dog', predicted: 'cat', confidence: 0.51, correct: false },
    ], 4);
    expect(html).toContain('class="pred-grid"');
    expect(html).toContain('repeat(4,');
    expect(html.match(/class="pred-cell pred-ok"/g)?.length).toBe(1);
    expect(html.match(/class="pred-cell pred-bad"/g)?.length).toBe(1);
    expect(html).toContain('>cat 93%</div>');
    expect(html).toContain('>cat 51% (true: dog)</div>');
    expect(html.match(/<img src="[^"]*" width="64" height="64"[^>]*image-rendering:pixelated/g)?.length).toBe(2);
  });

  it('escapes text and attributes, and loads no src but same-origin paths and data:image/', () => {
    const html = predictionGridHtml([
      { src: '/x.png" onerror="alert(1)', label: '<b>', predicted: '"q"&', confidence: 1, correct: false },
      { src: 'javascript:alert(1)', label: 'x', predicted: 'x', confidence: 0.5, correct: true },
      { src: '//evil.example/x.png', label: 'y', predicted: 'y', confidence: 0.5, correct: true },
    ]);
    expect(html).toContain('src="/x.png&quot; onerror=&quot;alert(1)"');
    expect(html).not.toContain('" onerror="');
    expect(html).not.toContain('javascript:');
    expect(html).not.toContain('evil.example');
    expect(html.match(/<img /g)?.length).toBe(1);
    expect(html).toContain('(true: &lt;b&gt;)');
    expect(html).not.toContain('<b>');
  });
});
