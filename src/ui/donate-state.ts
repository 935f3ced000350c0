// What the donate page's one button says and does, from the volunteer's state and the job's:
// pure, so the rules are tested without a browser (test/ui/donate-state.test.ts).
import type { PublicJob } from '../client/http.ts';
import type { VolunteerStatus } from '../client/worker-api.ts';

/** The job has run all its steps: a volunteer that joins now has nothing to compute. */
export function jobFinished(job: PublicJob | null): boolean {
  return job !== null && job.step >= job.job.totalSteps;
}

/** `finished`: the job has nothing left to compute (the page then offers the trained model). */
export interface ButtonView { text: string; disabled: boolean; note: string | null; finished: boolean }

/** The job's newest evaluation (its final one once the job ends), as the donate view states it. */
export interface JobResult { step: number; top1: number; samples: number; final: boolean }

const resultText = (r: JobResult): string => `${r.final ? 'Its result' : 'Its last evaluation'}: `
  + `${(r.top1 * 100).toFixed(1)}% top-1 on ${r.samples.toLocaleString('en-US')} test images after step ${r.step}.`;

export function donateButton(state: VolunteerStatus['state'], job: PublicJob | null, result: JobResult | null = null): ButtonView {
  const finished = state === 'done' || jobFinished(job);
  // A paused job: a donor joins (or stays) and waits with a message, not a spinner.
  const paused = job?.paused === true && !finished
    ? `The job's owner has paused it at step ${job.step}: ${state === 'joining' || state === 'training'
      ? 'this device keeps its place and waits, without computing, until the owner resumes it.'
      : 'press Start to join; this device then waits, without computing, until the owner resumes it.'}`
    : null;
  if (state === 'joining' || state === 'training') return { text: 'Pause', disabled: false, note: paused, finished: false };
  if (finished) {
    const steps = job ? `all ${job.job.totalSteps} of its steps are done` : 'it has run all its steps';
    return {
      text: 'Finished', disabled: true, finished: true,
      note: `This job is finished: ${steps}, so there is nothing left to compute.${result ? ` ${resultText(result)}` : ''} `
        + 'Download the trained model below; the dashboard (#dashboard) shows how it trained.',
    };
  }
  return { text: state === 'paused' ? 'Resume' : 'Start', disabled: false, note: paused, finished: false };
}

/**
 * The device panel's help for a browser without WebGPU, unless the lines already hold it (the
 * probe's reason often quotes it): said once.
 */
export function withWebGpuHelp(lines: string[], help: string): string[] {
  return lines.some((l) => l.includes(help)) ? lines : [...lines, help];
}
