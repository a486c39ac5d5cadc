/**
 * Published per-task MiniWoB++ success rates for the 11 tasks of the `miniwob-easy` suite: published, not
 * measured here. Every number comes from one table we could read and cite, with the source next to it;
 * a number that could not be checked against a source is left out (see MINIWOB_PUBLISHED_NOT_INCLUDED).
 *
 * The one per-task table retrievable from here: AutoWebGLM (Lai et al., KDD 2024, arXiv:2404.03648),
 * Appendix E, Table 8 "Per-task performance on MiniWoB++" (56 tasks). It reports AutoWebGLM's own scores
 * and, side by side, HTML-T5-XL (Gur et al., ICLR 2024, arXiv:2307.12856) and WebN-T5-XL (Gur et al., 2022,
 * arXiv:2210.03945), as quoted there; the two Gur et al. columns were not checked against their own papers'
 * tables. GPT-4 / GPT-3.5-Turbo columns of that table are left out (scores such as 0.33 / 0.67 suggest a
 * handful of episodes per task). All three agents read the page's HTML/DOM (text), not pixels only.
 */

export interface PublishedSource {
  /** Short key used in the JSON and the chart. */
  key: string;
  /** The agent, as the source names it. */
  agent: string;
  /** What the agent observes (the embedded policy here sees pixels + a bag of instruction words). */
  observation: string;
  /** Where the numbers were read: paper, table, and for quoted columns the original paper. */
  source: string;
  /** Per task (MiniWoB page name): success rate in [0, 1]. */
  perTask: Readonly<Record<string, number>>;
}

const AUTOWEBGLM_TABLE8 =
  'Lai et al. 2024, "AutoWebGLM: A Large Language Model-based Web Navigating Agent" (KDD 2024, arXiv:2404.03648), Appendix E, Table 8';

export const MINIWOB_PUBLISHED: readonly PublishedSource[] = [
  {
    key: 'HTML-T5-XL',
    agent: 'HTML-T5-XL (finetuned T5-XL)',
    observation: 'HTML (text)',
    source: `${AUTOWEBGLM_TABLE8}, column HTML-T5-XL, quoting Gur et al. 2024, "A Real-World WebAgent with Planning, Long Context Understanding, and Program Synthesis" (ICLR 2024, arXiv:2307.12856)`,
    perTask: {
      'click-button': 1.0,
      'click-link': 1.0,
      'click-dialog': 1.0,
      'click-test': 1.0,
      'click-test-2': 1.0,
      'click-widget': 1.0,
      'click-tab': 1.0,
      'focus-text': 1.0,
      'focus-text-2': 1.0,
      'enter-text': 1.0,
      'enter-password': 1.0,
    },
  },
  {
    key: 'WebN-T5-XL',
    agent: 'WebN-T5-XL (finetuned T5-XL)',
    observation: 'HTML (text)',
    source: `${AUTOWEBGLM_TABLE8}, column WebN-T5-XL, quoting Gur et al. 2022, "Understanding HTML with Large Language Models" (arXiv:2210.03945)`,
    perTask: {
      'click-button': 1.0,
      'click-link': 0.99,
      'click-dialog': 1.0,
      'click-test': 1.0,
      'click-test-2': 1.0,
      'click-widget': 1.0,
      'click-tab': 0.57,
      'focus-text': 1.0,
      'focus-text-2': 1.0,
      'enter-text': 0.89,
      'enter-password': 0.72,
    },
  },
  {
    key: 'AutoWebGLM',
    agent: 'AutoWebGLM (ChatGLM3-6B)',
    observation: 'simplified HTML (text)',
    source: `${AUTOWEBGLM_TABLE8}, column AutoWebGLM`,
    perTask: {
      'click-button': 1.0,
      'click-link': 1.0,
      'click-dialog': 1.0,
      'click-test': 1.0,
      'click-test-2': 0.93,
      'click-widget': 1.0,
      'click-tab': 1.0,
      'focus-text': 1.0,
      'focus-text-2': 1.0,
      'enter-text': 1.0,
      'enter-password': 1.0,
    },
  },
];

/** Sources the issue names whose per-task numbers could not be read and cited from here: not in the data. */
export const MINIWOB_PUBLISHED_NOT_INCLUDED: readonly string[] = [
  'Liu et al. 2018, "Reinforcement Learning on Web Interfaces using Workflow-Guided Exploration" (WGE, ICLR 2018): per-task numbers are in a bar chart (Figure 3) and a table we could not retrieve; left out',
  'Humphreys et al. 2022, "A data-driven approach for learning to control computers" (CC-Net and human scores, ICML 2022): the per-task appendix table could not be retrieved; left out',
  'Shi et al. 2017, "World of Bits" (ICML 2017): per-task numbers not retrieved; left out',
  'Shaw et al. 2023, "From Pixels to UI Actions" (Pix2Act, pixels only, arXiv:2306.00245): per-task appendix not retrieved; left out',
];
