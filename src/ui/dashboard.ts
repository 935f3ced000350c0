// The dashboard (#dashboard): the job's history from GET /api/metrics, then live from the
// server-sent events of GET /api/events, drawn as SVG (src/ui/charts.ts) large enough for the
// back of a classroom. Redraws at most once a second.
import { stepUtilisation, tallyStep, tallyUtilisation, type UtilisationTally } from '../train/utilisation.ts';
import { apiFetch, pageSearch, refusedMessage } from './access.ts';
import type {
  EvalPrediction, LinkKind, LiveEvent, MetricRecord, PeerStepTiming, RingPeer, SyncChoice, VerificationTally,
} from '../protocol/messages.ts';
import type { Topology } from '../comm/topology.ts';
import { esc, lineChartSvg, placeholderSvg, ringSvg, timelineSvg, type TimelineRow } from './charts.ts';
import { confusionSvg, predictionGridHtml } from './eval-views.ts';
import { joinInfoOf, joinNotes, mainJoinUrl, qrSvg, withToken, type JoinInfo } from './join.ts';
import { ringPlacement, ringShape, ringShapeText, topologyOf } from './ring-shape.ts';
import { median } from '../stats.ts';
import { stepSplit, stepSplitSvg } from './step-split.ts';
import { creditBoardHtml, isCreditBoard } from './credit.ts';

interface StepPoint {
  step: number; generation: number; time: number; loss: number | null; ips: number; ring: number; timings: PeerStepTiming[]; innerSteps: number;
  bytesPerImage: number | null;
  /** The step's wall time (absent from older coordinators' events: null). */
  wallMs: number | null;
}
interface EvalPoint { step: number; time: number; top1: number; top5: number }
/** The newest evaluation that reported a confusion matrix or predictions (what it looked like). */
interface EvalDetail { step: number; final: boolean; samples: number; confusion: number[] | null; predictions: EvalPrediction[] }

export interface DashboardModel {
  steps: StepPoint[];
  evals: EvalPoint[];
  ring: RingPeer[];
  /** The generation `ring` belongs to (null before the first generation record or event). */
  ringGeneration: number | null;
  /** That generation's two-level plan (its groups, one after the other, are `ring`); null: flat. */
  topology: Topology | null;
  /** Why the generation's plan could not be used (it came malformed); null: it was fine or absent. */
  topologyProblem: string | null;
  globalBatch: number;
  title: string;
  /** How the job synchronises (exact sync SGD, or rounds of H local steps). */
  mode: string;
  /** A job with syncEvery "auto": the H it chose last and why (null: none chosen yet, or H is fixed). */
  sync: SyncChoice | null;
  /** A job that verifies its steps: its newest tally, and the newest conviction (null: none yet). */
  verification: VerificationTally | null;
  convicted: { step: number; names: string[]; reason: string } | null;
  detail: EvalDetail | null;
  /** The data set's class names (its manifest), empty until read. */
  classNames: string[];
  /** The newest checkpoint's step (the ONNX download exports it), null before the first. */
  checkpoint: number | null;
}

const MAX_POINTS = 5000;
/** Steps in the time-split chart: enough to see a trend, few enough for bars a few px wide. */
const SPLIT_STEPS = 100;

/** A model with nothing folded in yet. */
export function emptyModel(globalBatch = 1): DashboardModel {
  return {
    steps: [], evals: [], ring: [], ringGeneration: null, topology: null, topologyProblem: null, globalBatch, title: 'Training dashboard', mode: '',
    sync: null, verification: null, convicted: null, detail: null, classNames: [], checkpoint: null,
  };
}

/**
 * The compute utilisation the dashboard shows: the newest step's and that of the steps it holds
 * (src/train/utilisation.ts), or '' before a step with its wall time.
 */
export function utilisationLine(m: DashboardModel): string {
  let tally: UtilisationTally = { computeMs: 0, peerMs: 0 };
  let last: number | null = null;
  for (const s of m.steps) {
    if (s.wallMs === null) continue;
    tally = tallyStep(tally, s.timings, s.wallMs);
    last = stepUtilisation(s.timings, s.wallMs);
  }
  const all = tallyUtilisation(tally);
  if (all === null || last === null) return '';
  const steps = m.steps.filter((s) => s.wallMs !== null).length;
  return `compute utilisation ${(100 * last).toFixed(0)}% (last step), ${(100 * all).toFixed(0)}% over ${steps} steps`;
}

