// Peers that verification convicted (coordinator/audits.ts), refused when they come back: by
// the donor id they joined with, else by their address and name together. Kept in the job's
// folder (banned.jsonl, one JSON line each) so that a restarted coordinator refuses them too.
// What it cannot stop: a stranger who changes both its donor id (or name) and its address
// comes back as a new peer, and the audits catch it again at the same rate (docs/trust.md).
// A lab whose own device was convicted (a broken GPU driver computes wrongly) removes its line
// from the file and restarts the coordinator (the job resumes).
import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';

export const BANS_FILE = 'banned.jsonl';

export interface Ban {
  time: number;
  peerId: string;
  name: string | null;
  donor?: string;
  address?: string;
  /** The label of the volunteer token it joined with (volunteer-tokens.ts; revoked at the conviction). */
  tokenLabel?: string;
  /** The step it was convicted in (numbered from 1) and why. */
  step: number;
  reason: string;
}

/** Who asks to join, as far as the coordinator can tell; `tokenLabel`: whose volunteer token it came with (volunteer-tokens.ts). */
export interface Joiner {
  name: string | null; donor?: string; address?: string; tokenLabel?: string;
  /** Its own timing of its engine per image (JoinRequest.probeMsPerImage): its first step's silence allowance. */
  probeMsPerImage?: number;
  /** The most images it computes at once (JoinRequest.microBatch), for its session. */
  microBatch?: number;
}

/** The ban that refuses `j`, if any (pure): the same donor id, or the same address and the same name. */
export function banOf(bans: readonly Ban[], j: Joiner): Ban | null {
  return bans.find((b) => (j.donor !== undefined && b.donor === j.donor)
    || (j.address !== undefined && b.address === j.address && b.name === j.name)) ?? null;
}

/** The refusal a banned joiner reads: what happened, and what to do if its device is honest. */
export function refusalText(b: Ban): string {
  const who = b.donor !== undefined ? 'this donor id' : 'this address and name';
  return `refused: a peer with ${who} was caught in step ${b.step} of this job (${b.reason}). `
    + 'If nobody changed this device\'s work on purpose, it computes wrongly (a broken GPU driver, say): try the other backend '
    + `(--backend wasm, or ?backend=wasm on the page), and ask the job's owner to remove its line from ${BANS_FILE} in the job folder`;
}

export class BanList {
  private constructor(private readonly path: string, private readonly bans: Ban[], private readonly log: (line: string) => void) {}

  /** The bans kept in `jobDir` (none when the file is missing; unreadable lines are skipped and said). */
  static async open(jobDir: string, log: (line: string) => void): Promise<BanList> {
    const path = join(jobDir, BANS_FILE);
    let text = '';
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    const bans: Ban[] = [];
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        const b = JSON.parse(line) as Ban;
        if (typeof b === 'object' && b !== null && typeof b.peerId === 'string' && typeof b.reason === 'string') bans.push(b);
        else log(`bans: a line of ${path} is not a ban, skipped: ${line.slice(0, 80)}`);
      } catch {
        log(`bans: a line of ${path} is not JSON, skipped: ${line.slice(0, 80)}`);
      }
    }
    return new BanList(path, bans, log);
  }

  get size(): number {
    return this.bans.length;
  }

  /** Why `j` is refused, or null. */
  refusal(j: Joiner): string | null {
    const b = banOf(this.bans, j);
    return b ? refusalText(b) : null;
  }

  /** Adds a ban (kept in memory at once, on disk in the background; a failed write is logged). */
  add(b: Ban): void {
    this.bans.push(b);
    appendFile(this.path, `${JSON.stringify(b)}\n`).catch((e: unknown) => {
      this.log(`bans: cannot write ${this.path} (${e instanceof Error ? e.message : String(e)}); the ban holds until the coordinator restarts`);
    });
  }
}
