// 3x3 stride-1 convolutions by Winograd on the wasm kernels: F(2x2, 3x3) (wasm/winograd.ts: 16 GEMMs of
// Cout x Cin per 2x2 output tile, 2.25x fewer multiply-adds than im2col's GEMM) and F(4x4, 3x3)
// (wasm/winograd4.ts: 36 GEMMs per 4x4 tile, 4x fewer); src/wasm/ops-linalg.ts chooses this path.
//   forward          V = B^T x B per tile;  M_xi = U_xi V_xi (U = G w G^T);  y = A^T M A
//   backward input   the forward of dy with the filter turned (flipped, [ci][co]) and padding 2 - p
//   backward filter  dU_xi = sum over tiles of (A dy A^T)_xi V_xi^T;  dw (+)= G^T dU G
// A group of images (about a target count of tiles) is transformed, multiplied and transformed back
// in turn. Threads split groups of images, or, with fewer groups than threads, each group's channels
// (transforms) and its GEMMs (by xi) between barriers. Every output is computed in one fixed order
// whatever the thread count: the filter gradient's per-group sums are added in group order, as one
// thread adds them (bitwise the same for any thread count).
import type { Conv2dGeometry } from '../shapes/conv2d.ts';
import type { Kernels } from './kernels.ts';
import { groupsPerRound, MIN_SPLIT_MACS, splitRange, sumGroupsInOrder } from './split.ts';
import type { PartCtx, WasmCtx, WinogradMode } from './tensor.ts';

export type { WinogradMode } from './tensor.ts';

const F = 4;
/** gemmPanels' edge-tile scratch: one 4 x 8 tile of floats. */
const TILE_BYTES = 4 * 8 * F;
/** F(4x4, 3x3)'s output transform reads M up to 3 tiles past an image's last. */
const M_SLACK = 16;
/** A plane's padding (paddedPlane): 4 KiB pages and one cache line. */
const PAGE = 4096, LINE = 64;

/** One of the two algorithms: its output tile (m x m), positions (xi) and kernels. */
interface Variant {
  m: 2 | 4;
  xi: number;
  /** Tiles per group: about this many (whole images), so a group's transforms stay in cache beside its GEMMs. */
  target: number;
  /** U's 4-row panels [b0, b1) for the filter at w (turned: the input gradient's), each position's `plane` bytes apart. */
  filter(k: Kernels, w: number, cout: number, cin: number, u: number, turned: number, plane: number, b0: number, b1: number): void;
  /** Bytes of one part's transform scratch ('wgP'): the input transform's, and what the other transforms use from its start. */
  scratchBytes(k: Kernels, th: number, tw: number): number;
  /** Bytes between the positions' planes of a [rows][ld] matrix each (paddedPlane). */
  plane(rows: number, ld: number): number;
  input(k: Kernels, x: number, c0: number, c1: number, h: number, w: number, ph: number, pw: number, th: number, tw: number, v: number, ldT: number,
    chans: number, t0: number, pad: number, panels: number, plane: number): void;
  output(k: Kernels, m: number, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, ldT: number, chans: number, t0: number, y: number,
    accumulate: number, scratch: number, plane: number): void;
  gradOut(k: Kernels, dy: number, c0: number, c1: number, oh: number, ow: number, th: number, tw: number, g: number, ldT: number, chans: number,
    t0: number, scratch: number, plane: number): void;
  filterGrad(k: Kernels, du: number, e0: number, e1: number, count: number, dw: number, accumulate: number, scratch: number): void;
}

/**
 * Bytes between the positions' planes of a [rows][ld] float matrix each. The transforms read or write all positions of a
 * tile at once: planes a multiple of 4 KiB apart would all fall in the same cache sets, so each plane is rounded up to
 * 4 KiB and one 64-byte line added.
 */
const paddedPlane = (rows: number, ld: number): number => Math.ceil((rows * ld * F) / PAGE) * PAGE + LINE;