/** Folds one metrics record or live event into the model (pure but for the arrays it extends). */
export function fold(m: DashboardModel, e: MetricRecord | LiveEvent, now = Date.now()): void {
  if (e.type === 'step') {
    const timings = 'timings' in e ? e.timings : e.peers.map(({ checksum: _c, ...t }) => t);
    const ring = 'ring' in e ? e.ring : e.peers;
    const time = 'time' in e ? e.time : now;
    // A step re-run after a restart replaces the later history.
    while (m.steps.length && m.steps[m.steps.length - 1]!.step >= e.step) m.steps.pop();
    m.steps.push({
      step: e.step, generation: e.generation, time, loss: e.loss, ips: e.imagesPerSec, ring, timings, innerSteps: e.traffic?.innerSteps ?? 1,
      bytesPerImage: e.traffic?.bytesPerImage ?? null, wallMs: e.wallMs ?? null,
    });
    if (m.steps.length > MAX_POINTS) m.steps.splice(0, m.steps.length - MAX_POINTS);
  } else if (e.type === 'eval') {
    while (m.evals.length && m.evals[m.evals.length - 1]!.step >= e.step) m.evals.pop();
    m.evals.push({ step: e.step, time: 'time' in e ? e.time : now, top1: e.top1, top5: e.top5 });
    if (e.confusion || e.predictions?.length) {
      if (!m.detail || e.step >= m.detail.step) {
        m.detail = { step: e.step, final: e.final === true, samples: e.samples, confusion: e.confusion ?? null, predictions: e.predictions ?? [] };
      }
    } else if (m.detail && m.detail.step >= e.step) m.detail = null;
  } else if (e.type === 'checkpoint') {
    m.checkpoint = Math.max(m.checkpoint ?? 0, e.step);
  } else if (e.type === 'sync') {
    if (!m.sync || e.step >= m.sync.step) {
      m.sync = { step: e.step, from: e.from, h: e.h, share: e.share, computeMs: e.computeMs, syncMs: e.syncMs, reason: e.reason };
    }
  } else if (e.type === 'verification') {
    if (!m.verification || e.audits + e.caught + e.disputes >= m.verification.audits + m.verification.caught + m.verification.disputes) {
      m.verification = {
        step: e.step, audits: e.audits, caught: e.caught, disputes: e.disputes, auditedImages: e.auditedImages, computedImages: e.computedImages,
        ...(e.directed !== undefined ? { directed: e.directed } : {}),
      };
    }
    if (e.convicted?.length && (!m.convicted || e.step >= m.convicted.step)) m.convicted = { step: e.step, names: e.convicted, reason: e.reason ?? '' };
  } else if (e.type === 'generation') {
    m.ring = e.peers ?? e.ring.map((id) => ({ id, name: null, device: '' }));
    m.ringGeneration = e.generation;
    // Older records and events carry no plan: their ring was flat.
    const plan = topologyOf(e.topology, e.ring);
    m.topology = plan.topology;
    m.topologyProblem = plan.problem;
  }
}

/** The ring's shape in words, with the reason where a two-level plan came unreadable. */
export function ringShapeLine(m: DashboardModel): string {
  if (m.topologyProblem) return `${m.ring.length} peers; their two-level plan could not be read`;
  return ringShapeText(ringShape(m.ring, m.topology));
}

/**
 * How each ring edge runs, from the newest step's timings (a peer's `link` is its edge to its
 * successor: ring[i+1], or in a two-level ring its group's next member). A step of another
 * generation than the drawn ring says nothing about this ring's edges (its successors
 * differed): all unknown until this ring's first step.
 */
export function ringLinks(
  ring: readonly RingPeer[], ringGeneration: number | null, last: { generation: number; timings: readonly PeerStepTiming[] } | undefined,
): (LinkKind | undefined)[] {
  if (!last || (ringGeneration !== null && last.generation !== ringGeneration)) return ring.map(() => undefined);
  const links = new Map(last.timings.map((t) => [t.peerId, t.link]));
  return ring.map((p) => (ring.length > 1 ? links.get(p.id) : undefined));
}

