// The import rules of the house (docs/architecture.md, "Folders and who may import whom"), read
// from the sources themselves: every relative import (static, dynamic and `export ... from`) of
// every TypeScript file in the folders below, type-only ones included.
//   - src/ is the library the pages, the workers and the Node volunteer run: it imports nothing
//     from coordinator/, bench/, test/ or testbed/;
//   - src/protocol/ (the contract between coordinator, volunteers and pages) stands on its own:
//     besides itself only the ring's error kinds, the two-level plan it carries and the rounds'
//     limit; src/shapes/ (each op's parameter types and shape rules) imports no WebGPU code;
//   - the wasm engine, the model graph, the float64 references and the protocol reach no WebGPU
//     module (src/gpu, src/ops, shaders), however deep;
//   - coordinator/ imports src/ but not bench/, test/ or testbed/; bench/ and testbed/ never
//     import test/, and testbed/ (the network test bed and the jobs the tests and benches share)
//     imports no bench;
//   - no circle between files, counting type-only imports.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FOLDERS = ['src', 'coordinator', 'bench', 'test', 'testbed', 'scripts'];
const SPEC = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+)['"]/g;

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Every file (path from the root) and the files it imports (shaders and other assets included, by path). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const folder of FOLDERS) {
    for (const file of tsFiles(join(ROOT, folder))) {
      // Comments may quote imports: drop them first (line comments, then blocks).
      const text = readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '').replace(/\/\*[\s\S]*?\*\//g, '');
      const deps = [...text.matchAll(SPEC)].map((m) => relative(ROOT, resolve(dirname(file), m[1]!.replace(/\?.*$/, ''))));
      graph.set(relative(ROOT, file), deps);
    }
  }
  return graph;
}

const graph = importGraph();
const under = (path: string, folder: string): boolean => path === folder || path.startsWith(`${folder}/`);
/** Each import of a file under `from` that `bad` refuses, as "file -> import". */
function offending(from: string, bad: (dep: string) => boolean): string[] {
  const out: string[] = [];
  for (const [file, deps] of graph) if (under(file, from)) for (const d of deps) if (bad(d)) out.push(`${file} -> ${d}`);
  return out;
}
/** Every file `start` reaches through its imports. */
function closure(start: string): Set<string> {
  const seen = new Set<string>();
  const todo = [start];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    todo.push(...(graph.get(f) ?? []));
  }
  return seen;
}
const WEBGPU = (p: string): boolean => under(p, 'src/gpu') || under(p, 'src/ops') || under(p, 'shaders') || p === 'src/backend/webgpu.ts';

describe('the import rules', () => {
  it('reads the sources it rules on', () => {
    expect(graph.size).toBeGreaterThan(300);
    expect(graph.get('coordinator/run.ts')).toContain('src/protocol/messages.ts');
  });

  it('src/ imports nothing from coordinator/, bench/, test/ or testbed/', () => {
    expect(offending('src', (d) => ['coordinator', 'bench', 'test', 'testbed'].some((f) => under(d, f)))).toEqual([]);
  });

  it('src/protocol/ stands on its own; src/shapes/ imports no WebGPU code', () => {
    const allowed = new Set(['src/comm/errors.ts', 'src/comm/topology.ts', 'src/optim/outer.ts']);
    expect(offending('src/protocol', (d) => !under(d, 'src/protocol') && !allowed.has(d))).toEqual([]);
    expect(offending('src/shapes', (d) => !under(d, 'src/shapes') && d !== 'src/errors.ts')).toEqual([]);
  });

  it('the wasm engine, the model graph, the references and the protocol reach no WebGPU module', () => {
    const roots = [...graph.keys()].filter((f) => ['src/wasm', 'src/ref', 'src/shapes', 'src/protocol'].some((d) => under(f, d))
      || f === 'src/nn/graph.ts' || f === 'src/backend/engine.ts');
    expect(roots.length).toBeGreaterThan(20);
    const reached = roots.flatMap((r) => [...closure(r)].filter(WEBGPU).map((g) => `${r} reaches ${g}`));
    expect(reached).toEqual([]);
  });

  it('coordinator/ imports no bench or test code; bench/ and testbed/ import nothing from test/; testbed/ no bench', () => {
    expect(offending('coordinator', (d) => ['bench', 'test', 'testbed'].some((f) => under(d, f)))).toEqual([]);
    expect(offending('bench', (d) => under(d, 'test'))).toEqual([]);
    expect(offending('testbed', (d) => under(d, 'test') || under(d, 'bench'))).toEqual([]);
  });

  it('no circle between files, type-only imports counted', () => {
    // Tarjan's strongly connected components over the files that import something.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const on = new Set<string>();
    const circles: string[][] = [];
    let next = 0;
    const visit = (v: string): void => {
      index.set(v, next);
      low.set(v, next++);
      stack.push(v);
      on.add(v);
      for (const w of graph.get(v) ?? []) {
        if (!graph.has(w)) continue;
        if (!index.has(w)) {
          visit(w);
          low.set(v, Math.min(low.get(v)!, low.get(w)!));
        } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
      }
      if (low.get(v) === index.get(v)) {
        const scc: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          on.delete(w);
          scc.push(w);
        } while (w !== v);
        if (scc.length > 1) circles.push(scc.sort());
      }
    };
    for (const v of graph.keys()) if (!index.has(v)) visit(v);
    expect(circles).toEqual([]);
  });
});
