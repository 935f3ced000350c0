// One job on one port: the job folder on disk (job.json, checkpoints/, metrics.jsonl), the
// HTTP server with signaling (server.ts), the session sockets (sessions.ts) and the training
// driver (driver.ts) wired together. Starting on a folder that already holds the job resumes
// it from its newest verified checkpoint; peers rejoin on their own.
import { randomBytes, randomInt } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { layoutFingerprint } from '../src/checkpoint/format.ts';
import type { Manifest } from '../src/data/manifest.ts';
import { layoutOf } from '../src/nn/layout.ts';
import { modelByName } from '../src/nn/models.ts';
import { openCheckpointStore, type CheckpointStore } from './checkpoints.ts';
import { acquireJobLock } from './job-lock.ts';
import { VolunteerTokenError, VolunteerTokens } from './volunteer-tokens.ts';
import { writeFileAtomic } from './data/files.ts';
import { Driver, type AuditHooks, type DriverTimeouts } from './driver.ts';
import { HttpError } from './http.ts';
import { parseJobConfig, type JobConfig } from './job.ts';
import { latestPerStep, openMetricsLog, readMetrics, type MetricRecord, type MetricsLog } from './metrics.ts';
import { CreditLedger, creditView } from './credit.ts';
import { tokensMatch } from './routes.ts';
import { startCoordinator, type Coordinator, type CoordinatorOptions } from './server.ts';
import { checkIcePlan, iceServersFor, type ExternalIce, type IcePlan } from './ice.ts';
import { startStunServer } from './stun.ts';
import { DEFAULT_TLS_DIR, localTls, resolveTls, type TlsMaterial, type TlsOption } from './tls.ts';
import { joinUrls } from './addresses.ts';
import { createSessionServer } from './sessions.ts';
import { valSampleReader } from './val-samples.ts';
import { exportOnnx } from '../src/export/to-onnx.ts';
import { exportMetadata } from '../src/export/job.ts';
import { generationNeighbours } from './signaling.ts';
import { BANS_FILE, BanList, type Joiner } from './bans.ts';
import { DirectBook } from './direct-links.ts';
import type { LiveEvent } from '../src/protocol/messages.ts';

export const JOB_FILE = 'job.json';
/** Test images whose predictions each evaluation reports (the dashboard's grid). */
export const SHOWN_TEST_IMAGES = 24;
/** The job owner's token for POST /api/admin/... (created with the job, mode 0600). */
export const ADMIN_TOKEN_FILE = 'admin-token';
/** A private job's view token (routes.ts checkAccess): the dashboard's routes, for people who watch. */
export const VIEW_TOKEN_FILE = 'view-token';
/** Sessions closing within this time of the first are handed to the driver as one loss (run.ts `closed`). */
export const CLOSE_BATCH_MS = 20;
/** Donors the credit board shows. */
const CREDIT_BOARD = 20;

export interface JobRunOptions {
  /** The job folder; created when new. */
  jobDir: string;
  /** The job config (JSON as in a job file). For an existing folder it must equal the stored one, or be omitted. */
  config?: Record<string, unknown>;
  /** Holds `<dataset>/manifest.json` and the shards, served at /data/<dataset>/. */
  dataDir: string;
  /** The data set's own folder (manifest.json and shards) when it is not `<dataDir>/<dataset>`. */
  dataFolder?: string;
  manifest: Manifest;
  host?: string;
  port?: number;
  /** How many val images each evaluation uses (the first ones of the split). */
  evalSamples?: number;
  /** How many the job's last evaluation uses (default evalSamples; Infinity: the whole split). */
  finalEvalSamples?: number;
  heartbeatMs?: number;
  timeouts?: Partial<DriverTimeouts>;
  /** How a verifying job draws its audits (DriverDeps.audit; tests fix them). */
  audit?: AuditHooks;
  log?: (line: string) => void;
  /** The built page (dist/) to serve at /. */
  pageDir?: string;
  /** Every live event, as the dashboard sees it (npm start draws its progress bar from these). */
  onEvent?: (e: LiveEvent) => void;
  /**
   * ICE servers for the volunteers (ice.ts). Default: the coordinator's own STUN, UDP on its
   * port (`stun: false` turns it off); `turn`: a relay started by the caller (turn.ts).
   */
  ice?: { stun?: boolean; turn?: { port: number; secret: string }; external?: ExternalIce[]; externalSecret?: string; ttlSeconds?: number };
  /** HTTPS (tls.ts): by default whenever `host` is beyond loopback, with the local CA. */
  tls?: TlsOption;
  /** Per-address request and join limits (server.ts has the defaults); many local peers need more. */
  rateLimits?: CoordinatorOptions['rateLimits'];
}

