// The scaling bench's picture (bench/results/scaling.svg): measured against simulated step
// times on this machine, the all-reduce and the rest of the step, and the predicted
// efficiency of large rings for today's system and the planned one (labelled as such).
import { lineChartSvg } from './plot-lines.ts';
import type { Calibration, Validation } from './scaling-calibrate.ts';
import { predictRow, scenarios, type PredictInputs, type Scenario } from './scaling-predict.ts';
import type { RunSummary } from './scaling-run.ts';

/** Stacks complete SVG charts vertically in one SVG. */
export function stackSvgs(parts: string[]): string {
  const sizes = parts.map((p) => {
    const m = /<svg[^>]*\swidth="(\d+)"\s+height="(\d+)"/.exec(p);
    if (!m) throw new Error('stackSvgs: a chart without width and height');
    return { w: Number(m[1]), h: Number(m[2]) };
  });
  let y = 0;
  const body = parts.map((p, i) => {
    const g = `<g transform="translate(0 ${y})">\n${p}\n</g>`;
    y += sizes[i]!.h;
    return g;
  });
  return [`<svg xmlns="http://www.w3.org/2000/svg" width="${Math.max(...sizes.map((s) => s.w))}" height="${y}">`, ...body, '</svg>'].join('\n');
}

export function scalingPlot(runs: readonly RunSummary[], cal: Calibration, v: Validation, inp: PredictInputs): string {
  const batches = [...new Set(runs.map((r) => r.batch))];
  const series = batches.flatMap((b) => {
    const idx = runs.map((r, i) => [r, i] as const).filter(([r]) => r.batch === b);
    return [
      { name: `B=${b} step (measured)`, points: idx.map(([r]) => [r.peers, r.stepMs] as [number, number]) },
      { name: `B=${b} step (simulated)`, points: idx.map(([r, i]) => [r.peers, v.predictedS[i]! * 1000] as [number, number]) },
    ];
  });
  const measured = lineChartSvg({
    title: `small CNN on MNIST, N local peers on 2 shared cores: measured vs simulated (max error ${(100 * v.maxRelError).toFixed(0)}%)`,
    xLabel: 'peers N', yLabel: 'ms per step', series,
  });
  const comm = lineChartSvg({
    title: 'all-reduce and the rest of the step (measured), local peers',
    xLabel: 'peers N', yLabel: 'ms per step',
    series: batches.flatMap((b) => [
      { name: `B=${b} all-reduce`, points: runs.filter((r) => r.batch === b).map((r) => [r.peers, r.allReduceMs] as [number, number]) },
      { name: `B=${b} rest of the step`, points: runs.filter((r) => r.batch === b).map((r) => [r.peers, r.overheadMs] as [number, number]) },
    ]),
  });
  const ns = Array.from({ length: 10 }, (_, k) => 2 ** (k + 1));
  const lan = inp.links.find((l) => l.key === '1g')!;
  const sc = scenarios(cal, inp);
  const curve = (s: Scenario, sys: 'current' | 'planned'): [number, number][] =>
    ns.map((n) => [Math.log2(n), predictRow(cal, sys, s, 32_768, lan, n).efficiency]);
  const predicted = lineChartSvg({
    title: `predicted efficiency at B = 32K over 1 Gb/s (${lan.status}): an ImageNet job today vs the PLANNED (not built) system`,
    xLabel: 'log2 peers', yLabel: 'throughput(N) / sum of peers alone',
    series: sc.filter((s) => s.model === 'resnet50').flatMap((s) => [
      { name: `${s.key} current`, points: curve(s, 'current') },
      { name: `${s.key} planned`, points: curve(s, 'planned') },
    ]),
  });
  return stackSvgs([measured, comm, predicted]);
}
