// Where a process's time went, from a V8 .cpuprofile (node --cpu-prof): self time by function,
// largest first, as shares of the sampled time. Pure.

export interface ProfileLine { fn: string; at: string; share: number; ms: number }

interface CpuNode { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number }
interface CpuProfile { nodes: CpuNode[]; samples?: number[]; timeDeltas?: number[] }

/** The `top` functions by self time (idle, program and garbage collection by their V8 names); files shown relative to `root`. */
export function summariseProfile(raw: unknown, top: number, root = ''): ProfileLine[] {
  const p = raw as CpuProfile;
  if (!p || !Array.isArray(p.nodes)) return [];
  const self = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + Math.max(0, deltas[i] ?? 0));
  const byFn = new Map<string, ProfileLine>();
  let total = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    total += us;
    const f = n.callFrame;
    const path = f.url.replace(/^file:\/\//, '');
    const file = path.includes('/node_modules/') ? path.slice(path.indexOf('/node_modules/') + 1)
      : root && path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path;
    const key = `${f.functionName || '(anonymous)'} ${file}:${f.lineNumber + 1}`;
    const e = byFn.get(key) ?? { fn: f.functionName || '(anonymous)', at: file ? `${file}:${f.lineNumber + 1}` : '', share: 0, ms: 0 };
    e.ms += us / 1000;
    byFn.set(key, e);
  }
  const lines = [...byFn.values()].map((e) => ({ ...e, share: total > 0 ? (e.ms * 1000) / total : 0, ms: +e.ms.toFixed(1) }));
  return lines.sort((a, b) => b.ms - a.ms).slice(0, top);
}
