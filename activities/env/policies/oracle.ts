/**
 * Oracle policy: asks the task page for its next correct action. Used for demos (BC warm start),
 * pre-collection and tests. With `grid` (default) clicks are snapped to the embedded policy's 16×16
 * cell centres, so every demo is expressible as an embedded action index.
 */
import { embeddedActionToIndex, embeddedIndexToAction } from '../../../actions/embedded';
import { renderUiTarsResponse, uiTarsCoordSpace } from '../../../actions/uitars';
import type { EpisodePolicy, PolicyContext, PolicyFactory } from '../policy';
import { PolicyUnavailableError } from '../policy';

export function createOraclePolicy(ctx: PolicyContext, opts: { grid?: boolean } = {}): EpisodePolicy {
  const grid = opts.grid ?? ctx.options.grid !== false;
  return {
    async act(obs) {
      if (!ctx.env.oracle) throw new PolicyUnavailableError(`env ${ctx.env.kind} has no oracle`);
      let action = await ctx.env.oracle();
      // A finished task has no next action; say so explicitly.
      action ??= { type: 'finished' };
      let actionIndex = embeddedActionToIndex(action, obs.fields);
      if (grid && actionIndex !== undefined) action = embeddedIndexToAction(actionIndex, obs.fields) ?? action;
      if (!grid && action.type === 'click') actionIndex = undefined;
      const space = uiTarsCoordSpace({ width: obs.width, height: obs.height });
      return {
        action,
        actionText: renderUiTarsResponse(action, space),
        ...(actionIndex !== undefined ? { actionIndex } : {}),
        logProb: 0,
        entropy: 0,
        policyVersion: 0,
        policyServer: 'oracle',
      };
    },
  };
}

export const oraclePolicyFactory: PolicyFactory = (ctx) => createOraclePolicy(ctx);
