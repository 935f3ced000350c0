// The decoders of messages.ts's messages: untrusted `unknown` (parsed JSON from a socket or an
// HTTP body) in, a typed message or a typed error listing every problem found out. They never
// throw on bad input: a volunteer is a stranger, and one malformed message must not take
// anything down. The rules every message follows are at the top of messages.ts; the field
// reader they are built on is fields.ts.
import { MAX_SYNC_EVERY } from '../optim/outer.ts';
import type { Topology } from '../comm/topology.ts';
import {
  DIRECT_KEY, DONOR_ID, DONOR_NAME, ERROR_KINDS, FAILURE_KINDS, LINK_KINDS, MAX_BATCH, MAX_CONFUSION_CLASSES, MAX_ID_LENGTH, MAX_RING,
  MAX_DEAD_MS, MAX_FAILURE_DETAIL, MAX_PROBE_MS_PER_IMAGE, MAX_SAMPLE_ID, MIN_DEAD_MS, MAX_SHOWN, MAX_TEXT_LENGTH, MAX_TOKEN_LENGTH,
  PROTOCOL_VERSION, SKETCH_LENGTH, HOP_KEYS, RELAY_HOP_KEYS,
  type AuditTask, type CheckpointAnnounce,
  type CollectiveFailure, type CoordinatorMessage, type DirectRoutes, type Done, type ErrorMessage, type EvalCounts,
  type EvalResult, type Evaluate, type Evicted, type Heartbeat, type IceServer, type JoinAccept,
  type JoinRequest, type Leave, type LoadState, type NextSlice, type PeerMessage, type PrepareRing,
  type Prepared, type Ready, type Claim, type Grant, type RoundAssignment, type SliceReuse, type StepAssignment, type StepResult,
  type SketchReport, type HopReport, type StepTimings, type UploadRequest, type HopSeed, type HopSketchesMessage, type RelayHopReport,
} from './messages.ts';
import { FieldReader, ID_PATTERN, isObj, show, type Decoded, type Obj } from './fields.ts';
import { readTopology } from './topology.ts';

const U32 = 2 ** 32 - 1;
/** A timing above a day is a bug or a lie. */
const MAX_MS = 86_400_000;

const HEX = /^[0-9a-f]+$/;

/** An array element that must be a count of one or more (an audit's pieces). */
const piece = (v: unknown): string | null => (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_BATCH
  ? null
  : `must be an integer in [1, ${MAX_BATCH}]`);

/** An array element that must be a sample id. */
const sampleId = (v: unknown): string | null => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID
  ? null
  : `must be an integer in [0, ${MAX_SAMPLE_ID}]`);

function u32s(r: FieldReader, ...keys: string[]): number[] {
  return keys.map((k) => r.int(k, 0, U32));
}

type Fields<T> = Omit<T, 'type'>;
type Reader<T> = (r: FieldReader) => Fields<T>;

/** A host name or address a direct route names (no scheme, no port, no spaces). */
const DIRECT_HOST = /^[A-Za-z0-9.:%_-]{1,253}$/;

function readJoin(r: FieldReader): Fields<JoinRequest> {
  r.only(['type', 'protocol', 'token', 'name', 'donor', 'direct', 'probeMsPerImage', 'microBatch']);
  const protocol = r.int('protocol', 1, 1000);
  if (protocol !== PROTOCOL_VERSION && r.problems.length === 0) {
    r.problems.push(`protocol ${protocol} is not supported by this coordinator (it speaks ${PROTOCOL_VERSION}): reload the page or update the volunteer`);
  }
  const out: Fields<JoinRequest> = { protocol };
  if (r.has('token')) out.token = r.str('token', MAX_TOKEN_LENGTH);
  if (r.has('name')) out.name = r.str('name', 40, DONOR_NAME, "a name of 1 to 40 letters, digits, spaces and . _ ' - (starting with a letter or digit)");
  if (r.has('donor')) out.donor = r.str('donor', 64, DONOR_ID, 'a donor id of 8 to 64 characters [A-Za-z0-9_-]');
  if (r.has('probeMsPerImage')) out.probeMsPerImage = r.num('probeMsPerImage', 0, MAX_PROBE_MS_PER_IMAGE);
  if (r.has('microBatch')) out.microBatch = r.int('microBatch', 1, MAX_BATCH);
  if (r.has('direct')) {
    if (!isObj(r.o.direct)) r.fail('direct', 'an object {port}');
    else {
      const d = new FieldReader(r.o.direct, 'direct');
      d.only(['port', 'addresses']);
      out.direct = { port: d.int('port', 1, 65_535) };
      if (d.has('addresses')) {
        out.direct.addresses = d.array<string>('addresses', 32, (v) => (typeof v === 'string' && DIRECT_HOST.test(v) ? null : 'must be an IP address'));
      }
      r.problems.push(...d.problems);
    }
  }
  return out;
}


