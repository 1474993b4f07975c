// Disque dashboard: hash-routed views over the node's JSON API, polled
// while "Live" is on. No framework, no build step, no CDN. Everything a
// user or a queue name supplies is inserted with textContent, never HTML.
"use strict";

const POLL_MS = 2000;
const state = {
  view: "overview", queue: null, job: null, overview: null, queues: null, cluster: null, schedules: null, batches: null,
  prevQueues: new Map(), prevQueuesAt: 0, prevCounters: null, prevCountersAt: 0,
  sort: { key: "len", dir: "desc" }, cursor: "0", nextCursor: "0", timer: null,
  history: null, historyAt: 0, queueHistory: null, queueHistoryAt: 0,
};

function $(id) { return document.getElementById(id); }

function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function fmtNum(n) { return Number(n || 0).toLocaleString("en-US"); }
function fmtRate(r) { return r === null ? "–" : (r >= 10 ? r.toFixed(0) : r.toFixed(1)) + "/s"; }
function fmtBytes(n) {
  const u = ["B", "KB", "MB", "GB", "TB"]; let i = 0; n = Number(n || 0);
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}
function fmtAge(ms) {
  const s = Math.floor((ms || 0) / 1000);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
}

function toast(msg, isError) {
  const t = $("toast");
  t.textContent = msg;
  t.className = "show" + (isError ? " error" : "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = ""; }, 3000);
}

async function api(path, opts) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin", cache: "no-store" }, opts || {}));
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  if (!res.ok) throw new Error((body && body.error) || ("HTTP " + res.status));
  return body;
}

// Every state change is a POST carrying X-Disque-Action (CSRF guard).
function action(path, payload) {
  return api(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Disque-Action": "1" },
    body: JSON.stringify(payload || {}),
  });
}

function confirmDialog(title, text) {
  return new Promise((resolve) => {
    const d = $("confirm");
    $("confirm-title").textContent = title;
    $("confirm-text").textContent = text;
    d.returnValue = "cancel";
    d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
    d.showModal();
  });
}

function card(label, value, sub) {
  return el("div", { class: "card" },
    el("div", { class: "label", text: label }),
    el("div", { class: "value", text: value }),
    sub ? el("div", { class: "sub", text: sub }) : null);
}

function table(t, headers, rows) {
  t.replaceChildren(
    el("thead", {}, el("tr", {}, ...headers.map((h) =>
      el("th", { class: (h.num ? "num " : "") + (h.class || ""), "data-key": h.key, "data-dir": h.dir, text: h.label })))),
    el("tbody", {}, ...rows));
}

function pausedBadge(q) {
  if (q.paused_in && q.paused_out) return el("span", { class: "badge bad", text: "paused" });
  if (q.paused_in) return el("span", { class: "badge warn", text: "input paused" });
  if (q.paused_out) return el("span", { class: "badge warn", text: "output paused" });
  return el("span", { class: "badge ok", text: "active" });
}

// Per-queue in/out rates from the change since the previous poll.
function queueRates(list, now) {
  const dt = (now - state.prevQueuesAt) / 1000;
  for (const q of list) {
    const p = state.prevQueues.get(q.name);
    q.rate_in = p && dt > 0 ? Math.max(0, q.jobs_in - p.jobs_in) / dt : null;
    q.rate_out = p && dt > 0 ? Math.max(0, q.jobs_out - p.jobs_out) / dt : null;
  }
  state.prevQueues = new Map(list.map((q) => [q.name, q]));
  state.prevQueuesAt = now;
}

function queueLink(name) { return el("a", { href: "#/queue/" + encodeURIComponent(name), class: "mono", text: name }); }

// History charts: hand-drawn SVG line charts over /api/history and
// /api/queues/<name>/history (the node samples every interval_ms and keeps
// the last hour). The SVG is sized to its box on each draw, so it stays
// legible on a phone; the axes show the value range and minutes ago.
const SVG_NS = "http://www.w3.org/2000/svg";
const HISTORY_MS = 5000;

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// A "nice" upper bound for the y axis (1, 2, 2.5 or 5 × 10^n).
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

