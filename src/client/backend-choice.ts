// Which compute backend a volunteer trains on. At start it measures each available path on
// this device for about a second (training steps of the small CNN on a CIFAR-shaped batch,
// after one warm-up step that compiles pipelines) and keeps the faster: WebGPU on a real GPU,
// wasm on most CPU-only machines (software WebGPU is several times slower than SIMD on the
// CPU). A setting forces one. Both train in the same ring (src/optim/host.ts says how).
import type { AnyEngine, BackendKind, BackendPreference, TensorLike } from '../backend/engine.ts';
import { Model } from '../nn/model.ts';
import { smallCnn } from '../nn/models.ts';
import { makeRng, uniformF32 } from '../rng.ts';
import { recordGradients, uploadBatch } from '../train/step.ts';

export type { BackendPreference };

export interface BackendMeasure {
  backend: BackendKind;
  available: boolean;
  /** Training images/s of the probe (null: not available, or forced without measuring). */
  imagesPerSec: number | null;
  /** The device, or why the backend is not available. */
  detail: string;
}

export interface BackendChoice {
  chosen: BackendKind;
  /** One sentence for the page and the log. */
  reason: string;
  measures: BackendMeasure[];
}

export class BackendError extends Error {
  readonly kind = 'no-backend';
  constructor(message: string) {
    super(message);
    this.name = 'BackendError';
  }
}

const fmt = (v: number) => (v >= 10 ? v.toFixed(0) : v.toFixed(1));

/** The decision, from the measurements (pure). */
export function pickBackend(pref: BackendPreference, measures: readonly BackendMeasure[]): BackendChoice {
  const of = (b: BackendKind) => measures.find((m) => m.backend === b);
  const usable = measures.filter((m) => m.available && m.imagesPerSec !== null);
  if (pref !== 'auto') {
    const m = of(pref);
    if (!m || !m.available) {
      throw new BackendError(`the ${pref} backend was asked for but is not available here: ${m?.detail ?? 'not tried'}. `
        + "Choose 'auto' to use what this device has.");
    }
    return {
      chosen: pref, reason: `${pref} was chosen in the settings${m.imagesPerSec === null ? '' : ` (${fmt(m.imagesPerSec)} images/s here)`}`,
      measures: [...measures],
    };
  }
  if (usable.length === 0) throw new BackendError(`no compute backend works here: ${measures.map((m) => `${m.backend}: ${m.detail}`).join('; ')}`);
  const best = usable.reduce((a, b) => (b.imagesPerSec! > a.imagesPerSec! ? b : a));
  const others = measures.filter((m) => m !== best);
  const why = others.map((m) => (!m.available || m.imagesPerSec === null
    ? `${m.backend} is not available (${m.detail})`
    : `${m.backend} ${fmt(m.imagesPerSec)} images/s`)).join(', ');
  return {
    chosen: best.backend, reason: `${best.backend} is the faster path on this device: ${fmt(best.imagesPerSec!)} images/s${why ? ` vs ${why}` : ''}`,
    measures: [...measures],
  };
}

/** Training images/s of the small CNN at batch `batch` on this engine, measured for ~budgetMs. */
export async function measureEngine(engine: AnyEngine, budgetMs = 1000, batch = 8): Promise<number> {
  const spec = smallCnn([3, 32, 32], 10);
  const model = new Model(engine, spec, { seed: 1 });
  const rng = makeRng(7);
  const hostBatch = {
    x: uniformF32(rng, batch * 3 * 32 * 32), labels: Int32Array.from({ length: batch }, (_, i) => i % 10), shape: [batch, 3, 32, 32] as const,
  };
  let x: TensorLike | null = null;
  try {
    const once = async () => {
      x = uploadBatch(model, hostBatch, x);
      const total = recordGradients(model, x, 1);
      engine.flush();
      await engine.readF32(total);
      await engine.readF32(model.grads);
    };
    await once(); // compiles pipelines, allocates activations
    const t0 = performance.now();
    let n = 0;
    while (n === 0 || performance.now() - t0 < budgetMs) {
      await once();
      n++;
    }
    return (n * batch) / ((performance.now() - t0) / 1000);
  } finally {
    if (x) engine.release(x);
    model.destroy();
  }
}

export interface EngineFactories {
  webgpu?: () => Promise<AnyEngine>;
  wasm?: () => Promise<AnyEngine>;
}

/**
 * 'auto': creates every engine, measures each for ~budgetMs and returns the faster (the
 * others are destroyed). A forced preference creates that engine only, unmeasured. Throws a
 * BackendError that says what to do when none works.
 */
export async function chooseEngine(pref: BackendPreference, make: EngineFactories, budgetMs = 1000): Promise<{ engine: AnyEngine; choice: BackendChoice }> {
  const kinds: BackendKind[] = pref === 'auto' ? ['wasm', 'webgpu'] : [pref];
  const engines = new Map<BackendKind, AnyEngine>();
  const measures: BackendMeasure[] = [];
  for (const k of kinds) {
    const f = make[k];
    if (!f) {
      measures.push({ backend: k, available: false, imagesPerSec: null, detail: 'not built into this client' });
      continue;
    }
    try {
      const e = await f();
      engines.set(k, e);
      const ips = pref === 'auto' ? await measureEngine(e, budgetMs) : null;
      measures.push({ backend: k, available: true, imagesPerSec: ips, detail: e.info.description });
    } catch (err) {
      measures.push({ backend: k, available: false, imagesPerSec: null, detail: err instanceof Error ? err.message.split('\n')[0]! : String(err) });
    }
  }
  let choice: BackendChoice;
  try {
    choice = pickBackend(pref, measures);
  } catch (e) {
    for (const en of engines.values()) en.destroy();
    throw e;
  }
  for (const [k, en] of engines) if (k !== choice.chosen) en.destroy();
  return { engine: engines.get(choice.chosen)!, choice };
}
