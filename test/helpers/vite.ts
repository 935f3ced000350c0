// A vite dev server on 127.0.0.1 (ephemeral port) serving the repository, so browser tests
// load the same TypeScript modules (and `?raw` shaders) that Node runs.
import { createServer, type InlineConfig, type ViteDevServer } from 'vite';

export interface TestServer { server: ViteDevServer; origin: string }

export async function startViteServer(overrides: InlineConfig = {}): Promise<TestServer> {
  const server = await createServer({
    configFile: 'vite.config.ts',
    logLevel: 'warn',
    ...overrides,
    server: { host: '127.0.0.1', port: 0, hmr: false, ...overrides.server },
  });
  await server.listen();
  const addr = server.httpServer?.address();
  if (!addr || typeof addr === 'string') throw new Error('vite dev server has no port');
  return { server, origin: `http://127.0.0.1:${addr.port}` };
}