const F2: Variant = {
  m: 2, xi: 16, target: 256,
  plane: paddedPlane,
  filter: (k, ...a) => k.wgFilter(...a),
  scratchBytes: (k, th, tw) => k.wgInputScratchBytes(th, tw),
  input: (k, ...a) => k.wgInput(...a),
  output: (k, m, c0, c1, oh, ow, th, tw, ldT, chans, t0, y, accumulate, _scratch, plane) =>
    k.wgOutput(m, c0, c1, oh, ow, th, tw, ldT, chans, t0, y, accumulate, plane),
  gradOut: (k, dy, c0, c1, oh, ow, th, tw, g, ldT, chans, t0, _scratch, plane) => k.wgGradOut(dy, c0, c1, oh, ow, th, tw, g, ldT, chans, t0, plane),
  filterGrad: (k, du, e0, e1, count, dw, accumulate) => k.wgFilterGrad(du, e0, e1, count, dw, accumulate),
};

const F4: Variant = {
  m: 4, xi: 36, target: 128,
  plane: paddedPlane,
  filter: (k, ...a) => k.wg4Filter(...a),
  scratchBytes: (k, th, tw) => k.wg4ScratchBytes(th, tw),
  input: (k, ...a) => k.wg4Input(...a),
  output: (k, ...a) => k.wg4Output(...a),
  gradOut: (k, ...a) => k.wg4GradOut(...a),
  filterGrad: (k, ...a) => k.wg4FilterGrad(...a),
};

/**
 * 'auto' takes Winograd from this many channels on both sides (the transforms cost per channel, the GEMMs per
 * channel pair) and this many 2x2 output tiles per image (8x8 maps, or 7x7: the filter's transforms cost per
 * channel pair, the GEMMs per pair and tile). Measured with ResNet's layers at batch 16 (docs/wasm.md): 8x8 maps of
 * 128 channels run 2x faster, 4x4 maps of 256 break even, 2x2 maps of 512 take twice im2col's time. Of those, maps
 * of at least `f4Side` on both sides run F(4x4, 3x3) under 'auto'. Never by the batch size: a slice computed in micro-batches
 * must meet the same arithmetic per image as one computed at once (a ResNet-50 step with batch norm over groups of 4
 * small maps magnifies the difference between two algorithms' roundings to 1% of the step;
 * test/e2e/micro-batch.test.ts).
 */
export const WINOGRAD_MIN = { channels: 8, tilesPerImage: 16, f4Side: 8 } as const;

/**
 * The Winograd output tile a convolution runs with: 2 (F(2x2, 3x3)), 4 (F(4x4, 3x3)) or 0 (none: im2col). Only 3x3,
 * stride 1, padding at most 2; under 'auto' and 'f2', enough channels and tiles too ('f2': always F(2x2, 3x3));
 * 'always' and 'always4' wherever it applies (tests).
 */
export function winogradTile(g: Conv2dGeometry, mode: WinogradMode): 0 | 2 | 4 {
  if (mode === 'off' || g.kh !== 3 || g.kw !== 3 || g.sh !== 1 || g.sw !== 1 || g.ph > 2 || g.pw > 2) return 0;
  if (mode === 'always') return 2;
  if (mode === 'always4') return 4;
  const tiles = Math.ceil(g.oh / 2) * Math.ceil(g.ow / 2);
  if (g.cin < WINOGRAD_MIN.channels || g.cout < WINOGRAD_MIN.channels || tiles < WINOGRAD_MIN.tilesPerImage) return 0;
  return mode === 'auto' && g.oh >= WINOGRAD_MIN.f4Side && g.ow >= WINOGRAD_MIN.f4Side ? 4 : 2;
}

/** Whether a convolution runs by Winograd (either tile). */
export function winogradFits(g: Conv2dGeometry, mode: WinogradMode): boolean {
  return winogradTile(g, mode) !== 0;
}

/**
 * The variant of all three passes. The filter gradient sums over a group's tiles, and the groups follow how a batch is split
 * (a ring's slices, a stolen tail, micro-batches), so its rounding is where one split's weights part from another's, about
 * 10x more on F(4x4, 3x3) (G^T dU G cancels). It ran on F(2x2, 3x3) until the distributed tests compared rings with one
 * peer at GENTLE_LARS and replayed intervals that part (testbed/one-peer.ts); docs/wasm.md has the history.
 */
