// The page's network helpers: the /api/job reader, the join URL (with the page's token), the
// QR code, the plain-HTTP explanation; and the ring's direct/relayed edges.
import { describe, expect, it } from 'vitest';
import { insecureHelp, joinInfoOf, mainJoinUrl, qrModules, qrSvg } from '../../src/ui/join.ts';
import { ringSvg } from '../../src/ui/charts.ts';

describe('join info', () => {
  it('reads joinUrls and tls, dropping anything malformed', () => {
    expect(joinInfoOf({ joinUrls: ['https://10.0.0.1:8080/', 'javascript:alert(1)', 5, 'https://a b/'], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD' } })).toEqual({ joinUrls: ['https://10.0.0.1:8080/'], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD' } });
    expect(joinInfoOf({ tls: { caUrl: 'http://evil/ca.crt', caSha256: 'x' } })).toEqual({ joinUrls: [], tls: null });
    expect(joinInfoOf(null)).toEqual({ joinUrls: [], tls: null });
  });
  it('the main URL carries the page\'s own token, never one from the API', () => {
    const info = { joinUrls: ['https://10.0.0.1:8080/'], tls: null };
    expect(mainJoinUrl(info, '?token=s3cret', 'x')).toBe('https://10.0.0.1:8080/?token=s3cret');
    expect(mainJoinUrl(info, '', 'x')).toBe('https://10.0.0.1:8080/');
    expect(mainJoinUrl({ joinUrls: [], tls: null }, '', 'https://here/')).toBe('https://here/');
  });
  it('draws a QR code of the right version with finder patterns', () => {
    expect(qrModules('https://10.77.0.1:8080/')).toBe(25); // version 2 at level M
    const svg = qrSvg('https://10.77.0.1:8080/', 290);
    expect(svg.startsWith('<svg')).toBe(true);
    // The top-left finder's first row is 7 dark modules in a row at the quiet-zone offset.
    const cell = 290 / (25 + 8);
    for (let c = 0; c < 7; c++) expect(svg).toContain(`M${((c + 4) * cell).toFixed(2)} ${(4 * cell).toFixed(2)}h`);
    expect(svg).not.toContain(`M${((7 + 4) * cell).toFixed(2)} ${(4 * cell).toFixed(2)}h`); // the separator is light
  });
  it('on plain HTTP says why there is no WebGPU and where to go, not "use another browser"', () => {
    const loc = { protocol: 'http:', host: '10.77.0.1:8080', pathname: '/', search: '?name=x' };
    const h = insecureHelp(false, loc, { joinUrls: [], tls: { caUrl: '/ca.crt', caSha256: 'AB:CD:EF' } })!;
    expect(h.httpsUrl).toBe('https://10.77.0.1:8080/?name=x');
    expect(h.text).toContain('browsers give WebGPU (and threads) only to secure pages');
    expect(h.text).toContain('/ca.crt');
    expect(h.text).not.toMatch(/Chrome or Edge/);
    expect(insecureHelp(true, loc, null)).toBeNull();
  });
});

describe('the ring drawing', () => {
  it('draws relayed links dashed with a legend, direct ones solid', () => {
    const svg = ringSvg('ring', [
      { label: 'a', detail: '', share: 0.5, link: 'direct' },
      { label: 'n', detail: '', share: 0.5, link: 'relayed' },
    ]);
    expect(svg).toContain('stroke-dasharray');
    expect(svg).toContain('relayed (TURN)');
    expect(svg.match(/class="edge-direct"/g)?.length).toBe(1);
    expect(svg.match(/class="edge-relayed"/g)?.length).toBe(1);
  });
});
