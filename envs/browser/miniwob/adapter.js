/*
 * In-page adapter: gives a loaded MiniWoB++ page the same three globals as dartflow's own task pages
 * (tasks/pages/runtime.js), so BrowserEnv drives both the same way:
 *   reset(seed) → {instruction, fields}   Math.seedrandom(seed), then core.startEpisodeReal()
 *   state()     → {done, reward, reason}   WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL (raw: no time scaling)
 *   oracle()    → next canonical action | null, for the tasks listed in ORACLES (from core.getDOMInfo())
 * Evaluated once per page load by envs/browser/miniwob/page.ts with `__DARTFLOW_MINIWOB__` = {task,
 * timeLimit, gridSize} already defined. Plain browser JavaScript, no dependencies: it is sent as a string.
 */
(function () {
  'use strict';
  var opts = window.__DARTFLOW_MINIWOB__;
  var W = 160;
  var H = 210;
  // The page's own limit (set by its top-level script, e.g. 15 s for enter-password), kept for timeLimit "page".
  var pageLimit = core.EPISODE_MAX_TIME;
  var MAX_TIMER_MS = 2147483647;

  // MiniWoB's own env uses a 500×320 window and crops 160×210; dartflow's viewport is the 160×210 itself.
  // The HUD (last reward, timer; at left: 165px) is then off-screen but would widen the document, and a
  // focus call (e.g. jQuery UI's dialog) could scroll the task area sideways: hide it.
  var style = document.createElement('style');
  style.textContent = '#reward-display { display: none !important; }';
  document.head.appendChild(style);

  function limitMs() {
    if (opts.timeLimit === 'page') return pageLimit;
    if (opts.timeLimit === 'off') return MAX_TIMER_MS;
    return opts.timeLimit;
  }

  // Quoted strings of the instruction ("Enter "Kasie" into …") are the values an agent may have to type:
  // they become dartflow's task fields (the embedded policy's type_field_k tokens type fields[k]).
  function quotedFields(text) {
    var out = [];
    var re = /"([^"]+)"/g;
    var m;
    while ((m = re.exec(text)) !== null) if (out.indexOf(m[1]) < 0) out.push(m[1]);
    return out;
  }

  function utterance() {
    var u = core.getUtterance();
    if (u && typeof u === 'object') {
      var vals = [];
      var f = u.fields || {};
      for (var k in f) if (Object.prototype.hasOwnProperty.call(f, k)) vals.push(String(f[k]));
      return { instruction: String(u.utterance), fields: vals };
    }
    return { instruction: String(u), fields: quotedFields(String(u)) };
  }

  function waitReady(deadline) {
    return new Promise(function (resolve, reject) {
      (function poll() {
        if (WOB_TASK_READY) return resolve();
        if (Date.now() > deadline) return reject(new Error('MiniWoB task ' + opts.task + ' not ready after reset'));
        setTimeout(poll, 10);
      })();
    });
  }

  window.reset = function (seed) {
    // Leftovers of the previous episode must not leak into this one's first screen.
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    core.EPISODE_MAX_TIME = limitMs();
    Math.seedrandom(seed);
    core.startEpisodeReal();
    window.scrollTo(0, 0);
    return waitReady(Date.now() + 2000).then(utterance);
  };

  window.state = function () {
    var raw = Number(WOB_RAW_REWARD_GLOBAL);
    var reason = WOB_REWARD_REASON === null || WOB_REWARD_REASON === undefined ? '' : String(WOB_REWARD_REASON);
    return {
      done: WOB_DONE_GLOBAL === true,
      reward: raw,
      reason: WOB_DONE_GLOBAL
        ? (reason ? reason + ' ' : '') + '(raw ' + raw + ', time-scaled ' + Number(WOB_REWARD_GLOBAL).toFixed(3) + ')'
        : '',
    };
  };

  // ---- oracle --------------------------------------------------------------------------------------
  function flatten(node, out) {
    if (!node) return out;
    out.push(node);
    for (var i = 0; i < node.children.length; i++) flatten(node.children[i], out);
    return out;
  }
  function dom() {
    return flatten(core.getDOMInfo(), []);
  }
  function query() {
    return core.getUtterance();
  }
  function quoted() {
    return quotedFields(String(query()))[0];
  }
  function byId(nodes, id) {
    return nodes.filter(function (n) {
      return n.id === id;
    })[0];
  }
  function text(n) {
    return (n.text || '').replace(/\s+/g, ' ').trim();
  }

  // A click on the node where it is really on top (elements may overlap, e.g. click-test-2's two buttons):
  // preferably on the centre of one of the embedded policy's grid cells (so a grid-snapped demonstration
  // still hits), else any visible point of it, else its centre.
  function hits(n, x, y) {
    var el = core.previousDOMInfo[n.ref];
    var at = document.elementFromPoint(x, y);
    return !!(el && at && (el === at || el.contains(at)));
  }
  function nearest(n, points) {
    var cx = n.left + n.width / 2;
    var cy = n.top + n.height / 2;
    var best = null;
    for (var i = 0; i < points.length; i++) {
      var p = points[i];
      if (p.x <= n.left || p.x >= n.left + n.width || p.y <= n.top || p.y >= n.top + n.height) continue;
      if (p.x < 0 || p.x >= W || p.y < 0 || p.y >= H || !hits(n, p.x, p.y)) continue;
      var d = (p.x - cx) * (p.x - cx) + (p.y - cy) * (p.y - cy);
      if (!best || d < best.d) best = { x: p.x, y: p.y, d: d };
    }
    return best;
  }
  function clickOn(n) {
    if (!n) return null;
    var G = opts.gridSize;
    var grid = [];
    for (var r = 0; r < G; r++)
      for (var c = 0; c < G; c++) grid.push({ x: ((c + 0.5) / G) * W, y: ((r + 0.5) / G) * H });
    var fine = [];
    for (var fx = 1; fx < 8; fx++)
      for (var fy = 1; fy < 8; fy++) fine.push({ x: n.left + (n.width * fx) / 8, y: n.top + (n.height * fy) / 8 });
    var p = nearest(n, grid) || nearest(n, fine) || { x: n.left + n.width / 2, y: n.top + n.height / 2 };
    return { type: 'click', x: Math.min(1, Math.max(0, p.x / W)), y: Math.min(1, Math.max(0, p.y / H)) };
  }

  // Fill `fieldIds` with `value` in order, then click `submitId`.
  function fillAndSubmit(fieldIds, value, submitId) {
    var nodes = dom();
    for (var i = 0; i < fieldIds.length; i++) {
      var f = byId(nodes, fieldIds[i]);
      if (!f) return null;
      if (f.value !== value) {
        if (!f.focused) return clickOn(f);
        // Typing replaces a selection: select a wrong leftover first, then type over it.
        var el = document.activeElement;
        var all = f.value === '' || (el && el.selectionStart === 0 && el.selectionEnd === String(el.value).length);
        return all ? { type: 'type', text: value } : { type: 'hotkey', keys: ['ctrl', 'a'] };
      }
    }
    return clickOn(byId(nodes, submitId));
  }

  var ORDINAL = { '1st': 'tt1', '2nd': 'tt2', '3rd': 'tt3' };
  var WIDGET_TAGS = {
    radio: 'INPUT_radio',
    checkbox: 'INPUT_checkbox',
    text: 'INPUT_text',
    textarea: 'TEXTAREA',
    button: 'BUTTON',
  };

  var ORACLES = {
    'click-button': function () {
      var want = quoted();
      return clickOn(
        dom().filter(function (n) {
          return n.tag === 'BUTTON' && text(n) === want;
        })[0]
      );
    },
    'click-link': function () {
      var want = quoted();
      return clickOn(
        dom().filter(function (n) {
          return n.tag === 'SPAN' && / ?alink ?/.test(String(n.classes)) && text(n) === want;
        })[0]
      );
    },
    'click-dialog': function () {
      return clickOn(
        dom().filter(function (n) {
          return n.tag === 'BUTTON' && /ui-dialog-titlebar-close/.test(String(n.classes));
        })[0]
      );
    },
    'click-test': function () {
      return clickOn(byId(dom(), 'subbtn'));
    },
    'click-test-2': function () {
      return clickOn(byId(dom(), 'subbtn'));
    },
    'click-widget': function () {
      var tag = WIDGET_TAGS[quoted()];
      return clickOn(
        dom().filter(function (n) {
          return n.tag === tag;
        })[0]
      );
    },
    'click-tab': function () {
      var m = /Tab #(\d)/.exec(String(query()));
      return clickOn(
        dom().filter(function (n) {
          return n.tag === 'A' && text(n) === 'Tab #' + (m && m[1]);
        })[0]
      );
    },
    'focus-text': function () {
      return clickOn(byId(dom(), 'tt'));
    },
    'focus-text-2': function () {
      var m = /(1st|2nd|3rd)/.exec(String(query()));
      return clickOn(byId(dom(), ORDINAL[m && m[1]]));
    },
    'enter-text': function () {
      return fillAndSubmit(['tt'], quoted(), 'subbtn');
    },
    'enter-password': function () {
      return fillAndSubmit(['password', 'verify'], quoted(), 'subbtn');
    },
  };

  window.oracle = function () {
    if (WOB_DONE_GLOBAL) return null;
    var fn = ORACLES[opts.task];
    if (!fn)
      throw new Error(
        'MiniWoB task ' + opts.task + ' has no oracle (oracle tasks: ' + Object.keys(ORACLES).join(', ') + ')'
      );
    return fn();
  };
  window.__DARTFLOW_MINIWOB_ORACLES__ = Object.keys(ORACLES);
})();
