// The bare browser data channel of `npm run bench -- transport`: two Chromium pages on two
// test-bed hosts, an RTCPeerConnection each with the browser's defaults (mDNS host candidates),
// no project code at all. The bench carries the offer and the answer between the pages (whole
// SDPs after ICE gathering), then one page sends `bytes` in messages of `msg` bytes with
// bufferedAmount back-pressure and the other times their arrival. Page code is plain JavaScript
// strings: nothing of ours is loaded into the pages.
import type { Page } from 'playwright-core';

const SETUP = `
window.__vtGathered = (pc) => new Promise((ok) => {
  if (pc.iceGatheringState === 'complete') return ok();
  pc.addEventListener('icegatheringstatechange', () => { if (pc.iceGatheringState === 'complete') ok(); });
});
window.__vtOpen = (dc) => new Promise((ok, fail) => {
  if (dc.readyState === 'open') return ok();
  dc.onopen = () => ok();
  dc.onclose = () => fail(new Error('data channel closed before it opened'));
});
`;

const OFFER = `(async () => {
  ${SETUP}
  const pc = new RTCPeerConnection();
  const dc = pc.createDataChannel('bench');
  dc.binaryType = 'arraybuffer';
  window.__vt = { pc, dc };
  await pc.setLocalDescription(await pc.createOffer());
  await window.__vtGathered(pc);
  return pc.localDescription.sdp;
})()`;

const ANSWER = (offer: string) => `(async () => {
  ${SETUP}
  const pc = new RTCPeerConnection();
  window.__vt = { pc, dc: null };
  window.__vtChannel = new Promise((ok) => { pc.ondatachannel = (e) => { e.channel.binaryType = 'arraybuffer'; window.__vt.dc = e.channel; ok(e.channel); }; });
  await pc.setRemoteDescription({ type: 'offer', sdp: ${JSON.stringify(offer)} });
  await pc.setLocalDescription(await pc.createAnswer());
  await window.__vtGathered(pc);
  return pc.localDescription.sdp;
})()`;

const ACCEPT = (answer: string) => `(async () => {
  await window.__vt.pc.setRemoteDescription({ type: 'answer', sdp: ${JSON.stringify(answer)} });
  await window.__vtOpen(window.__vt.dc);
})()`;

const RECV = (bytes: number) => `(async () => {
  const dc = await window.__vtChannel;
  await window.__vtOpen(dc);
  return await new Promise((ok) => {
    let got = 0, t0 = 0;
    dc.onmessage = (e) => {
      if (got === 0) t0 = performance.now();
      got += e.data.byteLength;
      if (got >= ${bytes}) ok({ bytes: got, ms: performance.now() - t0 });
    };
  });
})()`;

const SEND = (bytes: number, msg: number, high: number, low: number) => `(async () => {
  const dc = window.__vt.dc;
  dc.bufferedAmountLowThreshold = ${low};
  const t0 = performance.now();
  for (let sent = 0; sent < ${bytes}; sent += ${msg}) {
    while (dc.bufferedAmount > ${high}) await new Promise((ok) => { dc.onbufferedamountlow = ok; setTimeout(ok, 20); });
    dc.send(new Uint8Array(${msg}));
  }
  return { ms: performance.now() - t0 };
})()`;

/** Connects a (offering) and b (answering); resolves when the channel is open on both. */
export async function connectPages(a: Page, b: Page): Promise<void> {
  const offer = await a.evaluate(OFFER) as string;
  const answer = await b.evaluate(ANSWER(offer)) as string;
  await a.evaluate(ACCEPT(answer));
}

/** a sends `bytes` to b; the receiver's time from its first message to its last. */
export async function pageStream(a: Page, b: Page, bytes: number, msg: number): Promise<{ bytes: number; ms: number }> {
  const recv = b.evaluate(RECV(bytes)) as Promise<{ bytes: number; ms: number }>;
  await a.evaluate(SEND(bytes, msg, 1 << 20, 256 << 10));
  return recv;
}