const variantOf = (g: Conv2dGeometry, mode: WinogradMode): Variant => (winogradTile(g, mode) === 4 ? F4 : F2);

/** One tiled pass: `inC` channels of h x w in, `outC` of oh x ow out (n images; byte addresses of image 0). */
interface Pass { n: number; inP: number; inC: number; h: number; w: number; ph: number; pw: number; outP: number; outC: number; oh: number; ow: number }

/** Tile counts and group sizes of a pass; ldV: the tiles of a group rounded up to whole 8-column panels (V in panels). */
interface Tiling { th: number; tw: number; per: number; nb: number; ldT: number; ldV: number; groups: number }

function tiling(p: Pass, vr: Variant): Tiling {
  const th = Math.ceil(p.oh / vr.m), tw = Math.ceil(p.ow / vr.m), per = th * tw;
  const nb = Math.max(1, Math.min(p.n, Math.floor(vr.target / per)));
  return { th, tw, per, nb, ldT: nb * per, ldV: Math.ceil((nb * per) / 8) * 8, groups: Math.ceil(p.n / nb) };
}

/** Bytes between positions' U (wgFilter: 4-row panels, `rows` rounded up to 4, times `cols`), padded as V's and M's planes. */
const uPlaneBytes = (rows: number, cols: number): number => paddedPlane(Math.ceil(rows / 4) * 4, cols);

/**
 * The filter at w transformed into U (turned: the input gradient's, rows and columns swapped), its 4-row panels split between
 * the threads (every value computed alone, so the same bits for any split); one op of cx.threads parts, so that it queues.
 */
function transformFilter(cx: WasmCtx, vr: Variant, w: number, cout: number, cin: number, u: number, turned: boolean): void {
  const rows = turned ? cin : cout, cols = turned ? cout : cin;
  const blocks = Math.ceil(rows / 4), plane = uPlaneBytes(rows, cols);
  cx.run(cx.threads, (pc, part) => {
    const [b0, b1] = splitRange(blocks, cx.threads, part);
    if (b1 > b0) vr.filter(pc.k, w, cout, cin, u, turned ? 1 : 0, plane, b0, b1);
  });
}

/**
 * out (=, or +=) the Winograd convolution of `in` with the transformed filter at u ([xi][outC][inC] in panels). The
 * transforms write V in the GEMM's panel layout, so the GEMMs (gemmPanels) copy nothing: the same bits as gemm()
 * on rows.
 */
