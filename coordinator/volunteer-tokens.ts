// A private job's tokens of one volunteer each (issue 46 part 3): the job owner issues one per
// person or desktop (POST /api/admin/volunteer-token with a label), and each opens the job as the
// join token does. What they add: a peer that verification convicts had joined with a token that
// names who it was given to, and that token is revoked, so the same person cannot come back under
// a new donor id, name or address with it; the owner is told the label. A revoked token is
// refused at the join and on every route, with the reason; revoking one by hand
// (POST /api/admin/revoke-token) does the same. The job's own join token stays for those who
// were given it (the owner may replace it: POST /api/admin/join-token).
//
// Kept in the job folder (volunteer-tokens.json, written whole and durably: writeFileAtomic), so a
// restarted coordinator knows them; nothing stored is dropped: a revoked token stays, revoked.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from './data/files.ts';
import { tokensMatch, type TokenHolder } from './routes.ts';

export const VOLUNTEER_TOKENS_FILE = 'volunteer-tokens.json';

/** A label names who a token was given to: 1 to 40 letters, digits, spaces, '.', '_' or '-'. */
export const TOKEN_LABEL = /^[\p{L}\p{N}._-][\p{L}\p{N} ._-]{0,39}$/u;
export const TOKEN_LABEL_RULE = 'a label of 1 to 40 letters, digits, spaces, ".", "_" or "-" (not starting with a space)';

/** At most this many tokens (issued and revoked) per job. */
export const MAX_VOLUNTEER_TOKENS = 10_000;

export interface VolunteerToken {
  label: string;
  token: string;
  /** When it was issued (ms since the epoch). */
  issued: number;
  /** Revoked: when, and why (a conviction's reason, or the owner's). */
  revoked?: { time: number; reason: string };
}

export class VolunteerTokenError extends Error {}

/** The entry whose token is `given`, if any (pure; every entry is compared, in constant time each). */
export function holderOf(entries: readonly VolunteerToken[], given: string): TokenHolder | null {
  let found: VolunteerToken | null = null;
  for (const e of entries) if (tokensMatch(given, e.token) && found === null) found = e;
  return found ? { label: found.label, revoked: found.revoked ? found.revoked.reason : null } : null;
}

/** The tokens of one job folder. Owns its file: every change is written before it is answered (a revocation applies before). */
export class VolunteerTokens {
  private constructor(private readonly path: string, private readonly entries: VolunteerToken[]) {}

  /** The tokens kept in `jobDir` (none when the file is missing); a file that is not such a list is an error that names it. */
  static async open(jobDir: string): Promise<VolunteerTokens> {
    const path = join(jobDir, VOLUNTEER_TOKENS_FILE);
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return new VolunteerTokens(path, []);
      throw e;
    }
    const entries = parseTokens(text);
    if (!entries) throw new VolunteerTokenError(`${path} is not a list of volunteer tokens: restore it from a backup, or move it away to start with none`);
    return new VolunteerTokens(path, entries);
  }

  /** Who holds `given` (null: no volunteer token of this job). */
  holder(given: string): TokenHolder | null {
    return holderOf(this.entries, given);
  }

  /** The labels, when each was issued, and why revoked ones were (never the tokens). */
  list(): { label: string; issued: number; revoked?: { time: number; reason: string } }[] {
    return this.entries.map(({ token: _t, ...rest }) => rest);
  }

  /** A new token for `label` (a label not yet used); written before it is returned. */
  async issue(label: string, now = Date.now()): Promise<string> {
    if (!TOKEN_LABEL.test(label)) throw new VolunteerTokenError(`label must be ${TOKEN_LABEL_RULE}, got ${JSON.stringify(label.slice(0, 50))}`);
    if (this.entries.some((e) => e.label === label)) {
      throw new VolunteerTokenError(`a token labelled "${label}" exists already: choose another label (a revoked one stays, so that its reason is kept)`);
    }
    if (this.entries.length >= MAX_VOLUNTEER_TOKENS) throw new VolunteerTokenError(`this job has ${MAX_VOLUNTEER_TOKENS} volunteer tokens already`);
    const token = randomBytes(18).toString('base64url');
    await this.save([...this.entries, { label, token, issued: now }]);
    this.entries.push({ label, token, issued: now });
    return token;
  }

  /**
   * Revokes the token labelled `label` (false: no such label; one already revoked keeps its first reason). Refused at once, before
   * the file is written (a conviction's revocation must not lag behind its log line); a failed write rejects, the token stays refused.
   */
  async revoke(label: string, reason: string, now = Date.now()): Promise<boolean> {
    const i = this.entries.findIndex((e) => e.label === label);
    if (i < 0) return false;
    const e = this.entries[i]!;
    if (e.revoked) return true;
    this.entries[i] = { ...e, revoked: { time: now, reason } };
    await this.save(this.entries);
    return true;
  }

  private save(entries: readonly VolunteerToken[]): Promise<void> {
    return writeFileAtomic(this.path, `${JSON.stringify(entries, null, 1)}\n`, true, 0o600);
  }
}

/** The entries of a tokens file, or null when it is not a list of them (pure). */
export function parseTokens(text: string): VolunteerToken[] | null {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(v)) return null;
  const out: VolunteerToken[] = [];
  for (const x of v) {
    if (typeof x !== 'object' || x === null) return null;
    const e = x as Record<string, unknown>;
    if (typeof e.label !== 'string' || typeof e.token !== 'string' || typeof e.issued !== 'number') return null;
    const r = e.revoked as Record<string, unknown> | undefined;
    if (r !== undefined && (typeof r !== 'object' || r === null || typeof r.time !== 'number' || typeof r.reason !== 'string')) return null;
    out.push({ label: e.label, token: e.token, issued: e.issued, ...(r ? { revoked: { time: r.time as number, reason: r.reason as string } } : {}) });
  }
  return out;
}