function fmtShort(v, unit) {
  if (unit === "bytes") return fmtBytes(v);
  if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + "k";
  return String(Math.round(v * 100) / 100);
}

function fmtAgo(ms) {
  const m = Math.round(ms / 60000);
  if (ms < 60000) return Math.round(ms / 1000) + "s ago";
  return m + "m ago";
}

// series: [{ name, values }]; t: sample times (ms). Returns the chart box;
// its SVG is drawn by drawCharts once the box is in the page, one SVG unit
// per CSS pixel of the box's width (text stays 11px on any screen).
function lineChart(id, title, t, series, unit) {
  const box = el("div", { class: "chart", "data-chart": id },
    el("h3", { text: title }),
    el("div", { class: "legend" }, ...series.map((s, i) => el("span", {}, el("i", { class: "c" + i }), s.name))));
  box.draw = () => {
    const old = box.querySelector("svg");
    if (old) old.remove();
    box.append(chartSvg(box.clientWidth - 26 || 560, title, t, series, unit));
  };
  return box;
}

function drawCharts(container, charts) {
  container.replaceChildren(...charts);
  for (const c of charts) c.draw();
}

function chartSvg(width, title, t, series, unit) {
  const W = Math.max(240, Math.round(width)), H = 180, L = 52, R = 10, T = 8, B = 24;
  const g = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  const n = t.length;
  let max = 0;
  for (const s of series) for (const v of s.values) if (v > max) max = v;
  max = niceMax(max);
  for (let k = 0; k <= 4; k++) {
    const y = T + (H - T - B) * (1 - k / 4);
    g.append(svg("line", { class: "grid-line", x1: L, x2: W - R, y1: y, y2: y }));
    if (k % 2 === 0) g.append(svg("text", { class: "axis", x: L - 6, y: y + 4, "text-anchor": "end" }, fmtShort(max * k / 4, unit)));
  }
  if (n < 2) {
    g.append(svg("text", { class: "empty", x: (L + W - R) / 2, y: H / 2, "text-anchor": "middle" },
      n ? "Collecting… (one sample so far)" : "Collecting… (no samples yet)"));
  } else {
    const t0 = t[0], t1 = t[n - 1], span = Math.max(1, t1 - t0);
    const x = (ti) => L + (W - L - R) * (ti - t0) / span;
    const y = (v) => T + (H - T - B) * (1 - Math.min(v, max) / max);
    series.forEach((s, i) => {
      let d = "";
      s.values.forEach((v, j) => { d += (j ? "L" : "M") + x(t[j]).toFixed(1) + " " + y(Number(v) || 0).toFixed(1); });
      g.append(svg("path", { class: "series c" + i, d, "data-points": n }));
    });
    for (const f of [0, 0.5, 1]) {
      const ti = t0 + span * f;
      g.append(svg("text", { class: "axis", x: x(ti), y: H - 6, "text-anchor": f === 0 ? "start" : f === 1 ? "end" : "middle" },
        f === 1 ? "now" : fmtAgo(t1 - ti)));
    }
  }
  return g;
}

function renderNodeHistory() {
  const h = state.history; if (!h) return;
  const charts = [
    lineChart("node-rates", "Jobs per second", h.t, [
      { name: "added", values: h.added_per_s }, { name: "delivered", values: h.delivered_per_s },
      { name: "acked", values: h.acked_per_s }]),
    lineChart("node-queued", "Queued jobs", h.t, [{ name: "queued", values: h.queued }]),
    lineChart("node-memory", "Memory", h.t, [{ name: "used", values: h.used_memory }, { name: "RSS", values: h.rss }], "bytes"),
  ];
  // Only when the node reports spilled bytes (no spill feature yet).
  if (h.spilled) charts.push(lineChart("node-spilled", "Spilled to disk", h.t, [{ name: "spilled", values: h.spilled.map((v) => v || 0) }], "bytes"));
  drawCharts($("charts-node"), charts);
  $("history-note").textContent = "sampled by the node every " + Math.round(h.interval_ms / 1000) + " s · " + h.samples + " of " + h.capacity + " points";
}