function apply(cx: WasmCtx, vr: Variant, p: Pass, u: number, accumulate: boolean): void {
  const t = tiling(p, vr), XI = vr.xi;
  const vPlane = vr.plane(p.inC, t.ldV), mPlane = vr.plane(p.outC, t.ldT);
  const vBytes = XI * vPlane, mBytes = XI * mPlane + M_SLACK, pb = vr.scratchBytes(cx.sizes, t.th, t.tw);
  const uPlane = uPlaneBytes(p.outC, p.inC);
  const macs = p.n * t.per * XI * p.inC * p.outC;
  const inX = p.inC * p.h * p.w * F, outX = p.outC * p.oh * p.ow * F;
  // One group: inputs transformed by channel range [c0, c1) of part `part` of `parts`, GEMMs by xi, outputs by channel
  // (`barrier` between them: a no-op when the part has the group to itself).
  // pad and tile: the part's scratch (taken once per part: a lookup per group cost as much as a small group's call).
  const group = (pc: PartCtx, q: number, part: number, parts: number, v: number, m: number, pad: number, tile: number, barrier: () => void): void => {
    const b0 = q * t.nb, cnt = Math.min(t.nb, p.n - b0), T = cnt * t.per;
    const [c0, c1] = splitRange(p.inC, parts, part);
    for (let i = 0; i < cnt; i++) {
      vr.input(pc.k, p.inP + (b0 + i) * inX, c0, c1, p.h, p.w, p.ph, p.pw, t.th, t.tw, v, t.ldV, p.inC, i * t.per, pad, 1, vPlane);
    }
    barrier();
    const [x0, x1] = splitRange(XI, parts, part);
    if (x1 > x0) pc.k.gemmPanelsRun(p.outC, T, p.inC, u + x0 * uPlane, uPlane, v + x0 * vPlane, vPlane, m + x0 * mPlane, mPlane, t.ldT, tile, x1 - x0);
    barrier();
    const [o0, o1] = splitRange(p.outC, parts, part);
    for (let i = 0; i < cnt; i++) {
      vr.output(pc.k, m, o0, o1, p.oh, p.ow, t.th, t.tw, t.ldT, p.outC, i * t.per, p.outP + (b0 + i) * outX, accumulate ? 1 : 0, pad, mPlane);
    }
  };
  if (macs < MIN_SPLIT_MACS || cx.threads === 1 || t.groups >= cx.threads) {
    const parts = macs < MIN_SPLIT_MACS ? 1 : Math.max(1, Math.min(cx.threads, t.groups));
    cx.run(parts, (pc, part) => {
      const [q0, q1] = splitRange(t.groups, parts, part);
      const v = pc.scratch('wgV', vBytes), m = pc.scratch('wgM', mBytes), pad = pc.scratch('wgP', pb), tile = pc.scratch('gemm', TILE_BYTES);
      for (let q = q0; q < q1; q++) group(pc, q, 0, 1, v, m, pad, tile, () => {});
    });
    return;
  }
  const v = cx.scratch('wgV', vBytes), m = cx.scratch('wgM', mBytes);
  cx.run(cx.threads, (pc, part) => {
    const pad = pc.scratch('wgP', pb), tile = pc.scratch('gemm', TILE_BYTES);
    for (let q = 0; q < t.groups; q++) {
      if (q > 0) pc.barrier(); // the previous group's outputs are read from m
      group(pc, q, part, cx.threads, v, m, pad, tile, () => pc.barrier());
    }
  });
}

// x [N, Cin, H, W], w [Cout, Cin, 3, 3] -> y [N, Cout, OH, OW] (byte addresses; the geometry checked by the caller).
export function winogradForward(cx: WasmCtx, g: Conv2dGeometry, px: number, pw: number, py: number): void {
  const vr = variantOf(g, cx.winograd);
  const u = cx.scratch('wgU', vr.xi * uPlaneBytes(g.cout, g.cin));
  transformFilter(cx, vr, pw, g.cout, g.cin, u, false);
  apply(cx, vr, { n: g.n, inP: px, inC: g.cin, h: g.h, w: g.w, ph: g.ph, pw: g.pw, outP: py, outC: g.cout, oh: g.oh, ow: g.ow }, u, false);
}

// dy [N, Cout, OH, OW], w -> dx [N, Cin, H, W] (= or += by accumulate)
export function winogradBackwardInput(cx: WasmCtx, g: Conv2dGeometry, pdy: number, pw: number, pdx: number, accumulate: boolean): void {
  const vr = variantOf(g, cx.winograd);
  const u = cx.scratch('wgU', vr.xi * uPlaneBytes(g.cin, g.cout));
  transformFilter(cx, vr, pw, g.cout, g.cin, u, true);
  apply(cx, vr, { n: g.n, inP: pdy, inC: g.cout, h: g.oh, w: g.ow, ph: 2 - g.ph, pw: 2 - g.pw, outP: pdx, outC: g.cin, oh: g.h, ow: g.w }, u, accumulate);
}