/** Every chart of the dashboard as SVG text. */
export function charts(m: DashboardModel): string[] {
  const t0 = m.steps[0]?.time ?? 0;
  const minutes = (t: number) => (t - t0) / 60_000;
  const losses = m.steps.filter((s) => s.loss !== null);
  const W = 560, H = 340;
  const out = [
    lineChartSvg({
      title: 'training loss', xLabel: 'step', yLabel: 'loss', width: W, height: H,
      series: [{ name: 'loss', points: losses.map((s) => [s.step, s.loss!]) }],
    }),
    m.evals.length
      ? lineChartSvg({ title: 'test accuracy', xLabel: 'step', yLabel: '%', width: W, height: H, series: [
        { name: 'top-1', points: m.evals.map((e) => [e.step, 100 * e.top1]) },
        { name: 'top-5', points: m.evals.map((e) => [e.step, 100 * e.top5]) },
      ] })
      : placeholderSvg('test accuracy', 'no evaluation yet (the job evaluates every few steps)', W, H),
    lineChartSvg({
      title: 'loss against wall time', xLabel: 'minutes', yLabel: 'loss', width: W, height: H,
      series: [{ name: 'loss', points: losses.map((s) => [minutes(s.time), s.loss!]) }],
    }),
    lineChartSvg({ title: 'throughput and peers over time', xLabel: 'minutes', yLabel: 'images/s', width: W, height: H,
      right: { label: 'peers', series: ['peers'] }, series: [
      { name: 'images/s', points: m.steps.map((s) => [minutes(s.time), s.ips]) },
      { name: 'peers', points: m.steps.map((s) => [minutes(s.time), s.ring]) },
    ] }),
  ];
  // What the network carries per image: sync mode sends ~2x the model per step, rounds 1/H of that.
  const traffic = m.steps.filter((s) => s.bytesPerImage !== null && s.ring > 1);
  if (traffic.length) {
    out.push(lineChartSvg({ title: `bytes sent per image (${m.steps[m.steps.length - 1]!.innerSteps > 1 ? 'rounds' : 'every step synchronised'})`,
      xLabel: 'step', yLabel: 'KB / image', width: W, height: H, series: [
      { name: 'all peers', points: traffic.map((s) => [s.step, s.bytesPerImage! / 1000]) },
    ] }));
  }
  // Scaling: median images/s per ring size, against the ideal line from the smallest ring.
  const bySize = new Map<number, number[]>();
  for (const s of m.steps) bySize.set(s.ring, [...(bySize.get(s.ring) ?? []), s.ips]);
  const sizes = [...bySize.keys()].sort((a, b) => a - b);
  if (sizes.length) {
    const base = median(bySize.get(sizes[0]!)!) / sizes[0]!;
    out.push(lineChartSvg({ title: 'scaling', xLabel: 'peers', yLabel: 'images/s', width: W, height: H, dashed: ['ideal'], series: [
      { name: 'measured', points: sizes.map((n) => [n, median(bySize.get(n)!)]) },
      { name: 'ideal', points: sizes.map((n) => [n, base * n]) },
    ] }));
  }
  const rounds = (m.steps[m.steps.length - 1]?.innerSteps ?? 1) > 1;
  const splits = m.steps.slice(-SPLIT_STEPS).flatMap((s) => {
    const split = stepSplit(s.timings);
    return split ? [{ step: s.step, split }] : [];
  });
  out.push(stepSplitSvg(splits, { width: W, height: H, rounds }));
  const names = new Map(m.ring.map((p) => [p.id, p.name ?? p.id.slice(0, 8)]));
  const rows: TimelineRow[] = m.steps.slice(-3).reverse().flatMap((s) => s.timings.map((t) => ({
    label: `${s.innerSteps > 1 ? `round to ${s.step}` : `step ${s.step}`} ${names.get(t.peerId) ?? t.peerId.slice(0, 8)}`,
    parts: [{ value: t.computeMs, kind: 'compute' as const }, { value: t.commMs, kind: 'comm' as const }, { value: t.waitMs, kind: 'wait' as const }],
  })));
  out.push(timelineSvg(`per-peer time in the last ${rounds ? 'rounds' : 'steps'}`, rows, 'ms', W));
  const last = m.steps[m.steps.length - 1];
  const images = new Map((last?.timings ?? []).map((t) => [t.peerId, t.images]));
  const links = ringLinks(m.ring, m.ringGeneration, last);
  const relayed = links.filter((l) => l === 'relayed').length;
  const place = m.topology ? ringPlacement(m.ring.length, m.topology) : null;
  out.push(ringSvg(`the ring (${m.ring.length} peers${relayed ? `, ${relayed} link${relayed > 1 ? 's' : ''} relayed` : ''})`, m.ring.map((p, i) => ({
    label: p.name ?? p.id.slice(0, 8), detail: p.device || 'device not reported',
    share: (images.get(p.id) ?? 0) / Math.max(1, m.globalBatch * (last?.innerSteps ?? 1)),
    ...(links[i] ? { link: links[i] } : {}),
    ...(place?.[i] ? place[i] : {}),
  })), 460, ringShapeLine(m)));
  return out;
}

