// The converge bench refuses a model it cannot train on CIFAR-10 before it loads any data.
import { describe, expect, it } from 'vitest';
import { main } from '../../bench/converge.ts';

describe('converge bench arguments', () => {
  it('refuses a model that is not a CIFAR-10 model, naming the ones it can train', async () => {
    await expect(main(['--model=alexnet'])).rejects.toThrow(/--model must be one of small-cnn, small-cnn-bn, resnet20; got "alexnet"/);
    await expect(main(['--model=nope'])).rejects.toThrow(/--model must be one of .*; got "nope"/);
  });
});
