/** Terminal progress bars and status lines (no dependency): redrawn in place on a TTY, plain lines otherwise. */
export function bar(fraction: number, width = 24): string {
  const f = Math.max(0, Math.min(1, Number.isFinite(fraction) ? fraction : 0));
  const full = Math.round(f * width);
  return `[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${(f * 100).toFixed(0).padStart(3)}%`;
}

export class StatusLine {
  private lastPlain = 0;
  constructor(private readonly stream: NodeJS.WriteStream = process.stdout) {}
  update(text: string): void {
    if (this.stream.isTTY) {
      this.stream.write(`\r\x1b[2K${text}`);
    } else if (Date.now() - this.lastPlain > 5000) {
      // Logs and CI: one line every few seconds instead of a carriage-return animation.
      this.lastPlain = Date.now();
      this.stream.write(`${text}\n`);
    }
  }
  done(text?: string): void {
    if (this.stream.isTTY) this.stream.write('\r\x1b[2K');
    if (text) this.stream.write(`${text}\n`);
  }
}
