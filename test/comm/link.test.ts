// Connections that open before a ring takes them: their frames wait, in order, up to a byte
// bound; past it the connection is closed (a stranger cannot fill our memory).
import { describe, expect, it } from 'vitest';
import { PendingEvents } from '../../src/comm/link.ts';

describe('PendingEvents', () => {
  it('delivers early frames in order at listen()', () => {
    const p = new PendingEvents();
    p.frame(new Uint8Array([1]));
    p.frame(new Uint8Array([2, 3]));
    const got: number[][] = [];
    p.listen({ frame: (f) => got.push([...f]), drain: () => undefined, close: () => undefined });
    p.frame(new Uint8Array([4]));
    expect(got).toEqual([[1], [2, 3], [4]]);
  });

  it('closes a connection that sends more than the bound before it is taken, and drops what it sent', () => {
    let overflows = 0;
    const p = new PendingEvents(() => overflows++, 10);
    for (let i = 0; i < 5; i++) p.frame(new Uint8Array(4));
    expect(overflows).toBe(1);
    const frames: Uint8Array[] = [];
    const closes: string[] = [];
    p.listen({ frame: (f) => frames.push(f), drain: () => undefined, close: (r) => closes.push(r) });
    expect(frames).toEqual([]);
    expect(closes).toEqual(['more than 10 bytes arrived before the ring took this connection']);
  });
});
