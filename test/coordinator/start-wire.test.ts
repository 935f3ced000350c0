// npm start --wire: listed in --help, and a format it does not know is refused with the ones it
// does, before any data is loaded or a job folder touched.
import { describe, expect, it } from 'vitest';
import { START_USAGE, startMain } from '../../coordinator/main.ts';

describe('npm start --wire', () => {
  it('is listed in the usage with its default', () => {
    expect(START_USAGE).toMatch(/--wire f32\|f16\|bf16 +the number format of the all-reduce between peers: bf16 \(default for a/);
  });

  it('refuses an unknown format, naming the allowed ones', async () => {
    await expect(startMain(['--wire', 'f8'])).rejects.toThrow('--wire must be one of f32, f16, bf16; got "f8"');
    await expect(startMain(['--wire'])).rejects.toThrow('--wire must be one of f32, f16, bf16; got "true"');
  });
});
