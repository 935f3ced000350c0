// The page's network helpers: the /api/job reader, the join URL (with the page's token), the
// projector's notes, and the plain-HTTP explanation that replaces "use another browser".
import { describe, expect, it } from 'vitest';
import { WEBGPU_HELP } from '../../src/gpu/device.ts';
import { explainNoWebGpu, insecureHelp, joinInfoOf, joinNotes, mainJoinUrl, withToken } from '../../src/ui/join.ts';

describe('join info', () => {
  it('reads joinUrls and tls, dropping anything malformed', () => {
    expect(joinInfoOf({
      joinUrls: ['https://10.0.0.1:8080/', 'javascript:alert(1)', 5, 'https://a b/', 'https://x/"onload="'], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD' },
    })).toEqual({ joinUrls: ['https://10.0.0.1:8080/'], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD' } });
    expect(joinInfoOf({ tls: { caUrl: 'http://evil/ca.crt', caSha256: 'x' } })).toEqual({ joinUrls: [], tls: null });
    expect(joinInfoOf({ tls: { caUrl: '/ca.crt' } }).tls).toBeNull();
    expect(joinInfoOf({ joinUrls: 'https://10.0.0.1:8080/', tls: 'yes' })).toEqual({ joinUrls: [], tls: null });
    expect(joinInfoOf(null)).toEqual({ joinUrls: [], tls: null });
    expect(joinInfoOf({ job: { name: 'older coordinator' } })).toEqual({ joinUrls: [], tls: null });
  });

  it('the main URL carries the page\'s own token, once', () => {
    const info = { joinUrls: ['https://10.0.0.1:8080/', 'https://lab.local:8080/'], tls: null };
    expect(mainJoinUrl(info, '?token=s3cret', 'x')).toBe('https://10.0.0.1:8080/?token=s3cret');
    expect(mainJoinUrl(info, '', 'x')).toBe('https://10.0.0.1:8080/');
    expect(mainJoinUrl({ joinUrls: [], tls: null }, '', 'https://here/')).toBe('https://here/');
    expect(mainJoinUrl({ joinUrls: ['https://10.0.0.1:8080/?token=abc'], tls: null }, '?token=abc', 'x')).toBe('https://10.0.0.1:8080/?token=abc');
    expect(withToken('https://lab.local:8080/?name=x', '?token=a b&')).toBe('https://lab.local:8080/?name=x&token=a%20b');
  });

  it('the projector says to trust the CA, and how to put a private job\'s token in the QR code', () => {
    const tls = { caUrl: '/ca.crt', caSha256: 'AB:CD' };
    expect(joinNotes({ joinUrls: [], tls }, 'public', 'https://h/').join(' ')).toMatch(/trusted root on each device.*then open the https address/);
    expect(joinNotes({ joinUrls: [], tls: null }, 'public', 'https://h/')).toEqual([]);
    expect(joinNotes({ joinUrls: [], tls: null }, 'private', 'https://h/').join(' ')).toMatch(/private.*\?token=TOKEN#dashboard/);
    expect(joinNotes({ joinUrls: [], tls: null }, 'private', 'https://h/?token=t')).toEqual([]);
  });
});

describe('a page opened over plain HTTP', () => {
  const loc = { protocol: 'http:', host: '10.77.0.1:8080', pathname: '/', search: '?name=x' };

  it('says why there is no WebGPU and where to go, not "use another browser"', () => {
    const h = insecureHelp(false, loc, { joinUrls: [], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD:EF' } })!;
    expect(h.httpsUrl).toBe('https://10.77.0.1:8080/?name=x');
    expect(h.text).toContain('This page was opened over plain HTTP, so the browser gives it no WebGPU');
    expect(h.text).toContain('Open https://10.77.0.1:8080/?name=x instead');
    expect(h.text).toContain('trains on the CPU (wasm');
    expect(h.text).toContain('/ca.crt');
    expect(h.ca).toEqual({ url: '/ca.crt', sha256: 'AB:CD:EF' });
    expect(h.text).not.toMatch(/Chrome or Edge/);
    expect(insecureHelp(false, loc, null)!.ca).toBeNull();
    expect(insecureHelp(false, loc, null)!.text).not.toContain('certificate');
    expect(insecureHelp(true, loc, null)).toBeNull();
  });

  it('the worker\'s "no WebGPU in this browser" advice is replaced there, and only there', () => {
    const h = insecureHelp(false, loc, null);
    const reason = `wasm is the faster path on this device: 120 images/s vs webgpu is not available (${WEBGPU_HELP})`;
    const forced = `the webgpu backend was asked for but is not available here: ${WEBGPU_HELP}. Choose 'auto' to use what this device has.`;
    for (const m of [reason, forced]) {
      const out = explainNoWebGpu(m, WEBGPU_HELP, h);
      expect(out).not.toMatch(/Chrome or Edge|not available in this browser/);
      expect(out).toContain('plain HTTP');
      expect(explainNoWebGpu(m, WEBGPU_HELP, null)).toBe(m); // a secure page without WebGPU: the browser's fault
    }
    expect(WEBGPU_HELP).toMatch(/Use Chrome or Edge/); // what is being replaced still exists
  });
});
