// What the page and the dashboard say about reaching this job from other machines: the join
// address (large, with a QR code for a classroom projector), the coordinator's certificate
// authority to trust, and, on a page opened over plain HTTP, why it has no WebGPU and where to
// go instead. Pure functions (tested in Node); the DOM code in dashboard.ts / donate.ts.
import qrcode from 'qrcode-generator';
import { esc } from './charts.ts';

export interface JoinInfo {
  joinUrls: string[];
  tls: { caUrl: string; caSha256: string } | null;
}

/** Reads the network part of GET /api/job (absent fields on older coordinators: empty). */
export function joinInfoOf(x: unknown): JoinInfo {
  const o = typeof x === 'object' && x !== null ? (x as Record<string, unknown>) : {};
  const joinUrls = Array.isArray(o.joinUrls) ? o.joinUrls.filter((u): u is string => typeof u === 'string' && /^https?:\/\/[^\s"<>]+$/.test(u)).slice(0, 16) : [];
  const t = typeof o.tls === 'object' && o.tls !== null ? (o.tls as Record<string, unknown>) : null;
  const tls = t && typeof t.caUrl === 'string' && t.caUrl.startsWith('/') && typeof t.caSha256 === 'string' ? { caUrl: t.caUrl, caSha256: t.caSha256.slice(0, 200) } : null;
  return { joinUrls, tls };
}

/** The URL people should open: the first join URL, with the page's own ?token= when it has one. */
export function mainJoinUrl(info: JoinInfo, pageSearch: string, fallback: string): string {
  const token = new URLSearchParams(pageSearch).get('token');
  const base = info.joinUrls[0] ?? fallback;
  return token ? `${base}${base.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}` : base;
}

/** A QR code of `text` as SVG (error correction M, 4-module quiet zone). */
export function qrSvg(text: string, size = 260): string {
  const qr = qrcode(0, 'M');
  qr.addData(text);
  qr.make();
  const n = qr.getModuleCount();
  const cell = size / (n + 8);
  const rects: string[] = [];
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      if (qr.isDark(r, c)) rects.push(`M${((c + 4) * cell).toFixed(2)} ${((r + 4) * cell).toFixed(2)}h${cell.toFixed(2)}v${cell.toFixed(2)}h-${cell.toFixed(2)}z`);
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" viewBox="0 0 ${size} ${size}" role="img" aria-label="QR code of ${esc(text)}"><rect width="100%" height="100%" fill="white"/><path d="${rects.join('')}" fill="black"/></svg>`;
}

/** The number of modules per side of the QR code of `text` (tests). */
export function qrModules(text: string): number {
  const qr = qrcode(0, 'M');
  qr.addData(text);
  qr.make();
  return qr.getModuleCount();
}

export interface PageLocation { protocol: string; host: string; pathname: string; search: string }

/**
 * On a non-secure page (plain HTTP on an address other than localhost), the browser gives no
 * WebGPU, no SharedArrayBuffer and no threads. Says so and where to go; null on a secure page.
 */
export function insecureHelp(secure: boolean, loc: PageLocation, info: JoinInfo | null): { text: string; httpsUrl: string } | null {
  if (secure) return null;
  const httpsUrl = `https://${loc.host}${loc.pathname}${loc.search}`;
  const ca = info?.tls ? ` If the browser warns about the certificate, first install the coordinator's certificate (${info.tls.caUrl}, SHA-256 ${info.tls.caSha256.slice(0, 23)}…) as a trusted root.` : '';
  return {
    httpsUrl,
    text: `This page was opened over plain HTTP, so the browser gives it no WebGPU: browsers give WebGPU (and threads) only to secure pages. Open ${httpsUrl} instead.${ca} Meanwhile this device can train on its CPU (WebAssembly, one thread).`,
  };
}
