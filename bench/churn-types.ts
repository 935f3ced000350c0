// What a churn run (churn-run.ts) takes and gives: its options and defaults, the samples it
// takes every second, and its result, which bench/churn.ts reports and the tests check.
import type { Manifest } from '../src/data/manifest.ts';
import type { CheckpointCheck, HistoryCheck, StepSplit, Throughput } from './churn-check.ts';
import type { ThreadCpu } from './thread-cpu.ts';

export const CHURN_MODEL = 'tiny-cnn';

export interface ChurnOptions {
  /** Volunteers present on average. */
  peers: number;
  /** Volunteers per host process at most. */
  hostSize: number;
  steps: number;
  /** The churn's wall-clock bound. */
  seconds: number;
  seed: number;
  batch: number;
  checkpointEvery: number;
  killEverySec: number;
  maxKills: number;
  leavePerSec: number;
  joinPerSec: number;
  rampPerSec: number;
  /**
   * Host processes started before the clock and kept idle until the schedule needs a new one
   * (after a kill): a simulated machine is up before its volunteers arrive, as the first hosts
   * are, so a process's start (node, modules, WebRTC, the wasm kernels: ~0.9 CPU-s here) is not
   * charged to the ring it joins. Default 0.
   */
  spareHosts?: number;
  /** After `seconds`, how long the peers present may take to finish the job. */
  finishGraceSec: number;
  /** The job folder goes to <workDir>/job, every volunteer line to <workDir>/volunteers.log. */
  workDir: string;
  data: { dataDir: string; manifest: Manifest };
  log: (line: string) => void;
}

export const CHURN_DEFAULTS = {
  hostSize: 10, batch: 100, checkpointEvery: 5, killEverySec: 20, maxKills: Number.POSITIVE_INFINITY,
  leavePerSec: 0.5, joinPerSec: 0.6, rampPerSec: 10, finishGraceSec: 60,
} as const;

export interface Sample {
  /** Seconds since the job started. */
  t: number;
  step: number;
  ring: number;
  /** Peers with an open session (the driver's peer table). */
  connected: number;
  /** Volunteers the schedule has running. */
  present: number;
  heapMb: number;
  rssMb: number;
  /** Sum of the host processes' last reported rss. */
  hostsRssMb: number;
}

export interface DriverSizes { peers: number | null; uploads: number | null; evaluated: number | null; connections: number; eventClients: number }

export interface ChurnResult {
  seconds: number;
  churnSeconds: number;
  endedBy: 'finished' | 'time bound, finished in the grace' | 'time bound, stopped';
  finished: boolean;
  history: HistoryCheck;
  checkpoints: CheckpointCheck;
  /** Committed images/s from the end of the ramp to the end of the churn (or of the job). */
  throughput: Throughput;
  evictions: number;
  /** Evictions by who was evicted: a volunteer asked to leave, a killed one, or another (a live peer). */
  evictionsOf: { leaving: number; killed: number; other: number };
  evictionReasons: string[];
  /** CPU seconds by kind of thread, from the host processes' start to the volunteers' end (null off Linux). */
  threadCpu: ThreadCpu | null;
  peers: {
    started: number; sessions: number; leaves: number; kills: number; hostKills: number; maxPresent: number;
    exits: Record<string, number>; errors: string[]; hostsSpawned: number; unexpectedHostExits: string[];
    /** Volunteers that joined or trained more than 5 s after they were asked to leave. */
    ignoredLeaves: string[];
    /** Volunteers (not killed, nor on a killed host while stopping) that never reported their end: still running when their host was told to quit. */
    neverEnded: string[];
  };
  memory: {
    heapMbStart: number; heapMbMax: number; heapMbEnd: number; rssMbStart: number; rssMbMax: number; rssMbEnd: number;
    /** Least-squares slope of heapUsed over the second half of the churn (MB per minute). */
    heapSlopeMbPerMin: number | null;
    slopeWindowS: [number, number];
    hostRssMbMax: number;
    gc: boolean;
  };
  driverAtEnd: DriverSizes;
  driverMax: { peers: number; uploads: number; connections: number };
  /**
   * Seconds the driver spent in each kind of phase over the throughput's window (ramp end to
   * churn end): where the job's time goes (running, committed or aborted; admitting joiners; ...).
   */
  phaseSeconds: Record<string, number>;
  /** Committed steps in the throughput's window: each generation's first against the rest (churn-check.ts). */
  stepSplit: StepSplit;
  samples: Sample[];
  coordinatorLog: string[];
}
