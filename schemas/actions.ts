/**
 * The canonical GUI action stored in every step (Node-free: shared by workflows, env workers, policies).
 * Coordinates are normalized to [0,1] of the screen so one trajectory schema serves a 160×160 browser
 * env and a 1920×1080 OSWorld VM alike.
 */
import { z } from 'zod';

const unit = z.number().min(0).max(1);

export const ACTION_TYPES = [
  'click',
  'double_click',
  'right_click',
  'drag',
  'type',
  'hotkey',
  'scroll',
  'wait',
  'finished',
  'call_user',
  'hover',
  'key_down',
  'key_up',
] as const;
export type ActionType = (typeof ACTION_TYPES)[number];

export const CanonicalActionSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('click'), x: unit, y: unit }),
  z.object({ type: z.literal('double_click'), x: unit, y: unit }),
  z.object({ type: z.literal('right_click'), x: unit, y: unit }),
  z.object({ type: z.literal('drag'), x: unit, y: unit, x2: unit, y2: unit }),
  z.object({ type: z.literal('type'), text: z.string().max(10_000) }),
  z.object({ type: z.literal('hotkey'), keys: z.array(z.string().min(1)).min(1).max(8) }),
  z.object({
    type: z.literal('scroll'),
    direction: z.enum(['up', 'down', 'left', 'right']),
    x: unit.optional(),
    y: unit.optional(),
  }),
  z.object({ type: z.literal('wait') }),
  z.object({ type: z.literal('finished'), content: z.string().max(2000).optional() }),
  z.object({ type: z.literal('call_user') }),
  // UI-TARS's parser also emits these (DART executes them as moveTo / keyDown / keyUp).
  z.object({ type: z.literal('hover'), x: unit, y: unit }),
  z.object({ type: z.literal('key_down'), key: z.string().min(1).max(32) }),
  z.object({ type: z.literal('key_up'), key: z.string().min(1).max(32) }),
]);
export type CanonicalAction = z.infer<typeof CanonicalActionSchema>;
