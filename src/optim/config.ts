// The optimiser config a job carries, as plain data: parsed from untrusted JSON with every
// field checked, defaults filled in (DESIGN.md's recipe: eta 0.001, m 0.9, beta 5e-4), and
// unknown fields rejected so a typo ("weight_decay") cannot silently fall back to a default.
import { OptimError } from './errors.ts';
import type { OptimizerConfig } from './types.ts';

/** Fields with defaults; kind, lr and totalSteps have none. */
export const OPTIMIZER_DEFAULTS = {
  momentum: 0.9,
  weightDecay: 5e-4,
  eta: 0.001,
  nesterov: false,
  schedule: 'poly',
  warmupSteps: 0,
  warmupStartFactor: 0,
  power: 2,
  stepMilestones: [] as number[],
  stepFactor: 0.1,
  biasTrust: 'global',
} as const satisfies Partial<OptimizerConfig>;

const KEYS: readonly (keyof OptimizerConfig)[] = ['kind', 'lr', 'totalSteps', ...(Object.keys(OPTIMIZER_DEFAULTS) as (keyof OptimizerConfig)[])];

const bad = (detail: string): OptimError => new OptimError('bad-config', detail);

function num(o: Record<string, unknown>, key: keyof OptimizerConfig, ok: (v: number) => boolean, rule: string): number {
  const v = o[key] ?? (OPTIMIZER_DEFAULTS as Record<string, unknown>)[key];
  if (v === undefined) throw bad(`${key} is required (${rule})`);
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw bad(`${key} must be ${rule}, got ${JSON.stringify(v)}`);
  return v;
}

function oneOf<T extends string>(o: Record<string, unknown>, key: keyof OptimizerConfig, options: readonly T[]): T {
  const v = o[key] ?? (OPTIMIZER_DEFAULTS as Record<string, unknown>)[key];
  const found = options.find((x) => x === v);
  if (found === undefined) throw bad(`${key} must be one of ${options.map((x) => `'${x}'`).join(', ')}, got ${JSON.stringify(v)}`);
  return found;
}

const isInt = (v: number): boolean => Number.isInteger(v);

export function parseOptimizerConfig(input: unknown): OptimizerConfig {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw bad(`expected an object, got ${JSON.stringify(input)}`);
  const o = input as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !(KEYS as readonly string[]).includes(k));
  if (unknown.length > 0) throw bad(`unknown field(s) ${unknown.join(', ')}; the fields are ${KEYS.join(', ')}`);

  const kind = oneOf(o, 'kind', ['lars', 'sgd'] as const);
  const warmupSteps = num(o, 'warmupSteps', (v) => isInt(v) && v >= 0, 'an integer >= 0');
  const totalSteps = num(o, 'totalSteps', (v) => isInt(v) && v > warmupSteps, `an integer > warmupSteps (${warmupSteps})`);
  const momentum = num(o, 'momentum', (v) => v >= 0 && v < 1, 'in [0, 1)');
  const nesterov = o.nesterov ?? OPTIMIZER_DEFAULTS.nesterov;
  if (typeof nesterov !== 'boolean') throw bad(`nesterov must be true or false, got ${JSON.stringify(nesterov)}`);
  if (nesterov && kind !== 'sgd') throw bad("nesterov is only implemented for kind 'sgd'");

  const milestones = o.stepMilestones ?? OPTIMIZER_DEFAULTS.stepMilestones;
  if (!Array.isArray(milestones) || !milestones.every((m, i) => typeof m === 'number' && isInt(m) && m > warmupSteps && m < totalSteps
    && (i === 0 || m > (milestones[i - 1] as number)))) {
    throw bad(`stepMilestones must be increasing integers in (warmupSteps, totalSteps) = (${warmupSteps}, ${totalSteps}), got ${JSON.stringify(milestones)}`);
  }
  return {
    kind,
    lr: num(o, 'lr', (v) => v > 0, 'a number > 0'),
    momentum,
    weightDecay: num(o, 'weightDecay', (v) => v >= 0, 'a number >= 0'),
    eta: num(o, 'eta', (v) => v > 0, 'a number > 0'),
    nesterov,
    schedule: oneOf(o, 'schedule', ['poly', 'constant', 'step'] as const),
    warmupSteps,
    warmupStartFactor: num(o, 'warmupStartFactor', (v) => v >= 0 && v <= 1, 'in [0, 1]'),
    totalSteps,
    power: num(o, 'power', (v) => v > 0, 'a number > 0'),
    stepMilestones: [...(milestones as number[])],
    stepFactor: num(o, 'stepFactor', (v) => v > 0 && v <= 1, 'in (0, 1]'),
    biasTrust: oneOf(o, 'biasTrust', ['global', 'layer'] as const),
  };
}
