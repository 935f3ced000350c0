// The models, each described once as a node list (src/nn/graph.ts).
import { ALEXNET_LRN } from '../shapes/lrn.ts';
import { GraphBuilder, type ModelSpec } from './graph.ts';

export type ModelName = 'small-cnn' | 'small-cnn-bn' | 'tiny-cnn' | 'resnet20' | 'alexnet' | 'alexnet-bn' | 'resnet50';
export const MODEL_NAMES: readonly ModelName[] = ['small-cnn', 'small-cnn-bn', 'tiny-cnn', 'resnet20', 'alexnet', 'alexnet-bn', 'resnet50'];

/** The demo network for 28x28 and 32x32 images: three conv blocks and two linear layers. */
export function smallCnn(input: readonly [number, number, number] = [3, 32, 32], classes = 10): ModelSpec {
  return smallCnnOf(false, input, classes);
}

/**
 * The small CNN with batch normalisation after each conv (its convs then carry no bias), as
 * AlexNet-BN is AlexNet with BN: the network the seed paper's large-batch LARS result is about
 * (the converge bench's model, bench/converge.ts).
 */
export function smallCnnBn(input: readonly [number, number, number] = [3, 32, 32], classes = 10): ModelSpec {
  return smallCnnOf(true, input, classes);
}

function smallCnnOf(bn: boolean, input: readonly [number, number, number], classes: number): ModelSpec {
  const g = new GraphBuilder();
  let x = g.input;
  [32, 64, 128].forEach((c, i) => {
    const name = `conv${i + 1}`;
    x = g.maxpool(bn ? convBn(g, x, name, c, 3, 1, true) : g.relu(g.conv(x, name, c, 3, { pad: 1 })), 2, 2);
  });
  x = g.relu(g.linear(g.flatten(x), 'fc1', 256));
  g.linear(x, 'fc2', classes);
  return { name: bn ? 'small-cnn-bn' : 'small-cnn', input, classes, nodes: g.nodes };
}

/**
 * A few hundred parameters (170 on MNIST, 314 on CIFAR): one 3x3 stride-2 conv of 8 channels,
 * ReLU, global average pooling, a linear layer. For endurance runs of many simulated peers
 * (bench/churn.ts), where the protocol is under test and the model only has to be cheap.
 */
export function tinyCnn(input: readonly [number, number, number] = [3, 32, 32], classes = 10): ModelSpec {
  const g = new GraphBuilder();
  const x = g.gap(g.relu(g.conv(g.input, 'conv1', 8, 3, { stride: 2, pad: 1 })));
  g.linear(x, 'fc', classes);
  return { name: 'tiny-cnn', input, classes, nodes: g.nodes };
}

/** conv -> BN (-> ReLU): the ResNet unit. Convs before BN carry no bias. */
function convBn(g: GraphBuilder, x: number, name: string, c: number, k: number, stride: number, relu: boolean): number {
  const y = g.bn(g.conv(x, name, c, k, { stride, pad: (k - 1) >> 1, bias: false }), `${name}.bn`);
  return relu ? g.relu(y) : y;
}

/**
 * ResNet-20 for CIFAR (He et al. 2016, section 4.2): 3 stages of 3 basic blocks with 16, 32,
 * 64 channels. Shortcuts that change shape use a 1x1 conv + BN projection (option B) instead
 * of zero padding (option A), since we have no channel-pad op; that adds ~3k parameters.
 */
export function resnet20(input: readonly [number, number, number] = [3, 32, 32], classes = 10): ModelSpec {
  const g = new GraphBuilder();
  let x = convBn(g, g.input, 'conv1', 16, 3, 1, true);
  let cin = 16;
  [16, 32, 64].forEach((c, s) => {
    for (let b = 0; b < 3; b++) {
      const stride = s > 0 && b === 0 ? 2 : 1;
      const name = `layer${s + 1}.${b}`;
      const y = convBn(g, convBn(g, x, `${name}.conv1`, c, 3, stride, true), `${name}.conv2`, c, 3, 1, false);
      const short = stride !== 1 || cin !== c ? convBn(g, x, `${name}.down`, c, 1, stride, false) : x;
      x = g.relu(g.add(y, short));
      cin = c;
    }
  });
  g.linear(g.gap(x), 'fc', classes);
  return { name: 'resnet20', input, classes, nodes: g.nodes };
}