/**
 * What the newest detailed evaluation looked like: its test images with the model's guesses
 * (each fetched from GET /api/samples/val/<id>) and its confusion matrix. Empty strings where
 * there is nothing to show; class indices beyond the known names are shown as numbers.
 */
export function evalViews(m: DashboardModel): { heading: string; grid: string; confusion: string } {
  const d = m.detail;
  if (!d) return { heading: '', grid: '', confusion: '' };
  const name = (k: number) => m.classNames[k] ?? `class ${k}`;
  const grid = d.predictions.length
    ? predictionGridHtml(d.predictions.map((p) => ({
      src: withToken(`/api/samples/val/${p.id}`, pageSearch()), label: name(p.label), predicted: name(p.predicted), confidence: p.confidence,
      correct: p.label === p.predicted,
    })), 8)
    : '';
  const n = d.confusion ? Math.round(Math.sqrt(d.confusion.length)) : 0;
  const names = Array.from({ length: n }, (_, k) => name(k));
  const confusion = d.confusion && n * n === d.confusion.length ? confusionSvg(`confusion matrix after step ${d.step}`, names, d.confusion, 560) : '';
  const heading = `${d.final ? 'Final evaluation' : 'Evaluation'} after step ${d.step} on ${d.samples} test images`
    + `${d.predictions.length ? `: ${d.predictions.length} of them with the model's guesses (green right, red wrong)` : ''}`;
  return { heading, grid, confusion };
}

