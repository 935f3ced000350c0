// Messages between the test page and its data Worker.
import type { AugmentSpec } from '../../../src/data/augment.ts';
import type { ImageEncoding } from '../../../src/data/manifest.ts';

export interface BatchRequest {
  readonly kind: 'batch';
  readonly baseUrl: string;
  readonly ids: number[];
  readonly epoch: number;
  readonly seed: number;
  readonly augment: AugmentSpec;
  /** Hide ImageDecoder first, to run the createImageBitmap fallback. */
  readonly noImageDecoder: boolean;
}

export interface DecodeRequest {
  readonly kind: 'decode';
  readonly images: { bytes: number[]; encoding: ImageEncoding; channels: 1 | 3 }[];
  readonly noImageDecoder: boolean;
}

export type WorkerRequest = BatchRequest | DecodeRequest;

export type WorkerReply =
  | { readonly kind: 'batch'; readonly decoder: string; readonly x: number[]; readonly labels: number[]; readonly shape: number[] }
  | { readonly kind: 'decode'; readonly decoder: string; readonly images: { data: number[]; height: number; width: number }[] }
  | { readonly kind: 'error'; readonly message: string };
