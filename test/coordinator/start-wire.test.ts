// npm start --wire, --lars-biases and --momentum-carry: listed in --help, and a value it does not know is
// refused saying what it takes, before any data is loaded or a job folder touched.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_JOB, DEFAULT_VERIFY, defaultWarmup, readCarry, readSyncEvery, readVerify, START_OUTER, START_USAGE, startMain,
} from '../../coordinator/main.ts';

describe('npm start --wire', () => {
  it('is listed in the usage with its default', () => {
    expect(START_USAGE).toMatch(/--wire f32\|f16\|bf16\|i8 +the number format of the all-reduce between peers: bf16 \(default for a/);
  });

  it('refuses an unknown format, naming the allowed ones', async () => {
    await expect(startMain(['--wire', 'f8'])).rejects.toThrow('--wire must be one of f32, f16, bf16, i8; got "f8"');
    await expect(startMain(['--wire'])).rejects.toThrow('--wire must be one of f32, f16, bf16, i8; got "true"');
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
    for (const bad of ['1', '-0.1', 'x', '', 'NaN']) expect(() => readCarry(bad)).toThrow(
      /--momentum-carry takes a number in \[0, 1\) \(default 0\.75\) or 'own'/,
    );
    await expect(startMain(['--sync-every', '8', '--momentum-carry', '1.5'])).rejects.toThrow(
      "--momentum-carry takes a number in [0, 1) (default 0.75) or 'own', got '1.5'",
    );
  });
});

describe('npm start --sync-every', () => {
  it('is auto beyond loopback (1 on loopback, and with the i8 wire), takes a number or auto, and refuses anything else', async () => {
    expect(START_USAGE).toMatch(/--sync-every H\|auto .*\n(.*\n){4}.*\(default: auto with --host beyond loopback, else 1\)/);
    expect(readSyncEvery('', '127.0.0.1', 'bf16')).toBe(1);
    expect(readSyncEvery('', 'localhost', 'bf16')).toBe(1);
    expect(readSyncEvery('', '0.0.0.0', 'bf16')).toBe('auto');
    expect(readSyncEvery('', '10.1.2.3', 'i8')).toBe(1);
    expect(readSyncEvery('auto', '127.0.0.1', 'bf16')).toBe('auto');
    expect(readSyncEvery('8', '0.0.0.0', 'bf16')).toBe(8);
    for (const bad of ['0', '1.5', 'fast', '2000']) expect(() => readSyncEvery(bad, '0.0.0.0', 'bf16')).toThrow(
      /--sync-every must be auto or a whole number of steps in \[1, 1024\]/,
    );
    await expect(startMain(['--sync-every', 'often'])).rejects.toThrow('--sync-every must be auto or a whole number of steps in [1, 1024], got "often"');
  });
});

describe('npm start --verify', () => {
  const job = { host: '0.0.0.0', wire: 'bf16' as const, syncEvery: 'auto' as const, momentumCarry: 0.75, steal: 'auto' as const };

  it('is auto: 0.05 where strangers can join (beyond loopback), off on loopback; a share or off as given', () => {
    expect(START_USAGE).toMatch(/--verify auto\|off\|F .*\n(.*\n){1}.*\(default auto: 0\.05\n.*with --host beyond loopback, else off/);
    expect(DEFAULT_VERIFY).toBe(0.05);
    expect(readVerify('auto', job)).toEqual({ verify: 0.05, note: null });
    expect(readVerify('auto', { ...job, host: '10.1.2.3', syncEvery: 1 })).toEqual({ verify: 0.05, note: null });
    expect(readVerify('auto', { ...job, host: '127.0.0.1' })).toEqual({ verify: 0, note: null });
    expect(readVerify('auto', { ...job, host: 'localhost' })).toEqual({ verify: 0, note: null });
    expect(readVerify('0.2', { ...job, host: '127.0.0.1' })).toEqual({ verify: 0.2, note: null });
    expect(readVerify('off', job)).toEqual({ verify: 0, note: null });
  });

  it('auto says why it is off where the job rules it out (the i8 wire, rounds without the carry, explicit stealing)', () => {
    expect(readVerify('auto', { ...job, wire: 'i8', syncEvery: 1 }).note).toMatch(/^donors' work is not verified: the i8 wire \(use --wire bf16 to verify\)/);
    expect(readVerify('auto', { ...job, momentumCarry: undefined }).note).toMatch(/rounds without the momentum carry \(drop --momentum-carry own/);
    expect(readVerify('auto', { ...job, steal: 0.5 })).toEqual({ verify: 0, note: expect.stringMatching(/--steal 0\.5 \(drop it to verify\)/) as unknown });
    // Rounds with the carry, and steal auto (which a verified job turns off) or off, verify.
    expect(readVerify('auto', { ...job, steal: 0 }).verify).toBe(0.05);
  });

  it('refuses anything else saying what it takes', async () => {
    for (const bad of ['', 'sometimes', '1.5', '-0.1']) {
      expect(() => readVerify(bad, job)).toThrow(/--verify must be auto, off or a share in \[0, 1\] of the members audited each step/);
    }
    await expect(startMain(['--verify', 'always'])).rejects.toThrow(
      '--verify must be auto, off or a share in [0, 1] of the members audited each step, got "always"',
    );
  });
});

describe("npm start's default job", () => {
  it('is LARS at lr 12 with two warm-up epochs (what the converge search picks); SGD and the recipes warm up as before', () => {
    expect(DEFAULT_JOB).toMatchObject({ batch: 512, epochs: 11, larsLr: 12, larsWarmupEpochs: 2 });
    expect(START_USAGE).toMatch(/--lr X \(default 12 for LARS, 0\.2 for SGD/);
    // CIFAR-10 at B = 512: 97 steps an epoch, 1,067 in 11 epochs.
    expect(defaultWarmup('lars', null, 97, 1067)).toBe(194);
    expect(defaultWarmup('sgd', null, 97, 1067)).toBe(97);
    // Short jobs: at most a fifth (LARS) or a tenth (SGD) of their steps.
    expect(defaultWarmup('lars', null, 97, 100)).toBe(20);
    expect(defaultWarmup('sgd', null, 97, 100)).toBe(10);
    // A recipe's epochs, at most a tenth of the job.
    expect(defaultWarmup('lars', 5, 1000, 90_000)).toBe(5000);
    expect(defaultWarmup('lars', 5, 1000, 20_000)).toBe(2000);
  });
});

describe('npm start --steal', () => {
  it('is listed in the usage with its default, and a value it does not know is refused before any data loads', async () => {
    expect(START_USAGE).toMatch(/--steal auto\|off\|F +work stealing: .*\n(.*\n){1,2}.* auto \(default\): 0\.75 on\n.*measured it faster/);
    await expect(startMain(['--steal', 'sometimes'])).rejects.toThrow('--steal must be auto, off or a number in [0, 0.75], got "sometimes"');
    await expect(startMain(['--steal', '0.8'])).rejects.toThrow('--steal must be auto, off or a number in [0, 0.75], got "0.8"');
    await expect(startMain(['--steal', ''])).rejects.toThrow('--steal must be auto, off or a number in [0, 0.75], got ""');
  });
});
