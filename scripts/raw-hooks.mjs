// Module hooks for `?raw` imports (see raw-loader.mjs).
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

export async function resolve(specifier, context, next) {
  if (specifier.endsWith('?raw')) {
    const base = specifier.slice(0, -'?raw'.length);
    const resolved = await next(base, context);
    return { url: `${resolved.url}?raw`, shortCircuit: true };
  }
  return next(specifier, context);
}

export async function load(url, context, next) {
  if (url.endsWith('?raw')) {
    const path = fileURLToPath(url.slice(0, -'?raw'.length));
    const text = await readFile(path, 'utf8');
    return { format: 'module', source: `export default ${JSON.stringify(text)};`, shortCircuit: true };
  }
  return next(url, context);
}
