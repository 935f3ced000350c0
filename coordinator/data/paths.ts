// Where built data sets live by default (npm start's --cache): .cache/data at the repo root.
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const DEFAULT_CACHE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '../../.cache/data');
