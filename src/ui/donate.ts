// The donate view: what the job is, what this device offers, one button to start, pause and
// resume, and a throttle. All training runs in a dedicated Worker behind comlink; this thread
// only draws. `?donate=1` starts at once (lab kiosks), `?token=` fills a private job's token.
import { apiFetch, pageToken, refusedMessage } from './access.ts';
import { proxy, transfer, wrap, type Remote } from 'comlink';
import { BACKEND_PREFERENCES, type BackendPreference } from '../backend/engine.ts';
import { loadBrowserPeer } from '../comm/peerjs-peer.ts';
import { serveRtcRelay } from '../comm/relay.ts';
import type { PublicJob } from '../client/http.ts';
import { WEBGPU_HELP } from '../gpu/device.ts';
import { donateButton, withWebGpuHelp, type JobResult } from './donate-state.ts';
import { explainNoWebGpu, insecureHelp, joinInfoOf, withToken, type JoinInfo } from './join.ts';
import { syncChoiceLine, syncModeOf } from './dashboard.ts';
import { isCreditBoard, yourCredit } from './credit.ts';
import { donorId } from './donor.ts';
import type { MetricRecord } from '../protocol/messages.ts';
import type { VolunteerStatus, VolunteerWorkerApi } from '../client/worker-api.ts';

const $ = (id: string): HTMLElement => document.getElementById(id)!;

function row(dl: HTMLElement, pairs: [string, string][]): void {
  dl.replaceChildren(...pairs.flatMap(([k, v]) => {
    const dt = document.createElement('dt');
    dt.textContent = k;
    const dd = document.createElement('dd');
    dd.textContent = v;
    return [dt, dd];
  }));
}

/** The newest step's rounds and bytes per image, as a note (empty before a step with a ring). */
function trafficNote(records: readonly MetricRecord[]): string {
  const steps = records.filter((r): r is Extract<MetricRecord, { type: 'step' }> => r.type === 'step');
  const last = steps[steps.length - 1];
  if (!last?.traffic) return '';
  const rounds = steps.filter((r) => (r.traffic?.innerSteps ?? 1) > 1).length;
  return `${rounds ? `; ${rounds} rounds so far` : ''}${last.ring > 1 ? `; ${(last.traffic.bytesPerImage / 1000).toFixed(1)} KB sent per image` : ''}`;
}

/** A job with syncEvery "auto": the H it chose last and why, as a note (empty before a choice). */
function syncNote(records: readonly MetricRecord[]): string {
  const last = records.filter((r): r is Extract<MetricRecord, { type: 'sync' }> => r.type === 'sync').pop();
  return last ? `; now ${syncChoiceLine(last)}` : '';
}

async function refreshJob(dl: HTMLElement): Promise<{ job: PublicJob; result: JobResult | null } | null> {
  try {
    const res = await apiFetch('/api/job');
    const refused = refusedMessage(res.status);
    if (refused) {
      row(dl, [['status', refused]]);
      return null;
    }
    if (!res.ok) throw new Error(`the coordinator answered ${res.status}`);
    const j = (await res.json()) as PublicJob;
    const m = (await (await apiFetch('/api/metrics')).json()) as { records: MetricRecord[] };
    const ev = m.records.filter((r): r is Extract<MetricRecord, { type: 'eval' }> => r.type === 'eval').pop();
    row(dl, [
      ['job', j.job.name],
      ['model', `${j.job.model} with ${j.job.optimizer.kind.toUpperCase()}, global batch ${j.job.globalBatch}`
        + `${j.job.labelSmoothing ? `, label smoothing ${j.job.labelSmoothing}` : ''}`],
      ['data set', j.job.dataset],
      ['step', `${j.step} of ${j.job.totalSteps}`],
      ['peers', String(j.peers)],
      ['synchronisation', syncModeOf(j.job.outer) + syncNote(m.records) + trafficNote(m.records)],
      ['test accuracy', ev ? `${(ev.top1 * 100).toFixed(1)}% top-1 at step ${ev.step}` : 'not evaluated yet'],
      ['access', j.job.access === 'private' ? 'private (needs a join token)' : 'public'],
      ...(j.paused ? [['status', `paused by its owner at step ${j.step}`] as [string, string]] : []),
    ]);
    return { job: j, result: ev ? { step: ev.step, top1: ev.top1, samples: ev.samples, final: ev.final === true } : null };
  } catch (e) {
    row(dl, [['status', `no coordinator answers here (${e instanceof Error ? e.message : String(e)}): open the address the coordinator printed`]]);
    return null;
  }
}

