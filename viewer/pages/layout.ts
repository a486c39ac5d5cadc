/**
 * The page shell every view shares: styles, breadcrumbs, and the one inline script a page may carry
 * (allowed by a per-response CSP nonce; nothing else runs, and nothing loads from another origin).
 */
import { escapeHtml, html, raw, type Html } from '../html';

export interface Page {
  status?: number;
  title: string;
  /** [label, href] from the campaigns list down to this page; the last one is the current page. */
  crumbs: Array<[string, string]>;
  body: Html;
  /** Inline JavaScript run after the body (keyboard stepping). */
  script?: string;
}

const CSS = `
:root { color-scheme: light; --muted:#666; --line:#ddd; --accent:#ff1f8e; --ok:#1a7f37; --bad:#c62828; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fafafa; }
header { background: #20232a; color: #fff; padding: 10px 20px; display: flex; gap: 16px; align-items: baseline; }
header a { color: #9cdcfe; text-decoration: none; }
header .brand { font-weight: 700; color: #fff; }
main { padding: 16px 20px 40px; max-width: 1500px; }
h1 { font-size: 20px; margin: 4px 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: var(--muted); }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 600; }
.notice { border-left: 4px solid #e0a800; background: #fff8e1; padding: 8px 12px; margin: 8px 0; }
.error-box { border-left: 4px solid var(--bad); background: #fdecea; padding: 12px 16px; margin: 8px 0; }
.error-box code { word-break: break-all; }
.kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; background: #fff; padding: 8px 12px; border: 1px solid var(--line); }
.kv dt { color: var(--muted); } .kv dd { margin: 0; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.charts svg { max-width: 100%; height: auto; border: 1px solid var(--line); }
.shot-wrap { position: relative; display: inline-block; line-height: 0; background: #000; outline: 1px solid #888; }
.shot-wrap .typed { position: absolute; left: 4%; right: 4%; bottom: 3%; line-height: 1.3; font: 600 13px ui-monospace, monospace; color: #fff; background: rgba(255,31,142,.88); padding: 3px 6px; border-radius: 3px; white-space: pre-wrap; word-break: break-all; max-height: 45%; overflow: hidden; }
.shot-wrap img.shot { image-rendering: pixelated; display: block; }
.shot-wrap svg.overlay { position: absolute; inset: 0; width: 100%; height: 100%; pointer-events: none; }
.steps { display: flex; flex-direction: column; gap: 14px; }
.step { display: flex; gap: 16px; background: #fff; border: 2px solid var(--line); padding: 10px; scroll-margin-top: 10px; }
.step.current { border-color: var(--accent); }
.step .shot { width: 320px; }
.step .info { flex: 1; min-width: 0; }
.step pre { white-space: pre-wrap; word-break: break-word; background: #f5f5f5; padding: 6px 8px; margin: 6px 0; max-height: 14em; overflow: auto; }
.caption { font-family: ui-monospace, monospace; color: var(--accent); font-weight: 600; }
.group { display: grid; gap: 10px; align-items: start; }
.group .col { background: #fff; border: 1px solid var(--line); padding: 8px; min-width: 0; }
.group .cell { margin: 6px 0; }
.group .shot-wrap { display: block; }
.group .shot { width: 100%; height: auto; }
form.filter { margin-bottom: 12px; }
form.filter input[type=text] { width: 420px; }
.pager { margin: 10px 0; display: flex; gap: 14px; }
`;

export function layout(page: Page, nonce: string): string {
  const crumbs = page.crumbs.map(([label, link], i) =>
    i === page.crumbs.length - 1 ? html`<span>${label}</span>` : html`<a href="${link}">${label}</a> ›`
  );
  const script = page.script ? raw(`<script nonce="${escapeHtml(nonce)}">${page.script}</script>`) : '';
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <link rel="icon" href="data:," />
        <title>${page.title} · dartflow viewer</title>
        <style nonce="${nonce}">
          ${raw(CSS)}
        </style>
      </head>
      <body>
        <header>
          <a class="brand" href="/">dartflow viewer</a>
          <nav>${crumbs}</nav>
        </header>
        <main>${page.body}</main>
        ${script}
      </body>
    </html>`.value;
}

export function errorPage(status: number, title: string, detail: string, crumbs: Array<[string, string]> = []): Page {
  return {
    status,
    title,
    crumbs: [['campaigns', '/'], ...crumbs, [title, '']],
    body: html`<h1>${title}</h1>
      <div class="error-box" id="error" data-status="${status}"><p>${detail}</p></div>
      <p class="muted">HTTP ${status}. <a href="/">Back to the campaigns</a>.</p>`,
  };
}
