// npm start --wire, --lars-biases and --momentum-carry: listed in --help, and a value it does not know is
// refused saying what it takes, before any data is loaded or a job folder touched.
import { describe, expect, it } from 'vitest';
import { readCarry, START_OUTER, START_USAGE, startMain } from '../../coordinator/main.ts';

describe('npm start --wire', () => {
  it('is listed in the usage with its default', () => {
    expect(START_USAGE).toMatch(/--wire f32\|f16\|bf16 +the number format of the all-reduce between peers: bf16 \(default for a/);
  });

  it('refuses an unknown format, naming the allowed ones', async () => {
    await expect(startMain(['--wire', 'f8'])).rejects.toThrow('--wire must be one of f32, f16, bf16; got "f8"');
    await expect(startMain(['--wire'])).rejects.toThrow('--wire must be one of f32, f16, bf16; got "true"');
  });
});

describe('npm start --lars-biases', () => {
  it('is listed in the usage, and a value it does not know is refused before any data loads', async () => {
    expect(START_USAGE).toMatch(/--lars-biases layer\|global +LARS: a bias steps at its layer weight's trust ratio \(default\) or at/);
    await expect(startMain(['--lars-biases', 'own'])).rejects.toThrow('--lars-biases must be one of layer, global; got "own"');
  });
});

describe('npm start --momentum-carry', () => {
  it('is listed in the usage with its default, and rounds default to plain averaging with the carry', () => {
    expect(START_USAGE).toMatch(/--momentum-carry R\|own +with rounds: .*\n.*\n.*\(default 0\.75\); own: each peer keeps its own \(DiLoCo\)/);
    expect(START_OUTER).toEqual({ lr: 1, momentum: 0, carry: 0.75 });
  });

  it('takes a number in [0, 1) or own, and refuses anything else saying what it takes', async () => {
    expect(readCarry('0.5')).toBe(0.5);
    expect(readCarry('0')).toBe(0);
    expect(readCarry('own')).toBeUndefined();
    for (const bad of ['1', '-0.1', 'x', '', 'NaN']) expect(() => readCarry(bad)).toThrow(/--momentum-carry takes a number in \[0, 1\) \(default 0\.75\) or 'own'/);
    await expect(startMain(['--sync-every', '8', '--momentum-carry', '1.5'])).rejects.toThrow("--momentum-carry takes a number in [0, 1) (default 0.75) or 'own', got '1.5'");
  });
});
