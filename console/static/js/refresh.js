// The refresh the user controls: off by default; when on, the current
// page's refresh runs every interval, one at a time (the next waits for
// the last to finish), and never while the tab is hidden. Off stops all
// polling: nothing calls the API until the user acts.

const onKey = 'sundial.console.autoRefresh';
const everyKey = 'sundial.console.refreshEvery';

export class Refresher {
  constructor(onRefreshed) {
    this.on = window.sessionStorage.getItem(onKey) === 'true';
    this.every = Number(window.sessionStorage.getItem(everyKey)) || 5000;
    this.task = null;
    this.timer = 0;
    this.running = false;
    this.onRefreshed = onRefreshed;
    document.addEventListener('visibilitychange', () => this.schedule());
  }

  // page makes task the current page's refresh and runs it once now.
  page(task) {
    this.task = task;
    return this.run();
  }

  setOn(on) {
    this.on = on;
    window.sessionStorage.setItem(onKey, String(on));
    this.schedule();
  }

  setEvery(ms) {
    this.every = ms;
    window.sessionStorage.setItem(everyKey, String(ms));
    this.schedule();
  }

  stop() {
    this.task = null;
    window.clearTimeout(this.timer);
  }

  async run() {
    window.clearTimeout(this.timer);
    const task = this.task;
    if (!task) return;
    this.running = true;
    try {
      await task();
      this.onRefreshed(new Date());
    } finally {
      this.running = false;
      if (task === this.task) this.schedule();
    }
  }

  schedule() {
    window.clearTimeout(this.timer);
    if (!this.on || !this.task || this.running || document.hidden) return;
    this.timer = window.setTimeout(() => this.run(), this.every);
  }
}
