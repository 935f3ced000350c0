// Every input of the scaling bench's predictions in one table (the JSON's predictions.inputs and
// docs/scaling.md), each with its status (bench/scaling-inputs.ts): measured, fitted, assumed or
// code, and where it comes from or why it is assumed.
import { DEFAULT_TWO_LEVEL_FROM } from '../coordinator/two-level.ts';
import { DEFAULT_BUCKET_BYTES, DEFAULT_LAST_BUCKET_BYTES } from '../src/nn/buckets.ts';
import { DEFAULT_GPU_BUDGET } from '../src/nn/fit.ts';
import type { Calibration } from './scaling-calibrate.ts';
import type { PredictionInput } from './scaling-inputs.ts';
import {
  CHURN, GPU_RESNET50_224_IMAGES_PER_S, HELD_PER_PARAM_BYTES, PREDICT_GPU_COPY_BYTES_PER_S, PREDICT_MICROBATCH_S, PREDICT_SPEED_SIGMA,
  PREDICT_STRAGGLER, RESNET50_IMAGE_BYTES, START_WIRE_SCALE, type PredictInputs,
} from './scaling-predict.ts';

const THIS_RUN = 'npm run bench -- scaling (this run)';

export function inputTable(cal: Calibration, inp: PredictInputs, transportMissing: string | null): Record<string, PredictionInput> {
  const t: Record<string, PredictionInput> = {
    gpuResnet50At224ImagesPerS: {
      value: GPU_RESNET50_224_IMAGES_PER_S, unit: 'images/s', status: 'assumed',
      source: 'one real GPU per peer; no GPU has run this project (issue 42): other models and sizes scale by training FLOPs',
    },
    smallCnnImagesPerS: { value: cal.imagesPerSecPerPeer, unit: 'images/s', status: 'fitted', source: `${THIS_RUN}: the loopback runs' mean compute` },
    stragglerMean: {
      value: PREDICT_STRAGGLER, unit: 'mean slowdown a step', status: 'assumed',
      source: `real machines (GC, the OS, a shared GPU): the ${cal.stragglerMean.toFixed(3)} fitted here is 2-core contention`,
    },
    speedSigma: {
      value: PREDICT_SPEED_SIGMA, unit: 'lognormal sigma', status: 'assumed', source: 'volunteers\' speeds differ; slices follow speed, so it costs little',
    },
    softwareLatencyPerMessage: {
      value: cal.link.latencyS, unit: 's', status: 'fitted', source: `${THIS_RUN}: the loopback runs and the latency probes (a 1.5 KB gradient)`,
    },
    overheadPerStep: { value: cal.overheadS, unit: 's', status: 'fitted', source: `${THIS_RUN}: step - slowest compute - all-reduce` },
    overheadPerPeer: { value: cal.overheadPerPeerS, unit: 's at a whole machine', status: 'fitted', source: `${THIS_RUN}: as overheadPerStep, by share` },
    microBatchCost: {
      value: PREDICT_MICROBATCH_S, unit: 's', status: 'assumed',
      source: 'each micro-batch past a step\'s first on a real GPU (launches, a read-back); the straggler runs measure it on software WebGPU only',
    },
    gpuCopyRate: {
      value: PREDICT_GPU_COPY_BYTES_PER_S, unit: 'bytes/s', status: 'assumed',
      source: 'a real GPU reading the gradient back and taking the weights up each step; never measured (issue 42)',
    },
    resnet50BytesPerImage64: {
      value: RESNET50_IMAGE_BYTES[64]!, unit: 'bytes', status: 'measured', source: 'npm run bench -- fit (WebGPU, 2026-11-28, one run: docs/imagenet.md)',
    },
    resnet50BytesPerImage224: {
      value: RESNET50_IMAGE_BYTES[224]!, unit: 'bytes', status: 'measured', source: 'npm run bench -- fit (WebGPU, 2026-11-28, one run: docs/imagenet.md)',
    },
    heldPerParameter: {
      value: HELD_PER_PARAM_BYTES, unit: 'bytes', status: 'assumed', source: 'weights, gradient and the micro-batches\' sum in float32 on the device',
    },
    gpuBudget: {
      value: DEFAULT_GPU_BUDGET, unit: 'bytes', status: 'code', source: 'src/nn/fit.ts DEFAULT_GPU_BUDGET: a tab\'s GPU budget when nobody says more',
    },
    wireScale: {
      value: START_WIRE_SCALE, unit: 'bytes per float32 byte', status: 'code', source: 'bf16 frames, the wire of a job npm start creates (coordinator/main.ts)',
    },
    bucketBytes: { value: DEFAULT_BUCKET_BYTES, unit: 'bytes', status: 'code', source: 'src/nn/buckets.ts, all-reduced as backward completes them' },
    lastBucketBytes: { value: DEFAULT_LAST_BUCKET_BYTES, unit: 'bytes', status: 'code', source: 'src/nn/buckets.ts' },
    twoLevelFrom: { value: DEFAULT_TWO_LEVEL_FROM, unit: 'peers', status: 'code', source: 'coordinator/two-level.ts' },
    meanSessionS: { value: CHURN.meanSessionS, unit: 's', status: 'assumed', source: 'how long a volunteer stays; not measured' },
    lossDetectS: { value: CHURN.detectS, unit: 's', status: 'assumed', source: 'a lost peer to the next generation running' },
    joinS: { value: CHURN.joinS, unit: 's', status: 'assumed', source: 'admission at a step boundary' },
  };
  if (inp.hostUpdateS) {
    t.hostUpdateResnet50 = {
      value: inp.hostUpdateS.resnet50, unit: 's', status: 'measured', source: `${THIS_RUN}: bench/scaling-update.ts, host LARS + checksum, this CPU`,
    };
    t.hostUpdateSmallCnn = {
      value: inp.hostUpdateS.small, unit: 's', status: 'measured', source: `${THIS_RUN}: the same for the small CNN (in the fitted overhead)`,
    };
  }
  for (const l of inp.links) {
    t[`link_${l.key}`] = {
      value: l.bytesPerS, unit: 'bytes/s each way', status: l.status,
      source: l.status === 'assumed' && transportMissing && l.key.startsWith('1g') ? `${l.source}: ${transportMissing}` : l.source,
    };
  }
  return t;
}
