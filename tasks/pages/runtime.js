/* dartflow task-page runtime (inlined into every task page by tasks/pages.ts).
 * Pages define window.task = {reset(D) → {instruction, fields}, oracle(D) → canonical action}.
 * The runtime provides the seeded PRNG, layout helpers and the agent-facing API:
 *   reset(seed) → {instruction, fields}; state() → {done, reward, reason}; oracle() → action | null.
 * Reward is binary: 1 on success, 0 on failure (DART counts reward > 0 as success). */
(function () {
  'use strict';
  function mulberry32(a) {
    return function () {
      a = (a + 0x6d2b79f5) | 0;
      var t = Math.imul(a ^ (a >>> 15), 1 | a);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  var W = 160,
    H = 160;
  /** Thrown by place() when earlier elements left no room; reset() then draws a new layout. */
  function LayoutFull(msg) {
    this.message = msg;
  }
  var D = {
    W: W,
    H: H,
    rng: mulberry32(1),
    // Eight colours far apart in RGB so a 64×64 CNN can tell them apart.
    COLORS: [
      { name: 'red', css: '#e6194b' },
      { name: 'green', css: '#3cb44b' },
      { name: 'blue', css: '#4363d8' },
      { name: 'yellow', css: '#ffe119' },
      { name: 'orange', css: '#f58231' },
      { name: 'purple', css: '#911eb4' },
      { name: 'cyan', css: '#42d4f4' },
      { name: 'black', css: '#000000' },
    ],
    status: { done: false, reward: 0, reason: 'running' },
    area: null,
    randi: function (lo, hi) {
      return lo + Math.floor(D.rng() * (hi - lo));
    },
    pick: function (arr) {
      return arr[D.randi(0, arr.length)];
    },
    shuffle: function (arr) {
      var a = arr.slice();
      for (var i = a.length - 1; i > 0; i--) {
        var j = D.randi(0, i + 1);
        var t = a[i];
        a[i] = a[j];
        a[j] = t;
      }
      return a;
    },
    sample: function (arr, k) {
      return D.shuffle(arr).slice(0, k);
    },
    end: function (reward, reason) {
      if (D.status.done) return;
      D.status = { done: true, reward: reward > 0 ? 1 : 0, reason: reason };
    },
    /** Absolutely positioned element inside #area. */
    el: function (tag, x, y, w, h, css, parent) {
      var e = document.createElement(tag);
      e.style.position = 'absolute';
      e.style.left = x + 'px';
      e.style.top = y + 'px';
      e.style.width = w + 'px';
      e.style.height = h + 'px';
      if (css) for (var k in css) e.style[k] = css[k];
      (parent || D.area).appendChild(e);
      return e;
    },
    /** A random free rectangle (margin 4 px, gap 6 px to everything in `taken`). Random tries first;
     *  if they all collide, a full scan of free positions guarantees no overlap whenever one exists. */
    place: function (w, h, taken) {
      function free(x, y) {
        for (var i = 0; i < taken.length; i++) {
          var r = taken[i];
          if (x < r.x + r.w + 6 && r.x < x + w + 6 && y < r.y + r.h + 6 && r.y < y + h + 6) return false;
        }
        return true;
      }
      var x = -1,
        y = -1;
      for (var tries = 0; tries < 100 && x < 0; tries++) {
        var cx = D.randi(4, W - w - 4 + 1),
          cy = D.randi(4, H - h - 4 + 1);
        if (free(cx, cy)) {
          x = cx;
          y = cy;
        }
      }
      if (x < 0) {
        var spots = [];
        for (var sy = 4; sy <= H - h - 4; sy += 2)
          for (var sx = 4; sx <= W - w - 4; sx += 2) if (free(sx, sy)) spots.push([sx, sy]);
        if (spots.length === 0) throw new LayoutFull('no room for a ' + w + 'x' + h + ' element');
        var s = D.pick(spots);
        x = s[0];
        y = s[1];
      }
      var rect = { x: x, y: y, w: w, h: h };
      taken.push(rect);
      return rect;
    },
    clamp01: function (v) {
      return Math.min(1, Math.max(0, v));
    },
    /** The canonical click at an element's centre, normalized to the 160×160 viewport. */
    clickAt: function (e) {
      var r = e.getBoundingClientRect();
      return { type: 'click', x: D.clamp01((r.left + r.width / 2) / W), y: D.clamp01((r.top + r.height / 2) / H) };
    },
  };
  window.D = D;
  window.reset = function (seed) {
    D.rng = mulberry32((Number(seed) ^ 0x5bd1e995) >>> 0);
    D.status = { done: false, reward: 0, reason: 'running' };
    D.area = document.getElementById('area');
    if (document.activeElement && document.activeElement.blur) document.activeElement.blur();
    var r = null;
    // A seed whose random layout paints itself into a corner simply draws again (still deterministic).
    for (var attempt = 0; r === null; attempt++) {
      D.area.innerHTML = '';
      try {
        r = window.task.reset(D);
      } catch (e) {
        if (!(e instanceof LayoutFull) || attempt >= 50) throw e;
      }
    }
    return { instruction: String(r.instruction), fields: (r.fields || []).map(String) };
  };
  window.state = function () {
    return { done: D.status.done, reward: D.status.reward, reason: D.status.reason };
  };
  window.oracle = function () {
    return D.status.done ? null : window.task.oracle(D);
  };
})();
