// Launches Debian's headless Chromium through playwright-core with the flags RECIPES.md
// found necessary here: software WebGPU (llvmpipe via ANGLE GL-EGL, or SwiftShader),
// loopback WebRTC host candidates, no background networking, a fresh profile.
import { mkdtempSync, mkdirSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export interface LaunchOptions {
  /** 'llvmpipe' (faster, needs featureLevel 'compatibility' in the page) or 'swiftshader'. */
  webgpu?: 'llvmpipe' | 'swiftshader';
  /** Extra Chromium command-line flags. */
  args?: string[];
}

/**
 * `loopbackWebRtc` (single-host tests only): gather 127.0.0.1 host candidates and show real IPs
 * instead of mDNS names. Multi-host tests leave it off: a real browser's WebRTC defaults.
 */
export function chromiumFlags(webgpu: 'llvmpipe' | 'swiftshader' = 'llvmpipe', loopbackWebRtc = true): string[] {
  const flags = [
    '--no-sandbox',
    '--enable-unsafe-webgpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    '--disable-quic',
    ...(loopbackWebRtc ? ['--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'] : []),
  ];
  if (webgpu === 'llvmpipe') flags.push('--use-angle=gl-egl', '--use-webgpu-adapter=opengles');
  return flags;
}

/** Chromium writes to XDG folders even with a fresh profile: point them at a temp dir. */
function isolateHome(): string {
  const home = mkdtempSync(join(tmpdir(), 'vt-chromium-'));
  for (const sub of ['config', 'cache', 'runtime']) mkdirSync(join(home, sub), { recursive: true, mode: 0o700 });
  return home;
}

export interface LaunchedBrowser {
  browser: Browser;
  /** A fresh context (a separate "person": own storage, own WebRTC identity). */
  newContext(): Promise<BrowserContext>;
  close(): Promise<void>;
}

export async function launchChromium(opts: LaunchOptions = {}): Promise<LaunchedBrowser> {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(`Chromium not found at ${CHROMIUM_PATH}: run 'npm run setup' (installs Debian's chromium) or set CHROMIUM_PATH.`);
  }
  const home = isolateHome();
  const browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [...chromiumFlags(opts.webgpu), ...(opts.args ?? [])],
    env: {
      ...process.env,
      HOME: home,
      XDG_CONFIG_HOME: join(home, 'config'),
      XDG_CACHE_HOME: join(home, 'cache'),
      XDG_RUNTIME_DIR: join(home, 'runtime'),
    },
  });
  return {
    browser,
    newContext: () => browser.newContext({ permissions: ['camera', 'microphone'] }),
    close: () => browser.close(),
  };
}
