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
  const joinUrls = Array.isArray(o.joinUrls)
    ? o.joinUrls.filter((u): u is string => typeof u === 'string' && u.length <= 500 && /^https?:\/\/[^\s"<>]+$/.test(u)).slice(0, 16)
    : [];
  const t = typeof o.tls === 'object' && o.tls !== null ? (o.tls as Record<string, unknown>) : null;
  const tls = t && typeof t.caUrl === 'string' && /^\/[^\s"<>]*$/.test(t.caUrl) && typeof t.caSha256 === 'string'
    ? { caUrl: t.caUrl, caSha256: t.caSha256.slice(0, 200) }
    : null;
  return { joinUrls, tls };
}

/** `url` with `?token=` set to the page's own token, unless it carries one already. */
export function withToken(url: string, pageSearch: string): string {
  const token = new URLSearchParams(pageSearch).get('token');
  if (!token || /[?&]token=/.test(url)) return url;
  return `${url}${url.includes('?') ? '&' : '?'}token=${encodeURIComponent(token)}`;
}

/** The URL people should open: the first join URL (else `fallback`), with the page's ?token=. */
export function mainJoinUrl(info: JoinInfo, pageSearch: string, fallback: string): string {
  return withToken(info.joinUrls[0] ?? fallback, pageSearch);
}

/**
 * What the projector says under the address, beyond the address itself: how to get past the
 * certificate warning, and for a private job whose dashboard was opened without its token,
 * that people need the token (it is not put in the QR code unless the dashboard's own URL has it).
 */
export function joinNotes(info: JoinInfo, access: 'public' | 'private' | null, url: string): string[] {
  const notes: string[] = [];
  if (info.tls) {
    notes.push('Install it as a trusted root on each device once, then open the https address (docs/networks.md: "HTTPS and WebGPU on other machines").');
  }
  if (access === 'private' && !/[?&]token=/.test(url)) {
    notes.push('This job is private: people type its join token on the page, '
      + 'or open this dashboard as /?token=TOKEN#dashboard to put the token in the address and the QR code.');
  }
  return notes;
}

/** The most bytes a QR code holds at error correction M (version 40, byte mode). */
export const QR_MAX_BYTES = 2331;

function qrOf(text: string): ReturnType<typeof qrcode> {
  const qr = qrcode(0, 'M');
  qr.addData(text, 'Byte');
  qr.make();
  return qr;
}

/** `text` as the ASCII bytes the QR code holds (the library's default takes one byte per char). */
export const qrText = (text: string): string => (/^[\x20-\x7e]*$/.test(text) ? text : encodeURI(text));

/** A QR code of `text` as SVG (error correction M, 4-module quiet zone); a note if it cannot fit. */
export function qrSvg(text: string, size = 260): string {
  const ascii = qrText(text);
  if (ascii.length > QR_MAX_BYTES) {
    return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}"><rect width="100%" height="100%" fill="white"/>`
      + '<text x="50%" y="50%" text-anchor="middle" font-size="13">address too long for a QR code</text></svg>';
  }
  const qr = qrOf(ascii);
  const n = qr.getModuleCount();
  const cell = size / (n + 8);
  const rects: string[] = [];
  for (let r = 0; r < n; r++) {
    for (let c = 0; c < n; c++) {
      if (qr.isDark(r, c)) {
        rects.push(`M${((c + 4) * cell).toFixed(2)} ${((r + 4) * cell).toFixed(2)}h${cell.toFixed(2)}v${cell.toFixed(2)}h-${cell.toFixed(2)}z`);
      }
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" viewBox="0 0 ${size} ${size}" role="img" `
    + `aria-label="QR code of ${esc(ascii).replace(/"/g, '&quot;')}" shape-rendering="crispEdges">`
    + `<rect width="100%" height="100%" fill="white"/><path d="${rects.join('')}" fill="black"/></svg>`;
}

/** The QR code of `text` as rows of dark (true) and light modules, without the quiet zone (tests). */
export function qrMatrix(text: string): boolean[][] {
  const qr = qrOf(qrText(text));
  const n = qr.getModuleCount();
  return Array.from({ length: n }, (_, r) => Array.from({ length: n }, (_, c) => qr.isDark(r, c)));
}

export interface PageLocation { protocol: string; host: string; pathname: string; search: string }

export interface InsecureHelp {
  /** The whole explanation, one paragraph. */
  text: string;
  /** The same page over https://. */
  httpsUrl: string;
  /** The coordinator's CA to download first, when it has one. */
  ca: { url: string; sha256: string } | null;
}

/**
 * On a non-secure page (plain HTTP on an address other than localhost), the browser gives no
 * WebGPU, no SharedArrayBuffer and no threads, whatever the browser. Says so and where to go;
 * null on a secure page.
 */
export function insecureHelp(secure: boolean, loc: PageLocation, info: JoinInfo | null): InsecureHelp | null {
  if (secure) return null;
  const httpsUrl = `https://${loc.host}${loc.pathname}${loc.search}`;
  const ca = info?.tls ? { url: info.tls.caUrl, sha256: info.tls.caSha256 } : null;
  const caText = ca
    ? " If the browser warns about the certificate there, first download the coordinator's CA certificate "
      + `(${ca.url}, SHA-256 ${ca.sha256.slice(0, 23)}…) and install it as a trusted root.`
    : '';
  return {
    httpsUrl,
    ca,
    text: 'This page was opened over plain HTTP, so the browser gives it no WebGPU (browsers give WebGPU, and threads, only to secure pages). '
      + `Open ${httpsUrl} instead.${caText} Meanwhile it trains on the CPU (wasm, one thread).`,
  };
}

/**
 * A device or status message with the "use another browser" advice (`browserHelp`, i.e.
 * WEBGPU_HELP) replaced by the real reason on a non-secure page: the browser is not at fault.
 */
export function explainNoWebGpu(message: string, browserHelp: string, insecure: InsecureHelp | null): string {
  if (!insecure) return message;
  return message.split(browserHelp).join('WebGPU is not given to this page because it was opened over plain HTTP');
}
