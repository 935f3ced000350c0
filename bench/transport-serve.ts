// Serves the repository with vite (the project's config: COOP/COEP headers, workers as ES
// modules) on every address of a test-bed host, for the transport bench's donor pages
// (bench/transport-relay.html). Prints {"port": N} once; exits when stdin ends.
import { createServer } from 'vite';

const server = await createServer({ configFile: 'vite.config.ts', logLevel: 'warn', server: { host: '0.0.0.0', port: 0, hmr: false } });
await server.listen();
const addr = server.httpServer?.address();
if (!addr || typeof addr === 'string') throw new Error('vite has no port');
process.stdout.write(`${JSON.stringify({ port: addr.port })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void server.close().then(() => process.exit(0)));
