// A short run of `npm run bench -- transport` on its real parts: two namespaced hosts on a
// 1 Gbit/s link, kernel TCP, the Node volunteers' direct link (TLS over TCP) and WebRTC link, a bare Chromium channel
// between pages on the two hosts, the link as a donor page opens it (relayed to a worker), and
// ring all-reduces across 2 and 3 hosts. Small sizes: this
// checks that every part moves its bytes and reports, not how fast (figures come from the bench).
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('transport bench', () => {
  it('moves bytes over TCP, the Node links (direct, WebRTC), a bare page channel and a donor page link, all-reduces across hosts', {
    timeout: 300_000,
  }, async () => {
    const { main } = await import('../../bench/transport.ts');
    const lines: string[] = [];
    const log = console.log;
    console.log = (s: unknown) => { lines.push(String(s)); };
    try {
      await main(['--mb=16', '--allreduce-mb=8']);
    } finally {
      console.log = log;
    }
    const last = JSON.parse(lines[lines.length - 1]!) as Record<string, number | null>;
    for (const k of ['tcp_mbps', 'node_mbps', 'bare_page_mbps', 'page_mbps', 'node_vs_tcp', 'page_vs_tcp', 'page_vs_bare', 'tcp_cpu_s_per_gb',
      'node_cpu_s_per_gb', 'bare_page_cpu_s_per_gb', 'page_cpu_s_per_gb', 'allreduce_lan_eff_2', 'allreduce_lan_eff_3',
      'node_webrtc_mbps', 'node_webrtc_vs_tcp', 'node_webrtc_cpu_s_per_gb', 'allreduce_lan_eff_2_webrtc', 'allreduce_lan_eff_3_webrtc']) {
      expect(last[k], k).toBeGreaterThan(0);
    }
    // A 1 Gbit/s line is 125 MB/s: nothing measured over it may exceed that (shaping is on).
    for (const k of ['tcp_mbps', 'node_mbps', 'node_webrtc_mbps', 'bare_page_mbps', 'page_mbps']) expect(last[k], k).toBeLessThan(130);
    // ResNet-50's wire per image over 64 peers: about a quarter of f32's on int8, half on bf16.
    expect(last.bytes_per_image_int8! / last.bytes_per_image_bf16!, 'int8 against bf16 bytes per image').toBeGreaterThan(0.5);
    expect(last.bytes_per_image_int8! / last.bytes_per_image_bf16!, 'int8 against bf16 bytes per image').toBeLessThan(0.51);
    // Every namespace the bench made is gone.
    expect(execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' })).not.toMatch(new RegExp(`vtb${process.pid}-`));
  });
});
