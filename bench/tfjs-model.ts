// The same ModelSpec (src/nn/graph.ts) trained with TF.js ops, for the `step` benchmark's
// peer. TF.js prefers NHWC, so it runs in its own layout; shapes and FLOPs are the same.
import type { ModelSpec } from '../src/nn/graph.ts';
import { layoutOf } from '../src/nn/layout.ts';
import { tf } from './tfjs-webgpu.ts';

export interface TfModel {
  /** One SGD-with-momentum step on (x, onehot labels); returns the mean loss tensor. */
  step(x: tf.Tensor4D, y: tf.Tensor2D): tf.Scalar;
  dispose(): void;
}

export function tfModel(spec: ModelSpec, lr: number): TfModel {
  const layout = layoutOf(spec);
  const vars = new Map<string, tf.Variable>();
  for (const p of layout.params) {
    // NHWC conv weights are [KH, KW, Cin, Cout]; linear weights [out, in] as ours (matMul transB).
    const shape = p.shape.length === 4 ? [p.shape[2]!, p.shape[3]!, p.shape[1]!, p.shape[0]!] : p.shape;
    const init = p.role === 'weight' ? tf.randomNormal(shape, 0, Math.sqrt(2 / p.fanIn)) : p.role === 'bn-gamma' ? tf.ones(shape) : tf.zeros(shape);
    vars.set(`${p.node}.${p.role}`, tf.variable(init));
  }
  const v = (node: number, role: string) => vars.get(`${node}.${role}`)!;
  const opt = tf.train.momentum(lr, 0.9);
  const forward = (x: tf.Tensor4D): tf.Tensor2D => {
    const out: tf.Tensor[] = [x];
    spec.nodes.forEach((n, i) => {
      if (n.op === 'input') return;
      const xin = n.op === 'add' ? out[n.a]! : out[n.in]!;
      let y: tf.Tensor;
      switch (n.op) {
        case 'conv':
          y = tf.conv2d(xin as tf.Tensor4D, v(i, 'weight') as tf.Tensor4D, n.stride, [[0, 0], [n.pad, n.pad], [n.pad, n.pad], [0, 0]]);
          if (n.bias) y = tf.add(y, v(i, 'bias'));
          break;
        case 'linear':
          y = tf.matMul(xin as tf.Tensor2D, v(i, 'weight') as tf.Tensor2D, false, true);
          if (n.bias) y = tf.add(y, v(i, 'bias'));
          break;
        case 'bn': {
          const axes = xin.rank === 4 ? [0, 1, 2] : [0];
          const { mean, variance } = tf.moments(xin, axes);
          y = tf.batchNorm(xin, mean, variance, v(i, 'bn-beta'), v(i, 'bn-gamma'), 1e-5);
          break;
        }
        case 'relu': y = tf.relu(xin); break;
        case 'maxpool': y = tf.maxPool(xin as tf.Tensor4D, n.k, n.stride, n.pad === 0 ? 'valid' : n.pad); break;
        case 'avgpool': y = tf.avgPool(xin as tf.Tensor4D, n.k, n.stride, n.pad === 0 ? 'valid' : n.pad); break;
        case 'gap': y = tf.mean(xin, [1, 2]); break;
        case 'lrn':
          y = tf.localResponseNormalization(xin as tf.Tensor4D, (n.params.size - 1) / 2, n.params.k, n.params.alpha / n.params.size, n.params.beta);
          break;
        case 'dropout': y = tf.dropout(xin, n.p); break;
        case 'add': y = tf.add(xin, out[n.b]!); break;
        case 'flatten': y = tf.reshape(xin, [xin.shape[0]!, -1]); break;
      }
      out.push(y);
    });
    return out[out.length - 1] as tf.Tensor2D;
  };
  return {
    step(x, y) {
      return opt.minimize(() => tf.losses.softmaxCrossEntropy(y, forward(x)) as tf.Scalar, true) as tf.Scalar;
    },
    dispose() {
      for (const t of vars.values()) t.dispose();
      opt.dispose();
    },
  };
}

/**
 * The peer's timed training: `steps` steps (after 2 warm-up steps) of the model in TF.js on
 * whichever backend is active, on one fixed NCHW batch of the spec's input shape, the loss read back each step.
 */
export async function timeTfTraining(
  spec: ModelSpec, x: Float32Array, labels: Int32Array, batch: number, steps: number,
): Promise<{ ms: number[]; loss: number[] }> {
  const tm = tfModel(spec, 0.01);
  const X = tf.transpose(tf.tensor4d(x, [batch, ...spec.input]), [0, 2, 3, 1]) as tf.Tensor4D;
  const Y = tf.cast(tf.oneHot(tf.tensor1d(labels, 'int32'), spec.classes), 'float32') as tf.Tensor2D;
  const ms: number[] = [], loss: number[] = [];
  for (let s = 0; s < steps + 2; s++) {
    const t0 = performance.now();
    const l = tm.step(X, Y);
    const v = (await l.data())[0]!;
    l.dispose();
    if (s >= 2) { ms.push(performance.now() - t0); loss.push(v); }
  }
  tm.dispose();
  tf.dispose([X, Y]);
  return { ms, loss };
}
