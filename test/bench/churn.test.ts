// The churn benchmark's code path (bench/churn-run.ts) with few peers: a real job, simulated
// volunteers in 2 host processes (the real client on WasmEngine, real WebRTC), leaves, one
// host SIGKILLed mid-run; the run must end by itself with every step committed once and every
// checkpoint readable and matching the ring's committed weights.
import { describe, expect, it } from 'vitest';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { churnData, runChurn } from '../../bench/churn-run.ts';
import { CHURN_DEFAULTS } from '../../bench/churn-types.ts';

// Enough steps that the host kill (2 s after the ramp) lands mid-run: 6 peers of tiny-cnn run
// 150 steps in under 2 s here.
const STEPS = 800;

describe('churn benchmark', () => {
  it('6 peers, leaves and a host kill: no step lost or doubled, checkpoints readable, ends by itself', async () => {
    const root = await mkdtemp(join(tmpdir(), 'vt-churn-'));
    const lines: string[] = [];
    try {
      const data = await churnData(resolve('.cache/bench/churn/data'));
      const r = await runChurn({
        ...CHURN_DEFAULTS, peers: 6, hostSize: 3, steps: STEPS, seconds: 60, seed: 5, batch: 24,
        killEverySec: 2, maxKills: 1, leavePerSec: 0.3, finishGraceSec: 60, workDir: root, data, log: (l) => lines.push(l),
      });
      const why = `\n${lines.join('\n')}\n${r.coordinatorLog.slice(-30).join('\n')}`;
      expect(r.finished, why).toBe(true);
      expect(r.history.finalStep).toBe(STEPS);
      expect(r.history.lostSteps, why).toEqual([]);
      expect(r.history.doubledSteps, why).toEqual([]);
      expect(r.history.splitChecksums).toEqual([]);
      expect(r.peers.hostKills).toBe(1);
      expect(r.peers.kills).toBeGreaterThan(0);
      expect(r.checkpoints.files).toBeGreaterThan(0);
      expect(r.checkpoints.unreadable).toEqual([]);
      expect(r.checkpoints.wrongModel).toEqual([]);
      expect(r.checkpoints.mismatches).toEqual([]);
      expect(r.checkpoints.unmatched).toEqual([]);
      // After everyone left, the coordinator holds nobody.
      expect(r.driverAtEnd.peers).toBe(0);
      expect(r.driverAtEnd.uploads).toBe(0);
      expect(r.peers.unexpectedHostExits).toEqual([]);
      expect(r.samples.length).toBeGreaterThan(2);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  }, 120_000);
});
