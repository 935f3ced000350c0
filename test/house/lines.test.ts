// No source line over 160 characters (the house standard, issue 44): every TypeScript, shader,
// script and Python file in the project's folders, counted in characters as an editor shows them.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FOLDERS = ['src', 'wasm', 'coordinator', 'bench', 'test', 'testbed', 'scripts'];
const SOURCE = /\.(ts|mjs|js|sh|py|wgsl)$/;
/** Folders of generated or installed files that may sit inside the ones above. */
const SKIP = new Set(['node_modules', 'results', 'build', 'dist']);
const MAX_LINE = 160;

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (SKIP.has(name) || name.startsWith('.')) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (SOURCE.test(name)) out.push(p);
  }
  return out;
}

/** `file:line (length)` of every line longer than `max` characters in `text`. */
function longLines(file: string, text: string, max = MAX_LINE): string[] {
  return text.split('\n').flatMap((line, i) => ([...line].length > max ? [`${file}:${i + 1} (${[...line].length})`] : []));
}

describe('line length', () => {
  it('finds a long line (the rule can fail)', () => {
    expect(longLines('x.ts', `ok\n${'a'.repeat(MAX_LINE + 1)}\n${'é'.repeat(MAX_LINE)}`)).toEqual([`x.ts:2 (${MAX_LINE + 1})`]);
  });

  it(`no source line is over ${MAX_LINE} characters`, () => {
    const files = FOLDERS.flatMap((f) => sourceFiles(join(ROOT, f)));
    expect(files.length).toBeGreaterThan(300);
    const long = files.flatMap((f) => longLines(relative(ROOT, f), readFileSync(f, 'utf8')));
    expect(long, 'rewrap these lines').toEqual([]);
  });
});