function renderQueueHistory() {
  const h = state.queueHistory; if (!h || h.name !== state.queue) return;
  drawCharts($("charts-queue"), [
    lineChart("queue-rates", "Jobs per second", h.t, [{ name: "in", values: h.in_per_s }, { name: "out (delivered)", values: h.out_per_s }]),
    lineChart("queue-len", "Queue length", h.t, [{ name: "queued", values: h.len }])]);
}

// History changes once per sample: fetched at most every HISTORY_MS.
async function refreshHistory(force) {
  const now = Date.now();
  try {
    if (state.view === "overview" && (force || now - state.historyAt >= HISTORY_MS)) {
      state.historyAt = now;
      state.history = await api("/api/history");
      renderNodeHistory();
    }
    if (state.view === "queue" && (force || now - state.queueHistoryAt >= HISTORY_MS)) {
      state.queueHistoryAt = now;
      state.queueHistory = await api("/api/queues/" + encodeURIComponent(state.queue) + "/history");
      renderQueueHistory();
    }
  } catch (e) { toast("Loading the history failed: " + e.message, true); }
}

function renderOverview() {
  const o = state.overview; if (!o) return;
  const t = o.totals, m = o.memory;
  const memSub = m.max ? Math.round(100 * m.used / m.max) + "% of " + fmtBytes(m.max) : "";
  $("cards").replaceChildren(
    card("Queued jobs", fmtNum(t.queued), fmtNum(t.queues) + " queues"),
    card("Jobs in memory", fmtNum(t.jobs), "all states"),
    card("Blocked consumers", fmtNum(t.blocked)),
    card("Clients", fmtNum(t.clients)),
    card("Memory", fmtBytes(m.used), memSub + (m.level ? " · level " + m.level : "")),
    card("AOF", o.aof.state, o.aof.state === "off" ? "" : fmtBytes(o.aof.size) + (o.aof.error ? " · write error" : "")),
    card("Uptime", fmtAge(o.node.uptime_s * 1000), "v" + o.node.version));
  const c = o.counters;
  const dt = (o.now - state.prevCountersAt) / 1000;
  const prev = state.prevCounters;
  const rate = (k) => (prev && dt > 0 ? fmtRate(Math.max(0, c[k] - prev[k]) / dt) : "");
  $("flow").replaceChildren(...[
    ["Added", "added"], ["Delivered", "delivered"], ["Acked", "acked"], ["Nacked", "nacked"],
    ["Re-queued", "requeued"], ["Expired", "expired"], ["Evicted", "evicted"],
    ["Dead-lettered", "dead_lettered"], ["Imported", "imported"], ["NOREPL", "norepl"], ["OOM refusals", "oom"],
  ].map(([label, k]) => card(label, fmtNum(c[k]), rate(k))));
  state.prevCounters = c; state.prevCountersAt = o.now;
  const ready = $("ready");
  ready.textContent = o.node.ready ? "not ready" : "ready";
  ready.className = "badge " + (o.node.ready ? "bad" : "ok");
  ready.title = o.node.ready || "The node is ready";
  $("node-id").textContent = o.node.id.slice(0, 8) + " · :" + o.node.port;
  renderTopQueues();
}

