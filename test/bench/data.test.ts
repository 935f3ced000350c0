// bench data's accounting: per-peer download is the running total at the peer's last step, data
// waits and step times add up over the steps it took part in.
import { describe, expect, it } from 'vitest';
import { peerDataFigures } from '../../bench/data.ts';
import type { MetricRecord } from '../../coordinator/metrics.ts';

type StepRecord = Extract<MetricRecord, { type: 'step' }>;
const peer = (peerId: string, fetchedBytes: number | undefined, dataMs: number | undefined) =>
  ({
    peerId, images: 8, computeMs: 10, commMs: 1, waitMs: 0, checksum: 'ab', ...(fetchedBytes === undefined ? {} : { fetchedBytes }),
    ...(dataMs === undefined ? {} : { dataMs }),
  });
const step = (n: number, wallMs: number, peers: ReturnType<typeof peer>[]): StepRecord =>
  ({ type: 'step', time: n, step: n, generation: 1, ring: peers.length, loss: 1, imagesPerSec: 1, wallMs, peers });

describe('bench data accounting', () => {
  it('takes each peer\'s last running download total and sums its data waits over its steps', () => {
    const f = peerDataFigures([
      step(1, 100, [peer('a', 1000, 40), peer('b', 500, 0)]),
      step(2, 50, [peer('a', 1000, 0), peer('b', 1500, 10)]),
      step(3, 70, [peer('b', 1600, undefined)]), // a has left
    ]);
    expect(f.get('a')).toEqual({ fetched: 1000, dataMs: 40, stepMs: 150, steps: 2 });
    expect(f.get('b')).toEqual({ fetched: 1600, dataMs: 10, stepMs: 220, steps: 3 });
  });

  it('counts a peer that reported nothing as no download and no wait', () => {
    expect(peerDataFigures([step(1, 10, [peer('c', undefined, undefined)])]).get('c')).toEqual({ fetched: 0, dataMs: 0, stepMs: 10, steps: 1 });
  });
});
