// The volunteer's step machine (src/client/step-machine.ts): its table is the drawing in
// docs/architecture.md, arrow for arrow and label for label, and it refuses any other transition.
// The transitions a real volunteer takes through its steps and rounds are named in
// volunteer-prefetch.test.ts; the failure path (SyncAllReduce -> Aborted) in training.test.ts's kill.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { STEP_TRANSITIONS, StepMachine, allowed, type PhaseChange, type StepPhase } from '../../src/client/step-machine.ts';
import { StateError } from '../../src/client/state.ts';

/** The arrows inside the drawing's `state InSession { ... }` block, as "from --> to: label". */
function drawnArrows(): string[] {
  const doc = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8').split('\n');
  const start = doc.findIndex((l) => l.trim() === 'state InSession {');
  expect(start, 'docs/architecture.md draws the volunteer step as `state InSession {`').toBeGreaterThan(0);
  const end = doc.findIndex((l, i) => i > start && l.trim() === '}');
  return doc.slice(start + 1, end).map((l) => l.trim()).filter((l) => /^\w+ --> \w+: /.test(l));
}

describe('the step machine', () => {
  it('holds exactly the transitions drawn in docs/architecture.md, with their labels, in their order', () => {
    expect(STEP_TRANSITIONS.map((x) => `${x.from} --> ${x.to}: ${x.on}`)).toEqual(drawnArrows());
  });

  it('reaches every phase from NoState, and every phase leads on to another', () => {
    const phases = new Set<StepPhase>(STEP_TRANSITIONS.flatMap((x) => [x.from, x.to]));
    const seen = new Set<StepPhase>(['NoState']);
    for (let grew = true; grew;) {
      grew = false;
      for (const x of STEP_TRANSITIONS) if (seen.has(x.from) && !seen.has(x.to)) { seen.add(x.to); grew = true; }
    }
    expect([...seen].sort()).toEqual([...phases].sort());
    for (const p of phases) expect(STEP_TRANSITIONS.some((x) => x.from === p && x.to !== p), `${p} leads on`).toBe(true);
  });

  it('a sync step: Ready -> SyncPrepare -> SyncCompute -> SyncAllReduce -> SyncApply -> Reporting -> Ready, each told once', () => {
    const told: PhaseChange[] = [];
    const m = new StepMachine((c) => told.push(c));
    const path: StepPhase[] = ['Loading', 'Ready', 'SyncPrepare', 'SyncCompute', 'SyncAllReduce', 'SyncApply', 'Reporting', 'Ready'];
    for (const p of path) m.go(p, 4);
    expect(m.phase).toBe('Ready');
    expect(told.map((c) => c.to)).toEqual(path);
    expect(told.every((c) => c.step === 4)).toBe(true);
    // A phase to itself (a grant, a hearing) changes nothing and is not told.
    m.go('Ready', 5);
    expect(told).toHaveLength(path.length);
    expect(m.trail()).toContain('Reporting -> Ready (step 5)');
  });

  it('the failure path: SyncAllReduce -> Aborted carries its reason; the re-run starts from Aborted', () => {
    const told: PhaseChange[] = [];
    const m = new StepMachine((c) => told.push(c));
    for (const p of ['Loading', 'Ready', 'SyncPrepare', 'SyncCompute', 'SyncAllReduce'] as const) m.go(p, 2);
    m.go('Aborted', 2, 'the all-reduce failed: the link to b closed');
    expect(told.at(-1)).toEqual({ from: 'SyncAllReduce', to: 'Aborted', step: 2, why: 'the all-reduce failed: the link to b closed' });
    expect(allowed('Aborted', 'SyncPrepare')).toBe(true);
    m.go('SyncPrepare', 2);
    expect(m.phase).toBe('SyncPrepare');
  });

  it('refuses a transition the table does not hold, naming both phases, the step and the trail, and stays where it was', () => {
    const m = new StepMachine();
    // A step before any state was loaded, a report with no apply, an upload in the middle of a step.
    const go = (to: StepPhase, step: number) => () => m.go(to, step);
    expect(go('SyncPrepare', 0)).toThrow(StateError);
    expect(go('SyncPrepare', 0)).toThrow(/from NoState to SyncPrepare in step 1.*no transition/);
    m.go('Loading', 0);
    m.go('Ready', 0);
    m.go('SyncPrepare', 0);
    expect(go('Reporting', 0)).toThrow(/from SyncPrepare to Reporting in step 1.*after NoState -> Loading \(step 1\), Loading -> Ready/);
    m.go('SyncCompute', 0);
    expect(go('Uploading', 0)).toThrow(/from SyncCompute to Uploading/);
    expect(m.phase).toBe('SyncCompute');
    expect(allowed('RoundAllReduce', 'SyncApply')).toBe(false);
  });
});
