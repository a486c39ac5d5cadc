/**
 * The action of a step drawn over its screenshot as SVG: click point, drag path, typed text, scroll
 * arrow; typed text and keys go in the caption (SVG text would be stretched with the image). Canonical actions are normalized to [0,1] (schemas/actions.ts), so the overlay's
 * viewBox is the unit square stretched over the image: the same drawing fits a 160×160 browser env and
 * a 1920×1080 VM. Strokes keep their screen width (`non-scaling-stroke`) whatever the image size.
 */
import type { CanonicalAction } from '../schemas/actions';
import { html, raw, type Html } from './html';

const COLOR = '#ff1f8e';
const STROKE_ATTR = raw(`stroke="${COLOR}" stroke-width="3" vector-effect="non-scaling-stroke" fill="none"`);

/** A short label: text is drawn in an HTML caption under the image, because SVG text would be stretched. */
export function actionCaption(action: CanonicalAction | null): string {
  if (!action) return 'unparsed action (failed step)';
  switch (action.type) {
    case 'click':
    case 'double_click':
    case 'right_click':
      return `${action.type} (${action.x.toFixed(3)}, ${action.y.toFixed(3)})`;
    case 'drag':
      return `drag (${action.x.toFixed(3)}, ${action.y.toFixed(3)}) → (${action.x2.toFixed(3)}, ${action.y2.toFixed(3)})`;
    case 'type':
      return `type "${action.text}"`;
    case 'hotkey':
      return `hotkey ${action.keys.join('+')}`;
    case 'scroll':
      return `scroll ${action.direction}${action.x !== undefined && action.y !== undefined ? ` at (${action.x.toFixed(3)}, ${action.y.toFixed(3)})` : ''}`;
    case 'finished':
      return action.content ? `finished: ${action.content}` : 'finished';
    default:
      return action.type;
  }
}

/** A point marker in unit coordinates; the ring is an ellipse so it stays round on a non-square image. */
function marker(x: number, y: number, aspect: number, kind: string): Html {
  const r = 0.045;
  return html`<g class="act-${kind}" data-x="${x}" data-y="${y}">
    <ellipse cx="${x}" cy="${y}" rx="${r / Math.max(aspect, 1e-6)}" ry="${r}" ${STROKE_ATTR} />
    <line x1="${x - 0.07 / aspect}" y1="${y}" x2="${x + 0.07 / aspect}" y2="${y}" ${STROKE_ATTR} />
    <line x1="${x}" y1="${y - 0.07}" x2="${x}" y2="${y + 0.07}" ${STROKE_ATTR} />
  </g>`;
}

/** A line with an arrowhead drawn as a polyline (no <marker>: its id would repeat once per step on a page). */
function arrow(x1: number, y1: number, x2: number, y2: number, aspect: number): Html {
  // Work in square space (x scaled by aspect) so the head is symmetric on a stretched image.
  const dx = (x2 - x1) * aspect;
  const dy = y2 - y1;
  const len = Math.hypot(dx, dy) || 1;
  const [ux, uy] = [dx / len, dy / len];
  const head = 0.06;
  const back = (side: number): [number, number] => [
    x2 + (-ux * head - side * uy * head * 0.6) / aspect,
    y2 + (-uy * head + side * ux * head * 0.6),
  ];
  const [lx, ly] = back(1);
  const [rx, ry] = back(-1);
  return html`<line x1="${x1}" y1="${y1}" x2="${x2}" y2="${y2}" ${STROKE_ATTR} />
    <polyline points="${lx},${ly} ${x2},${y2} ${rx},${ry}" ${STROKE_ATTR} />`;
}

const ARROWS: Record<'up' | 'down' | 'left' | 'right', [number, number]> = {
  up: [0, -1],
  down: [0, 1],
  left: [-1, 0],
  right: [1, 0],
};

/**
 * The overlay for one step. `width`/`height` are the observation's pixels (only their ratio matters).
 * Actions without a place on screen: wait, finished and call_user draw a dashed frame; type and hotkey
 * are labelled in HTML by the page.
 */
export function actionOverlay(action: CanonicalAction | null, width: number, height: number): Html {
  const aspect = width / height;
  let body: Html | string = '';
  if (action) {
    switch (action.type) {
      case 'click':
        body = marker(action.x, action.y, aspect, 'click');
        break;
      case 'double_click':
        body = html`${marker(action.x, action.y, aspect, 'double_click')}<ellipse
            cx="${action.x}"
            cy="${action.y}"
            rx="${0.075 / aspect}"
            ry="0.075"
            ${STROKE_ATTR}
          />`;
        break;
      case 'right_click':
        body = marker(action.x, action.y, aspect, 'right_click');
        break;
      case 'drag':
        body = html`<g class="act-drag">
          ${marker(action.x, action.y, aspect, 'drag-start')} ${arrow(action.x, action.y, action.x2, action.y2, aspect)}
        </g>`;
        break;
      case 'scroll': {
        const [dx, dy] = ARROWS[action.direction];
        const x = action.x ?? 0.5;
        const y = action.y ?? 0.5;
        body = html`<g class="act-scroll" data-direction="${action.direction}">
          ${arrow(x, y, x + (dx * 0.25) / aspect, y + dy * 0.25, aspect)}
        </g>`;
        break;
      }
      case 'type':
      case 'hotkey':
        // Drawn as an HTML label by the page (pages/shot.ts): text in a stretched SVG would be distorted.
        body = html`<g class="act-${action.type}"></g>`;
        break;
      default:
        body = html`<rect
          class="act-${action.type}"
          x="0.01"
          y="0.01"
          width="0.98"
          height="0.98"
          ${STROKE_ATTR}
          stroke-dasharray="6 4"
        />`;
    }
  } else {
    body = html`<g class="act-none"
      ><line x1="0.1" y1="0.1" x2="0.9" y2="0.9" ${STROKE_ATTR} /><line
        x1="0.9"
        y1="0.1"
        x2="0.1"
        y2="0.9"
        ${STROKE_ATTR}
    /></g>`;
  }
  return html`<svg class="overlay" viewBox="0 0 1 1" preserveAspectRatio="none" aria-hidden="true">${body}</svg>`;
}
