(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("braid-data").textContent);
  const app = document.getElementById("app");
  const tip = document.getElementById("tip");
  const GiB = 1024 * 1024 * 1024;

  // ---- helpers ----------------------------------------------------------------------------
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})[c]);
  }
  function el(tag, attrs, html) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function niceStep(span, target) {
    if (!(span > 0)) return 1;
    const raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (raw <= m * mag * 1.0000001) return m * mag;
    return 10 * mag;
  }
  function ticks(lo, hi, target) {
    const step = niceStep(hi - lo, target), out = [];
    for (let k = Math.ceil(lo / step - 1e-7); k * step <= hi + (hi - lo) * 1e-7; ++k) out.push(k * step);
    return {step: step, values: out};
  }
  function decimals(step) { return Math.max(0, -Math.floor(Math.log10(step) + 1e-9)); }
  const DARK = {F: [0x1f, 0x4e, 0x9c], B: [0xc4, 0x56, 0x1a], W: [0x5b, 0x4a, 0x91]};
  const LIGHT = {F: [0x9c, 0xc3, 0xef], B: [0xf7, 0xbf, 0x8f], W: [0xc6, 0xbc, 0xe6]};
  function chunkColour(phase, chunk, vpp) {
    const d = DARK[phase] || DARK.F, l = LIGHT[phase] || LIGHT.F, t = vpp > 1 ? chunk / (vpp - 1) : 0;
    const c = [0, 1, 2].map((i) => Math.round(d[i] + (l[i] - d[i]) * t));
    return "#" + c.map((v) => v.toString(16).padStart(2, "0")).join("");
  }
  const TP_COLOUR = {F: "#5d8fd0", B: "#e39a5e", W: "#9c8fcc"};
  const STREAM_COLOUR = {p2p_next: "#7f7f7f", p2p_prev: "#a5a5a5", d2h: "#8c5a3c", h2d: "#2a9d8f",
    cp: "#b39ddb", ep: "#80cbc4"};
  // The collective groups' exposed time, as the report attributes it (the same colours as the SVG).
  const EXPOSED_COLOUR = {tp: "#d62728", cp: "#6a1b9a", ep: "#00695c", dp: "#59a14f"};
  const CATEGORY_COLOUR = {busy_s: "#4c78a8", tp_exposed_s: "#d62728", cp_exposed_s: "#6a1b9a",
    ep_exposed_s: "#00695c", pp_idle_s: "#c7c7c7", offload_stall_s: "#8c5a3c", dp_exposed_s: "#59a14f",
    dp_s: "#59a14f", optimizer_s: "#edc948"};
  // The collective groups beyond TP that get a lane of their own when a run has their ops.
  const GROUP_LANES = ["cp", "ep"];
  const PALETTE = ["#76b7b2", "#ff9da7", "#9c755f", "#bab0ac", "#b07aa1", "#f28e2b"];
  const SCHEDULE_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
    "#17becf", "#bcbd22", "#7f7f7f", "#d62728"];

  // Time in a run's display unit: symbolic units, or s / ms / us by the span shown.
  function timeUnit(run, spanS) {
    if (run.time_unit === "unit") return {per_s: 1, label: "units"};
    if (spanS >= 10) return {per_s: 1, label: "s"};
    if (spanS >= 1e-3) return {per_s: 1e3, label: "ms"};
    return {per_s: 1e6, label: "us"};
  }
  // A time with a unit chosen by its own size, or by `ref` (so both ends of a window match).
  function fmtTime(run, s, ref) {
    const m = Math.abs(ref === undefined ? s : ref);
    if (run.time_unit === "unit") return (+s.toFixed(3)) + " units";
    if (m >= 1) return s.toFixed(4) + " s";
    if (m >= 1e-3) return (s * 1e3).toFixed(3) + " ms";
    return (s * 1e6).toFixed(2) + " us";
  }

  function showTip(ev, html) {
    tip.innerHTML = html;
    tip.style.display = "block";
    const w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.clientX + 14, y = ev.clientY + 14;
    if (x + w > window.innerWidth - 4) x = ev.clientX - w - 14;
    if (y + h > window.innerHeight - 4) y = ev.clientY - h - 14;
    tip.style.left = Math.max(0, x) + "px";
    tip.style.top = Math.max(0, y) + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  // ---- the page's compact columns (src/output/html.cpp, compact_for_page) ------------------
  // The same values as the data document's plain columns, in fewer bytes; restored here before
  // anything is drawn. A column may be a plain array or {dict, index}, {delta} (running sums) or
  // {concat: [a, b]} (a[i] + b[i]); ops.start may be {gap} (after the previous op on its lane).
  function decodeColumn(c) {
    if (Array.isArray(c) || c === null || typeof c !== "object") return c;
    if ("dict" in c) return c.index.map((k) => c.dict[k]);
    if ("delta" in c) {
      let sum = 0;
      return decodeColumn(c.delta).map((d) => (sum += d));
    }
    if ("concat" in c) {
      const b = decodeColumn(c.concat[1]);
      return decodeColumn(c.concat[0]).map((a, i) => a + b[i]);
    }
    return c;
  }
  function decodeRun(run) {
    const ops = run.ops || {};
    for (const k of Object.keys(ops)) if (k !== "start") ops[k] = decodeColumn(ops[k]);
    if (ops.start && !Array.isArray(ops.start) && "gap" in ops.start) {
      // A copy of the gaps, added to in place: a packed array (new Array(n) of a large n is a
      // sparse one in V8, slow to read on every redraw).
      const start = decodeColumn(ops.start.gap).slice();
      for (let i = 1; i < start.length; ++i)
        if (ops.rank[i] === ops.rank[i - 1] && ops.stream[i] === ops.stream[i - 1]) start[i] += start[i - 1] + ops.dur[i - 1];
      ops.start = start;
    } else {
      ops.start = decodeColumn(ops.start);
    }
    (run.memory || []).forEach((m) => {
      m.t = decodeColumn(m.t);
      m.activation_bytes = decodeColumn(m.activation_bytes);
    });
  }

  // ---- timelines (one shared window for all runs: compare puts them on one time axis) ------
  const LEFT = 72, RIGHT = 16, COMPUTE_H = 24, TP_H = 8, P2P_H = 6, COPY_H = 6, GAP = 2, RANK_GAP = 10;
  function plotWidth() { return Math.max(600, Math.min(1800, window.innerWidth - 60)) - LEFT - RIGHT; }

  function prepareRun(run) {
    const ops = run.ops, n = ops.start.length, streams = run.streams;
    run.n = n;
    run.pp = run.report.pp;
    run.vpp = run.report.vpp;
    run.totalTicks = Math.round(run.report.iteration_time_s / run.tick_s);
    run.streamIndex = {};
    streams.forEach((s, i) => { run.streamIndex[s] = i; });
    // Report data written before the other groups' exposure: TP's alone.
    run.exposed = run.exposed || {tp: run.tp_exposed || []};
    run.hasCopy = new Array(run.pp).fill(false);
    const hasGroup = {};
    for (let i = 0; i < n; ++i) {
      const s = streams[ops.stream[i]];
      if (s === "d2h" || s === "h2d") run.hasCopy[ops.rank[i]] = true;
      if (GROUP_LANES.includes(s)) hasGroup[s] = true;
    }
    run.groupLanes = GROUP_LANES.filter((g) => hasGroup[g]);
    run.rankY = [];
    let y = 0;
    for (let r = 0; r < run.pp; ++r) {
      run.rankY.push(y);
      y += COMPUTE_H + GAP + TP_H + run.groupLanes.length * (GAP + TP_H) + GAP + P2P_H +
        (run.hasCopy[r] ? GAP + COPY_H : 0) + RANK_GAP;
    }
    run.lanesH = y - RANK_GAP;
  }

  // The y of a collective lane (tp, or a group lane) in rank r's block; -1 for none.
  function commLaneY(run, r, stream) {
    const tpY = run.rankY[r] + COMPUTE_H + GAP;
    if (stream === "tp" || stream === "tp_ring" || stream === "dp") return tpY;
    const k = run.groupLanes.indexOf(stream);
    return k < 0 ? -1 : tpY + (k + 1) * (TP_H + GAP);
  }

  // The y and height of an op's mark within its rank block.
  function laneOf(run, i) {
    const s = run.streams[run.ops.stream[i]], y0 = run.rankY[run.ops.rank[i]];
    const tpY = y0 + COMPUTE_H + GAP, p2pY = tpY + TP_H + run.groupLanes.length * (GAP + TP_H) + GAP;
    const copyY = p2pY + P2P_H + GAP;
    switch (s) {
      case "compute": {  // a braided block: side a in the top half, side b in the bottom half
        const side = run.ops.side[i];
        return side === 1 ? [y0, COMPUTE_H / 2] : side === 2 ? [y0 + COMPUTE_H / 2, COMPUTE_H / 2] : [y0, COMPUTE_H];
      }
      case "tp":
      case "tp_ring": return [tpY, TP_H];  // TE's ring transfers, drawn with the TP lane as in the SVG
      case "cp":
      case "ep": return [commLaneY(run, run.ops.rank[i], s), TP_H];
      case "p2p_next": return [p2pY, P2P_H / 2];
      case "p2p_prev": return [p2pY + P2P_H / 2, P2P_H / 2];
      case "d2h": return [copyY, COPY_H / 2];
      default: return [copyY + COPY_H / 2, COPY_H / 2];
    }
  }
  function opColour(run, i) {
    const ops = run.ops, s = run.streams[ops.stream[i]];
    if (s === "compute") return chunkColour(ops.phase[i], ops.chunk[i], run.vpp);
    if (s === "tp" || s === "tp_ring") return TP_COLOUR[ops.phase[i]] || TP_COLOUR.F;
    return STREAM_COLOUR[s] || "#888";
  }

  const view = {totalS: 0, fromS: 0, toS: 0, views: []};

  function renderTimeline(v) {
    const run = v.run, ops = run.ops, w = plotWidth(), tick = run.tick_s;
    const from = view.fromS / tick, to = view.toS / tick, span = to - from;
    const X = (t) => LEFT + (t - from) / span * w;
    const axisH = 34, height = run.lanesH + axisH + 4;
    const parts = [];
    parts.push('<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="' + (LEFT + w + RIGHT) +
      '" height="' + height + '" data-from="' + view.fromS + '" data-to="' + view.toS + '">');
    parts.push('<defs><clipPath id="clip' + v.index + '"><rect x="' + LEFT + '" y="0" width="' + w +
      '" height="' + run.lanesH + '"/></clipPath></defs>');
    for (let r = 0; r < run.pp; ++r) {
      const y0 = run.rankY[r];
      parts.push('<text class="rl" x="' + (LEFT - 8) + '" y="' + (y0 + 16) + '" text-anchor="end">rank ' + r + '</text>');
      parts.push('<rect class="lane" x="' + LEFT + '" y="' + y0 + '" width="' + w + '" height="' + COMPUTE_H + '"/>');
      for (const s of ["tp"].concat(run.groupLanes)) {
        const ly = commLaneY(run, r, s);
        parts.push('<rect class="thin" x="' + LEFT + '" y="' + ly + '" width="' + w + '" height="' + TP_H + '"/>');
        parts.push('<text class="k" x="' + (LEFT - 8) + '" y="' + (ly + 7) + '" text-anchor="end">' + s + "</text>");
      }
      const p2pY = y0 + COMPUTE_H + GAP + TP_H + run.groupLanes.length * (GAP + TP_H) + GAP;
      parts.push('<rect class="thin" x="' + LEFT + '" y="' + p2pY + '" width="' + w + '" height="' + P2P_H + '"/>');
      parts.push('<text class="k" x="' + (LEFT - 8) + '" y="' + (p2pY + 6) + '" text-anchor="end">p2p</text>');
      if (run.hasCopy[r]) {
        const cy = p2pY + P2P_H + GAP;
        parts.push('<rect class="thin" x="' + LEFT + '" y="' + cy + '" width="' + w + '" height="' + COPY_H + '"/>');
        parts.push('<text class="k" x="' + (LEFT - 8) + '" y="' + (cy + 6) + '" text-anchor="end">copy</text>');
      }
    }
    parts.push('<g clip-path="url(#clip' + v.index + ')">');
    // One mark per op, except that ops narrower than a pixel join the mark before them on their
    // lane (rules below): the mark takes the colour that covers most of it, and data-n says how
    // many ops it holds. Zoomed in, every op is its own mark.
    // Each lane keeps its own open mark: a braided block's two sides alternate in stream order.
    let shown = 0, marks = 0;
    const openByLane = new Map();
    const flush = (open) => {
      let colour = "", most = -1;
      for (const c in open.weights) if (open.weights[c] > most) { most = open.weights[c]; colour = c; }
      parts.push('<rect class="op" data-i="' + open.i + '" data-n="' + open.n + '" x="' + open.x0.toFixed(2) + '" y="' + open.y +
        '" width="' + (open.x1 - open.x0).toFixed(3) + '" height="' + open.h + '" fill="' + colour + '"/>');
      ++marks;
    };
    for (let i = 0; i < run.n; ++i) {
      const b = ops.start[i], e = b + ops.dur[i];
      if (e <= from || b >= to) continue;
      ++shown;
      const x0 = X(Math.max(b, from)), x1 = X(Math.min(e, to)), ly = laneOf(run, i), colour = opColour(run, i);
      const lane = ops.rank[i] * 16 + ops.stream[i] * 3 + ops.side[i];
      const group = run.streams[ops.stream[i]] === "compute" ? ops.instruction[i] : -1;
      const open = openByLane.get(lane);
      // Same instruction side (a braided side's units are apart by the other side's): join
      // across a gap of up to 4 px while either is narrower than a pixel. Another instruction:
      // join across half a pixel while the open mark is narrower than a pixel.
      const gap = open ? x0 - open.x1 : 0, narrow = open && (x1 - x0 < 1 || open.x1 - open.x0 < 1);
      if (open && ((group >= 0 && open.group === group && gap < 4 && narrow) || (gap < 0.5 && open.x1 - open.x0 < 1))) {
        open.x1 = Math.max(open.x1, x1);
        open.n += 1;
        open.weights[colour] = (open.weights[colour] || 0) + (x1 - x0);
        continue;
      }
      if (open) flush(open);
      const next = {i: i, n: 1, x0: x0, x1: x1, y: ly[0], h: ly[1], group: group, weights: {}};
      next.weights[colour] = x1 - x0;
      openByLane.set(lane, next);
    }
    for (const open of openByLane.values()) flush(open);
    // Exposed collective time: the report's intervals, at true width, over each group's lane.
    let exposed = 0;
    for (const s of Object.keys(run.exposed)) {
      run.exposed[s].forEach((list, r) => {
        const y = commLaneY(run, r, s);
        if (y < 0) return;
        list.forEach((iv, k) => {
          if (iv[1] <= from || iv[0] >= to) return;
          const x0 = X(Math.max(iv[0], from)), x1 = X(Math.min(iv[1], to));
          parts.push('<rect class="ex" data-s="' + s + '" data-r="' + r + '" data-k="' + k + '" x="' + x0.toFixed(2) +
            '" y="' + y + '" width="' + (x1 - x0).toFixed(3) + '" height="' + TP_H + '" fill="' +
            (EXPOSED_COLOUR[s] || EXPOSED_COLOUR.tp) + '"/>');
          ++exposed;
        });
      });
    }
    parts.push("</g>");
    // Axis.
    const u = timeUnit(run, view.toS - view.fromS), ay = run.lanesH + 6;
    parts.push('<line class="axis" x1="' + LEFT + '" y1="' + ay + '" x2="' + (LEFT + w) + '" y2="' + ay + '"/>');
    const t = ticks(view.fromS * u.per_s, view.toS * u.per_s, 10), dec = decimals(t.step);
    for (const value of t.values) {
      const x = X(value / u.per_s / tick);
      parts.push('<line class="axis" x1="' + x + '" y1="' + ay + '" x2="' + x + '" y2="' + (ay + 5) + '"/>');
      parts.push('<text class="l" x="' + x + '" y="' + (ay + 17) + '" text-anchor="middle">' + value.toFixed(dec) + "</text>");
    }
    parts.push('<text class="l" x="' + (LEFT + w) + '" y="' + (ay + 30) + '" text-anchor="end">time (' + u.label + ")</text>");
    parts.push("</svg>");
    v.box.innerHTML = parts.join("");
    v.box.dataset.ops = shown;
    v.box.dataset.marks = marks;
    v.box.dataset.exposed = exposed;
    v.label.textContent = "window " + fmtTime(run, view.fromS, view.toS) + " to " + fmtTime(run, view.toS) +
      " \u00b7 " + shown + " ops in " + marks + " marks";
  }
  function renderTimelines() { view.views.forEach(renderTimeline); }
  function setWindow(fromS, toS) {
    const minSpan = view.totalS * 1e-6;
    let span = Math.min(Math.max(toS - fromS, minSpan), view.totalS);
    fromS = Math.min(Math.max(fromS, 0), view.totalS - span);
    view.fromS = fromS;
    view.toS = fromS + span;
    renderTimelines();
  }
  function zoomAt(factor, centreS) {
    const span = view.toS - view.fromS, next = span * factor;
    setWindow(centreS - (centreS - view.fromS) * next / span, centreS - (centreS - view.fromS) * next / span + next);
  }

  function opTip(run, i) {
    const o = run.ops, tick = run.tick_s;
    const rows = ["<b>" + esc(o.name[i]) + "</b>",
      "rank " + o.rank[i] + " \u00b7 stream " + esc(run.streams[o.stream[i]]) + " \u00b7 " + esc(o.kind[i]),
      "microbatch " + o.mb[i] + " \u00b7 chunk " + o.chunk[i] + (o.unit[i] ? " \u00b7 unit " + esc(o.unit[i]) : "") +
        " \u00b7 phase " + esc(o.phase[i]),
      "start " + fmtTime(run, o.start[i] * tick) + " \u00b7 duration " + fmtTime(run, o.dur[i] * tick)];
    return rows.join("<br>");
  }

  function addTimeline(section, run, index) {
    const wrap = el("div", {"class": "tl", "id": "timeline-" + index});
    const head = el("div", {"class": "tlhead"}, "<b>" + esc(run.report.schedule) + "</b> ");
    const label = el("span", {"class": "win", "id": "window-" + index});
    head.appendChild(label);
    const box = el("div", {"class": "tlbox"});
    wrap.appendChild(head);
    wrap.appendChild(box);
    section.appendChild(wrap);
    const v = {run: run, index: index, box: box, label: label};
    view.views.push(v);
    box.addEventListener("mousemove", (ev) => {
      const t = ev.target;
      if (t.classList.contains("op")) showTip(ev, opTip(run, +t.dataset.i) +
        (+t.dataset.n > 1 ? "<br><i>and " + (t.dataset.n - 1) + " more ops in this mark: zoom in</i>" : ""));
      else if (t.classList.contains("ex")) {
        const iv = run.exposed[t.dataset.s][+t.dataset.r][+t.dataset.k];
        showTip(ev, "<b>" + esc(t.dataset.s.toUpperCase()) + " exposed</b> (report's attribution)<br>rank " +
          t.dataset.r + " \u00b7 start " +
          fmtTime(run, iv[0] * run.tick_s) + " \u00b7 duration " + fmtTime(run, (iv[1] - iv[0]) * run.tick_s));
      } else hideTip();
    });
    box.addEventListener("mouseleave", hideTip);
    const timeAt = (ev) => {
      const rect = box.firstChild.getBoundingClientRect();
      const f = Math.min(Math.max((ev.clientX - rect.left - LEFT) / plotWidth(), 0), 1);
      return view.fromS + f * (view.toS - view.fromS);
    };
    box.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      zoomAt(ev.deltaY > 0 ? 1.25 : 0.8, timeAt(ev));
    }, {passive: false});
    let drag = null;
    box.addEventListener("mousedown", (ev) => { drag = {x: ev.clientX, from: view.fromS, to: view.toS}; ev.preventDefault(); });
    window.addEventListener("mouseup", () => { drag = null; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const dt = (ev.clientX - drag.x) / plotWidth() * (drag.to - drag.from);
      if (dt !== 0) setWindow(drag.from - dt, drag.to - dt);
    });
  }

  function timelineLegend(runs) {
    const items = [], seen = {};
    const add = (key, colour, label, cls) => {
      if (seen[key]) return;
      seen[key] = true;
      items.push('<span class="sw' + (cls ? " " + cls : "") + '" style="background:' + colour + '"></span>' + esc(label));
    };
    for (const run of runs) {
      const o = run.ops;
      for (let i = 0; i < run.n; ++i) {
        const s = run.streams[o.stream[i]];
        if (s === "compute") add("c" + o.phase[i] + o.chunk[i], opColour(run, i), o.phase[i] + (run.vpp > 1 ? " chunk " + o.chunk[i] : ""));
      }
      for (let i = 0; i < run.n; ++i) {
        const s = run.streams[o.stream[i]];
        if (s === "tp" || s === "tp_ring") add("tp" + o.phase[i], opColour(run, i), "TP collective (" + o.phase[i] + ")");
        else if (GROUP_LANES.includes(s)) add(s, opColour(run, i), s.toUpperCase() + " collective");
        else if (s !== "compute") add(s, opColour(run, i), s.replace("_", "-"));
      }
      for (const s of Object.keys(run.exposed))
        if (run.exposed[s].some((l) => l.length))
          add("ex" + s, EXPOSED_COLOUR[s] || EXPOSED_COLOUR.tp, s.toUpperCase() + " exposed (report's attribution)");
    }
    return '<div class="legend">' + items.join(" ") + "</div>";
  }

  // ---- per-rank stacked bars (categories: the rank fields ending in _s, in report order) ----
  function categoryColour(key, k) { return CATEGORY_COLOUR[key] || PALETTE[k % PALETTE.length]; }
  function addBars(section, run, index) {
    // One scale for every run (compare: the longest iteration), so bars compare across runs.
    const ranks = run.report.ranks, T = view.totalS || run.report.iteration_time_s;
    const own = run.report.iteration_time_s;
    const keys = Object.keys(ranks[0] || {}).filter((k) => /_s$/.test(k) && typeof ranks[0][k] === "number");
    const w = Math.min(plotWidth(), 900), barH = 16, rowH = 22, top = 4;
    const parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="bars" id="bars-' + index + '" width="' + (LEFT + w + 70) +
      '" height="' + (top + rowH * ranks.length + 30) + '">'];
    ranks.forEach((rr, r) => {
      let x = LEFT;
      const y = top + r * rowH;
      parts.push('<text class="rl" x="' + (LEFT - 8) + '" y="' + (y + 12) + '" text-anchor="end">rank ' + rr.rank + "</text>");
      keys.forEach((key, k) => {
        const bw = T > 0 ? rr[key] / T * w : 0;
        parts.push('<rect class="bar" data-r="' + r + '" data-key="' + key + '" x="' + x.toFixed(2) + '" y="' + y +
          '" width="' + Math.max(0, bw).toFixed(3) + '" height="' + barH + '" fill="' + categoryColour(key, k) + '"/>');
        x += Math.max(0, bw);
      });
      const idle = own > 0 ? (1 - rr.busy_s / own) * 100 : 0;
      parts.push('<text class="k" x="' + (LEFT + w + 6) + '" y="' + (y + 12) + '">' + idle.toFixed(1) + "% idle</text>");
    });
    const ay = top + rowH * ranks.length + 4;
    const u = timeUnit(run, T), t = ticks(0, T * u.per_s, 8), dec = decimals(t.step);
    parts.push('<line class="axis" x1="' + LEFT + '" y1="' + ay + '" x2="' + (LEFT + w) + '" y2="' + ay + '"/>');
    for (const value of t.values) {
      const x = LEFT + value / u.per_s / T * w;
      parts.push('<text class="l" x="' + x + '" y="' + (ay + 14) + '" text-anchor="middle">' + value.toFixed(dec) + "</text>");
    }
    parts.push('<text class="l" x="' + (LEFT + w) + '" y="' + (ay + 26) + '" text-anchor="end">time (' + u.label + ")</text></svg>");
    const legend = keys.map((key, k) => '<span class="sw" style="background:' + categoryColour(key, k) + '"></span>' +
      esc(key.replace(/_s$/, ""))).join(" ");
    const box = el("div", {"class": "chart"}, '<div class="legend">' + legend + "</div>" + parts.join(""));
    section.appendChild(box);
    box.addEventListener("mousemove", (ev) => {
      const t = ev.target;
      if (!t.classList.contains("bar")) return hideTip();
      const rr = ranks[+t.dataset.r], v = rr[t.dataset.key];
      showTip(ev, "<b>rank " + rr.rank + ": " + esc(t.dataset.key.replace(/_s$/, "")) + "</b><br>" + fmtTime(run, v) +
        " \u00b7 " + (own > 0 ? (v / own * 100).toFixed(2) : "0") + "% of the iteration");
    });
    box.addEventListener("mouseleave", hideTip);
  }

  // ---- memory over time per rank (static + activation, the cap, the peak) -------------------
  function addMemory(section, run, index) {
    const rep = run.report, uniform = run.time_unit === "unit", T = rep.iteration_time_s;
    // Uniform reports have no real bytes: activations in M_a, no static memory and no cap.
    const ma = rep.ma_gib * GiB;
    const scale = uniform ? (ma > 0 ? ma : 1) : GiB;
    const unit = uniform ? (ma > 0 ? "M_a" : "bytes") : "GiB";
    // The study's memory cap, the peak's terms (fixed overhead included); a document written
    // before reports carried it has the HBM only.
    const cap = uniform ? 0 : (rep.cap_gib !== undefined ? rep.cap_gib : rep.hbm_gib);
    const thin = !uniform && rep.thin_margin ? " \u00b7 thin margin " + rep.margin_gib.toFixed(2) + " GiB" : "";
    let ymax = cap;
    rep.ranks.forEach((rr) => {
      ymax = Math.max(ymax, uniform ? rr.activation_peak_gib * GiB / scale : rr.static_gib + rr.activation_peak_gib);
    });
    ymax = ymax > 0 ? ymax * 1.08 : 1;
    const cw = 420, ch = 130, ml = 48, mb = 30, mt = 30;
    const grid = el("div", {"class": "memgrid", "id": "memory-" + index});
    rep.ranks.forEach((rr, r) => {
      const mem = run.memory[r] || {t: [], activation_bytes: []};
      const stat = uniform ? 0 : rr.static_gib;
      const X = (ticksV) => ml + ticksV * run.tick_s / (T > 0 ? T : 1) * cw;
      const Y = (v) => mt + ch - v / ymax * ch;
      const parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="memory" width="' + (ml + cw + 12) + '" height="' + (mt + ch + mb) + '">'];
      parts.push('<text class="rl" x="' + ml + '" y="12">rank ' + rr.rank + "</text>");
      const yt = ticks(0, ymax, 6), dec = decimals(yt.step);
      for (const value of yt.values) {
        parts.push('<line class="grid" x1="' + ml + '" y1="' + Y(value) + '" x2="' + (ml + cw) + '" y2="' + Y(value) + '"/>');
        parts.push('<text class="l" x="' + (ml - 4) + '" y="' + (Y(value) + 4) + '" text-anchor="end">' + value.toFixed(dec) + "</text>");
      }
      parts.push('<text class="k" x="6" y="' + (mt + ch / 2) + '" transform="rotate(-90 10 ' + (mt + ch / 2) + ')" text-anchor="middle">' + unit + "</text>");
      let d = "M" + ml + " " + Y(stat), peak = -1, peakT = 0;
      for (let k = 0; k < mem.t.length; ++k) {
        const v = stat + mem.activation_bytes[k] / scale;
        d += "H" + X(mem.t[k]).toFixed(2) + "V" + Y(v).toFixed(2);
        if (v > peak) { peak = v; peakT = mem.t[k]; }
      }
      d += "H" + (ml + cw);
      if (stat > 0) parts.push('<line class="static" x1="' + ml + '" y1="' + Y(stat) + '" x2="' + (ml + cw) + '" y2="' + Y(stat) + '"/>' +
        '<text class="k" x="' + (ml + cw - 2) + '" y="' + (Y(stat) + 11) + '" text-anchor="end">static ' + stat.toFixed(2) + " " + unit + "</text>");
      if (cap > 0) parts.push('<line class="cap" x1="' + ml + '" y1="' + Y(cap) + '" x2="' + (ml + cw) + '" y2="' + Y(cap) + '"/>' +
        '<text class="capl" x="' + (ml + 2) + '" y="' + (Y(cap) - 3) + '">cap ' + cap.toFixed(2) + " " + unit + thin + "</text>");
      parts.push('<path class="memline" d="' + d + '"/>');
      if (peak >= 0) parts.push('<circle class="peak" cx="' + X(peakT).toFixed(2) + '" cy="' + Y(peak).toFixed(2) + '" r="3"/>' +
        '<text class="pk" x="' + Math.min(X(peakT) + 5, ml + cw - 90).toFixed(1) + '" y="' + (Y(peak) - 5).toFixed(1) + '">peak ' + peak.toFixed(2) + " " + unit + "</text>");
      const u = timeUnit(run, T), xt = ticks(0, T * u.per_s, 5), xdec = decimals(xt.step);
      parts.push('<line class="axis" x1="' + ml + '" y1="' + (mt + ch) + '" x2="' + (ml + cw) + '" y2="' + (mt + ch) + '"/>');
      for (const value of xt.values) {
        const x = ml + value / u.per_s / (T > 0 ? T : 1) * cw;
        parts.push('<text class="l" x="' + x + '" y="' + (mt + ch + 14) + '" text-anchor="middle">' + value.toFixed(xdec) + "</text>");
      }
      parts.push('<text class="l" x="' + (ml + cw) + '" y="' + (mt + ch + 27) + '" text-anchor="end">time (' + u.label + ")</text></svg>");
      grid.appendChild(el("div", {"class": "memcell"}, parts.join("")));
    });
    section.appendChild(grid);
  }

  // ---- sweep: throughput against peak memory, Pareto front, filters ------------------------
  function addSweep(sweep) {
    const section = el("section", {"id": "sweep"}, "<h2>Sweep: throughput against peak memory</h2>");
    app.appendChild(section);
    // Rows of different global batches: tokens/s compares different work per step.
    if (sweep.global_batch_note) section.appendChild(el("p", {"class": "note", "id": "global-batch-note"}, esc(sweep.global_batch_note)));
    const points = sweep.points;
    const schedules = [...new Set(points.map((p) => p.schedule))];
    const colour = (s) => SCHEDULE_PALETTE[schedules.indexOf(s) % SCHEDULE_PALETTE.length];
    const values = (k) => [...new Set(points.map((p) => p[k]))].sort((a, b) => a - b);
    // The layout fields to filter by; the global batch where the data has it (braid report keeps
    // the sweeps of data documents written before it).
    const batch = points.length > 0 && points[0].global_batch !== undefined;
    const keys = ["tp", "pp", "seq", "mbs", "m"].concat(batch ? ["global_batch"] : []);
    const filters = el("div", {"class": "filters"});
    schedules.forEach((s) => {
      filters.insertAdjacentHTML("beforeend", '<label><input type="checkbox" class="fs" value="' + esc(s) + '" checked>' +
        '<span class="sw" style="background:' + colour(s) + '"></span>' + esc(s) + "</label>");
    });
    filters.insertAdjacentHTML("beforeend", '<label><input type="checkbox" id="show-oom" checked>over the cap</label>');
    for (const k of keys) {
      const opts = values(k).map((v) => '<option value="' + v + '">' + v + "</option>").join("");
      filters.insertAdjacentHTML("beforeend", '<label>' + k.replace("_", " ") + ' <select id="filter-' + k + '"><option value="">all</option>' + opts + "</select></label>");
    }
    section.appendChild(filters);
    const box = el("div", {"class": "chart", "id": "scatter"});
    section.appendChild(box);
    const W = Math.min(plotWidth(), 1000), H = 420, ml = 80, mb = 44, mt = 16, mr = 20;
    function visiblePoints() {
      const on = new Set([...filters.querySelectorAll(".fs")].filter((c) => c.checked).map((c) => c.value));
      const oom = filters.querySelector("#show-oom").checked;
      const sel = {};
      for (const k of keys) sel[k] = filters.querySelector("#filter-" + k).value;
      return points.map((p, k) => [p, k]).filter(([p]) => on.has(p.schedule) && (oom || p.status === "ok") &&
        keys.every((k) => sel[k] === "" || String(p[k]) === sel[k]));
    }
    function render() {
      const shown = visiblePoints();
      let xmax = sweep.cap_gib || 0, ymax = 0;
      for (const p of points) { xmax = Math.max(xmax, p.peak_gib); ymax = Math.max(ymax, p.tokens_per_s); }
      xmax = (xmax || 1) * 1.05;
      ymax = (ymax || 1) * 1.08;
      const X = (v) => ml + v / xmax * W, Y = (v) => mt + H - v / ymax * H;
      const parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="' + (ml + W + mr) + '" height="' + (mt + H + mb) + '">'];
      const xt = ticks(0, xmax, 10), yt = ticks(0, ymax, 8);
      for (const v of xt.values) parts.push('<line class="grid" x1="' + X(v) + '" y1="' + mt + '" x2="' + X(v) + '" y2="' + (mt + H) + '"/>' +
        '<text class="l" x="' + X(v) + '" y="' + (mt + H + 15) + '" text-anchor="middle">' + v.toFixed(decimals(xt.step)) + "</text>");
      for (const v of yt.values) parts.push('<line class="grid" x1="' + ml + '" y1="' + Y(v) + '" x2="' + (ml + W) + '" y2="' + Y(v) + '"/>' +
        '<text class="l" x="' + (ml - 5) + '" y="' + (Y(v) + 4) + '" text-anchor="end">' + v.toFixed(decimals(yt.step)) + "</text>");
      parts.push('<text class="l" x="' + (ml + W) + '" y="' + (mt + H + 34) + '" text-anchor="end">peak memory per GPU (GiB)</text>');
      parts.push('<text class="l" x="14" y="' + (mt + H / 2) + '" transform="rotate(-90 14 ' + (mt + H / 2) + ')" text-anchor="middle">tokens/s</text>');
      if (sweep.cap_gib > 0) parts.push('<line class="cap" x1="' + X(sweep.cap_gib) + '" y1="' + mt + '" x2="' + X(sweep.cap_gib) + '" y2="' + (mt + H) + '"/>' +
        '<text class="capl" x="' + (X(sweep.cap_gib) - 4) + '" y="' + (mt + 12) + '" text-anchor="end">cap ' + sweep.cap_gib.toFixed(2) + " GiB</text>");
      // Pareto front of the shown rows that fit: no other uses less memory for more throughput.
      const fit = shown.filter(([p]) => p.status === "ok").sort((a, b) => a[0].peak_gib - b[0].peak_gib || b[0].tokens_per_s - a[0].tokens_per_s);
      let best = -1;
      const front = [];
      for (const [p] of fit) if (p.tokens_per_s > best) { best = p.tokens_per_s; front.push(p); }
      if (front.length) parts.push('<polyline class="front" points="' + front.map((p) => X(p.peak_gib).toFixed(2) + "," + Y(p.tokens_per_s).toFixed(2)).join(" ") + '"/>');
      for (const [p, k] of shown) {
        const c = colour(p.schedule);
        parts.push('<circle class="pt" data-k="' + k + '" cx="' + X(p.peak_gib).toFixed(2) + '" cy="' + Y(p.tokens_per_s).toFixed(2) +
          '" r="5" fill="' + (p.status === "ok" ? c : "#fff") + '" stroke="' + c + '"/>');
        if (p.thin) parts.push('<circle class="thin" cx="' + X(p.peak_gib).toFixed(2) + '" cy="' + Y(p.tokens_per_s).toFixed(2) + '" r="8" fill="none" stroke="#d62728"/>');
      }
      parts.push("</svg>");
      box.innerHTML = '<div class="legend">' + shown.length + " of " + points.length + " rows shown \u00b7 line: Pareto front of the rows that fit \u00b7 hollow: over the cap \u00b7 red ring: thin margin</div>" + parts.join("");
      box.dataset.points = shown.length;
      box.dataset.front = front.length;
    }
    filters.addEventListener("change", render);
    box.addEventListener("mousemove", (ev) => {
      const t = ev.target;
      if (!t.classList.contains("pt")) return hideTip();
      const p = points[+t.dataset.k];
      showTip(ev, "<b>" + esc(p.schedule) + "</b><br>tp " + p.tp + " \u00b7 pp " + p.pp + " \u00b7 seq " + p.seq + " \u00b7 mbs " + p.mbs +
        " \u00b7 m " + p.m + " \u00b7 schedule " + esc(p.schedule) + (batch ? " \u00b7 global batch " + p.global_batch : "") + "<br>" + Math.round(p.tokens_per_s) + " tokens/s \u00b7 peak " +
        p.peak_gib.toFixed(2) + " GiB" + (p.status === "ok" ? "" : " (over the cap)"));
    });
    box.addEventListener("mouseleave", hideTip);
    render();
  }

  // ---- the page -------------------------------------------------------------------------------
  function summary(run) {
    const r = run.report, pct = (v) => (v * 100).toFixed(2) + "%";
    let s = "p " + r.pp + ", v " + r.vpp + ", m " + r.microbatches + (run.time_unit === "unit" ? "" : ", tp " + r.tp) +
      " \u00b7 iteration " + fmtTime(run, r.iteration_time_s) + " \u00b7 TP bubble " + pct(r.tp_bubble_rate) +
      " \u00b7 PP bubble " + pct(r.pp_bubble_rate);
    if (r.offload_stall_rate > 0) s += " \u00b7 offload stall " + pct(r.offload_stall_rate);
    if (run.time_unit !== "unit") s += " \u00b7 peak " + r.max_peak_memory_gib.toFixed(2) + " GiB" + (r.oom ? " (OOM)" : "") +
      " \u00b7 " + Math.round(r.tokens_per_s) + " tokens/s";
    return s;
  }

  function main() {
    const t0 = performance.now();
    app.appendChild(el("h1", {}, esc(data.title)));
    const runs = data.runs;
    runs.forEach(decodeRun);
    runs.forEach(prepareRun);
    if (runs.length) {
      const list = el("div", {"class": "summary"});
      runs.forEach((run) => list.insertAdjacentHTML("beforeend", "<div><b>" + esc(run.report.schedule) + "</b> \u2014 " +
        esc(run.report.study) + ": " + summary(run) + "</div>"));
      app.appendChild(list);
      view.totalS = Math.max(...runs.map((r) => r.report.iteration_time_s || 1e-9));
      view.fromS = 0;
      view.toS = view.totalS;
      const section = el("section", {"id": "timelines"}, "<h2>Timeline" + (runs.length > 1 ? "s on one time axis" : "") + "</h2>" +
        '<div class="controls"><button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button>' +
        '<button id="zoom-reset">whole iteration</button> wheel: zoom at the pointer \u00b7 drag: pan \u00b7 hover: op details</div>' +
        timelineLegend(runs));
      app.appendChild(section);
      runs.forEach((run, k) => addTimeline(section, run, k));
      section.querySelector("#zoom-in").addEventListener("click", () => zoomAt(0.5, (view.fromS + view.toS) / 2));
      section.querySelector("#zoom-out").addEventListener("click", () => zoomAt(2, (view.fromS + view.toS) / 2));
      section.querySelector("#zoom-reset").addEventListener("click", () => setWindow(0, view.totalS));
      renderTimelines();
      const bars = el("section", {"id": "breakdown"}, "<h2>Where each rank's time goes</h2>");
      app.appendChild(bars);
      runs.forEach((run, k) => {
        if (runs.length > 1) bars.appendChild(el("h3", {}, esc(run.report.schedule)));
        addBars(bars, run, k);
      });
      const mem = el("section", {"id": "memory"}, "<h2>Memory over time (static + activations)</h2>");
      app.appendChild(mem);
      runs.forEach((run, k) => {
        if (runs.length > 1) mem.appendChild(el("h3", {}, esc(run.report.schedule)));
        addMemory(mem, run, k);
      });
    }
    if (data.sweep) addSweep(data.sweep);
    window.braidReport = {renderMs: performance.now() - t0, runs: runs.length, setWindow: setWindow,
      // The decoded data: its ops and memory columns are --report-data's (the browser test).
      data: data,
      window: () => [view.fromS, view.toS]};
    document.body.dataset.ready = "1";
  }
  main();
})();
