import { describe, expect, it } from 'vitest';
import { parseOptimizerConfig } from '../../src/optim/config.ts';
import { OptimError } from '../../src/optim/errors.ts';

function rejects(input: unknown, pattern: RegExp): void {
  let err: unknown;
  try {
    parseOptimizerConfig(input);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(OptimError);
  expect((err as OptimError).kind).toBe('bad-config');
  expect((err as OptimError).message).toMatch(pattern);
}

describe('parseOptimizerConfig', () => {
  it('fills the recipe defaults (eta 0.001, m 0.9, beta 5e-4, poly power 2)', () => {
    expect(parseOptimizerConfig({ kind: 'lars', lr: 5, totalSteps: 1000 })).toEqual({
      kind: 'lars', lr: 5, momentum: 0.9, weightDecay: 5e-4, eta: 0.001, nesterov: false, schedule: 'poly',
      warmupSteps: 0, warmupStartFactor: 0, totalSteps: 1000, power: 2, stepMilestones: [], stepFactor: 0.1, biasTrust: 'global',
    });
  });

  it('keeps given values', () => {
    const c = parseOptimizerConfig({
      kind: 'sgd', lr: 0.1, totalSteps: 90, momentum: 0, weightDecay: 1e-4, nesterov: true, schedule: 'step', stepMilestones: [30, 60], warmupSteps: 5,
    });
    expect(c).toMatchObject({ kind: 'sgd', momentum: 0, weightDecay: 1e-4, nesterov: true, schedule: 'step', stepMilestones: [30, 60], warmupSteps: 5 });
  });

  it('says which field is wrong', () => {
    rejects(null, /expected an object/);
    rejects({ kind: 'adam', lr: 1, totalSteps: 10 }, /kind must be one of 'lars', 'sgd'/);
    rejects({ kind: 'lars', totalSteps: 10 }, /lr is required/);
    rejects({ kind: 'lars', lr: 1 }, /totalSteps is required/);
    rejects({ kind: 'lars', lr: -1, totalSteps: 10 }, /lr must be a number > 0/);
    rejects({ kind: 'lars', lr: '1', totalSteps: 10 }, /lr must be/);
    rejects({ kind: 'lars', lr: 1, totalSteps: 10, momentum: 1 }, /momentum must be in \[0, 1\)/);
    rejects({ kind: 'lars', lr: 1, totalSteps: 10, warmupSteps: 10 }, /totalSteps must be an integer > warmupSteps \(10\)/);
    rejects({ kind: 'lars', lr: 1, totalSteps: 10, weight_decay: 0 }, /unknown field\(s\) weight_decay/);
    rejects({ kind: 'lars', lr: 1, totalSteps: 10, nesterov: true }, /nesterov is only implemented for kind 'sgd'/);
    rejects({ kind: 'sgd', lr: 1, totalSteps: 10, nesterov: 'yes' }, /nesterov must be true or false/);
    rejects({ kind: 'sgd', lr: 1, totalSteps: 10, schedule: 'step', stepMilestones: [5, 3] }, /stepMilestones must be increasing/);
    rejects({ kind: 'sgd', lr: 1, totalSteps: 10, stepMilestones: [10] }, /stepMilestones/);
    rejects({ kind: 'sgd', lr: 1, totalSteps: 10, eta: Infinity }, /eta must be a number > 0/);
    rejects({ kind: 'lars', lr: 1, totalSteps: 10, biasTrust: 'own' }, /biasTrust must be one of 'global', 'layer', got "own"/);
  });
});
