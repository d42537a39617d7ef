/**
 * A progress bar on stderr: redrawn in place on a terminal, a few plain lines (every 25%) when stderr is a file
 * or a pipe, so logs stay readable.
 */

/** A stream the bar writes to (stderr by default); `isTTY` picks the in-place style. */
export interface ProgressStream {
  write(text: string): unknown;
  readonly isTTY?: boolean;
  readonly columns?: number;
}

/** A bar created by {@link createProgressBar}. */
export interface ProgressBar {
  /** Reports `done` of `total` units (bytes, say); `total` may grow. */
  update(done: number, total: number): void;
  /** Ends the bar (a last line at 100% when not already drawn) and says how long it took. */
  finish(): void;
}

/** Options of {@link createProgressBar}. */
export interface ProgressBarOptions {
  /** Where to draw. Default `process.stderr`. */
  readonly stream?: ProgressStream;
  /** Formats amounts for the bar. Default: bytes as MB/GB. */
  readonly format?: (units: number) => string;
}

/** Bytes as `12.3 MB` / `1.20 GB`. */
export function formatBytes(bytes: number): string {
  if (bytes >= 1e9) return `${(bytes / 1e9).toFixed(2)} GB`;
  return `${(bytes / 1e6).toFixed(1)} MB`;
}

/** Terminal redraws at most this often, so a fast load does not spend its time drawing. */
const REDRAW_MS = 80;
/** Plain-line mode reports at these fractions. */
const STEPS = [0.25, 0.5, 0.75, 1];

/** Starts a progress bar labelled `label` (nothing is drawn until the first `update`). */
export function createProgressBar(label: string, options: ProgressBarOptions = {}): ProgressBar {
  const stream = options.stream ?? process.stderr;
  const format = options.format ?? formatBytes;
  const started = performance.now();
  let lastDraw = 0;
  let nextStep = 0;
  let last = { done: 0, total: 0 };

  const line = (done: number, total: number) => {
    const fraction = total > 0 ? Math.min(1, done / total) : 0;
    const percent = `${Math.floor(fraction * 100)}%`.padStart(4);
    return { fraction, text: `${label} ${percent} ${format(done)} / ${format(total)}` };
  };

  const drawTty = (done: number, total: number) => {
    const { fraction, text } = line(done, total);
    const width = Math.max(10, Math.min(40, (stream.columns ?? 80) - text.length - 4));
    const filled = Math.round(fraction * width);
    stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${text}\x1b[K`);
  };

  return {
    update(done, total) {
      last = { done, total };
      if (stream.isTTY) {
        const now = performance.now();
        if (now - lastDraw < REDRAW_MS && done < total) return;
        lastDraw = now;
        drawTty(done, total);
        return;
      }
      const { fraction, text } = line(done, total);
      let crossed = false;
      while (nextStep < STEPS.length && fraction >= STEPS[nextStep]!) {
        nextStep++;
        crossed = true;
      }
      if (crossed) stream.write(`${text}\n`);
    },
    finish() {
      const seconds = ((performance.now() - started) / 1000).toFixed(1);
      if (stream.isTTY) {
        drawTty(last.total, last.total);
        stream.write(` (${seconds} s)\n`);
      } else {
        if (nextStep < STEPS.length && last.total > 0) stream.write(`${line(last.total, last.total).text}\n`);
        stream.write(`${label} done in ${seconds} s\n`);
      }
    },
  };
}