/** Shows the dashboard in `root`; returns a function that stops its updates. */
export function showDashboard(root: HTMLElement): () => void {
  const m = emptyModel();
  const $ = (id: string) => root.querySelector<HTMLElement>(`#${id}`)!;
  let dirty = true;
  let peers = 0;
  const draw = () => {
    if (!dirty) return;
    dirty = false;
    const last = m.steps[m.steps.length - 1];
    const ev = m.evals[m.evals.length - 1];
    $('dash-title').textContent = m.title;
    $('dash-step').textContent = last ? String(last.step) : '0';
    const rounds = m.steps.filter((s) => s.innerSteps > 1).length;
    const mode = root.querySelector<HTMLElement>('#dash-mode');
    const util = utilisationLine(m);
    if (mode) {
      const sent = last?.bytesPerImage ? ` · ${(last.bytesPerImage / 1000).toFixed(1)} KB sent per image` : '';
      const shape = m.ring.length ? ` · ${ringShapeLine(m)}` : '';
      const choice = syncChoiceLine(m.sync);
      const verified = verificationLine(m.verification, m.convicted);
      mode.textContent = m.mode + (choice ? ` · ${choice}` : '') + (rounds ? ` · ${rounds} rounds` : '') + sent + (util ? ` · ${util}` : '') + shape
        + (verified ? ` · ${verified}` : '');
      root.dataset.verification = verified;
    }
    const shown = m.ring.length || last?.ring || peers;
    $('dash-peers').textContent = String(shown);
    $('dash-ips').textContent = last ? last.ips.toFixed(1) : '-';
    $('dash-loss').textContent = last?.loss != null ? last.loss.toFixed(3) : '-';
    $('dash-top1').textContent = ev ? `${(ev.top1 * 100).toFixed(1)}%` : '-';
    $('dash-charts').innerHTML = charts(m).join('\n');
    const views = evalViews(m);
    const evalBox = root.querySelector<HTMLElement>('#dash-eval');
    if (evalBox) {
      evalBox.hidden = !views.heading;
      $('dash-eval-heading').textContent = views.heading;
      $('dash-preds').innerHTML = views.grid;
      $('dash-confusion').innerHTML = views.confusion;
    }
    const model = root.querySelector<HTMLElement>('#dash-model');
    if (model) {
      model.hidden = m.checkpoint === null;
      if (m.checkpoint !== null) {
        model.innerHTML = `<a href="${esc(withToken('/api/model.onnx', pageSearch()))}" download>Download the trained model (ONNX)</a>, `
          + `as of step ${m.checkpoint} (its newest checkpoint); docs/export.md says how to run it`;
      }
    }
    root.dataset.step = last ? String(last.step) : '0';
    root.dataset.peers = String(shown);
  };
  const timer = setInterval(draw, 1000);
  // The credit board (coordinator/credit.ts): the top donors and the class total, every 10 s.
  const board = async () => {
    const box = root.querySelector<HTMLElement>('#dash-credit');
    if (!box) return;
    try {
      const res = await apiFetch('/api/credit');
      const c: unknown = res.ok ? await res.json() : null;
      box.hidden = !isCreditBoard(c);
      if (isCreditBoard(c)) box.innerHTML = `<h2>Donors</h2>${creditBoardHtml(c)}`;
      root.dataset.creditImages = isCreditBoard(c) ? String(c.images) : '';
    } catch {
      // The coordinator is gone: the rest of the dashboard says so.
    }
  };
  void board();
  const boardTimer = setInterval(() => void board(), 10_000);
  /** The job's last step (GET /api/job): its committed step shows the final board at once. */
  let totalSteps: number | null = null;
  // Listen first, then read the history: events published in between are held and folded
  // after it (the history may or may not hold them; fold keeps the newest per step).
  const events = new EventSource(withToken('/api/events', pageSearch()));
  const listening = new Promise<void>((resolve) => events.addEventListener('hello', () => resolve(), { once: true }));
  let held: LiveEvent[] | null = [];
  for (const type of ['step', 'eval', 'generation', 'checkpoint', 'sync', 'verification'] as const) {
    events.addEventListener(type, (ev) => {
      const e = JSON.parse((ev as MessageEvent<string>).data) as LiveEvent;
      if (held) held.push(e);
      else fold(m, e);
      if (e.type === 'step' && totalSteps !== null && e.step >= totalSteps) void board();
      dirty = true;
    });
  }
  void (async () => {
    const answer = await apiFetch('/api/job');
    const refused = refusedMessage(answer.status);
    if (refused) {
      root.dataset.refused = refused;
      root.insertAdjacentHTML('afterbegin', `<p class="refused">${esc(refused)}</p>`);
      return;
    }
    const raw: unknown = await answer.json();
    const job = jobHeadOf(raw);
    showJoin(root, joinInfoOf(raw), job.access);
    m.globalBatch = job.globalBatch;
    m.title = job.title;
    m.mode = job.mode;
    peers = job.peers;
    totalSteps = job.totalSteps;
    if (job.dataset) void classNamesOf(job.dataset).then((names) => { m.classNames = names; dirty = true; });
    await listening;
    const history = (await (await apiFetch('/api/metrics')).json()) as { records: MetricRecord[] };
    for (const r of history.records) fold(m, r);
    for (const e of held ?? []) fold(m, e);
    held = null;
    dirty = true;
    draw();
  })();
  return () => {
    clearInterval(timer);
    clearInterval(boardTimer);
    events.close();
  };
}

/** The parts of GET /api/job the dashboard shows, read defensively (it is the network's word). */
export function jobHeadOf(x: unknown): {
  title: string; globalBatch: number; peers: number; access: 'public' | 'private' | null; mode: string; dataset: string | null; totalSteps: number | null;
} {
  const o = typeof x === 'object' && x !== null ? (x as Record<string, unknown>) : {};
  const j = typeof o.job === 'object' && o.job !== null ? (o.job as Record<string, unknown>) : {};
  const str = (v: unknown) => (typeof v === 'string' ? v : '?');
  const num = (v: unknown, d: number) => (typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : d);
  return {
    title: `${str(j.name)}: ${str(j.model)} on ${str(j.dataset)}, global batch ${num(j.globalBatch, 0) || '?'}`,
    globalBatch: num(j.globalBatch, 1),
    peers: num(o.peers, 0),
    access: j.access === 'public' || j.access === 'private' ? j.access : null,
    mode: syncModeOf(j.outer),
    dataset: typeof j.dataset === 'string' && /^[a-z0-9][a-z0-9_-]{0,63}$/i.test(j.dataset) ? j.dataset : null,
    totalSteps: num(j.totalSteps, 0) || null,
  };
}

