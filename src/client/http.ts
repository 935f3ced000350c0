// The volunteer's HTTP calls to the coordinator: JSON in and out, errors decoded from the
// protocol's ErrorMessage so the reason the coordinator gave reaches the person.
import { type JoinAccept, type JoinRequest } from '../protocol/messages.ts';
import { decodeCoordinatorMessage, expectType } from '../protocol/decode.ts';
import { describe, parseJsonText } from '../protocol/fields.ts';
import type { OptimizerConfig } from '../optim/types.ts';
import type { OuterConfig } from '../optim/outer.ts';
import type { ModelName } from '../nn/models.ts';
import type { WireFormat } from '../protocol/frames.ts';

export class CoordinatorError extends Error {
  readonly kind = 'coordinator';
  constructor(message: string, readonly status: number) {
    super(message);
    this.name = 'CoordinatorError';
  }
}

/** What GET /api/job tells every peer (coordinator/job.ts publicJobInfo). */
export interface PublicJob {
  jobId: number;
  step: number;
  generation: number;
  peers: number;
  /** The owner paused the job (absent from older coordinators: not paused). */
  paused?: boolean;
  job: {
    name: string; model: ModelName; dataset: string; globalBatch: number; optimizer: OptimizerConfig;
    totalSteps: number; stepsPerEpoch: number; evalEvery: number; checkpointEvery: number; seed: number; access: 'public' | 'private';
    /** Rounds: syncEvery 1 is exact sync SGD (absent from older coordinators: the same). */
    outer?: OuterConfig;
    /** Label smoothing of the training loss (absent from older coordinators: 0). */
    labelSmoothing?: number;
    /** The sync step's gradient bucket size (absent: 25 MiB; src/client/sync-step.ts). */
    bucketBytes?: number;
    /** The cap of the bucket all-reduced last (absent: 1 MiB; 0: none; src/nn/buckets.ts bucketPlan). */
    lastBucketBytes?: number;
    /** false: no overlap (one bucket, all-reduced after backward). */
    overlap?: boolean;
    /** The all-reduce's wire format (absent from older coordinators: 'f32'); checked by jobWire (sync-step.ts). */
    wire?: WireFormat;
    /** Ghost batch norm's images per BN group (absent: BN over the whole slice; src/nn/model.ts). */
    bnGroup?: number;
    /** How long its rings may take to form (absent: RING_FORM_TIMEOUT_MS; coordinator/job.ts). */
    ringFormMs?: number;
  };
}

/**
 * `fetchFn` that sends a private job's token ("Authorization: Bearer") with every request to the
 * coordinator at `base` that carries no Authorization of its own (a checkpoint upload sends its
 * session's); other addresses and a public job (no token) get the requests as they are.
 */
export function withJobToken(fetchFn: typeof fetch, base: string, token: string | undefined): typeof fetch {
  if (!token) return fetchFn;
  return (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(base)) return fetchFn(input, init);
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has('authorization')) headers.set('authorization', `Bearer ${token}`);
    return fetchFn(input, { ...init, headers });
  };
}

async function failure(res: Response, what: string): Promise<CoordinatorError> {
  const text = await res.text();
  const parsed = parseJsonText(text);
  const d = parsed.ok ? decodeCoordinatorMessage(parsed.value) : null;
  const reason = d?.ok && d.value.type === 'error' ? d.value.message : text.slice(0, 200);
  return new CoordinatorError(`${what}: the coordinator answered ${res.status}: ${reason}`, res.status);
}

async function call(fetchFn: typeof fetch, url: string, init: RequestInit | undefined, what: string): Promise<Response> {
  let res: Response;
  try {
    res = await fetchFn(url, init);
  } catch (e) {
    throw new CoordinatorError(
      `${what}: no answer from ${url} (${e instanceof Error ? e.message : String(e)}): is the coordinator running at that address?`, 0,
    );
  }
  if (!res.ok) throw await failure(res, what);
  return res;
}

export async function getJob(fetchFn: typeof fetch, base: string): Promise<PublicJob> {
  const res = await call(fetchFn, `${base}/api/job`, undefined, 'GET /api/job');
  return (await res.json()) as PublicJob;
}

export async function join(fetchFn: typeof fetch, base: string, body: JoinRequest): Promise<JoinAccept> {
  const res = await call(fetchFn, `${base}/api/join`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  }, 'POST /api/join');
  const d = expectType(decodeCoordinatorMessage(await res.json()), 'join-accept');
  if (!d.ok) {
    throw new CoordinatorError(
      `POST /api/join: unexpected answer (${describe(d.error)}): is this a volunteer-trainer coordinator of the same version?`, res.status,
    );
  }
  return d.value;
}

export async function downloadCheckpoint(fetchFn: typeof fetch, base: string, step: number): Promise<Uint8Array> {
  const res = await call(fetchFn, `${base}/api/checkpoints/${step}`, undefined, `GET checkpoint ${step}`);
  return new Uint8Array(await res.arrayBuffer());
}

export async function uploadCheckpoint(fetchFn: typeof fetch, base: string, peerId: string, token: string, step: number, file: Uint8Array): Promise<void> {
  await call(fetchFn, `${base}/api/checkpoints/${step}?peer=${encodeURIComponent(peerId)}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/octet-stream' },
    body: file as Uint8Array<ArrayBuffer>,
  }, `upload checkpoint ${step}`);
}
