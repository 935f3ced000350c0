// A vite dev server on 127.0.0.1 (ephemeral port) serving the repository, so browser tests
// load the same TypeScript modules (and `?raw` shaders) that Node runs.
import { createServer, type InlineConfig, type ViteDevServer } from 'vite';
import { afterAll, beforeAll } from 'vitest';
import { launchChromium, type LaunchedBrowser } from '../../testbed/chromium.ts';

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

/** What pageHost() starts for the tests of the block it is called in. */
export interface PageHost { readonly origin: string; readonly browser: LaunchedBrowser }

/**
 * A vite dev server and a headless Chromium (SwiftShader WebGPU) for the tests of the enclosing
 * describe block: started before them, closed after. Read origin and browser inside the tests.
 */
export function pageHost(): PageHost {
  let server: ViteDevServer | undefined;
  let browser: LaunchedBrowser | undefined;
  let origin = '';
  beforeAll(async () => {
    ({ server, origin } = await startViteServer());
    browser = await launchChromium({ webgpu: 'swiftshader' });
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });
  return {
    get origin() { return origin; },
    get browser() {
      if (!browser) throw new Error('pageHost(): the browser is not started (use it inside a test)');
      return browser;
    },
  };
}