export interface RunningJob {
  readonly coordinator: Coordinator;
  /** What the coordinator serves HTTPS with (null: plain HTTP). */
  readonly tls: TlsMaterial | null;
  readonly driver: Driver;
  readonly job: JobConfig;
  readonly jobId: number;
  readonly checkpoints: CheckpointStore;
  readonly url: string;
  /** True when the folder held this job already (a resume). */
  readonly resumed: boolean;
  /** The admin token (also in `<jobDir>/admin-token`). */
  readonly adminToken: string;
  /** A private job's view token, for people who watch its dashboard (also in `<jobDir>/view-token`); null: a public job. */
  readonly viewToken: string | null;
  close(): Promise<void>;
}

export class JobFolderError extends Error {
  readonly kind = 'job-folder';
  constructor(message: string) {
    super(message);
    this.name = 'JobFolderError';
  }
}

interface StoredJob { jobId: number; config: Record<string, unknown> }

/** A job with syncEvery "auto" resumes with the H it chose last (its metrics' last 'sync' record). */
function syncResume(history: readonly MetricRecord[]): { syncH?: number } {
  const last = history.filter((r) => r.type === 'sync').pop();
  return last && last.type === 'sync' && Number.isInteger(last.h) && last.h >= 1 ? { syncH: last.h } : {};
}