export function showDonate(root: HTMLElement): void {
  const params = new URLSearchParams(location.search);
  const worker = new Worker(new URL('../client/worker.ts', import.meta.url), { type: 'module', name: 'volunteer' });
  const api: Remote<VolunteerWorkerApi> = wrap<VolunteerWorkerApi>(worker);
  const button = $('toggle') as HTMLButtonElement;
  const status = $('status');
  const device = $('device');
  const throttle = $('throttle') as HTMLInputElement;
  const token = $('token') as HTMLInputElement;
  const backend = $('backend') as HTMLSelectElement;
  const wanted = params.get('backend');
  if (wanted && (BACKEND_PREFERENCES as readonly string[]).includes(wanted)) backend.value = wanted;
  const preference = () => backend.value as BackendPreference;
  let state: VolunteerStatus['state'] = 'idle';
  let stopRelay: (() => void) | null = null;
  token.value = params.get('token') ?? '';

  const jobDl = $('job');
  let job: PublicJob | null = null;
  let result: JobResult | null = null;
  let joinInfo: JoinInfo | null = null;
  // First of all: a page from http://<LAN address> is not a secure context, so it has no WebGPU
  // whatever the browser; say so before anything else (the CA part once /api/job answers).
  const insecure = () => insecureHelp(window.isSecureContext, location, joinInfo);
  const explain = (message: string) => explainNoWebGpu(message, WEBGPU_HELP, insecure());
  const showInsecure = () => {
    const help = insecure();
    const box = $('insecure');
    box.hidden = !help;
    root.dataset.secure = help ? 'no' : 'yes';
    if (!help) return;
    const link = (href: string, text: string, download = false) => {
      const a = document.createElement('a');
      a.href = href;
      a.textContent = text;
      if (download) a.download = '';
      return a;
    };
    const strong = document.createElement('strong');
    strong.append(link(help.httpsUrl, `Open ${help.httpsUrl}`));
    const items: Node[] = [document.createTextNode(help.text), document.createElement('br'), strong];
    if (help.ca) items.push(document.createTextNode(' · '), link(help.ca.url, 'Download the CA certificate', true));
    box.replaceChildren(...items);
  };
  showInsecure();
  let lastStatus: VolunteerStatus | null = null;
  const refresh = async () => {
    const got = await refreshJob(jobDl);
    job = got?.job ?? null;
    result = got?.result ?? null;
    $('token-row').hidden = job?.job.access !== 'private';
    joinInfo = job ? joinInfoOf(job) : null;
    showInsecure();
    if (root.dataset.device === 'ok' && root.dataset.probing !== '1') showButton();
  };
  // This device's credit (coordinator/credit.ts), under the id this browser keeps (donor.ts).
  const donor = donorId();
  const showCredit = async () => {
    const { id, kept } = await donor;
    try {
      const res = await apiFetch(`/api/credit?donor=${id}`, pageToken() ?? (token.value || null));
      const c: unknown = res.ok ? await res.json() : null;
      const text = isCreditBoard(c) ? yourCredit(c) : '';
      $('credit').textContent = text && !kept ? `${text} (This browser keeps no storage here: the credit starts again on the next visit.)` : text;
    } catch {
      // No coordinator: refreshJob says so.
    }
  };
  void refresh().then(showCredit);
  let ticks = 0;
  const timer = setInterval(() => {
    void refresh();
    if (++ticks % 3 === 0) void showCredit();
  }, 5000);

  /** The model's download link, shown exactly when the job is finished (its note, drawn by either path below, points at it). */
  const showModel = (finished: boolean) => {
    const model = $('model-link') as HTMLAnchorElement;
    model.hidden = !finished;
    model.href = withToken('/api/model.onnx', location.search);
  };
  /** The button (and, for a finished job, why it is off) from the volunteer's and the job's state. */
  const showButton = () => {
    const v = donateButton(state, job, result);
    button.textContent = v.text;
    button.disabled = v.disabled;
    root.dataset.finished = v.finished ? '1' : '';
    root.dataset.jobPaused = job?.paused ? '1' : '';
    showModel(v.finished);
    if (v.note && (state === 'idle' || state === 'done' || state === 'paused' || state === 'error')) status.textContent = v.note;
    else if (lastStatus) draw(lastStatus);
  };
  const draw = (s: VolunteerStatus) => {
    // A run that ends or pauses has its credit settled: show it now rather than at the next read.
    if (s.state !== state && (s.state === 'done' || s.state === 'paused')) void showCredit();
    state = s.state;
    lastStatus = s;
    const v = donateButton(s.state, job, result);
    button.textContent = v.text;
    button.disabled = v.disabled;
    showModel(v.finished);
    backend.disabled = s.state === 'joining' || s.state === 'training';
    status.classList.toggle('bad', s.state === 'error');
    const parts = [explain(s.message)];
    if (v.note) parts.push(v.note);
    if (s.step !== null) {
      parts.push(`step ${s.step}${s.ringSize ? `, ring of ${s.ringSize}` : ''}${s.loss !== null ? `, slice loss ${s.loss.toFixed(4)}` : ''}`
        + `${s.imagesPerSec !== null ? `, ${s.imagesPerSec.toFixed(1)} images/s here` : ''}`);
    }
    if (s.cache) {
      parts.push(`shard cache: ${s.cache.hits} reused, ${s.cache.misses} downloaded`
        + `${s.cache.corrupt ? `, ${s.cache.corrupt} damaged and fetched again` : ''}`);
    }
    status.textContent = parts.join('\n');
    root.dataset.state = s.state;
  };
  const onStatus = proxy(draw);

  const start = async () => {
    button.disabled = true;
    try {
      // The worker trains; WebRTC stays here (workers have none) and is relayed over a channel.
      const channel = new MessageChannel();
      stopRelay?.(); // the previous run's peers are gone (its worker side left)
      stopRelay = serveRtcRelay(channel.port1, await loadBrowserPeer());
      const o = { url: location.origin, token: token.value || undefined, name: params.get('name') ?? undefined, donor: (await donor).id };
      await api.start({ ...o, throttle: Number(throttle.value) / 100, backend: preference() }, transfer(channel.port2, [channel.port2]), onStatus);
    } catch (e) {
      draw({
        state: 'error', message: e instanceof Error ? e.message : String(e), peerId: null, step: null, ringSize: 0, loss: null, imagesPerSec: null,
        cache: null,
      });
    } finally {
      button.disabled = donateButton(state, job).disabled;
    }
  };
  button.addEventListener('click', () => {
    if (state === 'joining' || state === 'training') {
      button.disabled = true;
      void api.pause().finally(() => { button.disabled = false; });
    } else void start();
  });
  throttle.addEventListener('input', () => {
    $('throttle-value').textContent = `${throttle.value}%`;
    void api.setThrottle(Number(throttle.value) / 100);
  });
  // Leaving the page is a normal leave: say so while the worker can still speak.
  addEventListener('pagehide', () => { void api.pause(); clearInterval(timer); });

  // Measures the paths this browser has and shows which one trains, and why.
  const probe = (then?: () => void) => {
    button.disabled = true;
    device.classList.remove('bad');
    device.textContent = 'Measuring this device…';
    root.dataset.probing = '1';
    const pageHasWebGpu = typeof navigator !== 'undefined' && 'gpu' in navigator && !!navigator.gpu;
    api.probe(preference(), pageHasWebGpu).then(
      (r) => {
        const lines = [`Training on ${r.backend === 'wasm' ? 'WebAssembly SIMD (CPU)' : 'WebGPU'}: ${r.device}`, `Why: ${explain(r.reason)}.`];
        const noGpu = r.measures.find((m) => m.backend === 'webgpu' && !m.available);
        const help = insecure();
        if (noGpu && help) lines.push(`For the GPU, open ${help.httpsUrl} (see the note above).`);
        const shown = noGpu && !help ? withWebGpuHelp(lines, WEBGPU_HELP) : lines;
        if (!noGpu && r.backend === 'webgpu' && r.cpu) shown.push('(software WebGPU: a real GPU is 100x faster)');
        device.textContent = shown.join('\n');
        button.disabled = donateButton(state, job).disabled;
        root.dataset.device = 'ok';
        root.dataset.backend = r.backend;
        root.dataset.probing = '';
        then?.();
      },
      (e: unknown) => {
        device.classList.add('bad');
        // The worker's errors say what to do; never show a stack.
        const msg = e instanceof Error ? e.message : String(e);
        const first = msg.split('\n')[0]!.replace(/\s+at .*$/, '');
        const help = insecure();
        device.textContent = help ? `${help.text}\n(${explain(first)})` : first;
        root.dataset.device = 'missing';
        delete root.dataset.backend;
        root.dataset.probing = '';
      },
    );
  };
  backend.addEventListener('change', () => probe());
  probe(() => { if (params.get('donate') === '1') void start(); });
}
