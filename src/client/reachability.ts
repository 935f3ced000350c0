// Reachability: what a volunteer says when WebRTC cannot connect it to anyone. It logs once
// what it offers (host, STUN and TURN addresses, ice-check.ts) and any server that failed, and
// after MAX_UNREACHABLE evictions in a row for unreachability it leaves with a message that
// says why and what to do, instead of rejoining in a loop.
import { diagnoseIce, summarizeIce } from '../comm/ice-check.ts';
import type { IceServer } from '../protocol/messages.ts';
import type { VolunteerPlatform } from './volunteer-context.ts';

/** Evictions in a row for unreachability (with no ring link ever opened) before the volunteer gives up. */
export const MAX_UNREACHABLE = 3;

/** A volunteer that cannot open a WebRTC link to any other peer: the message says why and what to do. */
export class UnreachableError extends Error {
  readonly kind = 'unreachable';
  constructor(message: string) {
    super(message);
    this.name = 'UnreachableError';
  }
}

export async function unreachableError(
  p: Pick<VolunteerPlatform, 'iceCheck'>, servers: IceServer[], config: RTCConfiguration, last: string, log: (l: string) => void,
): Promise<UnreachableError> {
  const lines = [
    `this device could not open a WebRTC connection to any other volunteer (${MAX_UNREACHABLE} rings in a row; the last: ${last}), `
    + 'so it leaves the job instead of rejoining in a loop.',
  ];
  if (p.iceCheck) {
    const report = await p.iceCheck(config).catch(() => null);
    if (report) {
      log(`volunteer: WebRTC addresses of this device: ${summarizeIce(report)}`);
      lines.push(`WebRTC addresses of this device: ${summarizeIce(report)}.`);
      const found = diagnoseIce(servers, report);
      lines.push(...(found.length ? found : [
        'the STUN/TURN servers answered, so the other volunteers\' networks may block this one: '
        + 'ask the job owner to run the coordinator with --turn (a relay every peer can reach).',
      ]));
    }
  }
  return new UnreachableError(lines.join('\n  '));
}

/** Logs what this device offers WebRTC and what failed (in the background); returns true. */
export function reportIce(check: NonNullable<VolunteerPlatform['iceCheck']>, servers: IceServer[], config: RTCConfiguration, log: (l: string) => void): true {
  void check(config).then((r) => {
    log(`volunteer: WebRTC addresses of this device: ${summarizeIce(r)}`);
    for (const finding of diagnoseIce(servers, r)) log(`volunteer: warning: ${finding}`);
  }, () => undefined);
  return true;
}
