// Lets plain Node (tsx) import shader files the way vite does: `import src from './x.wgsl?raw'`.
// Registered with `node --import tsx --import ./scripts/raw-loader.mjs`.
import { register } from 'node:module';

register('./raw-hooks.mjs', import.meta.url);