/** A message's direct routes: at most 3 (a successor in the flat ring, or in a group and a column ring), each {host, port, key}. */
function readDirect(parent: FieldReader): DirectRoutes {
  const out: DirectRoutes = {};
  if (!isObj(parent.o.direct)) {
    parent.fail('direct', 'an object {peerId: {host, port, key}}');
    return out;
  }
  const entries = Object.entries(parent.o.direct);
  if (entries.length > 3) parent.problems.push(`direct names ${entries.length} peers; at most 3 (this peer's successors)`);
  for (const [id, v] of entries.slice(0, 3)) {
    if (id.length > MAX_ID_LENGTH || !ID_PATTERN.test(id)) {
      parent.problems.push(`direct: ${show(id)} is not a peer id`);
      continue;
    }
    if (!isObj(v)) {
      parent.problems.push(`direct.${id} must be an object {host, port, key}`);
      continue;
    }
    const d = new FieldReader(v, `direct.${id}`);
    d.only(['host', 'port', 'key']);
    const route = {
      host: d.str('host', 253, DIRECT_HOST, 'a host name or IP address'), port: d.int('port', 1, 65_535),
      key: d.str('key', 43, DIRECT_KEY, '32 bytes in base64url'),
    };
    parent.problems.push(...d.problems);
    if (!d.problems.length) out[id] = route;
  }
  return out;
}

