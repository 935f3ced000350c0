// The donate page's button from the volunteer's state and the job's (src/ui/donate-state.ts),
// and the device panel's WebGPU help said once.
import { describe, expect, it } from 'vitest';
import type { PublicJob } from '../../src/client/http.ts';
import { donateButton, jobFinished, withWebGpuHelp } from '../../src/ui/donate-state.ts';
import { WEBGPU_HELP } from '../../src/gpu/device.ts';

const job = (step: number, totalSteps: number) => ({ jobId: 1, step, generation: 1, peers: 0, job: { totalSteps } }) as unknown as PublicJob;

describe('donate button', () => {
  it('offers Start, Pause and Resume while the job has steps left', () => {
    expect(donateButton('idle', job(10, 970))).toEqual({ text: 'Start', disabled: false, note: null, finished: false });
    expect(donateButton('training', job(10, 970)).text).toBe('Pause');
    expect(donateButton('joining', null).text).toBe('Pause');
    expect(donateButton('paused', job(10, 970))).toEqual({ text: 'Resume', disabled: false, note: null, finished: false });
    expect(donateButton('error', null).text).toBe('Start');
  });

  it('a finished job offers no Start and says why', () => {
    expect(jobFinished(job(970, 970))).toBe(true);
    expect(jobFinished(job(969, 970))).toBe(false);
    expect(jobFinished(null)).toBe(false);
    for (const s of ['idle', 'paused', 'error', 'done'] as const) {
      const v = donateButton(s, job(970, 970));
      expect(v.text).toBe('Finished');
      expect(v.disabled).toBe(true);
      expect(v.note).toMatch(/finished: all 970 of its steps are done, so there is nothing left to compute/);
    }
    // A volunteer still in its last step keeps its Pause.
    expect(donateButton('training', job(970, 970)).text).toBe('Pause');
    expect(donateButton('done', null).note).toMatch(/it has run all its steps/);
    expect(donateButton('done', null).finished).toBe(true);
  });

  it('a finished job states its result and offers the trained model', () => {
    const v = donateButton('idle', job(970, 970), { step: 970, top1: 0.8004, samples: 10_000, final: true });
    expect(v.note).toBe('This job is finished: all 970 of its steps are done, so there is nothing left to compute. '
      + 'Its result: 80.0% top-1 on 10,000 test images after step 970. Download the trained model below; the dashboard (#dashboard) shows how it trained.');
    expect(v.finished).toBe(true);
    const last = donateButton('idle', job(970, 970), { step: 900, top1: 0.7, samples: 1000, final: false });
    expect(last.note).toMatch(/Its last evaluation: 70\.0% top-1 on 1,000 test images after step 900\./);
  });

  it('a paused job: a donor may join and waits with a message, not a spinner', () => {
    const paused = { ...job(12, 970), paused: true } as PublicJob;
    const idle = donateButton('idle', paused);
    expect(idle).toMatchObject({ text: 'Start', disabled: false, finished: false });
    const at = "The job's owner has paused it at step 12: ";
    expect(idle.note).toBe(`${at}press Start to join; this device then waits, without computing, until the owner resumes it.`);
    for (const s of ['joining', 'training'] as const) {
      expect(donateButton(s, paused)).toMatchObject({
        text: 'Pause', note: `${at}this device keeps its place and waits, without computing, until the owner resumes it.`,
      });
    }
    // Resumed: no note.
    expect(donateButton('training', job(12, 970)).note).toBeNull();
  });

  it('says how to get WebGPU once, whether or not the reason already quotes it', () => {
    expect(withWebGpuHelp(['Training on WebAssembly SIMD (CPU): x', 'Why: webgpu is not available.'], WEBGPU_HELP)).toHaveLength(3);
    const quoted = ['Training on WebAssembly SIMD (CPU): x', `Why: webgpu is not available: ${WEBGPU_HELP}.`];
    expect(withWebGpuHelp(quoted, WEBGPU_HELP)).toEqual(quoted);
  });
});
