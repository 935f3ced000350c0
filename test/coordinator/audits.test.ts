// Who audits whom (coordinator/audits.ts AuditBook.plan): every drawn member gets an auditor, never
// itself, each auditor recomputes at most one slice, and the auditor of a member is a random other.
import { describe, expect, it } from 'vitest';
import { AuditBook } from '../../coordinator/audits.ts';

const slices = (n: number) => Array.from({ length: n }, (_, i) => [2 * i, 2 * i + 1]);

describe('audit plan', () => {
  it('at fraction 1 every member is audited by another, each auditor once (500 plans of 3 to 6 members)', () => {
    const book = new AuditBook(1, 'f32');
    for (let t = 0; t < 500; t++) {
      const n = 3 + (t % 4);
      const ring = Array.from({ length: n }, (_, i) => `p${i}`);
      const plan = book.plan(t, ring, slices(n), 0);
      const audited = plan.map((p, auditor) => {
        expect(p.audit, `plan ${t}: member ${auditor} audits nobody`).toBeDefined();
        expect(p.audit!.peer).not.toBe(ring[auditor]);
        expect(p.audit!.sampleIds).toEqual(slices(n)[ring.indexOf(p.audit!.peer)]);
        return p.audit!.peer;
      });
      expect(new Set(audited).size).toBe(n);
    }
  });

  it('a member\'s auditor is any other member, about equally often', () => {
    const book = new AuditBook(1, 'f32');
    const ring = ['a', 'b', 'c', 'd'];
    const whoAuditsA = new Map<string, number>();
    for (let t = 0; t < 3000; t++) {
      const auditor = book.plan(t, ring, slices(4), 0).findIndex((p) => p.audit?.peer === 'a');
      whoAuditsA.set(ring[auditor]!, (whoAuditsA.get(ring[auditor]!) ?? 0) + 1);
    }
    expect([...whoAuditsA.keys()].sort()).toEqual(['b', 'c', 'd']);
    for (const count of whoAuditsA.values()) expect(Math.abs(count - 1000)).toBeLessThan(150);
  });

  it('at a fraction below 1 about that share is audited, and nobody in a ring of 2', () => {
    const book = new AuditBook(0.25, 'f32');
    const ring = Array.from({ length: 8 }, (_, i) => `p${i}`);
    let audits = 0;
    for (let t = 0; t < 400; t++) audits += book.plan(t, ring, slices(8), 0).filter((p) => p.audit).length;
    expect(audits / (400 * 8)).toBeGreaterThan(0.2);
    expect(audits / (400 * 8)).toBeLessThan(0.3);
    expect(book.plan(0, ['a', 'b'], slices(2), 0).filter((p) => p.audit)).toEqual([]);
  });
});
