// GradArrays (src/train/grad-arrays.ts): arrays given back are taken again, never two users at once.
import { describe, expect, it } from 'vitest';
import { GradArrays } from '../../src/train/grad-arrays.ts';

describe('GradArrays', () => {
  it('hands back what was given, newest first, and makes new arrays when none wait', () => {
    const p = new GradArrays(5);
    const a = p.take(), b = p.take();
    expect(a).not.toBe(b);
    expect(a.length).toBe(5);
    p.give(a);
    p.give(b);
    expect(p.waiting).toBe(2);
    expect(p.take()).toBe(b);
    expect(p.take()).toBe(a);
    expect(p.take()).not.toBe(a);
  });
  it('refuses an array of another length or one given back twice, and keeps at most 4', () => {
    const p = new GradArrays(3);
    expect(() => p.give(new Float32Array(4))).toThrow(/4 floats given back where the gradient has 3/);
    const a = p.take();
    p.give(a);
    expect(() => p.give(a)).toThrow(/given back twice/);
    for (let i = 0; i < 6; i++) p.give(new Float32Array(3));
    expect(p.waiting).toBe(4);
    expect(() => new GradArrays(-1)).toThrow(/whole number of floats/);
  });
});
