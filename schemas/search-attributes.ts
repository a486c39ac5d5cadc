/**
 * dartflow's custom search attributes: stable API (the Temporal UI and `temporal workflow list --query`
 * filter on these names). Node-free so workflows can import it.
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  campaignId: defineSearchAttributeKey('DartflowCampaignId', SearchAttributeType.KEYWORD),
  policyVersion: defineSearchAttributeKey('DartflowPolicyVersion', SearchAttributeType.INT),
  successRate: defineSearchAttributeKey('DartflowSuccessRate', SearchAttributeType.DOUBLE),
  state: defineSearchAttributeKey('DartflowState', SearchAttributeType.KEYWORD),
} as const;

/** name → `temporal server start-dev --search-attribute NAME=TYPE` type word. */
export const SEARCH_ATTRIBUTE_CLI_TYPES: Record<string, string> = {
  DartflowCampaignId: 'Keyword',
  DartflowPolicyVersion: 'Int',
  DartflowSuccessRate: 'Double',
  DartflowState: 'Keyword',
};
