// Line charts for the benchmarks: the same SVG charts the dashboard draws (src/ui/charts.ts).
export { lineChartSvg, type LineChart, type LineSeries } from '../src/ui/charts.ts';