/** Inputs smaller than this get the downsampled-ImageNet stems below (Chrabaszcz et al. 2017 train at 32-64 px). */
export const SMALL_INPUT = 128;

/**
 * AlexNet at 224x224 as in torchvision (64-192-384-256-256 channels, no grouped convs:
 * 61,100,840 parameters) with the original's local response normalisation after conv1 and
 * conv2. With `bn`, AlexNet-BN as in the LARS paper: BN after every conv instead of LRN.
 * Below 128x128 (downsampled ImageNet) conv1 is 7x7 stride 2 instead of 11x11 stride 4: at
 * 64x64 the original stem would leave a 1x1 map after the last pool; this one leaves 3x3.
 */
export function alexnet(bn = false, classes = 1000, input: readonly [number, number, number] = [3, 224, 224]): ModelSpec {
  const g = new GraphBuilder();
  const block = (x: number, name: string, c: number, k: number, stride: number, pad: number, lrn: boolean) => {
    let y = g.conv(x, name, c, k, { stride, pad, bias: !bn });
    if (bn) y = g.bn(y, `${name}.bn`);
    y = g.relu(y);
    return lrn && !bn ? g.lrn(y, ALEXNET_LRN) : y;
  };
  const small = Math.min(input[1], input[2]) < SMALL_INPUT;
  let x = g.maxpool(small ? block(g.input, 'conv1', 64, 7, 2, 3, true) : block(g.input, 'conv1', 64, 11, 4, 2, true), 3, 2);
  x = g.maxpool(block(x, 'conv2', 192, 5, 1, 2, true), 3, 2);
  x = block(x, 'conv3', 384, 3, 1, 1, false);
  x = block(x, 'conv4', 256, 3, 1, 1, false);
  x = g.maxpool(block(x, 'conv5', 256, 3, 1, 1, false), 3, 2);
  x = g.flatten(x);
  x = g.relu(g.linear(g.dropout(x, 0.5), 'fc6', 4096));
  x = g.relu(g.linear(g.dropout(x, 0.5), 'fc7', 4096));
  g.linear(x, 'fc8', classes);
  return { name: bn ? 'alexnet-bn' : 'alexnet', input, classes, nodes: g.nodes };
}

/**
 * ResNet-50 (v1.5: stride on the 3x3 conv), 25,557,032 parameters at 1000 classes. Below
 * 128x128 the stem is a 3x3 stride-1 conv before the max pool (instead of 7x7 stride 2), so a
 * 64x64 image reaches the first stage at 32x32 and the last at 4x4, as a 128x128 one does.
 */
export function resnet50(classes = 1000, input: readonly [number, number, number] = [3, 224, 224]): ModelSpec {
  const g = new GraphBuilder();
  const small = Math.min(input[1], input[2]) < SMALL_INPUT;
  let x = g.maxpool(convBn(g, g.input, 'conv1', 64, small ? 3 : 7, small ? 1 : 2, true), 3, 2, 1);
  [[64, 3], [128, 4], [256, 6], [512, 3]].forEach(([w, blocks], s) => {
    for (let b = 0; b < blocks!; b++) {
      const stride = s > 0 && b === 0 ? 2 : 1;
      const name = `layer${s + 1}.${b}`;
      let y = convBn(g, x, `${name}.conv1`, w!, 1, 1, true);
      y = convBn(g, y, `${name}.conv2`, w!, 3, stride, true);
      y = convBn(g, y, `${name}.conv3`, w! * 4, 1, 1, false);
      const short = b === 0 ? convBn(g, x, `${name}.down`, w! * 4, 1, stride, false) : x;
      x = g.relu(g.add(y, short));
    }
  });
  g.linear(g.gap(x), 'fc', classes);
  return { name: 'resnet50', input, classes, nodes: g.nodes };
}

export function modelByName(name: ModelName, input?: readonly [number, number, number], classes?: number): ModelSpec {
  switch (name) {
    case 'small-cnn': return smallCnn(input, classes);
    case 'small-cnn-bn': return smallCnnBn(input, classes);
    case 'tiny-cnn': return tinyCnn(input, classes);
    case 'resnet20': return resnet20(input, classes);
    case 'alexnet': return alexnet(false, classes, input);
    case 'alexnet-bn': return alexnet(true, classes, input);
    case 'resnet50': return resnet50(classes, input);
  }
}
