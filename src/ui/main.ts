// The page: the donate view (default) and the dashboard (#dashboard), one at a time.
import { showDashboard } from './dashboard.ts';
import { showDonate } from './donate.ts';

const donate = document.getElementById('donate')!;
const dashboard = document.getElementById('dashboard')!;
let stopDashboard: (() => void) | null = null;
let donateShown = false;

function route(): void {
  const dash = location.hash === '#dashboard';
  donate.hidden = dash;
  dashboard.hidden = !dash;
  if (dash && !stopDashboard) stopDashboard = showDashboard(dashboard);
  if (!dash && stopDashboard) {
    stopDashboard();
    stopDashboard = null;
  }
  if (!dash && !donateShown) {
    donateShown = true;
    showDonate(donate);
  }
}

addEventListener('hashchange', route);
route();