function readHeartbeat(r: FieldReader): Fields<Heartbeat> {
  r.only(['type', 'peerId', 'generation', 'step']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return { peerId: r.id('peerId'), generation: generation!, step: step! };
}

function readStepResult(r: FieldReader): Fields<StepResult> {
  r.only(['type', 'peerId', 'generation', 'step', 'loss', 'checksum', 'timings', 'images', 'reused', 'claimed', 'link', 'linkPrev', 'sentBytes',
    'fetchedBytes', 'microBatch', 'sketch', 'total', 'audit', 'hops']);
  const [generation, step] = u32s(r, 'generation', 'step');
  const loss = r.o.loss === null ? null : r.num('loss', -1e30, 1e30);
  let timings: StepTimings = { computeMs: 0, commMs: 0, waitMs: 0 };
  if (isObj(r.o.timings)) {
    const t = new FieldReader(r.o.timings, 'timings');
    t.only(['computeMs', 'commMs', 'waitMs', 'dataMs', 'exposedCommMs', 'overheadMs']);
    timings = { computeMs: t.num('computeMs', 0, MAX_MS), commMs: t.num('commMs', 0, MAX_MS), waitMs: t.num('waitMs', 0, MAX_MS) };
    if (t.has('dataMs')) timings.dataMs = t.num('dataMs', 0, MAX_MS);
    if (t.has('exposedCommMs')) timings.exposedCommMs = t.num('exposedCommMs', 0, MAX_MS);
    if (t.has('overheadMs')) timings.overheadMs = t.num('overheadMs', 0, MAX_MS);
    r.problems.push(...t.problems);
  } else r.fail('timings', 'an object {computeMs, commMs, waitMs}');
  const images = r.int('images', 0, MAX_BATCH);
  return {
    peerId: r.id('peerId'), generation: generation!, step: step!, loss,
    checksum: r.str('checksum', 64, HEX, 'a lower-case hex digest of 1..64 characters'),
    timings, images,
    ...(r.has('reused') ? { reused: r.int('reused', 0, images) } : {}),
    ...(r.has('claimed') ? { claimed: r.int('claimed', 0, images) } : {}),
    ...(r.has('link') ? { link: r.oneOf('link', LINK_KINDS) } : {}),
    ...(r.has('linkPrev') ? { linkPrev: r.oneOf('linkPrev', LINK_KINDS) } : {}),
    ...(r.has('sentBytes') ? { sentBytes: r.num('sentBytes', 0, 2 ** 53) } : {}),
    ...(r.has('fetchedBytes') ? { fetchedBytes: r.num('fetchedBytes', 0, 2 ** 53) } : {}),
    ...(r.has('microBatch') ? { microBatch: r.int('microBatch', 1, MAX_BATCH) } : {}),
    ...(r.has('sketch') ? { sketch: readSketch(r, 'sketch') } : {}),
    ...(r.has('total') ? { total: readSketch(r, 'total') } : {}),
    ...(r.has('audit') ? { audit: readSketch(r, 'audit', true) as SketchReport & { peer: string } } : {}),
    ...(r.has('hops') ? { hops: readHops(r) } : {}),
  };
}

/** A step's hop sketches (StepResult.hops): four sketch reports. */
function readHops(parent: FieldReader): HopReport {
  return readHopReport(parent, HOP_KEYS);
}

/** A hearing's hop sketches (HopSketchesMessage.hops): seven sketch reports. */
function readRelayHops(parent: FieldReader): RelayHopReport {
  return readHopReport(parent, RELAY_HOP_KEYS);
}

function readHopReport<K extends (typeof RELAY_HOP_KEYS)[number]>(parent: FieldReader, keys: readonly K[]): Record<K, SketchReport> {
  const empty: SketchReport = { sums: [], squares: [] };
  if (!isObj(parent.o.hops)) {
    parent.fail('hops', `an object {${keys.join(', ')}}, each {sums, squares}`);
    return Object.fromEntries(keys.map((k) => [k, empty])) as Record<K, SketchReport>;
  }
  const r = new FieldReader(parent.o.hops, 'hops');
  r.only([...keys]);
  const out = Object.fromEntries(keys.map((k) => [k, readSketch(r, k)])) as Record<K, SketchReport>;
  parent.problems.push(...r.problems);
  return out;
}

function readHopSketches(r: FieldReader): Fields<HopSketchesMessage> {
  r.only(['type', 'peerId', 'generation', 'step', 'sketch', 'hops']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return { peerId: r.id('peerId'), generation: generation!, step: step!, sketch: readSketch(r, 'sketch'), hops: readRelayHops(r) };
}

function readHopSeed(r: FieldReader): Fields<HopSeed> {
  r.only(['type', 'generation', 'step', 'seed']);
  const [generation, step, seed] = u32s(r, 'generation', 'step', 'seed');
  return { generation: generation!, step: step!, seed: seed! };
}

const sketchValue = (v: unknown): string | null => (typeof v === 'number' && Number.isFinite(v) && Math.abs(v) < 1e300 ? null : 'must be a finite number');

/** A sketch report (SKETCH_LENGTH sums and squares; with `peer` for an audit). */
function readSketch(parent: FieldReader, key: 'sketch' | 'total' | 'audit' | (typeof RELAY_HOP_KEYS)[number], peer = false): SketchReport & { peer?: string } {
  if (!isObj(parent.o[key])) {
    parent.fail(key, `an object {${peer ? 'peer, ' : ''}sums, squares}`);
    return { sums: [], squares: [] };
  }
  const r = new FieldReader(parent.o[key], key);
  r.only(peer ? ['peer', 'sums', 'squares'] : ['sums', 'squares']);
  const sums = r.array<number>('sums', SKETCH_LENGTH, sketchValue);
  const squares = r.array<number>('squares', SKETCH_LENGTH, sketchValue);
  if (sums.length !== SKETCH_LENGTH || squares.length !== SKETCH_LENGTH) {
    r.problems.push(`sums and squares must have ${SKETCH_LENGTH} items each, got ${sums.length} and ${squares.length}`);
  }
  if (squares.some((q) => q < 0)) r.problems.push('squares must not be negative');
  const out = { sums, squares, ...(peer ? { peer: r.id('peer') } : {}) };
  parent.problems.push(...r.problems);
  return out;
}

function readEvalResult(r: FieldReader): Fields<EvalResult> {
  r.only(['type', 'peerId', 'step', 'counts']);
  const base = { peerId: r.id('peerId'), step: r.int('step', 0, U32) };
  if (!isObj(r.o.counts)) {
    r.fail('counts', 'an object {samples, top1, top5, lossSum}');
    return { ...base, counts: { samples: 0, top1: 0, top5: 0, lossSum: 0 } };
  }
  const e = new FieldReader(r.o.counts, 'counts');
  e.only(['samples', 'top1', 'top5', 'lossSum', 'confusion', 'predictions']);
  const samples = e.int('samples', 0, MAX_BATCH);
  const top5 = e.int('top5', 0, samples);
  const counts: EvalCounts = { samples, top1: e.int('top1', 0, top5), top5, lossSum: e.num('lossSum', 0, 1e30) };
  if (e.has('confusion')) {
    counts.confusion = e.array<number>('confusion', MAX_CONFUSION_CLASSES ** 2, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= samples
      ? null
      : `must be a count in [0, ${samples}]`));
    if (!e.problems.length && counts.confusion.reduce((a, b) => a + b, 0) !== samples) e.fail('confusion', `counts summing to samples (${samples})`);
  }
  if (e.has('predictions')) {
    counts.predictions = e.array<unknown>(
      'predictions', MAX_SHOWN, (v) => (isObj(v) ? null : 'must be an object {id, label, predicted, confidence}'),
    ).map((v) => {
      const p = new FieldReader(v as Obj, 'predictions[]');
      p.only(['id', 'label', 'predicted', 'confidence']);
      const out = {
        id: p.int('id', 0, MAX_SAMPLE_ID), label: p.int('label', 0, MAX_CONFUSION_CLASSES * 100), predicted: p.int('predicted', 0, MAX_CONFUSION_CLASSES * 100),
        confidence: p.num('confidence', 0, 1),
      };
      e.problems.push(...p.problems);
      return out;
    });
  }
  r.problems.push(...e.problems);
  return { ...base, counts };
}

function readReady(r: FieldReader): Fields<Ready> {
  r.only(['type', 'peerId', 'step', 'checksum', 'device']);
  return {
    peerId: r.id('peerId'), step: r.int('step', 0, U32),
    checksum: r.str('checksum', 64, HEX, 'a lower-case hex digest of 1..64 characters'),
    device: r.str('device', MAX_TEXT_LENGTH),
  };
}

function readPrepared(r: FieldReader): Fields<Prepared> {
  r.only(['type', 'peerId', 'id']);
  return { peerId: r.id('peerId'), id: r.int('id', 0, U32) };
}

function readClaim(r: FieldReader): Fields<Claim> {
  r.only(['type', 'peerId', 'generation', 'step']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return { peerId: r.id('peerId'), generation: generation!, step: step! };
}

function readGrant(r: FieldReader): Fields<Grant> {
  r.only(['type', 'generation', 'step', 'ids', 'last']);
  const [generation, step] = u32s(r, 'generation', 'step');
  const out: Fields<Grant> = { generation: generation!, step: step!, ids: r.array<number>('ids', MAX_BATCH, sampleId) };
  if (r.has('last')) {
    if (r.o.last !== true) r.fail('last', 'true (or absent)');
    else if (out.ids.length === 0) r.problems.push('last needs ids: an empty grant ends the claims by itself');
    else out.last = true;
  }
  return out;
}

function readFailure(r: FieldReader): Fields<CollectiveFailure> {
  r.only(['type', 'peerId', 'generation', 'step', 'failedPeerId', 'kind', 'detail']);
  const [generation, step] = u32s(r, 'generation', 'step');
  const out: Fields<CollectiveFailure> = {
    peerId: r.id('peerId'), generation: generation!, step: step!, failedPeerId: r.id('failedPeerId'), kind: r.oneOf('kind', FAILURE_KINDS),
  };
  if (r.has('detail')) out.detail = r.str('detail', MAX_FAILURE_DETAIL);
  return out;
}

function readAnnounce(r: FieldReader): Fields<CheckpointAnnounce> {
  r.only(['type', 'peerId', 'generation', 'step', 'bytes', 'sha256']);
  const [generation, step] = u32s(r, 'generation', 'step');
  return {
    peerId: r.id('peerId'), generation: generation!, step: step!,
    bytes: r.int('bytes', 1, Number.MAX_SAFE_INTEGER),
    sha256: r.str('sha256', 64, /^[0-9a-f]{64}$/, 'a sha256 digest (64 lower-case hex characters)'),
  };
}

function readLeave(r: FieldReader): Fields<Leave> {
  r.only(['type', 'peerId', 'reason', 'afterStep', 'failed']);
  const out: Fields<Leave> = { peerId: r.id('peerId') };
  if (r.has('reason')) out.reason = r.str('reason', MAX_TEXT_LENGTH);
  if (r.has('afterStep')) out.afterStep = r.bool('afterStep');
  if (r.has('failed')) out.failed = r.bool('failed');
  return out;
}

function readAccept(r: FieldReader): Fields<JoinAccept> {
  r.only(['type', 'peerId', 'signalingToken', 'signalingPath', 'job', 'heartbeatMs', 'checkpointStep', 'iceServers', 'directSecret']);
  return {
    ...(r.has('directSecret') ? { directSecret: r.str('directSecret', 43, DIRECT_KEY, '32 bytes in base64url') } : {}),
    peerId: r.id('peerId'),
    signalingToken: r.str('signalingToken', MAX_TOKEN_LENGTH, ID_PATTERN, 'a token [A-Za-z0-9_-]'),
    signalingPath: r.str('signalingPath', 256, /^\/[A-Za-z0-9_/-]*$/, 'an absolute URL path'),
    job: r.int('job', 0, U32),
    heartbeatMs: r.int('heartbeatMs', 100, 600_000),
    checkpointStep: r.o.checkpointStep === null ? null : r.int('checkpointStep', 0, U32),
    iceServers: readIceServers(r),
  };
}

const ICE_URL = /^(stuns?|turns?):[^\s]{1,250}$/;
const MAX_ICE_SERVERS = 16;

function readIceServers(r: FieldReader): IceServer[] {
  if (!r.has('iceServers')) return [];
  const list = r.array<unknown>('iceServers', MAX_ICE_SERVERS, (v) => (isObj(v) ? null : 'must be an object {urls, username?, credential?}'));
  const out: IceServer[] = [];
  list.forEach((v, i) => {
    if (!isObj(v)) return;
    const s = new FieldReader(v, `iceServers[${i}]`);
    s.only(['urls', 'username', 'credential']);
    const urls = s.array<string>('urls', 8, (u) => (typeof u === 'string' && ICE_URL.test(u) ? null : 'must be a stun:, stuns:, turn: or turns: URL'));
    if (urls.length === 0 && Array.isArray(s.o.urls)) s.fail('urls', 'at least one URL');
    const server: IceServer = { urls };
    if (s.has('username')) server.username = s.str('username', 256);
    if (s.has('credential')) server.credential = s.str('credential', 256);
    r.problems.push(...s.problems);
    out.push(server);
  });
  return out;
}

function readRing(r: FieldReader): string[] {
  const ring = r.array<string>('ring', MAX_RING, (v) => (typeof v === 'string' && v.length <= MAX_ID_LENGTH && ID_PATTERN.test(v)
    ? null
    : 'must be a peer id'));
  if (ring.length === 0 && Array.isArray(r.o.ring)) r.fail('ring', 'a non-empty array of peer ids');
  if (new Set(ring).size !== ring.length) r.problems.push('ring has a peer twice');
  return ring;
}

/** The message's `topology` for its `ring` into `out`, or its problem into r's. */
function readTopologyInto(r: FieldReader, out: { topology?: Topology }, ring: readonly string[]): void {
  const t = readTopology(r.o.topology, ring);
  if (t.ok) out.topology = t.value;
  else r.problems.push(t.problem);
}

function readPrepare(r: FieldReader): Fields<PrepareRing> {
  r.only(['type', 'id', 'ring', 'topology', 'next', 'direct']);
  const out: Fields<PrepareRing> = { id: r.int('id', 0, U32), ring: readRing(r) };
  if (r.has('next')) out.next = readNext(r, MAX_BATCH);
  if (r.has('direct')) out.direct = readDirect(r);
  if (r.has('topology')) readTopologyInto(r, out, out.ring);
  return out;
}

function readAssignment(r: FieldReader): Fields<StepAssignment> {
  r.only([
    'type', 'job', 'generation', 'step', 'ring', 'rank', 'globalBatch', 'sampleIds', 'epoch', 'seed', 'uploadCheckpoint', 'round', 'next', 'reuse', 'steal',
    'topology', 'verify', 'direct', 'deadMs',
  ]);
  const [job, generation, step, epoch, seed] = u32s(r, 'job', 'generation', 'step', 'epoch', 'seed');
  const ring = readRing(r);
  const rank = r.int('rank', 0, Math.max(0, ring.length - 1));
  const globalBatch = r.int('globalBatch', 1, MAX_BATCH);
  const sampleIds = r.array<number>('sampleIds', MAX_BATCH, sampleId);
  if (sampleIds.length > globalBatch) r.problems.push(`sampleIds has ${sampleIds.length} ids, more than globalBatch ${globalBatch}`);
  const out: Fields<StepAssignment> = { job: job!, generation: generation!, step: step!, ring, rank, globalBatch, sampleIds, epoch: epoch!, seed: seed! };
  if (r.has('uploadCheckpoint')) out.uploadCheckpoint = r.bool('uploadCheckpoint');
  if (r.has('round')) out.round = readRound(r, globalBatch);
  if (r.has('next')) out.next = readNext(r, globalBatch);
  if (r.has('reuse')) out.reuse = readReuse(r, sampleIds.length);
  if (out.reuse && out.round) r.problems.push('reuse is for sync steps only, not with a round');
  if (r.has('steal')) out.steal = readSteal(r, globalBatch);
  if (out.steal && (out.round || out.reuse)) r.problems.push('steal is for a fresh sync step only, not with a round or a reuse');
  if (r.has('topology')) readTopologyInto(r, out, ring);
  if (r.has('verify')) out.verify = readVerify(r, globalBatch);
  if (out.verify?.audit && (out.verify.audit.round !== undefined) !== (out.round !== undefined)) {
    r.problems.push('verify.audit.round goes with a round (and only with one): a sync step\'s audit names sampleIds');
  }
  if (r.has('direct')) out.direct = readDirect(r);
  if (r.has('deadMs')) out.deadMs = r.int('deadMs', MIN_DEAD_MS, MAX_DEAD_MS);
  return out;
}

/** What a step's verification asks: sketches always, and an audit of another member's slice when it names one. */
function readVerify(parent: FieldReader, globalBatch: number): { audit?: AuditTask } {
  if (!isObj(parent.o.verify)) {
    parent.fail('verify', 'an object {audit?}');
    return {};
  }
  const r = new FieldReader(parent.o.verify, 'verify');
  r.only(['audit']);
  let out: { audit?: AuditTask } = {};
  if (r.has('audit')) {
    if (!isObj(r.o.audit)) r.fail('audit', 'an object {peer, sampleIds, epoch}');
    else {
      const a = new FieldReader(r.o.audit, 'verify.audit');
      a.only(['peer', 'sampleIds', 'epoch', 'seed', 'round', 'microBatch', 'pieces']);
      const innerIds = (v: unknown) => (Array.isArray(v) && v.length <= globalBatch && v.every((x) => sampleId(x) === null)
        ? null
        : `must be an array of at most globalBatch (${globalBatch}) sample ids`);
      out = {
        audit: {
          peer: a.id('peer'), sampleIds: a.array<number>('sampleIds', globalBatch, sampleId), epoch: a.int('epoch', 0, U32),
          ...(a.has('seed') ? { seed: a.int('seed', 0, U32) } : {}),
          ...(a.has('microBatch') ? { microBatch: a.int('microBatch', 1, globalBatch) } : {}),
          ...(a.has('pieces') ? { pieces: a.array<number>('pieces', globalBatch, piece) } : {}),
          ...(a.has('round') ? { round: a.array<number[]>('round', MAX_SYNC_EVERY, innerIds).map((x) => x.map((v) => v + 0)) } : {}),
        },
      };
      const pieced = out.audit?.pieces?.reduce((n, k) => n + k, 0);
      if (pieced !== undefined && pieced !== out.audit!.sampleIds.length) {
        a.problems.push(`verify.audit.pieces must add up to its ${out.audit!.sampleIds.length} sampleIds, got ${pieced}`);
      }
      r.problems.push(...a.problems);
    }
  }
  parent.problems.push(...r.problems);
  return out;
}

/** A step's work stealing: the most ids a grant may carry (1..globalBatch). */
function readSteal(parent: FieldReader, globalBatch: number): { chunk: number } {
  if (!isObj(parent.o.steal)) {
    parent.fail('steal', 'an object {chunk}');
    return { chunk: 1 };
  }
  const r = new FieldReader(parent.o.steal, 'steal');
  r.only(['chunk']);
  const out = { chunk: r.int('chunk', 1, globalBatch) };
  parent.problems.push(...r.problems);
  return out;
}

/** Which kept sum a re-run may add: a generation and how many leading ids of sampleIds it covers (1..all). */
function readReuse(parent: FieldReader, slice: number): SliceReuse {
  if (!isObj(parent.o.reuse)) {
    parent.fail('reuse', 'an object {generation, count}');
    return { generation: 0, count: 0 };
  }
  const r = new FieldReader(parent.o.reuse, 'reuse');
  r.only(['generation', 'count']);
  if (slice === 0) r.problems.push('reuse needs a non-empty sampleIds');
  const out = { generation: r.int('generation', 0, U32), count: r.int('count', 1, Math.max(1, slice)) };
  parent.problems.push(...r.problems);
  return out;
}

/** The next step's slice (a prefetch hint): at most globalBatch ids. */
function readNext(parent: FieldReader, globalBatch: number): NextSlice {
  if (!isObj(parent.o.next)) {
    parent.fail('next', 'an object {step, epoch, sampleIds}');
    return { step: 0, epoch: 0, sampleIds: [] };
  }
  const r = new FieldReader(parent.o.next, 'next');
  r.only(['step', 'epoch', 'sampleIds']);
  const [step, epoch] = u32s(r, 'step', 'epoch');
  const sampleIds = r.array<number>('sampleIds', globalBatch, sampleId);
  parent.problems.push(...r.problems);
  return { step: step!, epoch: epoch!, sampleIds };
}

/** A round's plan: at most MAX_SYNC_EVERY inner steps, at most MAX_BATCH ids in all. */
function readRound(parent: FieldReader, globalBatch: number): RoundAssignment {
  const empty: RoundAssignment = { ids: [], epochs: [], images: 0 };
  if (!isObj(parent.o.round)) {
    parent.fail('round', 'an object {ids, epochs, images}');
    return empty;
  }
  const r = new FieldReader(parent.o.round, 'round');
  r.only(['ids', 'epochs', 'images']);
  const idOk = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID;
  const ids = r.array<number[]>('ids', MAX_SYNC_EVERY, (v) => (Array.isArray(v) && v.length <= globalBatch && v.every(idOk)
    ? null
    : `must be an array of at most globalBatch (${globalBatch}) sample ids`));
  const epochs = r.array<number>('epochs', MAX_SYNC_EVERY, (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= U32
    ? null
    : 'must be an epoch number'));
  const images = r.int('images', 1, MAX_BATCH);
  if (ids.length === 0 && Array.isArray(r.o.ids)) r.fail('ids', 'a non-empty array (one entry per inner step)');
  if (epochs.length !== ids.length) r.problems.push(`round.epochs has ${epochs.length} entries, round.ids ${ids.length}`);
  const total = ids.reduce((a, x) => a + (Array.isArray(x) ? x.length : 0), 0);
  if (total > images) r.problems.push(`round.ids hold ${total} ids, more than round.images ${images}`);
  parent.problems.push(...r.problems);
  return r.problems.length ? empty : { ids: ids.map((x) => x.map((v) => v + 0)), epochs, images };
}

function readLoadState(r: FieldReader): Fields<LoadState> {
  r.only(['type', 'source', 'step', 'next']);
  const source = r.oneOf('source', ['seed', 'checkpoint'] as const);
  const step = r.int('step', 0, U32);
  if (source === 'seed' && step !== 0 && r.problems.length === 0) r.problems.push('source "seed" is only for step 0');
  return { source, step, ...(r.has('next') ? { next: readNext(r, MAX_BATCH) } : {}) };
}

function readUploadRequest(r: FieldReader): Fields<UploadRequest> {
  r.only(['type', 'step']);
  return { step: r.int('step', 0, U32) };
}

function readDone(r: FieldReader): Fields<Done> {
  r.only(['type', 'step', 'reason']);
  return { step: r.int('step', 0, U32), reason: r.str('reason', MAX_TEXT_LENGTH) };
}

function readEvaluate(r: FieldReader): Fields<Evaluate> {
  r.only(['type', 'step', 'ids', 'show', 'confusion']);
  const idOk = (v: unknown) => (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= MAX_SAMPLE_ID
    ? null
    : `must be an integer in [0, ${MAX_SAMPLE_ID}]`);
  return {
    step: r.int('step', 0, U32), ids: r.array<number>('ids', MAX_BATCH, idOk),
    ...(r.has('show') ? { show: r.array<number>('show', MAX_SHOWN, idOk) } : {}),
    ...(r.has('confusion') ? { confusion: r.bool('confusion') } : {}),
  };
}

function readEvicted(r: FieldReader): Fields<Evicted> {
  r.only(['type', 'reason', 'cause']);
  return { reason: r.str('reason', MAX_TEXT_LENGTH), ...(r.has('cause') ? { cause: r.oneOf('cause', ['unreachable'] as const) } : {}) };
}

function readError(r: FieldReader): Fields<ErrorMessage> {
  r.only(['type', 'kind', 'message']);
  return { kind: r.oneOf('kind', ERROR_KINDS), message: r.str('message', MAX_TEXT_LENGTH) };
}

const PEER_READERS = {
  join: readJoin, heartbeat: readHeartbeat, 'step-result': readStepResult,
  'collective-failure': readFailure, 'checkpoint-announce': readAnnounce, leave: readLeave, ready: readReady, 'eval-result': readEvalResult,
  prepared: readPrepared, claim: readClaim, 'hop-sketches': readHopSketches,
} satisfies { [K in PeerMessage['type']]: Reader<Extract<PeerMessage, { type: K }>> };

const COORDINATOR_READERS = {
  'join-accept': readAccept, 'step-assignment': readAssignment, error: readError,
  'load-state': readLoadState, 'upload-checkpoint': readUploadRequest, done: readDone, evicted: readEvicted, evaluate: readEvaluate,
  prepare: readPrepare, grant: readGrant, 'hop-seed': readHopSeed,
} satisfies { [K in CoordinatorMessage['type']]: Reader<Extract<CoordinatorMessage, { type: K }>> };

function decodeWith<M extends { type: string }>(readers: Record<string, Reader<M>>, input: unknown, side: string): Decoded<M> {
  if (!isObj(input)) return { ok: false, error: { kind: 'malformed', problems: [`expected a JSON object, got ${show(input)}`] } };
  const type = input.type;
  if (typeof type !== 'string' || !Object.hasOwn(readers, type)) {
    return { ok: false, error: { kind: 'unknown-type', problems: [`type must be one of ${Object.keys(readers).join(', ')} (${side}), got ${show(type)}`] } };
  }
  const r = new FieldReader(input);
  const fields = readers[type]!(r);
  if (r.problems.length) return { ok: false, error: { kind: 'malformed', problems: [`${type}: ${r.problems[0]}`, ...r.problems.slice(1)] } };
  return { ok: true, value: { type, ...fields } as unknown as M };
}

export function decodePeerMessage(input: unknown): Decoded<PeerMessage> {
  return decodeWith<PeerMessage>(PEER_READERS as Record<string, Reader<PeerMessage>>, input, 'messages a peer sends');
}

export function decodeCoordinatorMessage(input: unknown): Decoded<CoordinatorMessage> {
  return decodeWith<CoordinatorMessage>(COORDINATOR_READERS as Record<string, Reader<CoordinatorMessage>>, input, 'messages the coordinator sends');
}

/** Narrows a decoded message to one type (e.g. the body of POST /api/join must be a 'join'). */
export function expectType<M extends { type: string }, K extends M['type']>(d: Decoded<M>, type: K): Decoded<Extract<M, { type: K }>> {
  if (!d.ok) return d;
  if (d.value.type !== type) return { ok: false, error: { kind: 'unknown-type', problems: [`expected a '${type}' message here, got '${d.value.type}'`] } };
  return { ok: true, value: d.value as Extract<M, { type: K }> };
}
