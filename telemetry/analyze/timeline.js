// mptx transfer timeline: draws the transfers embedded in #mptx-data on a
// canvas, one row per path. Self-contained: no network, no libraries.
// Every string from the trace goes through textContent or fillText, never
// HTML. window.mptxTimeline exposes the state for tests.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("mptx-data").textContent);
  const canvas = document.getElementById("tl");
  const ctx = canvas.getContext("2d");
  const tip = document.getElementById("tip");
  const GUTTER = 150, AXIS = 28, ROW = 30, PAD = 6;
  const COLORS = ["#4c78a8", "#f58518", "#e45756", "#bab0ac"];
  const NAMES = ["acked", "straggler", "requeued", "abandoned / superseded"];
  const EVNAMES = ["path down", "path up", "quarantine", "requeue", "CNP burst", "PFC pause"];
  const state = { cur: 0, x0: 0, x1: 1, rows: [], drawnBars: 0, drawnEvents: 0, drawnGaps: 0, draws: 0 };

  function fmtDur(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toPrecision(4) + " s";
    if (a >= 1e6) return (ns / 1e6).toPrecision(4) + " ms";
    if (a >= 1e3) return (ns / 1e3).toPrecision(4) + " µs";
    return Math.round(ns) + " ns";
  }
  function fmtBytes(b) {
    const u = [["GiB", 1 << 30], ["MiB", 1 << 20], ["KiB", 1 << 10]];
    for (const [n, v] of u) if (b >= v) return (b / v).toPrecision(4).replace(/\.?0+$/, "") + " " + n;
    return b + " B";
  }

  // Per-row bars sorted by start, for hit tests.
  function index(t) {
    const rows = t.rows.map(() => []);
    t.bars.forEach((b, i) => rows[b[0]].push(i));
    rows.forEach((r) => r.sort((a, b) => t.bars[a][2] - t.bars[b][2]));
    return rows;
  }

  function rowsOf(t) { return t.rows.length + (t.receiver ? 1 : 0); }

  function layout() {
    const t = data[state.cur];
    const dpr = window.devicePixelRatio || 1;
    const cssW = canvas.clientWidth || 1000;
    const cssH = AXIS + rowsOf(t) * ROW + PAD;
    canvas.style.height = cssH + "px";
    canvas.width = Math.round(cssW * dpr);
    canvas.height = Math.round(cssH * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    return { w: cssW, h: cssH };
  }

  function x(ns, w) { return GUTTER + (ns - state.x0) / (state.x1 - state.x0) * (w - GUTTER - 10); }
  function ns(px, w) { return state.x0 + (px - GUTTER) / (w - GUTTER - 10) * (state.x1 - state.x0); }

  function niceStep(span, n) {
    const raw = span / Math.max(n, 1);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function draw() {
    const t = data[state.cur];
    const { w, h } = layout();
    state.draws++;
    ctx.clearRect(0, 0, w, h);
    ctx.font = "12px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    // rows
    const n = rowsOf(t);
    for (let r = 0; r < n; r++) {
      const y = AXIS + r * ROW;
      ctx.fillStyle = r % 2 ? "#ffffff" : "#f4f6f9";
      ctx.fillRect(0, y, w, ROW);
      ctx.fillStyle = "#1d2330";
      const label = r < t.rows.length ? t.rows[r].label : t.receiver.label;
      ctx.fillText(label.length > 22 ? label.slice(0, 21) + "…" : label, 6, y + ROW / 2);
    }
    // axis
    const span = state.x1 - state.x0;
    const step = niceStep(span, (w - GUTTER) / 110);
    ctx.strokeStyle = "#d5dae3";
    ctx.fillStyle = "#5b6475";
    ctx.textAlign = "center";
    for (let v = Math.ceil(state.x0 / step) * step; v <= state.x1; v += step) {
      const px = x(v, w);
      ctx.beginPath(); ctx.moveTo(px, AXIS - 4); ctx.lineTo(px, h - PAD); ctx.stroke();
      const label = "+" + fmtDur(v), half = ctx.measureText(label).width / 2;
      if (px - half >= GUTTER - 20 && px + half <= w) ctx.fillText(label, px, AXIS / 2);
    }
    ctx.textAlign = "left";
    ctx.save();
    ctx.beginPath(); ctx.rect(GUTTER, AXIS, w - GUTTER, h - AXIS); ctx.clip();
    // start-up gaps
    state.drawnGaps = 0;
    t.rows.forEach((row, r) => {
      if (!row.gap) return;
      const y = AXIS + r * ROW + 3, x0 = x(0, w), x1 = x(row.first, w);
      ctx.save();
      ctx.fillStyle = "rgba(228, 87, 86, 0.10)";
      ctx.fillRect(x0, y, x1 - x0, ROW - 6);
      ctx.strokeStyle = "rgba(228, 87, 86, 0.45)";
      ctx.beginPath();
      for (let k = x0 - ROW; k < x1; k += 8) { ctx.moveTo(Math.max(k, x0), y + ROW - 6); ctx.lineTo(Math.min(k + ROW - 6, x1), y); }
      ctx.stroke();
      ctx.fillStyle = "#b03a39";
      const txt = "start-up gap " + fmtDur(row.first);
      if (x1 - x0 > ctx.measureText(txt).width + 8) ctx.fillText(txt, x0 + 4, y + (ROW - 6) / 2);
      ctx.restore();
      state.drawnGaps++;
    });
    // bars
    state.drawnBars = 0;
    for (const b of t.bars) {
      const [r, lane, s, e, kind] = b;
      if (e < state.x0 || s > state.x1) continue;
      const lanes = t.rows[r].lanes;
      const hh = (ROW - 6) / lanes;
      const y = AXIS + r * ROW + 3 + lane * hh;
      const x0 = x(s, w), x1 = Math.max(x(e, w), x0 + 1);
      ctx.fillStyle = COLORS[kind & 15];
      ctx.fillRect(x0, y + 0.5, x1 - x0, hh - 1);
      if (kind & 16) { ctx.strokeStyle = "#000"; ctx.lineWidth = 1.5; ctx.strokeRect(x0, y + 0.5, x1 - x0, hh - 1); ctx.lineWidth = 1; }
      state.drawnBars++;
    }
    // receiver row
    if (t.receiver) {
      const r = t.rows.length, y = AXIS + r * ROW + 6;
      const a = x(0, w), b = x(t.receiver.last_arrival, w), c = x(t.receiver.last_arrival + t.receiver.lag, w);
      ctx.fillStyle = "rgba(76, 120, 168, 0.35)"; ctx.fillRect(a, y, b - a, ROW - 12);
      ctx.fillStyle = t.receiver.bound ? "#e45756" : "#f58518"; ctx.fillRect(b, y, Math.max(c - b, 1), ROW - 12);
      ctx.fillStyle = "#1d2330";
      const lag = "lag " + fmtDur(t.receiver.lag), lw = ctx.measureText(lag).width;
      ctx.fillText(lag, Math.max(c, b) + 4 + lw < w ? Math.max(c, b) + 4 : b - lw - 4, y + (ROW - 12) / 2);
    }
    // events
    state.drawnEvents = 0;
    for (const ev of t.events) {
      const [r, at, kind, , dur] = ev;
      if (at < state.x0 || at > state.x1) continue;
      const px = x(at, w), y = AXIS + r * ROW;
      state.drawnEvents++;
      if (kind === 5) { // PFC pause: a band
        ctx.fillStyle = "rgba(148, 103, 189, 0.35)";
        ctx.fillRect(px, y + 1, Math.max(x(at + dur, w) - px, 1), ROW - 2);
        continue;
      }
      ctx.strokeStyle = ctx.fillStyle = ["#c0392b", "#2e8b57", "#e67e22", "#c0392b", "#d4a017", "#9467bd"][kind];
      if (kind <= 2) {
        ctx.setLineDash([3, 3]); ctx.beginPath(); ctx.moveTo(px, y); ctx.lineTo(px, y + ROW); ctx.stroke(); ctx.setLineDash([]);
      }
      ctx.beginPath();
      if (kind === 0) { ctx.moveTo(px - 5, y + 1); ctx.lineTo(px + 5, y + 1); ctx.lineTo(px, y + 9); }
      else if (kind === 1) { ctx.moveTo(px - 5, y + ROW - 1); ctx.lineTo(px + 5, y + ROW - 1); ctx.lineTo(px, y + ROW - 9); }
      else if (kind === 2) { ctx.moveTo(px, y + 1); ctx.lineTo(px + 4, y + 5); ctx.lineTo(px, y + 9); ctx.lineTo(px - 4, y + 5); }
      else if (kind === 3) { ctx.moveTo(px - 3, y + 2); ctx.lineTo(px + 3, y + 8); ctx.moveTo(px + 3, y + 2); ctx.lineTo(px - 3, y + 8); ctx.stroke(); continue; }
      else { ctx.rect(px - 1, y + ROW - 7, 2, 6); }
      ctx.fill();
    }
    ctx.restore();
  }

  function describeBar(t, i) {
    const b = t.bars[i];
    const [r, , s, e, kind, chunk, attempt, bytes, reason] = b;
    let out = "chunk " + chunk + " · attempt " + attempt + " · " + t.rows[r].label + "\n" +
      fmtBytes(bytes) + " · +" + fmtDur(s) + " → +" + fmtDur(e) + " (" + fmtDur(e - s) + ")\n" + NAMES[kind & 15];
    if (kind & 16) out += " · critical chunk (acknowledged last)";
    if (reason >= 0) out += "\nreason: " + t.reasons[reason];
    return out;
  }

  function describeEvent(t, ev) {
    const [r, at, kind, chunk, dur] = ev;
    let out = EVNAMES[kind] + " · " + t.rows[r].label + " · +" + fmtDur(at);
    if (kind === 3) out += "\nchunk " + chunk + " requeued";
    if (kind === 4) out += "\n" + chunk + " CNPs over " + fmtDur(dur);
    if (kind === 5) out += "\npaused " + fmtDur(dur);
    if (kind === 2) out += "\nbackoff " + fmtDur(dur);
    return out;
  }

  // hit returns the description of what is under (row, time ± slack).
  function hit(row, at, slack) {
    const t = data[state.cur];
    if (row < 0) return "";
    if (row >= t.rows.length) {
      if (!t.receiver) return "";
      let s = t.receiver.label + " (its clock)\nlast chunk arrived +" + fmtDur(t.receiver.last_arrival) + "\nlag after it " + fmtDur(t.receiver.lag);
      if (t.receiver.bound) s += "\nreceiver-bound: " + t.receiver.bound;
      return s;
    }
    for (const ev of t.events) if (ev[0] === row && Math.abs(ev[1] - at) <= slack && ev[2] !== 5) return describeEvent(t, ev);
    const ids = state.rows[row];
    let best = -1;
    for (const i of ids) {
      const b = t.bars[i];
      if (b[2] - slack <= at && at <= b[3] + slack) { best = i; if (b[2] <= at && at <= b[3]) break; }
      if (b[2] > at + slack) break;
    }
    if (best >= 0) return describeBar(t, best);
    const g = t.rows[row];
    if (g.gap && at >= 0 && at < g.first) return "start-up gap: " + g.label + " carried nothing until +" + fmtDur(g.first);
    for (const ev of t.events) if (ev[0] === row && ev[2] === 5 && ev[1] <= at && at <= ev[1] + ev[4]) return describeEvent(t, ev);
    return "";
  }

  function select(i) {
    state.cur = i;
    const t = data[i];
    state.rows = index(t);
    state.x0 = 0;
    state.x1 = Math.max(t.end, ...t.bars.map((b) => b[3]), t.receiver ? t.receiver.last_arrival + t.receiver.lag : 0, 1) * 1.1; // room for the lag's label
    document.getElementById("title").textContent = t.title;
    const lines = document.getElementById("lines");
    lines.replaceChildren(...t.lines.map((l) => { const d = document.createElement("div"); d.textContent = l; return d; }));
    const legend = document.getElementById("legend");
    const items = [];
    ["acked", "straggler", "requeued", "other"].forEach((k, j) => { if (t.legend[k]) items.push([COLORS[j], NAMES[j]]); });
    if (t.legend.critical) items.push(["#000", "critical chunk (outlined)"]);
    if (t.legend.gap) items.push(["rgba(228,87,86,0.35)", "start-up gap"]);
    [["down", "#c0392b", "▼ path down"], ["up", "#2e8b57", "▲ path up"], ["quarantine", "#e67e22", "◆ quarantine"],
      ["requeue", "#c0392b", "× requeue"], ["cnp", "#d4a017", "CNP burst"], ["pfc", "#9467bd", "PFC pause"]]
      .forEach(([k, c, n]) => { if (t.legend[k]) items.push([c, n]); });
    legend.replaceChildren(...items.map(([c, n]) => {
      const s = document.createElement("span"); const sw = document.createElement("span");
      sw.className = "sw"; sw.style.background = c; s.append(sw, document.createTextNode(n)); return s;
    }));
    draw();
  }

  function zoom(f, centerNs) {
    const c = centerNs === undefined ? (state.x0 + state.x1) / 2 : centerNs;
    const span = Math.max((state.x1 - state.x0) / f, 10);
    const left = (c - state.x0) / (state.x1 - state.x0);
    state.x0 = c - left * span;
    state.x1 = state.x0 + span;
    draw();
  }

  function reset() { select(state.cur); }

  // events
  canvas.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = canvas.getBoundingClientRect();
    if (e.clientX - r.left < GUTTER) return;
    zoom(e.deltaY < 0 ? 1.25 : 0.8, ns(e.clientX - r.left, r.width));
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, x0: state.x0, x1: state.x1 }; canvas.classList.add("drag"); });
  window.addEventListener("mouseup", () => { drag = null; canvas.classList.remove("drag"); });
  canvas.addEventListener("mousemove", (e) => {
    const r = canvas.getBoundingClientRect();
    if (drag) {
      const d = (e.clientX - drag.x) / (r.width - GUTTER - 10) * (drag.x1 - drag.x0);
      state.x0 = drag.x0 - d; state.x1 = drag.x1 - d; draw(); return;
    }
    const px = e.clientX - r.left, py = e.clientY - r.top;
    const row = Math.floor((py - AXIS) / ROW);
    const at = ns(px, r.width), slack = 3 * (state.x1 - state.x0) / (r.width - GUTTER);
    const text = px >= GUTTER && py >= AXIS ? hit(row, at, slack) : "";
    if (!text) { tip.hidden = true; return; }
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.min(px + 14, r.width - tip.offsetWidth - 4) + "px";
    tip.style.top = (py + 16) + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("dblclick", reset);
  document.getElementById("zoom-in").addEventListener("click", () => zoom(1.5));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(1 / 1.5));
  document.getElementById("zoom-reset").addEventListener("click", reset);
  window.addEventListener("keydown", (e) => {
    if (e.key === "+" || e.key === "=") zoom(1.5);
    else if (e.key === "-") zoom(1 / 1.5);
    else if (e.key === "0") reset();
  });
  window.addEventListener("resize", draw);
  const pick = document.getElementById("pick");
  if (data.length > 1) {
    document.getElementById("pick-label").hidden = false;
    data.forEach((t, i) => { const o = document.createElement("option"); o.value = i; o.textContent = t.title; pick.append(o); });
    pick.addEventListener("change", () => select(+pick.value));
  }
  select(0);

  window.mptxTimeline = {
    data, state, select, zoom, reset,
    // hover describes what a pointer at (row, time in ns) would show.
    hover: (row, at) => hit(row, at, 0),
    view: () => [state.x0, state.x1],
  };
})();