/** Reads job.json of a folder, or null when the folder holds no job yet. */
export async function readJobFile(jobDir: string): Promise<StoredJob | null> {
  let text: string;
  try {
    text = await readFile(join(jobDir, JOB_FILE), 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const parsed = JSON.parse(text) as StoredJob;
  if (typeof parsed !== 'object' || parsed === null || !Number.isInteger(parsed.jobId) || typeof parsed.config !== 'object') {
    throw new JobFolderError(`${join(jobDir, JOB_FILE)} is not a job file: move the folder away or pick another --job-dir`);
  }
  return parsed;
}

const sameJson = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Starts (or resumes) the job in `o.jobDir`: one coordinator per folder (job-lock.ts), so a
 * folder in use by another refuses with JobFolderInUseError before anything in it is touched.
 */
export async function runJob(o: JobRunOptions): Promise<RunningJob> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  await mkdir(o.jobDir, { recursive: true });
  const lock = await acquireJobLock(o.jobDir, log);
  try {
    const running = await startJob(o, log);
    return { ...running, close: async () => { try { await running.close(); } finally { await lock.release(); } } };
  } catch (e) {
    await lock.release();
    throw e;
  }
}

async function startJob(o: JobRunOptions, log: (line: string) => void): Promise<RunningJob> {
  const stored = await readJobFile(o.jobDir);
  if (stored && o.config && !sameJson(stored.config, o.config)) {
    throw new JobFolderError(`${o.jobDir} holds another job (${JSON.stringify(stored.config)}): resume it without changing options, `
      + 'or use another --job-dir (or --fresh to start over; the old folder is kept beside it)');
  }
  const raw = stored?.config ?? o.config;
  if (!raw) throw new JobFolderError(`${o.jobDir} holds no job and no config was given`);
  const job = parseJobConfig(raw, o.manifest.splits.train.samples);
  if (job.dataset !== o.manifest.dataset) throw new JobFolderError(`the job trains on ${job.dataset} but the data given is ${o.manifest.dataset}`);
  const jobId = stored?.jobId ?? randomInt(1, 2 ** 31);
  const saveJob = (config: Record<string, unknown>) => writeFileAtomic(join(o.jobDir, JOB_FILE), `${JSON.stringify({ jobId, config }, null, 1)}\n`);
  if (!stored) await saveJob(raw);
  const adminToken = await readOrCreateToken(o.jobDir, ADMIN_TOKEN_FILE, 'an admin token');
  const viewToken = job.access.kind === 'private' ? await readOrCreateToken(o.jobDir, VIEW_TOKEN_FILE, 'a view token') : null;

  const { channels, height, width } = o.manifest.image;
  const spec = modelByName(job.model, [channels, height, width], o.manifest.classes.length);
  if (spec.input[1] !== height || spec.input[2] !== width) {
    throw new JobFolderError(`${job.model} takes ${spec.input[1]}x${spec.input[2]} images; ${job.dataset} has ${height}x${width}`);
  }
  const layout = layoutOf(spec);
  const fingerprint = layoutFingerprint(spec.name, layout);

  const checkpoints = await openCheckpointStore(join(o.jobDir, 'checkpoints'), { keep: job.keepCheckpoints, log });
  const newest = await checkpoints.readNewest();
  if (newest && newest.fingerprint !== fingerprint) {
    throw new JobFolderError(`the checkpoints in ${o.jobDir} are of model ${newest.fingerprint}, the job says ${fingerprint}`);
  }
  const metricsPath = join(o.jobDir, 'metrics.jsonl');
  const history = await readMetrics(metricsPath);
  // Credit (credit.ts): the committed steps of the history, then every record as it is appended.
  const ledger = new CreditLedger();
  for (const r of history) ledger.add(r);
  const written = openMetricsLog(metricsPath, log);
  // Records are serialised and credited after the driver's turn (setImmediate), in order: a step's record names every member
  // (~150 KB of JSON at 1,000), and the members' next assignments go out first. A flush writes what is still waiting.
  const waiting: MetricRecord[] = [];
  const drain = () => { for (const r of waiting.splice(0)) { ledger.add(r); written.append(r); } };
  const metrics: MetricsLog = {
    path: written.path,
    flush: () => { drain(); return written.flush(); },
    append: (r) => { if (waiting.push(r) === 1) setImmediate(drain); },
  };
  let generation = newest ? newest.generation + 1 : 0;
  for (const r of history) if (r.type === 'generation' || r.type === 'step' || r.type === 'abort') generation = Math.max(generation, r.generation + 1);
  const evaluated = history.filter((r) => r.type === 'eval').map((r) => r.step).filter((s) => newest === null || s <= newest.step);
  if (stored) {
    log(`resuming job ${jobId} from ${newest ? `the checkpoint of step ${newest.step}` : 'its seed (no checkpoint yet)'}; `
      + `${latestPerStep(history).length} steps of history`);
  }

  /** What each peer that joined said of itself (its name, its donor's lasting id: JoinRequest) and where it came from. */
  const joined = new Map<string, Joiner>();
  const bans = await BanList.open(o.jobDir, log);
  // A private job's tokens of one volunteer each; a public job has none (volunteer-tokens.ts).
  const volunteerTokens = job.access.kind === 'private' ? await VolunteerTokens.open(o.jobDir) : null;
  /**
   * Peers verification convicted: refused from now on (bans.ts); one that came with a volunteer token has that token revoked, and a
   * private job's owner is told which token let them in.
   */
  const convicted = (ids: readonly string[], reason: string, step: number) => {
    for (const id of ids) {
      const j = joined.get(id) ?? { name: null };
      bans.add({ time: Date.now(), peerId: id, ...j, step, reason });
      const who = `${j.name ?? id}${j.address ? ` (${j.address})` : ''}`;
      const label = j.tokenLabel;
      if (label !== undefined && volunteerTokens) {
        volunteerTokens.revoke(label, `caught in step ${step}: ${reason}`).catch((e: unknown) => {
          log(`verification: the token "${label}" could not be revoked in the job folder (${e instanceof Error ? e.message : String(e)}): revoke it by hand`);
        });
      }
      log(`verification: ${who} is refused from now on (${BANS_FILE} in the job folder)`
        + (label !== undefined ? `; it joined with the volunteer token "${label}", now revoked`
          : job.access.kind === 'private'
            ? '; it joined with the job\'s join token: replace it (POST /api/admin/join-token) if you do not know who that is' : ''));
    }
  };
  const tokens = new Map<string, { token: string; at: number; session: boolean }>();
  /** Node volunteers that take direct ring links, and the routes the messages to them carry (direct-links.ts). */
  const direct = new DirectBook();
  let coordinator: Coordinator | null = null;
  // Sessions that close within CLOSE_BATCH_MS of each other reach the driver together: a host
  // process of several volunteers that crashes closes all their sockets at once, and one by one
  // each would abort the step and begin a generation (the next one still holding the dead).
  let closing: { id: string; reason: string }[] = [];
  let closingTimer: ReturnType<typeof setTimeout> | null = null;
  const flushClosed = () => {
    const batch = closing;
    closing = [];
    closingTimer = null;
    driver.peersGone(batch);
  };
  const sessions = createSessionServer({
    authenticate: (id, token) => {
      const t = tokens.get(id);
      return !!t && tokensMatch(token, t.token);
    },
    opened: (id) => {
      tokens.get(id)!.session = true;
      const j = joined.get(id);
      driver.peerConnected(id, j?.name ?? null, j);
    },
    message: (id, m) => driver.message(id, m),
    closed: (id, reason) => {
      tokens.delete(id);
      joined.delete(id);
      direct.forget(id);
      coordinator?.signaling.revoke(id);
      closing.push({ id, reason });
      closingTimer ??= setTimeout(flushClosed, CLOSE_BATCH_MS);
    },
  });
  const publish = (e: LiveEvent) => {
    coordinator?.events.publish(e);
    o.onEvent?.(e);
  };
  const firstIds = (n: number) => Array.from({ length: Math.min(n, o.manifest.splits.val.samples) }, (_, i) => i);
  const evalIds = firstIds(o.evalSamples ?? 500);
  const finalEvalIds = firstIds(o.finalEvalSamples ?? evalIds.length);
  const driver: Driver = new Driver({
    job, jobId, trainSamples: o.manifest.splits.train.samples, trainShards: o.manifest.splits.train.shards.map((s) => s.samples), evalIds, finalEvalIds,
    showIds: evalIds.slice(0, SHOWN_TEST_IMAGES), classes: o.manifest.classes.length,
    checkpointStep: newest?.step ?? null, generation, evaluated, metrics, ...syncResume(history),
    send: (id, m) => sessions.send(id, direct.routed(id, m)),
    disconnect: (id, reason) => sessions.close(id, reason),
    publish, log, convicted, timeouts: o.timeouts, ...(o.audit ? { audit: o.audit } : {}),
    keptCheckpoints: (await checkpoints.list()).map((c) => c.step),
    discardCheckpointsAfter: (step) => {
      checkpoints.discardAfter(step).then(
        (steps) => { if (steps.length) log(`checkpoints: removed those of steps ${steps.join(', ')} (undone work)`); },
        (e: unknown) => log(`checkpoints: cannot remove those after step ${step} (${e instanceof Error ? e.message : String(e)}): `
          + 'remove them by hand before restarting, or the job resumes from undone work'),
      );
    },
  });
  const paramBytes = 4 * layout.paramFloats;
  const icePlan: IcePlan = { turn: o.ice?.turn, external: o.ice?.external, externalSecret: o.ice?.externalSecret, ttlSeconds: o.ice?.ttlSeconds };
  checkIcePlan(icePlan);
  const tls = await resolveTls(o.tls, o.host ?? '127.0.0.1', log);
  coordinator = await startCoordinator({
    tls: tls ?? undefined,
    // A peer is told the servers at the address it reached us by (its Host header).
    iceServers: (peerId, host) => iceServersFor(icePlan, host ?? loopbackOr(o.host), peerId),
    joinUrls: () => (coordinator ? joinUrls(o.host ?? '127.0.0.1', coordinator.port, coordinator.url.startsWith('https:')) : []),
    job, jobId, dataDir: o.dataDir, ...(o.dataFolder ? { dataFolder: o.dataFolder } : {}), checkpoints, host: o.host, port: o.port, heartbeatMs: o.heartbeatMs,
    log, metricsPath, pageDir: o.pageDir, metricsFlushed: () => metrics.flush(), rateLimits: o.rateLimits,
    credit: (donor) => creditView(ledger, CREDIT_BOARD, donor),
    status: () => {
      const s = driver.status();
      return { step: s.step, generation: s.generation, peers: s.peers, paused: s.paused };
    },
    refuseJoin: (j) => bans.refusal(j),
    ...(volunteerTokens ? { volunteerTokens } : {}),
    directJoin: (id, address, offer) => direct.register(id, address, offer.port, offer.addresses),
    onJoin: (id, token, who) => {
      // A join that never opens its session is forgotten after a minute (bounded memory).
      const now = Date.now();
      for (const [k, v] of tokens) {
        if (v.session || now - v.at < 60_000) continue;
        tokens.delete(k);
        joined.delete(k);
        direct.forget(k);
        coordinator?.signaling.revoke(k);
      }
      tokens.set(id, { token, at: now, session: false });
      joined.set(id, who);
    },
    uploads: {
      fingerprint,
      // Weights and momentum (and the outer momentum of a job in rounds), BN state, header.
      maxBytes: (job.outer.syncEvery > 1 ? 3 : 2) * paramBytes + 4 * layout.stateFloats + (1 << 20),
      check: (peerId, token, step) => {
        const t = tokens.get(peerId);
        if (!t || !tokensMatch(token, t.token)) return new HttpError('forbidden', 'unknown peer or wrong token for this upload');
        if (!driver.expectsUpload(peerId, step)) {
          return new HttpError('conflict', `the coordinator did not ask ${peerId} for the checkpoint of step ${step} (or it has it already)`);
        }
        return null;
      },
      stored: (peerId, step) => driver.checkpointStored(peerId, step),
    },
    upgrade: (req, socket, head) => sessions.handleUpgrade(req, socket, head),
    ...(viewToken ? { viewToken } : {}),
    valSample: valSampleReader(o.dataFolder ?? join(o.dataDir, o.manifest.dataset), o.manifest),
    onnx: async () => {
      const c = await checkpoints.readNewest();
      if (!c) return null;
      const chunks = exportOnnx({
        spec, weights: c.weights, bnState: c.bnState,
        metadata: exportMetadata({ model: job.model, job: job.name, step: c.step, fingerprint, manifest: o.manifest, spec }),
        doc: `${job.model} trained on ${job.dataset} by volunteer-trainer (job ${job.name}), step ${c.step}`,
      });
      return { fileName: `${job.name}-step-${c.step}.onnx`, chunks };
    },
    // WebRTC set-up only between neighbours in a ring of the current generation (the flat ring,
    // or a two-level plan's group and column rings). The driver sets them for a new generation
    // before it sends the assignments, so peers never dial before this allows it.
    // Also between neighbours of the ring announced ahead of a membership change (driver-ahead.ts).
    mayConnect: (from, to) => {
      const { ring, topology } = driver.status();
      const ahead = driver.preparedRing();
      return generationNeighbours(ring, topology, from, to) || (ahead !== null && generationNeighbours(ahead.ring, ahead.topology, from, to));
    },
    admin: {
      token: adminToken,
      pause: () => { driver.pause(); log('admin: the job pauses at the next step boundary'); },
      resume: () => { driver.resume(); log('admin: the job resumes'); },
      async rotateJoinToken(token) {
        if (job.access.kind !== 'private') throw new HttpError('conflict', 'this job is public: it has no join token');
        const next = token ?? randomBytes(18).toString('base64url');
        job.access.joinToken = next;
        await saveJob({ ...raw, joinToken: next });
        log('admin: the join token was replaced (peers already in the job stay)');
        return next;
      },
      async issueVolunteerToken(label) {
        if (!volunteerTokens) throw new HttpError('conflict', 'this job is public: anyone may join, it has no tokens');
        const token = await volunteerTokens.issue(label).catch((e: unknown) => {
          throw e instanceof VolunteerTokenError ? new HttpError('bad-request', e.message) : e;
        });
        log(`admin: a volunteer token was issued for "${label}"`);
        return token;
      },
      async revokeVolunteerToken(label, reason) {
        if (!volunteerTokens) throw new HttpError('conflict', 'this job is public: it has no tokens');
        const done = await volunteerTokens.revoke(label, reason);
        if (done) log(`admin: the volunteer token "${label}" was revoked (peers already in the job stay)`);
        return done;
      },
      volunteerTokens: () => volunteerTokens?.list() ?? [],
      async setSchedule(p) {
        if (p.evalEvery !== undefined) job.evalEvery = p.evalEvery;
        if (p.checkpointEvery !== undefined) job.checkpointEvery = p.checkpointEvery;
        Object.assign(raw, p);
        await saveJob(raw);
        log(`admin: evaluation every ${job.evalEvery} steps, checkpoints every ${job.checkpointEvery}`);
      },
    },
  });
  const c = coordinator;
  // STUN on UDP at the same port number; a port someone else holds only costs this service.
  const stun = o.ice?.stun === false ? null : await startStunServer(o.host ?? '127.0.0.1', c.port).catch((e: unknown) => {
    log(`coordinator: no STUN on UDP port ${c.port} (${e instanceof Error ? e.message : String(e)}): `
      + 'peers on other networks may not find each other; free the port or pass --ice');
    return null;
  });
  if (stun) icePlan.stunPort = stun.port;
  // The local CA's server certificate is checked twice a day and swapped before it expires
  // (or when this machine's addresses change).
  const renewal = tls?.ca && o.tls?.cert === undefined ? setInterval(() => {
    localTls(o.tls?.dir ?? DEFAULT_TLS_DIR, { log }).then(
      (m) => c.setTls(m),
      (e: unknown) => log(`tls: renewing the server certificate failed: ${e instanceof Error ? e.message : String(e)}`),
    );
  }, 12 * 3600_000) : null;
  renewal?.unref();
  return {
    coordinator: c, tls, driver, job, jobId, checkpoints, url: c.url, resumed: !!stored, adminToken, viewToken,
    async close() {
      if (closingTimer) clearTimeout(closingTimer);
      driver.stop();
      if (renewal) clearInterval(renewal);
      sessions.closeAll();
      await c.close();
      await stun?.close();
      await metrics.flush();
    },
  };
}

/** The address a peer would use when its join named no Host: loopback for a wildcard listen. */
const loopbackOr = (host: string | undefined): string => (!host || host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host);

/** The job's admin token, created (mode 0600) the first time. */
async function readOrCreateToken(jobDir: string, file: string, what: string): Promise<string> {
  const path = join(jobDir, file);
  try {
    const t = (await readFile(path, 'utf8')).trim();
    if (/^[A-Za-z0-9_-]{16,256}$/.test(t)) return t;
    throw new JobFolderError(`${path} is not ${what}: delete it to get a new one`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const token = randomBytes(24).toString('base64url');
  await writeFile(path, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return token;
}