/** The class names of a data set from its manifest (GET /data/<dataset>/manifest.json); none on failure. */
async function classNamesOf(dataset: string): Promise<string[]> {
  try {
    const res = await apiFetch(`/data/${encodeURIComponent(dataset)}/manifest.json`);
    if (!res.ok) return [];
    const json: unknown = await res.json();
    const classes = typeof json === 'object' && json !== null ? (json as Record<string, unknown>).classes : undefined;
    return Array.isArray(classes) ? classes.map((c, k) => (typeof c === 'string' ? c : `class ${k}`)) : [];
  } catch {
    return [];
  }
}

/** How a job synchronises, in words, from its `outer` settings (absent: every step). */
export function syncModeOf(outer: unknown): string {
  const o = typeof outer === 'object' && outer !== null ? (outer as Record<string, unknown>) : {};
  const h = typeof o.syncEvery === 'number' && Number.isInteger(o.syncEvery) && o.syncEvery > 1 ? o.syncEvery : 1;
  if (h === 1) return 'every step synchronised (exact sync SGD)';
  const carry = typeof o.carry === 'number' && Number.isFinite(o.carry) ? `, inner momentum carried from the round's mean (${o.carry})` : '';
  if (o.auto === true) return `auto: the coordinator measures the ring and runs rounds of 1 to ${h} steps (1: exact sync SGD${carry})`;
  return `rounds: ${h} local steps per peer, then one all-reduce (low-communication mode${carry})`;
}

/**
 * A verifying job's audits in words: how many, their cost in compute, disputes, peers caught and
 * the newest conviction ('' before its first verified step).
 */
export function verificationLine(t: VerificationTally | null, convicted: DashboardModel['convicted'] = null): string {
  if (!t) return '';
  const cost = t.computedImages > 0 ? ` (${(100 * t.auditedImages / t.computedImages).toFixed(1)}% of the compute)` : '';
  const disputes = t.disputes ? `, ${t.disputes} dispute${t.disputes === 1 ? '' : 's'}` : '';
  const caught = `${t.caught} peer${t.caught === 1 ? '' : 's'} caught`;
  const last = convicted ? `: ${convicted.names.join(', ')} in step ${convicted.step} (${convicted.reason})` : '';
  const directed = t.directed ? `, ${t.directed} of them of suspects` : '';
  return `verified: ${t.audits} audit${t.audits === 1 ? '' : 's'}${cost}${directed}${disputes}, ${caught}${last}`;
}

/** A job with syncEvery "auto": the H in force, since when and why ('' before the first choice). */
export function syncChoiceLine(c: SyncChoice | null): string {
  if (!c) return '';
  return `${c.h === 1 ? 'every step synchronised' : `rounds of ${c.h}`} since step ${c.step}: ${c.reason}`;
}

/** The join address, large, with its QR code and the CA to trust (for a projector). */
function showJoin(root: HTMLElement, info: JoinInfo, access: 'public' | 'private' | null): void {
  const box = root.querySelector<HTMLElement>('#dash-join');
  if (!box) return;
  const url = mainJoinUrl(info, location.search, `${location.origin}/`);
  const others = info.joinUrls.slice(1).map((u) => `<div class="other">${esc(withToken(u, location.search))}</div>`).join('');
  const ca = info.tls
    ? `<div class="ca"><a href="${esc(info.tls.caUrl)}" download>Download the CA certificate</a> `
      + `(SHA-256 <span class="fp">${esc(info.tls.caSha256)}</span>)</div>`
    : '';
  const notes = joinNotes(info, access, url).map((n) => `<div class="note">${esc(n)}</div>`).join('');
  box.innerHTML = `<div class="qr">${qrSvg(url)}</div><div><div>Join from any device on this network:</div><div class="join-url">${esc(url)}</div>`
    + `${others ? `<div>or</div>${others}` : ''}${ca}${notes}</div>`;
  box.hidden = false;
  box.dataset.url = url;
}
