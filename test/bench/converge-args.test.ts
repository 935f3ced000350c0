// The converge bench refuses a model it cannot train on CIFAR-10, or a search length that is
// not a whole number of epochs, a LARS weight decay below 0 or a noise-scale measurement it
// cannot make, before it loads any data.
import { describe, expect, it } from 'vitest';
import { main } from '../../bench/converge.ts';

describe('converge bench arguments', () => {
  it('refuses a model that is not a CIFAR-10 model, naming the ones it can train', async () => {
    await expect(main(['--model=alexnet'])).rejects.toThrow(/--model must be one of small-cnn, small-cnn-bn, resnet20; got "alexnet"/);
    await expect(main(['--model=nope'])).rejects.toThrow(/--model must be one of .*; got "nope"/);
  });

  it('refuses a search length that is not a whole number of epochs, before any data loads', async () => {
    await expect(main(['--lars-search-epochs=2.5'])).rejects.toThrow(/--lars-search-epochs must be whole numbers/);
    await expect(main(['--lars-search-epochs=0'])).rejects.toThrow(/--lars-search-epochs must be a positive number, got --lars-search-epochs=0/);
  });

  it('refuses a LARS weight decay that is not a number >= 0, before any data loads', async () => {
    await expect(main(['--lars-wd=-1e-4'])).rejects.toThrow(/--lars-wd must be a number >= 0 \(LARS's weight decay\), got --lars-wd=-1e-4/);
    await expect(main(['--lars-wd=x'])).rejects.toThrow(/--lars-wd must be a number >= 0/);
    await expect(main(['--lars-wd='])).rejects.toThrow(/--lars-wd must be a number >= 0/);
  });

  it('refuses a LARS bias rate other than layer or global, before any data loads', async () => {
    await expect(main(['--lars-biases=own'])).rejects.toThrow(/--lars-biases must be one of layer, global; got "own"/);
  });

  it('refuses a noise-scale measurement on fewer than 2 batches or on more images than the training split, before any data loads', async () => {
    await expect(main(['--noise-scale=1'])).rejects.toThrow(/--noise-scale=K needs a whole number K >= 2 of small batches to measure on, got --noise-scale=1/);
    await expect(main(['--noise-scale=2.5'])).rejects.toThrow(/needs a whole number K >= 2/);
    await expect(main(['--noise-scale='])).rejects.toThrow(/needs a whole number K >= 2/);
    await expect(main(['--noise-scale=4000'])).rejects.toThrow(/--noise-scale=4000: 4000 batches of 16 exceed the 50000 training images/);
  });
});
