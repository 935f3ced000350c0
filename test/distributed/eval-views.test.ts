// What the dashboard shows of an evaluation, end to end: a real job and a real volunteer process
// report a confusion matrix and predictions for the shown test images; the job's last evaluation
// covers the whole test split; the coordinator serves those test images and the trained model
// as ONNX, and ONNX Runtime, given a served image, answers what the dashboard said it would.
import { InferenceSession } from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SHOWN_TEST_IMAGES } from '../../coordinator/run.ts';
import { nodeDecoder } from '../../src/data/decode-node.ts';
import { normalizeInto } from '../../src/data/augment.ts';
import type { LiveEvent } from '../../src/protocol/messages.ts';
import type { Manifest } from '../../src/data/manifest.ts';
import { ortLogits, readOnnxHeader } from '../export/helpers.ts';
import { smallCnn } from '../../src/nn/models.ts';
import { buildTestData, startTestJob, tempRoot, testJob, volunteer } from '../../testbed/jobs.ts';

let root: { dir: string; remove(): Promise<void> };
let data: { dataDir: string; manifest: Manifest };
beforeAll(async () => {
  root = await tempRoot('eval-views');
  data = await buildTestData(root.dir);
}, 120_000);
afterAll(async () => root?.remove());

describe('evaluations the dashboard can show', () => {
  it('confusion matrices, shown predictions, a final evaluation on the whole test split, its images and the model as ONNX', async () => {
    const job = await startTestJob(root.dir, 'views', data, testJob(6, { evalEvery: 3, checkpointEvery: 3 }), { finalEvalSamples: Number.MAX_SAFE_INTEGER });
    try {
      // Before the first checkpoint there is no model to download.
      const early = await fetch(`${job.url}/api/model.onnx`);
      expect(early.status).toBe(404);
      expect(await early.text()).toMatch(/after the first checkpoint/);
      const v = volunteer(job.url, 'views', 'wasm');
      await job.driver.finished;
      await v.exited;

      const evals = job.events.filter((e): e is Extract<LiveEvent, { type: 'eval' }> => e.type === 'eval');
      expect(evals.map((e) => [e.step, e.samples, e.final ?? false])).toEqual([[3, 48, false], [6, data.manifest.splits.val.samples, true]]);
      const k = data.manifest.classes.length;
      for (const e of evals) {
        expect(e.confusion).toHaveLength(k * k);
        expect(e.confusion!.reduce((a, c) => a + c, 0)).toBe(e.samples);
        const diagonal = e.confusion!.reduce((a, c, i) => a + (i % (k + 1) === 0 ? c : 0), 0);
        expect(diagonal / e.samples).toBeCloseTo(e.top1, 12);
        expect(e.predictions!.map((p) => p.id)).toEqual(Array.from({ length: SHOWN_TEST_IMAGES }, (_, i) => i));
      }

      // The served test image carries its label, as the evaluation saw it.
      const last = evals[1]!;
      const shown = last.predictions![5]!;
      const img = await fetch(`${job.url}/api/samples/val/${shown.id}`);
      expect(img.status).toBe(200);
      expect(img.headers.get('content-type')).toMatch(/^image\//);
      expect(Number(img.headers.get('x-label'))).toBe(shown.label);
      const bytes = new Uint8Array(await img.arrayBuffer());
      expect((await fetch(`${job.url}/api/samples/val/${data.manifest.splits.val.samples}`)).status).toBe(404);
      expect((await fetch(`${job.url}/api/samples/val/-1`)).status).toBe(404);
      expect((await fetch(`${job.url}/api/samples/val/x`)).status).toBe(404);

      // The downloaded model (the final checkpoint) in ONNX Runtime, on that image normalised as
      // its metadata says, answers the class and confidence the dashboard showed.
      const model = await fetch(`${job.url}/api/model.onnx`);
      expect(model.status).toBe(200);
      expect(model.headers.get('content-disposition')).toMatch(/attachment; filename="test-step-6\.onnx"/);
      const file = new Uint8Array(await model.arrayBuffer());
      const head = readOnnxHeader(file);
      expect(head.opset).toBeGreaterThanOrEqual(17);
      const mean = JSON.parse(head.metadata.get('normalization_mean')!) as number[];
      const std = JSON.parse(head.metadata.get('normalization_std')!) as number[];
      const raw = await nodeDecoder.decode(bytes, data.manifest.image.encoding, data.manifest.image.channels);
      const spec = smallCnn([data.manifest.image.channels, data.manifest.image.height, data.manifest.image.width], k);
      const x = new Float32Array(spec.input[0] * spec.input[1] * spec.input[2]);
      normalizeInto(raw, mean, std, x, 0);
      const session = await InferenceSession.create(file);
      const logits = await ortLogits(session, spec, x, 1);
      const best = logits.indexOf(Math.max(...logits));
      const z = [...logits].reduce((a, l) => a + Math.exp(l - logits[best]!), 0);
      expect(best).toBe(shown.predicted);
      expect(Math.abs(1 / z - shown.confidence)).toBeLessThan(1e-4);
    } finally {
      await job.close();
    }
  }, 240_000);
});