// x [N, Cin, H, W], dy [N, Cout, OH, OW] -> dw [Cout, Cin, 3, 3] (= or += by accumulate)
export function winogradBackwardFilter(cx: WasmCtx, g: Conv2dGeometry, px: number, pdy: number, pdw: number, accumulate: boolean): void {
  const p: Pass = { n: g.n, inP: px, inC: g.cin, h: g.h, w: g.w, ph: g.ph, pw: g.pw, outP: pdy, outC: g.cout, oh: g.oh, ow: g.ow };
  const vr = variantOf(g, cx.winograd), XI = vr.xi;
  const t = tiling(p, vr);
  const W = g.cout * g.cin;
  const vPlane = vr.plane(g.cin, t.ldT), yPlane = vr.plane(g.cout, t.ldT);
  const vBytes = XI * vPlane, yBytes = XI * yPlane, pb = vr.scratchBytes(cx.sizes, t.th, t.tw);
  const inX = g.cin * g.h * g.w * F, outX = g.cout * g.oh * g.ow * F;
  const du = cx.scratch('wgU', XI * W * F);
  const macs = g.n * t.per * XI * W;
  // Group q's transforms (channel range of part `part`): V from x, Y from dy.
  const transforms = (pc: PartCtx, q: number, part: number, parts: number, v: number, y: number, pad: number): number => {
    const b0 = q * t.nb, cnt = Math.min(t.nb, g.n - b0);
    const [c0, c1] = splitRange(g.cin, parts, part), [o0, o1] = splitRange(g.cout, parts, part);
    for (let i = 0; i < cnt; i++) {
      vr.input(pc.k, px + (b0 + i) * inX, c0, c1, g.h, g.w, g.ph, g.pw, t.th, t.tw, v, t.ldT, g.cin, i * t.per, pad, 0, vPlane);
      vr.gradOut(pc.k, pdy + (b0 + i) * outX, o0, o1, g.oh, g.ow, t.th, t.tw, y, t.ldT, g.cout, i * t.per, pad, yPlane);
    }
    return cnt * t.per;
  };
  const gemms = (pc: PartCtx, T: number, x0: number, x1: number, v: number, y: number, dst: number, beta: number): void => {
    if (x1 <= x0) return;
    pc.k.gemmNTRun(g.cout, g.cin, T, y + x0 * yPlane, t.ldT, v + x0 * vPlane, t.ldT, dst + x0 * W * F, g.cin, 1, beta, yPlane, vPlane, W * F, x1 - x0);
  };
  const T = cx.threads;
  if (macs < MIN_SPLIT_MACS || T === 1) {
    // One part: dU = r_0, then += r_q group after group (gemmNT's beta 1 adds exactly as the threads' adds below).
    cx.run(1, (pc) => {
      const v = pc.scratch('wgV', vBytes), y = pc.scratch('wgM', yBytes), pad = pc.scratch('wgP', pb);
      for (let q = 0; q < t.groups; q++) gemms(pc, transforms(pc, q, 0, 1, v, y, pad), 0, XI, v, y, du, q > 0 ? 1 : 0);
      vr.filterGrad(pc.k, du, 0, W, W, pdw, accumulate ? 1 : 0, pad);
    });
    return;
  }
  if (t.groups >= T) {
    // Groups split between the threads, each group's sum into its own buffer, added in group order by element range.
    const partials = cx.scratch('aux2', groupsPerRound(t.groups, T, XI * W) * XI * W * F);
    cx.run(T, (pc, part) => {
      const v = pc.scratch('wgV', vBytes), y = pc.scratch('wgM', yBytes), pad = pc.scratch('wgP', pb);
      sumGroupsInOrder(pc, part, T, t.groups, XI * W, partials, du, false, (q, dst) => gemms(pc, transforms(pc, q, 0, 1, v, y, pad), 0, XI, v, y, dst, 0));
      pc.barrier();
      const [f0, f1] = splitRange(W, T, part);
      vr.filterGrad(pc.k, du, f0, f1, W, pdw, accumulate ? 1 : 0, pad);
    });
    return;
  }
  // Fewer groups than threads: every thread on each group, transforms by channel, GEMMs by xi.
  const v = cx.scratch('wgV', vBytes), y = cx.scratch('wgM', yBytes);
  cx.run(T, (pc, part) => {
    const [x0, x1] = splitRange(XI, T, part);
    const pad = pc.scratch('wgP', pb);
    for (let q = 0; q < t.groups; q++) {
      if (q > 0) pc.barrier(); // the previous group's GEMMs have read v and y
      const cnt = Math.min(t.nb, g.n - q * t.nb);
      transforms(pc, q, part, T, v, y, pad);
      pc.barrier();
      gemms(pc, cnt * t.per, x0, x1, v, y, du, q > 0 ? 1 : 0);
    }
    pc.barrier();
    const [f0, f1] = splitRange(W, T, part);
    vr.filterGrad(pc.k, du, f0, f1, W, pdw, accumulate ? 1 : 0, pad);
  });
}
