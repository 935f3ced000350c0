// What the donate page's one button says and does, from the volunteer's state and the job's:
// pure, so the rules are tested without a browser (test/ui/donate-state.test.ts).
import type { PublicJob } from '../client/http.ts';
import type { VolunteerStatus } from '../client/worker-api.ts';

/** The job has run all its steps: a volunteer that joins now has nothing to compute. */
export function jobFinished(job: PublicJob | null): boolean {
  return job !== null && job.step >= job.job.totalSteps;
}

export interface ButtonView { text: string; disabled: boolean; note: string | null }

export function donateButton(state: VolunteerStatus['state'], job: PublicJob | null): ButtonView {
  if (state === 'joining' || state === 'training') return { text: 'Pause', disabled: false, note: null };
  if (state === 'done' || jobFinished(job)) {
    const steps = job ? `all ${job.job.totalSteps} of its steps are done` : 'it has run all its steps';
    return {
      text: 'Finished', disabled: true,
      note: `This job is finished: ${steps}, so there is nothing left to compute. The dashboard (#dashboard) shows its result and links the trained model.`,
    };
  }
  return { text: state === 'paused' ? 'Resume' : 'Start', disabled: false, note: null };
}

/**
 * The device panel's help for a browser without WebGPU, unless the lines already hold it (the
 * probe's reason often quotes it): said once.
 */
export function withWebGpuHelp(lines: string[], help: string): string[] {
  return lines.some((l) => l.includes(help)) ? lines : [...lines, help];
}
