/** One step's screenshot (served by the viewer from MinIO) with its action drawn over it. */
import type { StepRecord } from '../../schemas/records';
import { html, type Html } from '../html';
import { actionOverlay } from '../overlay';

/** `screenshots/<sha256>.png` → the viewer's URL for it; null for a key of another shape. */
export function screenshotUrl(observationKey: string): string | null {
  const m = /^screenshots\/([0-9a-f]{64})\.png$/.exec(observationKey);
  return m ? `/screenshots/${m[1]}.png` : null;
}

/** Typed text and pressed keys as an HTML label over the image (readable at any image size, unlike SVG text). */
function typedLabel(step: StepRecord): Html | string {
  const a = step.action;
  if (a?.type === 'type') return html`<div class="typed" data-kind="type">⌨ ${a.text}</div>`;
  if (a?.type === 'hotkey') return html`<div class="typed" data-kind="hotkey">⌨ ${a.keys.join(' + ')}</div>`;
  return '';
}

export function stepShot(step: StepRecord, displayWidth: number): Html {
  const { width, height } = step.observationSize;
  const url = screenshotUrl(step.observationKey);
  const displayHeight = Math.round((displayWidth * height) / width);
  if (!url)
    return html`<div class="bad">screenshot key "${step.observationKey}" is not a content-addressed screenshot</div>`;
  return html`<div class="shot-wrap">
    <img
      class="shot"
      src="${url}"
      width="${displayWidth}"
      height="${displayHeight}"
      alt="step ${step.step} screenshot (${width}×${height})"
    />${actionOverlay(step.action, width, height)}${typedLabel(step)}
  </div>`;
}
