// A peer link's state machine (src/comm/link-machine.ts): its tables are the drawing in
// docs/architecture.md ("A peer link"), arrow for arrow and label for label, and it refuses any
// other transition. The transitions real links take are named in peerjs-link.test.ts (open on
// each end, close) and link-reuse.test.ts (released, offered or acked, adopted).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HEARING_TRANSITIONS, LINK_TRANSITIONS, LinkMachine, LinkStateError, type LinkTransition } from '../../src/comm/link-machine.ts';

/** The arrows of the drawing's `state "one connection" as Link { ... }` block: its two regions, split at `--`. */
function drawnRegions(): string[][] {
  const doc = readFileSync(new URL('../../docs/architecture.md', import.meta.url), 'utf8').split('\n');
  const start = doc.findIndex((l) => l.trim() === 'state "one connection" as Link {');
  expect(start, 'docs/architecture.md draws a link as `state "one connection" as Link {`').toBeGreaterThan(0);
  const end = doc.findIndex((l, i) => i > start && l.trim() === '}');
  const lines = doc.slice(start + 1, end).map((l) => l.trim());
  const split = lines.indexOf('--');
  const arrows = (ls: string[]) => ls.filter((l) => / --> /.test(l));
  return [arrows(lines.slice(0, split)), arrows(lines.slice(split + 1))];
}

const drawn = <P extends string>(x: LinkTransition<P>): string =>
  `${x.from === 'start' ? '[*]' : x.from} --> ${x.to === 'end' ? '[*]' : x.to}${x.on ? `: ${x.on}` : ''}`;

describe('the link machine', () => {
  it('holds exactly the transitions drawn in docs/architecture.md, both regions, with their labels, in their order', () => {
    const [owner, hearing] = drawnRegions();
    expect(LINK_TRANSITIONS.map(drawn)).toEqual(owner);
    expect(HEARING_TRANSITIONS.map(drawn)).toEqual(hearing);
  });

  it('every phase can close, and only Closed ends', () => {
    const phases = new Set(LINK_TRANSITIONS.flatMap((x) => [x.from, x.to]).filter((p) => p !== 'start' && p !== 'end'));
    for (const p of phases) if (p !== 'Closed') expect(LINK_TRANSITIONS.some((x) => x.from === p && x.to === 'Closed'), p).toBe(true);
    expect(LINK_TRANSITIONS.filter((x) => x.to === 'end').map((x) => x.from)).toEqual(['Closed']);
  });

  it('a kept link: Dialing -> Open -> Leased -> Idle -> Offering -> Leased, then Closed, after which nothing moves', () => {
    const m = new LinkMachine('b', 'Dialing');
    for (const p of ['Open', 'Leased', 'Idle', 'Offering', 'Leased', 'Closed'] as const) m.go(p);
    expect(m.trail).toEqual(['Dialing -> Open', 'Open -> Leased', 'Leased -> Idle', 'Idle -> Offering', 'Offering -> Leased', 'Leased -> Closed']);
    // A late open event or a settle on a closed link changes nothing.
    m.go('Open');
    m.go('Idle');
    expect(m.phase).toBe('Closed');
  });

  it('refuses a transition the table does not hold, naming the remote, both phases and the trail, and stays where it was', () => {
    const m = new LinkMachine('c', 'Accepting');
    // An accepting end is open only once the dialing end answered its READY; nothing is leased before it is open.
    expect(() => m.go('Open')).toThrow(LinkStateError);
    expect(() => m.go('Leased')).toThrow(/the link to c went from Accepting to Leased.*after no transition/);
    m.go('Answered');
    m.go('Open');
    m.go('Idle');
    // Only A offers and only B acks, each from Idle: an offer does not become an ACK.
    m.go('Offering');
    expect(() => m.go('Acked')).toThrow(/from Offering to Acked.*after Accepting -> Answered, Answered -> Open, Open -> Idle, Idle -> Offering/);
    expect(m.phase).toBe('Offering');
  });
});
