// The signaling server of `npm run bench -- network`, run on the test bed's `coord` host:
// listens on every address of that host and prints {port, issued: [{id, token}]} once.
import { startSignalingServer } from '../coordinator/signaling.ts';

const n = Number(process.argv[2] ?? 4);
const sig = await startSignalingServer({ path: '/signal', host: '0.0.0.0', port: 9000 });
const issued = Array.from({ length: n }, (_, i) => sig.signaling.issue(`h${i + 1}`));
process.stdout.write(`${JSON.stringify({ port: sig.port, issued })}\n`);
process.stdin.resume();
process.stdin.on('end', () => void sig.close().then(() => process.exit(0)));