function renderTopQueues() {
  const qs = state.queues; if (!qs) return;
  const top = qs.queues.slice(0, 10);
  table($("top-queues"), [
    { label: "Queue" }, { label: "Length", num: true }, { label: "Oldest", num: true },
    { label: "In", num: true }, { label: "Out", num: true }, { label: "State" },
  ], top.length ? top.map((q) => el("tr", {},
    el("td", {}, queueLink(q.name)), el("td", { class: "num", text: fmtNum(q.len) }),
    el("td", { class: "num", text: q.len ? fmtAge(q.oldest_age_ms) : "–" }),
    el("td", { class: "num", text: fmtRate(q.rate_in) }), el("td", { class: "num", text: fmtRate(q.rate_out) }),
    el("td", {}, pausedBadge(q)))) : [el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No queues yet." }))]);
}

const QUEUE_COLUMNS = [
  { key: "name", label: "Queue" }, { key: "len", label: "Length", num: true },
  { key: "oldest_age_ms", label: "Oldest job", num: true }, { key: "blocked", label: "Consumers", num: true },
  { key: "rate_in", label: "In/s", num: true }, { key: "rate_out", label: "Out/s", num: true },
  { key: "jobs_in", label: "Total in", num: true }, { key: "jobs_out", label: "Total out", num: true },
  { key: "paused", label: "State" }, { key: "", label: "" },
];

function renderQueues() {
  const qs = state.queues; if (!qs) return;
  const f = $("filter").value.trim().toLowerCase();
  let list = qs.queues.filter((q) => !f || q.name.toLowerCase().includes(f));
  const { key, dir } = state.sort;
  const val = (q) => (key === "paused" ? (q.paused_in ? 1 : 0) + (q.paused_out ? 2 : 0) : q[key]);
  list.sort((a, b) => {
    const x = val(a), y = val(b);
    const r = typeof x === "string" ? x.localeCompare(y) : (x ?? -1) - (y ?? -1);
    return dir === "asc" ? r : -r;
  });
  $("queue-count").textContent = list.length + " of " + qs.total + " queues" + (qs.total > qs.queues.length ? " (longest " + qs.queues.length + " listed)" : "");
  const headers = QUEUE_COLUMNS.map((c) => Object.assign({}, c, { dir: c.key === key ? dir : undefined }));
  table($("queues"), headers, list.length ? list.map((q) => el("tr", { "data-queue": q.name },
    el("td", {}, queueLink(q.name)),
    el("td", { class: "num", text: fmtNum(q.len) }),
    el("td", { class: "num", text: q.len ? fmtAge(q.oldest_age_ms) : "–" }),
    el("td", { class: "num", text: fmtNum(q.blocked) }),
    el("td", { class: "num", text: fmtRate(q.rate_in) }),
    el("td", { class: "num", text: fmtRate(q.rate_out) }),
    el("td", { class: "num", text: fmtNum(q.jobs_in) }),
    el("td", { class: "num", text: fmtNum(q.jobs_out) }),
    el("td", {}, pausedBadge(q)),
    el("td", {}, (q.paused_in || q.paused_out)
      ? el("button", { class: "btn small", "data-action": "resume", onclick: () => pauseQueue(q.name, "none") }, "Resume")
      : el("button", { class: "btn small", "data-action": "pause", onclick: () => pauseQueue(q.name, "all") }, "Pause")))) :
    [el("tr", {}, el("td", { colspan: QUEUE_COLUMNS.length, class: "muted", text: f ? "No queue matches." : "No queues yet." }))]);
}

async function pauseQueue(name, mode) {
  const what = { in: "Stop accepting new jobs (ADDJOB answers PAUSED)", out: "Stop delivering jobs to consumers", all: "Stop both accepting and delivering jobs", none: "Accept and deliver jobs again" }[mode];
  const title = mode === "none" ? "Resume queue " + name + "?" : "Pause queue " + name + "?";
  if (!(await confirmDialog(title, what + ", on every node of the cluster."))) return;
  try {
    await action("/api/queues/" + encodeURIComponent(name) + "/pause", { mode });
    toast(mode === "none" ? "Queue resumed" : "Queue paused");
    refresh();
  } catch (e) { toast("Failed: " + e.message, true); }
}

function currentQueue() { return state.queues && state.queues.queues.find((q) => q.name === state.queue); }

// QLIMIT: the cluster-wide setting, with this node's share and use.
function limitCard(l) {
  const parts = [];
  if (l.rate) parts.push(fmtNum(l.rate) + " per " + fmtNum(l.interval_ms) + " ms");
  if (l.inflight) parts.push(fmtNum(l.inflight) + " in flight");
  const here = [];
  if (l.rate) here.push(fmtNum(l.window_used) + "/" + fmtNum(l.rate_share) + " in window");
  if (l.inflight) here.push(fmtNum(l.inflight_used) + "/" + fmtNum(l.inflight_share) + " in flight");
  return card("Limit", parts.join(", "), "this node: " + here.join(", "));
}

function renderQueueHeader() {
  $("queue-title").textContent = state.queue;
  const q = currentQueue() || { len: 0, blocked: 0, jobs_in: 0, jobs_out: 0, paused_in: false, paused_out: false, oldest_age_ms: 0, rate_in: null, rate_out: null };
  $("queue-paused").replaceWith(Object.assign(pausedBadge(q), { id: "queue-paused" }));
  $("queue-cards").replaceChildren(
    card("Length", fmtNum(q.len)), card("Oldest job", q.len ? fmtAge(q.oldest_age_ms) : "–"),
    card("Consumers", fmtNum(q.blocked)), card("In", fmtRate(q.rate_in), fmtNum(q.jobs_in) + " total"),
    card("Out", fmtRate(q.rate_out), fmtNum(q.jobs_out) + " total"),
    ...(q.waiting ? [card("Waiting", fmtNum(q.waiting), "held by AFTER, not queued")] : []),
    ...(q.limit ? [limitCard(q.limit)] : []));
  $("redrive").hidden = !(state.overview && state.overview.features.redrive);
}

async function loadJobs() {
  const st = $("state-filter").value;
  const path = "/api/queues/" + encodeURIComponent(state.queue) + "/jobs?count=100&cursor=" + state.cursor + (st ? "&state=" + encodeURIComponent(st) : "");
  try {
    const r = await api(path);
    const [next, jobs] = r.result;
    state.nextCursor = next;
    $("next-page").disabled = next === "0";
    table($("jobs"), [{ label: "Job ID" }, { label: "State" }, { label: "Age", num: true },
      { label: "TTL", num: true }, { label: "Nacks", num: true }, { label: "Deliveries", num: true },
      { label: "Priority", num: true }, { label: "Progress" }, { label: "Body", class: "hide-sm" }],
    jobs.length ? jobs.map((j) => el("tr", {},
      el("td", {}, el("a", { class: "mono", href: "#/job/" + encodeURIComponent(j.id), text: j.id })),
      el("td", {}, el("span", { class: "badge", text: j.state })),
      el("td", { class: "num", text: fmtAge(Date.now() - j.ctime / 1e6) }),
      el("td", { class: "num", text: fmtAge(j.ttl * 1000) }),
      el("td", { class: "num", text: fmtNum(j.nacks) }),
      el("td", { class: "num", text: fmtNum(j["additional-deliveries"]) }),
      // Priority and progress are extension fields: absent for plain jobs (level 5, no report).
      el("td", { class: "num", text: fmtNum(j.priority ?? 5) }),
      el("td", { text: j.progress == null ? "–" : j.progress + "%" + (j["progress-desc"] ? " " + String(j["progress-desc"]).slice(0, 40) : "") }),
      el("td", { class: "mono hide-sm", text: String(j.body ?? "").slice(0, 80) }))) :
      [el("tr", {}, el("td", { colspan: 9, class: "muted", text: next === "0" ? "No jobs here." : "No jobs in this slice; try the next page." }))]);
  } catch (e) { toast("Loading jobs failed: " + e.message, true); }
}

async function loadJob() {
  $("job-title").textContent = state.job;
  try {
    const r = await api("/api/jobs/" + encodeURIComponent(state.job));
    const j = r.result;
    if (!j) {
      $("job-fields").replaceChildren(el("tr", {}, el("td", { class: "muted", text: "This job no longer exists on this node." })));
      $("job-body").textContent = "";
      $("delete-job").disabled = true;
      return;
    }
    $("delete-job").disabled = false;
    $("job-back").href = "#/queue/" + encodeURIComponent(j.queue || "");
    $("job-back").textContent = "← " + (j.queue || "Queue");
    const rows = Object.entries(j).filter(([k]) => k !== "body").map(([k, v]) =>
      el("tr", {}, el("th", { text: k }), el("td", { class: "mono", text: Array.isArray(v) ? v.join(", ") || "–" : String(v) })));
    $("job-fields").replaceChildren(el("tbody", {}, ...rows));
    $("job-body").textContent = j.body ?? "";
  } catch (e) { toast("Loading the job failed: " + e.message, true); }
}

// Each node's totals come from /api/cluster, which asks the peers over the
// bus; a peer that did not answer in time has totals null: "unknown".
function fmtWhen(s) {
  return s.every !== null ? "every " + fmtAge(s.every * 1000) : s.cron + " (" + s.tz + ")";
}

function renderSchedules() {
  const d = state.schedules; if (!d) return;
  const rows = d.schedules.map((s) => el("tr", { "data-schedule": s.name },
    el("td", { class: "mono", text: s.name }),
    el("td", { class: "mono", text: fmtWhen(s) }),
    el("td", {}, queueLink(s.queue)),
    el("td", { text: s["next-tick"] === null ? "–" : "in " + fmtAge(Math.max(0, s["next-tick"] - d.now)) }),
    el("td", { text: s["last-tick"] ? fmtAge(Math.max(0, d.now - s["last-tick"])) + " ago" : "never" }),
    el("td", { class: "num", text: fmtNum(s["ticks-fired"]) + " / " + fmtNum(s["ticks-deduplicated"]) }),
    el("td", {}, s.paused ? el("span", { class: "badge warn", text: "paused" }) : el("span", { class: "badge ok", text: "active" })),
    el("td", {},
      s.paused
        ? el("button", { class: "btn small", "data-action": "resume", onclick: () => scheduleAction(s.name, "resume") }, "Resume")
        : el("button", { class: "btn small", "data-action": "pause", onclick: () => scheduleAction(s.name, "pause") }, "Pause"),
      el("button", { class: "btn small danger", "data-action": "delete", onclick: () => scheduleAction(s.name, "delete") }, "Delete"))));
  table($("schedules"), [{ label: "Schedule" }, { label: "When" }, { label: "Queue" }, { label: "Next tick" },
    { label: "Last added" }, { label: "Added here / seen", num: true }, { label: "State" }, { label: "" }],
  rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No schedules (SCHEDULE ADD creates one)." }))]);
}

async function refreshSchedules() {
  try { state.schedules = await api("/api/schedules"); renderSchedules(); }
  catch (e) { toast("Loading the schedules failed: " + e.message, true); }
}

async function scheduleAction(name, act) {
  const text = {
    pause: "No job is added for its ticks until it is resumed, on every node of the cluster.",
    resume: "Its ticks are added again from the next one, on every node of the cluster.",
    delete: "The schedule is removed from every node of the cluster (SCHEDULE DEL); jobs already added stay.",
  }[act];
  const title = { pause: "Pause", resume: "Resume", delete: "Delete" }[act] + " schedule " + name + "?";
  if (!(await confirmDialog(title, text))) return;
  try {
    await action("/api/schedules/" + encodeURIComponent(name) + "/" + act);
    toast({ pause: "Schedule paused", resume: "Schedule resumed", delete: "Schedule deleted" }[act]);
    refreshSchedules();
  } catch (e) { toast("Failed: " + e.message, true); }
}

// A batch's progress: acknowledged (green) and dead-lettered (red) parts of
// a bar, widths set through the CSSOM (the page's CSP allows no inline
// style attribute), and "finished / total" beside it.
function progressBar(b) {
  const total = Number(b.total || 0);
  const bar = el("span", { class: "bar", title: fmtNum(b.acked) + " acked, " + fmtNum(b.dead) + " dead, " + fmtNum(b.pending) + " pending" });
  const acked = el("span", { class: "bar-acked" }), dead = el("span", { class: "bar-dead" });
  acked.style.width = (total ? 100 * b.acked / total : 0) + "%";
  dead.style.width = (total ? 100 * b.dead / total : 0) + "%";
  bar.append(acked, dead);
  return el("span", { class: "progress" }, bar,
    el("span", { class: "num", text: fmtNum(b.acked + b.dead) + " / " + fmtNum(total) }));
}

const BATCH_BADGE = { open: "", committed: "warn", succeeded: "ok", failed: "bad", cancelled: "bad" };

function renderBatches() {
  const d = state.batches; if (!d) return;
  const cbs = (b) => [["success", b["on-success"], b["success-added"]], ["complete", b["on-complete"], b["complete-added"]]]
    .filter(([, q]) => q !== null && q !== undefined)
    .map(([k, q, added]) => el("span", { class: "cb" }, k + " → ", queueLink(q), added ? " ✓" : ""));
  const rows = d.batches.map((b) => el("tr", { "data-batch": b.id },
    el("td", { class: "mono", text: b.id }),
    el("td", {}, el("span", { class: "badge " + (BATCH_BADGE[b.state] || ""), text: b.state })),
    el("td", {}, progressBar(b)),
    el("td", { class: "num", text: fmtNum(b.pending) }),
    el("td", { class: "num", text: fmtNum(b.acked) }),
    el("td", { class: "num", text: fmtNum(b.dead) }),
    el("td", {}, ...(cbs(b).length ? cbs(b) : ["–"])),
    el("td", {},
      b.state === "cancelled" || b["success-added"] || b["complete-added"] ? null
        : el("button", { class: "btn small danger", "data-action": "cancel", onclick: () => batchCancel(b.id) }, "Cancel"))));
  table($("batches"), [{ label: "Batch" }, { label: "State" }, { label: "Progress" }, { label: "Pending", num: true },
    { label: "Acked", num: true }, { label: "Dead", num: true }, { label: "Callbacks" }, { label: "" }],
  rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted", text: "No batches (BATCH CREATE opens one)." }))]);
}

async function refreshBatches() {
  try { state.batches = await api("/api/batches"); renderBatches(); }
  catch (e) { toast("Loading the batches failed: " + e.message, true); }
}

async function batchCancel(id) {
  if (!(await confirmDialog("Cancel batch " + id + "?",
    "No callback is added for it, on every node of the cluster (BATCH CANCEL); its members stay queued and are not deleted."))) return;
  try {
    await action("/api/batches/" + encodeURIComponent(id) + "/cancel");
    toast("Batch cancelled");
    refreshBatches();
  } catch (e) { toast("Failed: " + e.message, true); }
}

function renderCluster() {
  const c = state.cluster; if (!c) return;
  const known = c.nodes.length - c.nodes_unknown;
  $("cluster-cards").replaceChildren(
    card("Nodes", fmtNum(c.nodes.length), fmtNum(c.nodes.filter((n) => n.myself || n.reachable).length) + " reachable"),
    card("Queued jobs", fmtNum(c.queued_known), c.nodes_unknown ? "on " + known + " of " + c.nodes.length + " nodes (" + c.nodes_unknown + " unknown)" : "all nodes"));
  const tot = (n, k) => n.totals ? el("td", { class: "num", text: fmtNum(n.totals[k]) })
    : el("td", { class: "num muted", text: "unknown", title: "no answer in time (not linked, unreachable or an older version)" });
  table($("nodes"), [{ label: "Node" }, { label: "Address" }, { label: "Flags" }, { label: "Link" },
    { label: "Queued", num: true }, { label: "Jobs", num: true }, { label: "Queues", num: true }, { label: "Consumers", num: true }],
  c.nodes.map((n) => el("tr", { "data-node": n.id },
    el("td", { class: "mono", text: n.id.slice(0, 12) + (n.myself ? " (this node)" : "") }),
    el("td", { class: "mono", text: n.addr }),
    el("td", { text: n.flags }),
    el("td", {}, el("span", { class: "dot " + (n.myself ? "ok" : n.link ? "ok" : "bad") }), n.myself ? "self" : n.link ? (n.reachable ? "connected" : "linked, failing") : "disconnected"),
    tot(n, "queued"), tot(n, "jobs"), tot(n, "queues"), tot(n, "blocked"))));
}

async function refreshCluster() {
  try { state.cluster = await api("/api/cluster"); renderCluster(); }
  catch (e) { toast("Loading the cluster failed: " + e.message, true); }
}

async function refresh() {
  try {
    const [o, q] = await Promise.all([api("/api/overview"), api("/api/queues")]);
    state.overview = o;
    queueRates(q.queues, q.now);
    state.queues = q;
    renderOverview();
    if (state.view === "queues") renderQueues();
    if (state.view === "queue") renderQueueHeader();
    if (state.view === "cluster") refreshCluster();
    if (state.view === "schedules") refreshSchedules();
    if (state.view === "batches") refreshBatches();
    refreshHistory(false);
  } catch (e) {
    $("ready").textContent = "offline";
    $("ready").className = "badge bad";
    $("ready").title = e.message;
  }
}

function route() {
  const h = decodeURIComponent(location.hash.replace(/^#\/?/, ""));
  let view = "overview";
  if (h === "queues") view = "queues";
  else if (h === "cluster") view = "cluster";
  else if (h === "schedules") view = "schedules";
  else if (h === "batches") view = "batches";
  else if (h.startsWith("queue/")) { view = "queue"; if (state.queue !== h.slice(6)) { state.queue = h.slice(6); state.cursor = "0"; } }
  else if (h.startsWith("job/")) { view = "job"; state.job = h.slice(4); }
  state.view = view;
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + view;
  const tab = view === "queue" || view === "job" ? "queues" : view;
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.tab === tab);
  if (view === "queues") renderQueues();
  if (view === "queue") { renderQueueHeader(); loadJobs(); $("charts-queue").replaceChildren(); refreshHistory(true); }
  if (view === "overview") { renderNodeHistory(); refreshHistory(true); }
  if (view === "job") loadJob();
  if (view === "cluster") refreshCluster();
  if (view === "schedules") refreshSchedules();
  if (view === "batches") refreshBatches();
}

function schedule() {
  clearInterval(state.timer);
  if ($("live").checked) state.timer = setInterval(refresh, POLL_MS);
}

document.addEventListener("DOMContentLoaded", () => {
  $("queues").addEventListener("click", (ev) => {
    const th = ev.target.closest("th"); if (!th || !th.dataset.key) return;
    const key = th.dataset.key;
    state.sort = { key, dir: state.sort.key === key && state.sort.dir === "desc" ? "asc" : (key === "name" ? "asc" : "desc") };
    renderQueues();
  });
  $("filter").addEventListener("input", renderQueues);
  $("live").addEventListener("change", schedule);
  $("pause-in").addEventListener("click", () => pauseQueue(state.queue, "in"));
  $("pause-out").addEventListener("click", () => pauseQueue(state.queue, "out"));
  $("resume").addEventListener("click", () => pauseQueue(state.queue, "none"));
  $("redrive").addEventListener("click", async () => {
    if (!(await confirmDialog("Re-drive dead letters?", "Move the dead-lettered jobs queued in " + state.queue + " back to the queues they died in (REDRIVE FROM)."))) return;
    try { const r = await action("/api/queues/" + encodeURIComponent(state.queue) + "/redrive"); toast("Re-driven: " + JSON.stringify(r.result)); refresh(); }
    catch (e) { toast("Failed: " + e.message, true); }
  });
  $("state-filter").addEventListener("change", () => { state.cursor = "0"; loadJobs(); });
  $("first-page").addEventListener("click", () => { state.cursor = "0"; loadJobs(); });
  $("next-page").addEventListener("click", () => { state.cursor = state.nextCursor; loadJobs(); });
  $("delete-job").addEventListener("click", async () => {
    if (!(await confirmDialog("Delete job?", "Job " + state.job + " is removed from this node (DELJOB); other copies are not touched."))) return;
    try { await action("/api/jobs/" + encodeURIComponent(state.job) + "/delete"); toast("Job deleted"); loadJob(); refresh(); }
    catch (e) { toast("Failed: " + e.message, true); }
  });
  window.addEventListener("hashchange", route);
  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => { for (const c of document.querySelectorAll(".chart")) if (c.draw) c.draw(); }, 150);
  });
  route();
  refresh().then(route);
  schedule();
});
