// SPDX-License-Identifier: MIT
// cogworkerctl web: every page of the dashboard, drawn from the JSON API (/api/...).
//
// Rules this file keeps:
// - Everything that comes from Redis (class and queue names, args, error messages,
//   output, identities) is written with textContent or as an attribute value set through
//   the DOM, never as markup: a job's args are whatever its producer wrote. No HTML is
//   ever parsed from a string, nothing is evaluated, and links are built from fixed paths
//   plus encodeURIComponent, so no "javascript:" URL can be made from data.
// - Every change is a POST with the session's CSRF token (X-CSRF-Token); destructive ones
//   ask first. Under --read-only the server says so and no action button is drawn.
// - While Redis or the server is away a banner says so and the page keeps its last view;
//   only the overview and the batch pages refresh by themselves (POLL_MS; a batch page
//   is drawn again only when its document changed), and a job's output follows over
//   server-sent events, so an open tab costs a bounded number of Redis commands.
"use strict";

const POLL_MS = 2000;           // overview refresh
const CHART_POINTS = 90;        // 3 minutes of 2-s samples
const CHART_W = 1200;           // the charts' width in their own units (about the page's)
const PAGE_SIZE = 50;

const state = { session: null };

// ---- DOM helpers ----

// el("a", {href: "/queues", class: "x"}, "text", child...): strings become text nodes.
function el(tag, attrs, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v === null || v === undefined || v === false) continue;
		if (k === "class") e.className = v;
		else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
		else if (k === "href") e.setAttribute("href", safeHref(v));
		else e.setAttribute(k, v === true ? "" : String(v));
	}
	for (const kid of kids.flat(Infinity)) {
		if (kid === null || kid === undefined || kid === false) continue;
		e.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
	}
	return e;
}

// Only this site's own paths are links; anything else (a data URL, "javascript:") is not.
function safeHref(v) {
	const s = String(v);
	return s.startsWith("/") && !s.startsWith("//") ? s : "#";
}

function svg(tag, attrs) {
	const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
	for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
	return e;
}

function main() { return document.getElementById("main"); }

function setMain(...kids) {
	const m = main();
	m.replaceChildren(...kids.flat().filter((k) => k));
}

function banner(text, kind) {
	const b = document.getElementById("banner");
	if (!text) { b.hidden = true; b.textContent = ""; return; }
	b.hidden = false;
	b.className = kind || "";
	b.textContent = text;
}

function fmtNum(n) {
	return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US");
}

function fmtDuration(s) {
	if (s === null || s === undefined || isNaN(s)) return "-";
	s = Math.abs(s);
	if (s < 60) return s < 10 ? s.toFixed(1) + "s" : Math.round(s) + "s";
	if (s < 3600) return Math.floor(s / 60) + "m " + String(Math.floor(s % 60)).padStart(2, "0") + "s";
	if (s < 86400) return Math.floor(s / 3600) + "h " + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
	return Math.floor(s / 86400) + "d " + String(Math.floor(s % 86400 / 3600)).padStart(2, "0") + "h";
}

// Bytes as the log says them (src/usage.c): KiB below 1 MiB, MiB (one decimal below 10), GiB.
function fmtBytes(n) {
	if (n === null || n === undefined || isNaN(n) || n < 0) return "-";
	const mib = n / 1048576;
	if (n < 1048576) return Math.ceil(n / 1024) + "KiB";
	if (mib < 10) return mib.toFixed(1) + "MiB";
	if (mib < 10240) return Math.round(mib) + "MiB";
	return (mib / 1024).toFixed(1) + "GiB";
}

function fmtCpu(s) {
	return s === null || s === undefined || s === "" || isNaN(s) ? "-" : Number(s).toFixed(2) + "s";
}

// What a run cost (doc/protocol.md §4.9): "cpu=0.48s maxrss=151MiB", null when unknown.
function fmtCost(cpu, rss) {
	if (cpu === null || cpu === undefined || cpu === "") return null;
	return "cpu=" + fmtCpu(cpu) + " maxrss=" + fmtBytes(rss === undefined || rss === null ? null : Number(rss));
}

function fmtTime(t) {
	if (!t) return "-";
	return new Date(t * 1000).toISOString().replace(".000Z", "Z");
}

function fmtRelative(t) {
	if (!t) return "-";
	const d = t - Date.now() / 1000;
	return d > 0.5 ? "in " + fmtDuration(d) : fmtDuration(d) + " ago";
}

// A time cell: relative, with the exact UTC time as its title.
function timeCell(t) {
	return el("td", { title: t ? fmtTime(t) : null }, fmtRelative(t));
}

function compactJSON(v) {
	try { return JSON.stringify(v); } catch (e) { return String(v); }
}

function cut(s, n) {
	s = String(s);
	return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

function table(heads, rows, numeric) {
	const nums = new Set(numeric || []);
	return el("div", { class: "panel" }, el("table", {},
		el("thead", {}, el("tr", {}, heads.map((h, i) => el("th", { class: nums.has(i) ? "num" : null }, h)))),
		el("tbody", {}, rows)));
}

// ---- the API ----

async function api(path, opts) {
	opts = opts || {};
	const init = { credentials: "same-origin", headers: {} };
	if (opts.post) {
		init.method = "POST";
		init.headers["Content-Type"] = "application/x-www-form-urlencoded";
		if (state.session && state.session.csrf) init.headers["X-CSRF-Token"] = state.session.csrf;
		const body = new URLSearchParams();
		for (const [k, v] of Object.entries(opts.form || {})) {
			if (Array.isArray(v)) v.forEach((x) => body.append(k, x));
			else if (v !== null && v !== undefined) body.append(k, v);
		}
		init.body = body.toString();
	}
	let res, data = null;
	try {
		res = await fetch(path, init);
	} catch (e) {
		banner("The dashboard's server does not answer (" + e.message + "): showing the last view.", "error");
		return { ok: false, status: 0, data: { error: "server unreachable" } };
	}
	const type = res.headers.get("Content-Type") || "";
	if (type.startsWith("application/json")) {
		try { data = await res.json(); } catch (e) { data = null; }
	} else {
		data = await res.text();
	}
	if (res.status === 503 && data && data.unavailable) {
		banner("Redis does not answer: " + (data.error || "") + ". Showing the last view; trying again.", "error");
	} else if (res.status === 401) {
		showLogin();
	} else if (res.ok || res.status < 500) {
		banner(null);
	}
	return { ok: res.ok, status: res.status, data: data };
}

// A POST from a button: asks first when confirmText, reports the outcome, then redraws.
async function act(path, form, confirmText, after) {
	if (confirmText && !window.confirm(confirmText)) return null;
	const r = await api(path, { post: true, form: form });
	if (!r.ok) {
		const msg = r.data && r.data.error ? r.data.error : "HTTP " + r.status;
		banner("Not done: " + msg, "error");
	}
	if (after) await after(r);
	return r;
}

function canAct() {
	return state.session && !state.session.read_only && state.session.csrf;
}

function actionButton(label, path, form, confirmText, after, danger) {
	if (!canAct()) return null;
	return el("button", { class: danger ? "danger" : null, type: "button",
		onclick: () => act(path, form, confirmText, after || render) }, label);
}

// ---- pages ----

const pages = [
	{ path: "/", title: "Overview", draw: () => drawOverview() },
	{ path: "/queues", title: "Queues", draw: () => drawQueues() },
	{ path: "/jobs/running", title: "Running", draw: () => drawJobList("running") },
	{ path: "/jobs/scheduled", title: "Scheduled", draw: () => drawJobList("scheduled") },
	{ path: "/jobs/retry", title: "Retries", draw: () => drawJobList("retry") },
	{ path: "/jobs/dead", title: "Dead", draw: () => drawJobList("dead") },
	{ path: "/jobs/waiting", title: "Waiting", draw: () => drawWaiting() },
	{ path: "/jobs/queued", title: "Queued", nav: false, draw: () => drawJobList("queued") },
	{ path: "/jobs/after", title: "Dependencies", draw: () => drawJobList("after") },
	{ path: "/batches", title: "Batches", draw: () => drawBatches() },
	{ title: "Batch", nav: false, match: (p) => /^\/batches\/[^/]+$/.test(p),
		draw: () => drawBatch(decodeURIComponent(location.pathname.split("/")[2])) },
	{ path: "/processes", title: "Processes", draw: () => drawProcesses() },
	{ path: "/periodic", title: "Periodic", draw: () => drawPeriodic() },
	{ path: "/limits", title: "Limits", draw: () => drawLimits() },
	{ path: "/history", title: "History", draw: () => drawHistory() },
	{ path: "/metrics", title: "Metrics", draw: () => drawMetrics() },
	{ path: "/login", title: "Log in", nav: false, draw: () => showLogin() },
	{ title: "Job", nav: false, match: (p) => /^\/jobs\/[^/]+$/.test(p),
		draw: () => drawJob(decodeURIComponent(location.pathname.split("/")[2])) },
];

let timer = null;
function every(ms, fn) {
	if (timer) clearInterval(timer);
	timer = setInterval(fn, ms);
}

// Overview: the counters, a live chart of processed and failed per second (from the
// difference between two reads of the counters), the last 24 hours and the queues.
const live = { last: null, points: [] };

async function drawOverview() {
	const cards = el("div", { class: "cards", id: "cards" });
	const chart = el("div", { class: "panel" },
		el("div", { class: "legend" }, el("span", { class: "p" }, "— processed/s"), el("span", { class: "f" }, "— failed/s"),
			el("span", { class: "muted", id: "rate" }, "")),
		svg("svg", { class: "chart", id: "live", viewBox: "0 0 " + CHART_W + " 180", preserveAspectRatio: "none" }));
	const hours = el("div", { class: "panel" }, svg("svg", { class: "chart", id: "hours", viewBox: "0 0 " + CHART_W + " 180", preserveAspectRatio: "none" }));
	const queues = el("div", { id: "ov-queues" });
	setMain(el("h1", {}, "Overview"), cards, el("h2", {}, "Live"), chart,
		el("h2", {}, "Last 24 hours (UTC)"), hours, el("h2", {}, "Queues"), queues);
	await refreshOverview();
	every(POLL_MS, refreshOverview);
}

async function refreshOverview() {
	const [s, q] = await Promise.all([api("/api/stats"), api("/api/queues")]);
	if (s.ok) {
		const d = s.data;
		const c = document.getElementById("cards");
		if (!c) return;
		const card = (label, n, href, id) => el(href ? "a" : "div", { class: "card", href: href, id: id },
			el("div", { class: "n" }, fmtNum(n)), el("div", { class: "l" }, label));
		c.replaceChildren(
			card("Processed", d.processed, "/history", "c-processed"),
			card("Failed", d.failed, "/history", "c-failed"),
			card("Busy", d.busy, "/jobs/running", "c-busy"),
			card("Enqueued", d.enqueued, "/queues", "c-enqueued"),
			card("Scheduled", d.scheduled, "/jobs/scheduled", "c-scheduled"),
			card("Retries", d.retry, "/jobs/retry", "c-retry"),
			card("Dead", d.dead, "/jobs/dead", "c-dead"),
			card("Processes", d.processes, "/processes", "c-processes"));
		const now = Date.now() / 1000;
		if (live.last) {
			const dt = now - live.last.t;
			if (dt > 0) live.points.push({
				p: Math.max(0, (d.processed - live.last.processed) / dt),
				f: Math.max(0, (d.failed - live.last.failed) / dt) });
			if (live.points.length > CHART_POINTS) live.points.shift();
		}
		live.last = { t: now, processed: d.processed, failed: d.failed };
		drawLive();
		drawHours(d.throughput || []);
	}
	if (q.ok) {
		const box = document.getElementById("ov-queues");
		if (box) box.replaceChildren(queueTable(q.data, false));
	}
}

function drawLive() {
	const g = document.getElementById("live");
	if (!g) return;
	const pts = live.points;
	const max = Math.max(1, ...pts.map((x) => Math.max(x.p, x.f)));
	// The newest point at the right edge; older ones scroll left.
	const x0 = CHART_POINTS - pts.length;
	const xy = (i, v) => ((x0 + i) * CHART_W / (CHART_POINTS - 1)).toFixed(1) + "," + (170 - v / max * 160).toFixed(1);
	const line = (k, cls) => svg("polyline", { class: cls, points: pts.map((x, i) => xy(i, x[k])).join(" ") });
	g.replaceChildren(
		svg("line", { class: "grid", x1: 0, y1: 170, x2: CHART_W, y2: 170 }),
		svg("line", { class: "grid", x1: 0, y1: 10, x2: CHART_W, y2: 10 }),
		line("p", "processed"), line("f", "failed"));
	const t = svg("text", { x: 4, y: 20 });
	t.textContent = max.toFixed(1) + "/s";
	g.append(t);
	const last = pts[pts.length - 1];
	const rate = document.getElementById("rate");
	if (rate) rate.textContent = last ? last.p.toFixed(1) + " processed/s, " + last.f.toFixed(1) + " failed/s" : "measuring…";
}

function drawHours(tp) {
	const g = document.getElementById("hours");
	if (!g) return;
	bars(g, tp.map((h) => ({ ok: h.processed, bad: h.failed, label: fmtTime(h.hour).slice(11, 16) })));
}

// Stacked bars (ok below, bad on top), one per item, into an svg of CHART_W×180.
function bars(g, items) {
	const max = Math.max(1, ...items.map((x) => x.ok + x.bad));
	const w = CHART_W / Math.max(1, items.length);
	const kids = [svg("line", { class: "grid", x1: 0, y1: 160, x2: CHART_W, y2: 160 })];
	items.forEach((x, i) => {
		const hOk = x.ok / max * 145, hBad = x.bad / max * 145;
		kids.push(svg("rect", { class: "bar-ok", x: i * w + 1, y: 160 - hOk, width: Math.max(1, w - 2), height: hOk }));
		kids.push(svg("rect", { class: "bar-bad", x: i * w + 1, y: 160 - hOk - hBad, width: Math.max(1, w - 2), height: hBad }));
		if (i % Math.ceil(items.length / 12) === 0) {
			const t = svg("text", { x: i * w + 1, y: 175 });
			t.textContent = x.label;
			kids.push(t);
		}
	});
	const t = svg("text", { x: 4, y: 12 });
	t.textContent = fmtNum(max);
	kids.push(t);
	g.replaceChildren(...kids);
}

// Queues: size, latency, paused; pause, resume, clear (asks first).
function queueTable(list, actions) {
	if (!list.length) return el("p", { class: "muted" }, "No queues.");
	const rows = list.map((q) => {
		const base = "/api/queues/" + encodeURIComponent(q.name);
		const tds = [
			el("td", { class: "code" }, el("a", { href: "/jobs/queued?queue=" + encodeURIComponent(q.name) }, q.name)),
			el("td", { class: "num" }, fmtNum(q.size)),
			el("td", { class: "num" }, fmtDuration(q.latency)),
			el("td", {}, q.paused ? el("span", { class: "tag warn" }, "paused") : "no"),
		];
		if (actions && canAct()) tds.push(el("td", {},
			q.paused ? actionButton("Resume", base + "/resume", {}, null)
				: actionButton("Pause", base + "/pause", {}, null), " ",
			actionButton("Clear", base + "/clear", {},
				"Delete all " + fmtNum(q.size) + " job(s) of queue " + q.name + "?", null, true)));
		return el("tr", { "data-queue": q.name }, tds);
	});
	const heads = ["Queue", "Size", "Latency", "Paused"];
	if (actions && canAct()) heads.push("");
	return table(heads, rows, [1, 2]);
}

async function drawQueues() {
	const [r, g] = await Promise.all([api("/api/queues"), api("/api/groups")]);
	if (!r.ok) return setMain(el("h1", {}, "Queues"), el("p", { class: "muted" }, r.data && r.data.error || "unavailable"));
	setMain(el("h1", {}, "Queues"), queueTable(r.data, true), g.ok ? groupsPanel(g.data) : null);
}

// The jobs set aside for their fair-share group (/api/groups, as cogworkerctl groups lists
// them, most waiting first per class): the GROUPS_SHOWN most waiting groups of each class,
// so a tenant per group can't make the page endless. A read counts at most cut.read_max
// groups of a class (doc/protocol.md §7.35): a class's rows then carry "cut", and the page
// says how many groups were not read (their jobs are not in the total).
const GROUPS_SHOWN = 10;
function groupsPanel(list) {
	const waiting = list.filter((x) => x.waiting > 0);
	if (!waiting.length) return null;
	const byClass = new Map();
	for (const x of waiting) {
		if (!byClass.has(x.class)) byClass.set(x.class, []);
		byClass.get(x.class).push(x);
	}
	const kids = [el("h2", {}, "Set aside for their group"), el("p", { class: "muted" },
		"Jobs of a handler with group limits whose group has no room: they left their queue for their group's line and come back, oldest first, as the group frees a slot.")];
	for (const [cls, rows] of byClass) {
		const jobs = rows.reduce((n, x) => n + x.waiting, 0);
		const cut = rows[0].cut, notRead = cut ? cut.not_read : 0;
		kids.push(el("h3", { "data-class": cls }, cls + " — " + fmtNum(jobs) + " job(s) in " + fmtNum(rows.length) + " group(s)" +
			(notRead ? " read, " + fmtNum(notRead) + " more group(s) not read" : "")));
		kids.push(el("div", { "data-groups": cls }, table(["Group", "Waiting", "Running", "Limit", "Rate", "In window"], rows.slice(0, GROUPS_SHOWN).map((x) =>
			el("tr", { "data-group": x.group },
				el("td", { class: "code" }, x.group === "" ? "\"\"" : x.group), el("td", { class: "num" }, fmtNum(x.waiting)),
				el("td", { class: "num" }, fmtNum(x.running)), el("td", { class: "num" }, x.group_concurrency === null ? "-" : String(x.group_concurrency)),
				el("td", {}, x.group_rate_limit || "-"), el("td", { class: "num" }, x.window_starts === null ? "-" : fmtNum(x.window_starts)))), [1, 2, 3, 5])));
		if (notRead) kids.push(el("p", { class: "muted" }, "and " + fmtNum(rows.length + notRead - Math.min(rows.length, GROUPS_SHOWN)) + " more group(s), " + fmtNum(notRead) + " of them not read: a read counts at most " + fmtNum(cut.read_max) + " groups per class."));
		else if (rows.length > GROUPS_SHOWN) kids.push(el("p", { class: "muted" }, "and " + fmtNum(rows.length - GROUPS_SHOWN) + " more group(s): cogworkerctl groups --handler " + cls + " lists them all."));
	}
	return el("section", { id: "groups" }, kids);
}

// ---- job lists ----

const SET_TITLES = { running: "Running", scheduled: "Scheduled", retry: "Retries", dead: "Dead",
	waiting: "Waiting for a slot", queued: "Queued", after: "Waiting for other jobs" };
// What can be done to entries of each set (the API's set/action pairs).
const SET_ACTIONS = {
	scheduled: [["retry", "Run now"], ["delete", "Delete"], ["kill", "Kill"]],
	retry: [["retry", "Retry now"], ["delete", "Delete"], ["kill", "Kill"]],
	dead: [["retry", "Retry"], ["delete", "Delete"]],
	queued: [["delete", "Delete"]],
	running: [],
};

function params() { return new URLSearchParams(location.search); }

function jobHref(j) {
	const q = new URLSearchParams();
	if (j.set === "scheduled" || j.set === "retry" || j.set === "dead") {
		q.set("set", j.set);
		q.set("score", String(j.score));
	}
	return "/jobs/" + encodeURIComponent(j.jid || "") + (q.toString() ? "?" + q.toString() : "");
}

function errorText(j) {
	if (!j.error_class && !j.error_message) return "";
	return (j.error_class || "") + (j.error_class && j.error_message ? ": " : "") + (j.error_message || "");
}

function whenOf(j) {
	if (j.set === "running") return j.run_at;
	if (j.set === "after") return j.waiting_since;
	if (j.score !== null && j.score !== undefined) return j.score;
	return j.enqueued_at || j.created_at;
}

async function drawJobList(set) {
	const p = params();
	const from = Number(p.get("from") || 0);
	const filt = { class: p.get("class") || "", queue: p.get("queue") || "", q: p.get("q") || "" };
	const query = new URLSearchParams({ from: String(from), limit: String(PAGE_SIZE) });
	for (const [k, v] of Object.entries(filt)) if (v) query.set(k, v);
	const title = SET_TITLES[set] + (set === "queued" && filt.queue ? ": " + filt.queue : "");
	const form = el("form", { class: "filters", id: "filters", onsubmit: (ev) => {
		ev.preventDefault();
		const q = new URLSearchParams();
		for (const name of ["class", "queue", "q"]) {
			const v = form.elements[name].value.trim();
			if (v) q.set(name, v);
		}
		location.search = q.toString();
	} },
	el("input", { name: "class", placeholder: "class", value: filt.class }),
	el("input", { name: "queue", placeholder: "queue", value: filt.queue }),
	el("input", { name: "q", placeholder: "text in the job", value: filt.q }),
	el("button", { type: "submit" }, "Filter"),
	el("a", { href: location.pathname + (set === "queued" && filt.queue ? "?queue=" + encodeURIComponent(filt.queue) : "") }, "clear"));
	setMain(el("h1", {}, title), form, el("p", { class: "muted" }, "Loading…"));
	if (set === "queued" && !filt.queue) return setMain(el("h1", {}, title), form,
		el("p", {}, "Choose a queue on the ", el("a", { href: "/queues" }, "queues page"), "."));
	const r = await api("/api/jobs/" + set + "?" + query.toString());
	if (!r.ok) return setMain(el("h1", {}, title), form, el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const d = r.data;
	const filtered = filt.class || filt.q || (filt.queue && set !== "queued");
	const actions = canAct() ? SET_ACTIONS[set] || [] : [];
	const boxes = [];
	const rows = d.jobs.map((j) => {
		const box = actions.length ? el("input", { type: "checkbox", class: "pick" }) : null;
		if (box) { box.entry = j.truncated ? null : j.raw; box.jid = j.jid; boxes.push(box); }
		return el("tr", { "data-jid": j.jid || "" },
			actions.length ? el("td", {}, box) : null,
			timeCell(whenOf(j)),
			el("td", { class: "code" }, el("a", { href: jobHref(j) }, j.jid || "(no jid)")),
			el("td", {}, j.class),
			el("td", {}, j.queue || "-"),
			el("td", { class: "code args" }, j.truncated ? el("span", { class: "muted truncated" }, "(truncated: a job of " + fmtNum(j.size) + " bytes)")
				: cut(j.args === null ? j.raw : compactJSON(j.args), 160)),
			set === "running" ? el("td", { class: "code" }, j.process || "") : el("td", {}, cut(errorText(j), 200)));
	});
	const heads = [actions.length ? "" : null, set === "running" ? "Started" : set === "queued" ? "Enqueued" : set === "dead" ? "Died" : set === "after" ? "Waiting since" : "Due",
		"Job", "Class", "Queue", "Args", set === "running" ? "Process" : "Error"].filter((h) => h !== null);
	const range = d.jobs.length ? "entries " + fmtNum(d.from + 1) + "–" + fmtNum(d.next === null ? d.total : d.next) : "no entries";
	const summary = el("p", { class: "muted", id: "summary" }, fmtNum(d.total) + " in all; " + range +
		(filtered ? " looked at (" + fmtNum(d.read) + " read), " + fmtNum(d.jobs.length) + " match" : ""));
	const nav = el("div", { class: "pager" },
		from > 0 ? el("a", { href: pageHref(0) }, "« first") : null,
		from > 0 && !filtered ? el("a", { href: pageHref(Math.max(0, from - PAGE_SIZE)) }, "‹ previous") : null,
		d.next !== null ? el("a", { href: pageHref(d.next), id: "next" }, "next ›") : null);
	const bulk = actions.length ? el("div", { class: "toolbar" },
		el("span", { class: "muted" }, "Selected:"),
		actions.map(([a, label]) => el("button", { type: "button", "data-action": a, onclick: () => {
			const chosen = boxes.filter((b) => b.checked);
			if (!chosen.length) return banner("Select entries first.", "");
			// A truncated entry is named by its jid (the server finds it whole).
			const picked = chosen.filter((b) => b.entry !== null).map((b) => b.entry);
			const byJid = chosen.filter((b) => b.entry === null).map((b) => b.jid);
			const forms = [picked.length ? { entry: picked } : null, byJid.length ? { jid: byJid } : null].filter((f) => f);
			if (set === "queued") forms.forEach((f) => { f.queue = filt.queue; });
			if (a !== "retry" && !window.confirm(label + " " + chosen.length + " job(s)?")) return;
			(async () => {
				for (const [i, f] of forms.entries())
					await act("/api/jobs/" + set + "/" + a, f, null, i === forms.length - 1 ? render : null);
			})();
		} }, label)),
		el("span", { class: "muted" }, " All that match:"),
		actions.filter(([a]) => a !== "reschedule").map(([a, label]) => el("button", { type: "button", class: "danger", "data-all": a, onclick: () => {
			const form = Object.assign({ all: "1" }, filt);
			act("/api/jobs/" + set + "/" + a, form, label + " every " + (filtered ? "matching " : "") + "job in " + SET_TITLES[set].toLowerCase() +
				(filtered ? "" : " (" + fmtNum(d.total) + ")") + "?", render);
		} }, label + " all"))) : null;
	const all = actions.length ? el("input", { type: "checkbox", title: "select all", onchange: (ev) => boxes.forEach((b) => { b.checked = ev.target.checked; }) }) : null;
	const tbl = d.jobs.length ? table(heads, rows) : el("p", { class: "muted" }, filtered ? "Nothing matches on this page." : "Empty.");
	if (all && d.jobs.length) tbl.querySelector("th").append(all);
	setMain(el("h1", {}, title), form, summary, bulk, tbl, nav);
}

function pageHref(from) {
	const q = params();
	if (from > 0) q.set("from", String(from)); else q.delete("from");
	const s = q.toString();
	return location.pathname + (s ? "?" + s : "");
}

async function drawWaiting() {
	const r = await api("/api/jobs/waiting");
	if (!r.ok) return setMain(el("h1", {}, SET_TITLES.waiting), el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const kids = [el("h1", {}, SET_TITLES.waiting),
		el("p", { class: "muted" }, "Jobs a fleet_concurrency or rate_limit turned away; each waits in the schedule set for its next try.")];
	if (!r.data.classes.length) kids.push(el("p", { class: "muted" }, "No class has fleet limits (yet)."));
	for (const c of r.data.classes) {
		kids.push(el("h2", {}, c.class + " — " + fmtNum(c.waiting) + " waiting"));
		if (c.jobs.length) kids.push(table(["Job", "Next try"], c.jobs.map((j) => el("tr", { "data-jid": j.jid },
			el("td", { class: "code" }, el("a", { href: jobHref({ jid: j.jid, set: "scheduled", score: j.next_try }) }, j.jid)),
			timeCell(j.next_try)))));
	}
	setMain(kids);
}

// ---- batches ----

const BATCH_PARTS = ["pending", "succeeded", "dead", "discarded"];

// A stacked bar of a batch's members by how they settled, with its counts.
function batchBar(b) {
	const n = BATCH_PARTS.reduce((s, k) => s + (b[k] || 0), 0);
	// The widths through the CSSOM: the CSP allows no style attribute.
	const bar = el("span", { class: "bbar" }, BATCH_PARTS.filter((k) => b[k]).map((k) => {
		const s = el("span", { class: "b-" + k });
		s.style.width = (100 * b[k] / n).toFixed(2) + "%";
		return s;
	}));
	return el("span", { class: "bcounts" }, bar, " ", BATCH_PARTS.map((k) =>
		el("span", { class: "c-" + k, title: k }, fmtNum(b[k] || 0) + " " + k)).reduce((a, x) => a.concat(a.length ? [" · ", x] : [x]), []));
}

function batchState(b) {
	const done = b.completed_at || b.cancelled_at || b.expired_at;
	const cls = b.state === "cancelled" || b.state === "expired" ? "bad" : done ? "good" : b.state === "open" ? "warn" : "";
	return el("span", { class: "tag " + cls }, done && b.state === "committed" ? "complete" : b.state);
}

// Its callbacks: each class, and whether it fired (its jid, a link once fired).
function callbacks(b) {
	return ["success", "complete", "death"].filter((k) => b["on_" + k]).map((k) => {
		const jid = b["fired_" + k];
		return el("div", { class: "callback", "data-kind": k }, "on_" + k + ": ", el("span", {}, b["on_" + k]), " ",
			jid === null || jid === undefined ? el("span", { class: "tag" }, "not fired")
				: el("span", { class: "tag good" }, "fired"), jid ? [" ", el("a", { class: "code", href: "/jobs/" + encodeURIComponent(jid) }, jid)] : null);
	});
}

// A page that follows what it shows: drawn again only when its document changed, so a
// row being clicked is not replaced under the click.
function unchanged(r) {
	const text = JSON.stringify(r.data);
	if (r.ok && text === state.lastDrawn) return true;
	state.lastDrawn = r.ok ? text : null;
	return false;
}

// The states a batch is shown in (batchState), which the list filters by.
const BATCH_STATES = ["open", "committed", "complete", "cancelled", "expired"];

async function drawBatches() {
	state.lastDrawn = null;
	const p = params();
	const from = Number(p.get("from") || 0);
	const filt = { state: p.get("state") || "", q: p.get("q") || "" };
	const query = new URLSearchParams({ from: String(from), limit: String(PAGE_SIZE) });
	for (const [k, v] of Object.entries(filt)) if (v) query.set(k, v);
	const filtered = filt.state || filt.q;
	// Made once: a redraw (the page follows its batches) keeps what is being typed.
	const form = el("form", { class: "filters", id: "filters", onsubmit: (ev) => {
		ev.preventDefault();
		const n = new URLSearchParams();
		if (form.elements.state.value) n.set("state", form.elements.state.value);
		if (form.elements.q.value.trim()) n.set("q", form.elements.q.value.trim());
		location.search = n.toString();
	} },
	el("select", { name: "state" }, ["", ...BATCH_STATES].map((s) => el("option", { value: s, selected: filt.state === s }, s || "any state"))),
	el("input", { name: "q", placeholder: "text in the description", value: filt.q }),
	el("button", { type: "submit" }, "Filter"),
	el("a", { href: location.pathname }, "clear"));
	const draw = async () => {
		const r = await api("/api/batches?" + query.toString());
		if (unchanged(r)) return;
		if (!r.ok) return setMain(el("h1", {}, "Batches"), form, el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
		const d = r.data;
		const summary = filtered ? el("p", { class: "muted", id: "summary" }, fmtNum(d.total) + " in all; " +
			fmtNum(d.read) + " looked at from entry " + fmtNum(d.from + 1) + ", " + fmtNum(d.batches.length) + " match") : null;
		const rows = d.batches.map((b) => el("tr", { "data-bid": b.bid },
			el("td", { class: "code" }, el("a", { href: "/batches/" + encodeURIComponent(b.bid) }, b.bid)),
			el("td", { class: "desc" }, b.description || ""), el("td", {}, batchState(b)),
			el("td", { class: "num" }, fmtNum(Number(b.total))), el("td", {}, batchBar(b)),
			el("td", {}, callbacks(b)), timeCell(b.created_at),
			timeCell(b.completed_at || b.cancelled_at || b.expired_at)));
		setMain(el("h1", {}, "Batches (" + fmtNum(d.total) + ")"), form, summary,
			d.batches.length ? table(["Batch", "Description", "State", "Members", "Progress", "Callbacks", "Created", "Finished"], rows, [3])
				: el("p", { class: "muted" }, filtered ? "Nothing matches on this page." : "No batches (cogworkerctl batch new opens one)."),
			el("div", { class: "pager" }, from > 0 ? el("a", { href: pageHref(0) }, "« newest") : null,
				from > 0 && !filtered ? el("a", { href: pageHref(Math.max(0, from - PAGE_SIZE)) }, "‹ newer") : null,
				d.next !== null ? el("a", { href: pageHref(d.next), id: "next" }, "older ›") : null));
	};
	await draw();
	every(POLL_MS, draw);
}

async function drawBatch(bid) {
	state.lastDrawn = null;
	const draw = async () => {
		const r = await api("/api/batches/" + encodeURIComponent(bid));
		if (unchanged(r)) return;
		const head = el("h1", {}, "Batch ", el("span", { class: "code" }, bid));
		if (!r.ok) return setMain(head, el("p", { class: "muted", id: "not-found" }, (r.data && r.data.error) || "unavailable"));
		const b = r.data;
		const children = new Set(b.children || []);
		const kids = [head, el("div", { class: "panel", id: "batch" }, kv([
			["description", b.description], ["state", batchState(b)], ["members", fmtNum(Number(b.total)) + " in all"],
			["progress", batchBar(b)],
			["parent", b.parent ? el("a", { class: "code", href: "/batches/" + encodeURIComponent(b.parent) }, b.parent) : null],
			["created", b.created_at ? fmtTime(Number(b.created_at)) : null], ["committed", b.committed_at ? fmtTime(Number(b.committed_at)) : null],
			["finished", (b.completed_at || b.cancelled_at || b.expired_at) ? fmtTime(Number(b.completed_at || b.cancelled_at || b.expired_at)) : null],
			["expires", b.state === "open" && b.expires_at ? fmtTime(Number(b.expires_at)) : null],
			["callbacks", callbacks(b).length ? el("div", {}, callbacks(b)) : null]]),
		canAct() && !b.completed_at && b.state !== "cancelled" ? el("div", { class: "toolbar" },
			actionButton("Cancel", "/api/batches/" + encodeURIComponent(bid) + "/cancel", {},
				"Cancel batch " + bid + "? Its jobs not yet run are deleted and the running ones cancelled; no callback will fire.", null, true)) : null)];
		if (children.size) kids.push(el("h2", {}, "Child batches (" + children.size + ")"), el("ul", { id: "children" },
			[...children].map((c) => el("li", {}, el("a", { class: "code", href: "/batches/" + encodeURIComponent(c) }, c)))));
		for (const part of BATCH_PARTS) {
			const ids = (b[part + "_jids"] || []).filter((j) => !children.has(j)).sort();
			kids.push(el("h2", {}, part[0].toUpperCase() + part.slice(1) + " (" + fmtNum(b[part]) + ")"));
			kids.push(ids.length ? el("ul", { class: "members", "data-part": part }, ids.map((j) =>
				el("li", { "data-jid": j }, el("a", { class: "code", href: "/jobs/" + encodeURIComponent(j) }, j))))
				: el("p", { class: "muted" }, "None."));
			if (b[part] > (b[part + "_jids"] || []).length) kids.push(el("p", { class: "muted" }, "(the first " + fmtNum(b[part + "_jids"].length) + " shown)"));
		}
		setMain(kids);
	};
	await draw();
	every(POLL_MS, draw);
}

// ---- one job ----

const stream = { es: null, endedNote: null };

function kv(pairs) {
	return el("dl", { class: "kv" }, pairs.filter((x) => x && x[1] !== null && x[1] !== undefined && x[1] !== "")
		.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function prettyJSON(v, raw) {
	if (v === null || v === undefined) return raw || "null";
	try { return JSON.stringify(v, null, 2); } catch (e) { return raw || String(v); }
}

// How a job found in no set ended, from its last run in history (jobs show's "where").
function endedText(e) {
	const when = fmtTime(e.finished_at) + " (" + fmtRelative(e.finished_at) + ")";
	const runs = ", after " + e.runs + (e.runs === 1 ? " run" : " runs") + " in history.";
	if (e.outcome === "success") return "Finished: succeeded " + when + runs;
	if (e.outcome === "discarded") return "Finished: discarded " + when + runs;
	if (e.outcome === "retrying") return "Nowhere now: its last run failed " + when + " and was to be retried (deleted since, or on its way)" + runs;
	return "Finished: dead " + when + ", deleted from the dead set since" + runs;
}

// A job's fair-share group (jobs show's "group"): its name, the path, and its place when set aside.
function groupText(g) {
	let t = "Group " + (g.name === "" ? "\"\"" : g.name) + " (group_by " + g.group_by + (g.invalid ? ": the value is " + g.invalid + ", so the group \"\"" : "") + ")";
	if (g.set_aside) t += g.place ? ": set aside, " + fmtNum(g.place) + " of " + fmtNum(g.line) + " in its line, back when its group has room."
		: ": set aside in a line of " + fmtNum(g.line) + ", back when its group has room.";
	else t += ".";
	return t;
}

function locationPanel(jid, loc) {
	const base = "/api/jobs/" + loc.set + "/";
	const form = loc.truncated ? { jid: loc.jid } : { entry: loc.raw };
	if (loc.set === "queued") form.queue = loc.queue;
	const back = () => location.replace("/jobs/" + (loc.set === "running" || loc.set === "inprogress" ? "running" : loc.set));
	const btns = [];
	if (canAct()) {
		if (["scheduled", "retry", "dead"].includes(loc.set))
			btns.push(actionButton(loc.set === "scheduled" ? "Run now" : "Retry now", base + "retry", form, null, back));
		if (["scheduled", "retry"].includes(loc.set)) {
			btns.push(el("button", { type: "button", onclick: () => {
				const m = window.prompt("Run it in how many minutes (1 to 10080)?", "60");
				if (m) act(base + "reschedule", Object.assign({ minutes: m }, form), null, render);
			} }, "Reschedule"));
			btns.push(actionButton("Kill (to dead)", base + "kill", form, "Move this job to dead?", back, true));
		}
		if (["scheduled", "retry", "dead", "queued"].includes(loc.set))
			btns.push(actionButton("Delete", base + "delete", form, "Delete this job?", back, true));
		if (loc.set === "running" || loc.set === "inprogress") {
			const cancelPath = "/api/jobs/" + encodeURIComponent(jid) + "/cancel";
			btns.push(actionButton("Cancel", cancelPath, {}, "Stop this job's handler? It goes to dead as cancelled.", render, true));
			btns.push(actionButton("Cancel and discard", cancelPath, { discard: "1" }, "Stop this job's handler and drop the job?", render, true));
		}
	}
	const where = (loc.set === "after" ? "waiting for other jobs" : loc.set === "group" ? "set aside for its group until the group has room" : loc.set) +
		(loc.process ? " on " + loc.process : "") + " (" + loc.key + ")";
	return el("div", { class: "panel location", "data-set": loc.set },
		kv([["where", where], ["class", loc.class], ["queue", loc.queue],
			[loc.set === "dead" ? "died" : "due", loc.score && loc.set !== "group" ? fmtTime(loc.score) + " (" + fmtRelative(loc.score) + ")" : null],
			["started", loc.run_at ? fmtTime(loc.run_at) + " (" + fmtRelative(loc.run_at) + ")" : null],
			["waiting since", loc.waiting_since ? fmtTime(loc.waiting_since) + " (" + fmtRelative(loc.waiting_since) + ")" : null],
			["created", loc.created_at ? fmtTime(loc.created_at) : null],
			["enqueued", loc.enqueued_at ? fmtTime(loc.enqueued_at) : null],
			["failed", loc.failed_at ? fmtTime(loc.failed_at) : null],
			["retries", loc.retry_count !== null ? String(loc.retry_count) + " failure(s); retry " + compactJSON(loc.retry) : null],
			["error", errorText(loc) || null], ["parse error", loc.parse_error || null],
			["size", loc.truncated ? fmtNum(loc.size) + " bytes: more than max_job_bytes, shown truncated to its first " + fmtNum(loc.raw.length) + " characters" : null]]),
		el("h3", {}, "Args"), el("pre", { class: "light args" }, prettyJSON(loc.args, loc.raw)),
		el("details", {}, el("summary", {}, "The whole payload"), el("pre", { class: "light payload" }, prettyJSON(loc.payload, loc.raw))),
		btns.length ? el("div", { class: "toolbar" }, btns) : null);
}

async function drawJob(jid) {
	if (stream.es) { stream.es.close(); stream.es = null; }
	const p = params();
	const q = new URLSearchParams();
	if (p.get("set")) q.set("set", p.get("set"));
	if (p.get("score")) q.set("score", p.get("score"));
	const r = await api("/api/jobs/" + encodeURIComponent(jid) + (q.toString() ? "?" + q : ""));
	const head = el("h1", {}, "Job ", el("span", { class: "code" }, jid));
	if (!r.ok) return setMain(head, el("p", { class: "muted", id: "not-found" }, (r.data && r.data.error) || "unavailable",
		r.status === 404 && !p.get("set") ? " (each set is searched as far as its first 10 000 entries: open the job from its list to find it further)" : ""));
	const d = r.data;
	const kids = [head];
	// One line says where it is not: how it ended (from history), or nowhere; a job set
	// aside for its group is somewhere (its group's line), said by the group's line below.
	// A job found in no set, where the search of the group lines was cut: not claimed
	// absent from the lines it did not read (jobs show's "searched").
	const linesCut = d.group_lines_cut;
	if (d.ended) kids.push(el("p", { class: "muted", id: "ended" }, endedText(d.ended)));
	else if (!d.locations.length && !d.waits_for && !(d.group && d.group.set_aside)) kids.push(el("p", { class: "muted" }, linesCut ? "Nowhere searched (finished, deleted, or set aside in a group line not read): only its status and history are left." : "Nowhere now (finished, or deleted): only its status and history are left."));
	if (linesCut && !d.locations.length && !d.waits_for) kids.push(el("p", { class: "muted", id: "lines-cut" }, "Searched the first " + fmtNum(linesCut.read) + " of " + fmtNum(linesCut.read + linesCut.not_read) + " group lines (a search reads at most " + fmtNum(linesCut.read_max) + " per class); not in the others."));
	if (d.group) kids.push(el("p", { id: "group" }, groupText(d.group)));
	// A running job is also on its process's in-progress list: one panel says it.
	const runningOn = new Set(d.locations.filter((l) => l.set === "running").map((l) => l.process));
	d.locations.filter((l) => !(l.set === "inprogress" && runningOn.has(l.process)))
		.forEach((loc) => kids.push(locationPanel(jid, loc)));
	const depList = (list) => el("ul", {}, list.map((x) => el("li", { "data-jid": x.jid },
		el("a", { class: "code", href: "/jobs/" + encodeURIComponent(x.jid) }, x.jid), " ",
		el("span", { class: "tag " + (x.state === "success" ? "good" : x.state === "dead" || x.state === "discarded" ? "bad" : "") }, x.state))));
	if (d.waits_for) kids.push(el("h2", {}, "Waits for (" + (d.waits_for.after_any ? "runs once they all settled" : "runs once they all succeeded") + ")"),
		el("div", { class: "panel", id: "waits-for" }, d.waits_for.states.length ? depList(d.waits_for.states) : el("p", { class: "muted" }, "Nothing any more: on its way to its queue.")));
	if (d.dependants && d.dependants.length) kids.push(el("h2", {}, "Waited for by (" + d.dependants.length + ")"),
		el("div", { class: "panel", id: "dependants" }, depList(d.dependants)));
	if (d.status) {
		const st = d.status;
		const pct = Number(st.pct);
		kids.push(el("h2", {}, "Status"), el("div", { class: "panel", id: "status" },
			kv([["status", st.status], ["updated", st.update_time ? fmtTime(Number(st.update_time)) + " (" + fmtRelative(Number(st.update_time)) + ")" : null],
				["progress", isNaN(pct) ? null : el("span", {}, el("progress", { max: "100", value: String(pct) }), " " + pct + "% " + (st.message || ""))],
				["cost", fmtCost(st.cpu_s, st.maxrss_bytes)],
				...Object.entries(st).filter(([k]) => !["status", "update_time", "pct", "message", "cpu_s", "maxrss_bytes"].includes(k))])));
	}
	// Its runs: from history when it keeps them (each run, its outcome, error and cost),
	// else those kept with their output.
	const hist = d.history || [];
	const runs = hist.length ? hist : d.runs || [];
	if (runs.length) kids.push(el("h2", {}, "Runs (" + runs.length + (hist.length ? ", from history" : ", kept with their output") + ")"),
		el("div", { id: "runs", "data-source": hist.length ? "history" : "output" },
		table(["#", "Started", "Outcome", "Took", "CPU", "Peak RSS", "Error"], runs.map((x) => el("tr", {},
			el("td", {}, String(x.run)), timeCell(x.started_at), el("td", {}, x.outcome || "?"),
			el("td", { class: "num" }, x.finished_at && x.started_at ? fmtDuration(x.finished_at - x.started_at) : "-"),
			el("td", { class: "num" }, fmtCpu(x.cpu_s)), el("td", { class: "num" }, fmtBytes(x.maxrss_bytes)),
			el("td", {}, x.error_class ? cut(x.error_class + ": " + (x.error_message || ""), 300) : ""))), [3, 4, 5])));
	// The attempts log (failures), when history does not list the runs.
	if (!hist.length) kids.push(el("h2", {}, "Attempts (" + d.attempts.length + ")"));
	if (!hist.length && d.attempts.length) kids.push(table(["#", "Failed", "Outcome", "Error"], d.attempts.map((a, i) => typeof a === "object" && a !== null
		? el("tr", {}, el("td", {}, String(a.attempt || i + 1)), timeCell(a.failed_at), el("td", {}, a.outcome || ""),
			el("td", {}, cut((a.error_class || "") + ": " + (a.error_message || ""), 300)))
		: el("tr", {}, el("td", {}, String(i + 1)), el("td", { colspan: "3", class: "code" }, String(a))))));
	const out = el("pre", { id: "output" }, "");
	const outInfo = el("p", { class: "muted", id: "output-info" }, "");
	kids.push(el("h2", {}, "Output"), outInfo, out);
	setMain(kids);
	const running = d.locations.some((l) => l.set === "running" || l.set === "inprogress");
	const o = await api("/api/jobs/" + encodeURIComponent(jid) + "/output");
	if (o.ok) {
		const x = o.data;
		out.textContent = x.output || "";
		outInfo.textContent = "run " + x.run + " of " + x.runs.join(", ") + " · " + (x.identity || "?") +
			" · started " + fmtTime(x.started_at) + (x.dropped ? " · the first " + fmtNum(x.dropped) + " bytes were not kept" : "") +
			(x.finished_at ? " · " + (x.outcome || "?") + (x.error_class ? " (" + x.error_class + ": " + (x.error_message || "") + ")" : "") : " · running");
		if (stream.endedNote) outInfo.textContent = stream.endedNote + " · " + outInfo.textContent;
		stream.endedNote = null;
		if (!x.finished_at) follow(jid, x.run, out, outInfo, true);
	} else if (running) {
		follow(jid, 0, out, outInfo, false);
	} else {
		outInfo.textContent = (o.data && o.data.error) || "no output kept";
		out.hidden = true;
	}
}

// Live output over server-sent events: the events of `jobs log --follow`.
function follow(jid, run, out, info, have) {
	const es = new EventSource("/api/jobs/" + encodeURIComponent(jid) + "/output/stream" + (run ? "?run=" + run : ""));
	stream.es = es;
	if (have) out.textContent = "";
	info.textContent = "following live…";
	const parse = (ev) => { try { return JSON.parse(ev.data); } catch (e) { return {}; } };
	es.addEventListener("waiting", () => { info.textContent = "waiting for the job to start…"; });
	es.addEventListener("run", (ev) => {
		const x = parse(ev);
		info.textContent = "run " + x.run + " · " + (x.identity || "?") + " · started " + fmtTime(x.started_at) + " · following live…";
	});
	es.addEventListener("output", (ev) => {
		const x = parse(ev);
		if (x.skipped) out.append("[… " + fmtNum(x.skipped) + " bytes not kept …]\n");
		out.append(x.text || "");
		out.scrollTop = out.scrollHeight;
	});
	es.addEventListener("error", (ev) => {
		const x = ev.data ? parse(ev) : null;
		if (x && x.error) banner("Redis does not answer: " + x.error + ". Still following.", "error");
	});
	es.addEventListener("end", (ev) => {
		const x = parse(ev);
		es.close();
		stream.es = null;
		info.textContent = x.state === "ended"
			? "ended: " + (x.outcome || "?") + (x.error_class ? " (" + x.error_class + ": " + (x.error_message || "") + ")" : "")
			: x.message || x.state;
		// The run ended: the rest of the page (where the job is, its status, its buttons)
		// is drawn again, the outcome kept in front of the output's line.
		// Found nowhere now (no status kept), the page keeps the output and drops what is
		// stale: where it ran, its buttons, its progress.
		if (x.state === "ended" && route() && route().title === "Job") setTimeout(async () => {
			const r = await api("/api/jobs/" + encodeURIComponent(jid));
			if (r.ok) {
				stream.endedNote = info.textContent;
				return render();
			}
			document.querySelectorAll("main .location, #status").forEach((e) => e.remove());
			const h = document.querySelector("main h1");
			if (h) h.after(el("p", { class: "muted", id: "finished" }, "Finished: in no set now, and no status kept."));
		}, 1000);      // the ack follows the run's record
	});
}

// ---- processes, periodic, limits, history, metrics ----

async function drawProcesses() {
	const [r, run] = await Promise.all([api("/api/processes"), api("/api/jobs/running?limit=200")]);
	if (!r.ok) return setMain(el("h1", {}, "Processes"), el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const jobs = run.ok ? run.data.jobs : [];
	const kids = [el("h1", {}, "Processes (" + r.data.length + ")")];
	if (!r.data.length) kids.push(el("p", { class: "muted" }, "No live process."));
	for (const p of r.data) {
		const base = "/api/processes/" + encodeURIComponent(p.identity) + "/";
		const mine = jobs.filter((j) => j.process === p.identity);
		kids.push(el("div", { class: "panel process", "data-identity": p.identity },
			el("h2", {}, el("span", { class: "code" }, p.identity), " ", p.quiet ? el("span", { class: "tag warn" }, "quiet") : el("span", { class: "tag good" }, "active")),
			kv([["host", p.hostname], ["pid", p.pid === null ? "?" : String(p.pid)],
				["busy", fmtNum(p.busy) + " / " + (p.concurrency === null ? "?" : fmtNum(p.concurrency))],
				["queues", p.queues.join(", ")], ["last beat", p.beat_age === null ? "?" : fmtDuration(p.beat_age) + " ago"],
				["started", p.started_at ? fmtTime(p.started_at) + " (" + fmtRelative(p.started_at) + ")" : null],
				["memory", p.rss_kb === null ? null : (p.rss_kb / 1024).toFixed(1) + " MB"]]),
			canAct() ? el("div", { class: "toolbar" },
				p.quiet ? actionButton("Resume", base + "resume", {}, null) : actionButton("Quiet", base + "quiet", {}, null),
				actionButton("Stop", base + "stop", {}, "Stop " + p.identity + "? It finishes its jobs and exits.", null, true)) : null,
			mine.length ? table(["Job", "Class", "Queue", "Started", "Args"], mine.map((j) => el("tr", { "data-jid": j.jid || "" },
				el("td", { class: "code" }, el("a", { href: jobHref(j) }, j.jid || "?")), el("td", {}, j.class), el("td", {}, j.queue || "-"),
				timeCell(j.run_at), el("td", { class: "code args" }, cut(compactJSON(j.args), 120))))) : el("p", { class: "muted" }, "No job running.")));
	}
	setMain(kids);
}

async function drawPeriodic() {
	const r = await api("/api/periodic");
	if (!r.ok) return setMain(el("h1", {}, "Periodic"), el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const rows = r.data.map((e) => {
		const base = "/api/periodic/" + encodeURIComponent(e.pjid) + "/";
		return el("tr", { "data-pjid": e.pjid },
			el("td", { class: "code", title: e.pjid }, e.pjid.slice(0, 12)), el("td", { class: "code" }, e.cron || "?"),
			el("td", {}, e.class || "?"), el("td", { class: "code args" }, cut(compactJSON(e.args), 100)), el("td", {}, e.queue || "default"),
			timeCell(e.last_run), timeCell(e.next_run),
			el("td", {}, e.enabled ? el("span", { class: "tag good" }, "enabled") : el("span", { class: "tag warn" }, "disabled")),
			canAct() ? el("td", {}, actionButton("Run now", base + "run", {}, "Push a job of " + (e.class || "?") + " now?"), " ",
				e.enabled ? actionButton("Disable", base + "disable", {}, null) : actionButton("Enable", base + "enable", {}, null)) : null);
	});
	const heads = ["Entry", "Cron", "Class", "Args", "Queue", "Last run", "Next run", "State"];
	if (canAct()) heads.push("");
	setMain(el("h1", {}, "Periodic (" + r.data.length + ")"),
		r.data.length ? table(heads, rows) : el("p", { class: "muted" }, "No periodic entries (periodic:schedule is empty)."));
}

async function drawLimits() {
	const r = await api("/api/limits");
	if (!r.ok) return setMain(el("h1", {}, "Limits"), el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const now = Date.now() / 1000;
	const kids = [el("h1", {}, "Limits"), el("p", { class: "muted" },
		"Fleet-wide limits as Redis holds them. max_concurrency is per process: see each daemon's /metrics.")];
	if (!r.data.length) kids.push(el("p", { class: "muted" }, "No limits seen yet (a class shows up once a job of it starts under fleet_concurrency or rate_limit)."));
	else kids.push(table(["Class", "Fleet slots", "Waiting", "Rate", "In window", "Room"], r.data.map((l) => el("tr", { "data-class": l.class },
		el("td", {}, l.class), el("td", { class: "num" }, l.fleet_concurrency ? l.holders.length + " / " + l.fleet_concurrency : "-"),
		el("td", { class: "num" }, el("a", { href: "/jobs/waiting" }, fmtNum(l.waiters))), el("td", {}, l.rate_limit || "-"),
		el("td", { class: "num" }, l.rate_limit ? fmtNum(l.window_starts) : "-"),
		el("td", {}, l.rate_limit ? (l.next_room && l.next_room > now ? fmtRelative(l.next_room) : "now") : "-"))), [1, 2, 4]));
	for (const l of r.data.filter((x) => x.holders.length)) {
		kids.push(el("h2", {}, "Holders of " + l.class), table(["Process", "Fetcher", "Job", "Lease"], l.holders.map((h) => el("tr", {},
			el("td", { class: "code" }, h.identity), el("td", {}, h.fetcher), el("td", { class: "code" }, el("a", { href: "/jobs/" + encodeURIComponent(h.jid) }, h.jid)),
			timeCell(h.expires_at)))));
	}
	setMain(kids);
}

async function drawHistory() {
	const p = params();
	const from = Number(p.get("from") || 0);
	const q = new URLSearchParams({ from: String(from), limit: String(PAGE_SIZE), days: "14" });
	if (p.get("class")) q.set("class", p.get("class"));
	if (p.get("status")) q.set("status", p.get("status"));
	const r = await api("/api/history?" + q);
	const form = el("form", { class: "filters", onsubmit: (ev) => {
		ev.preventDefault();
		const n = new URLSearchParams();
		if (form.elements.class.value.trim()) n.set("class", form.elements.class.value.trim());
		if (form.elements.status.value) n.set("status", form.elements.status.value);
		location.search = n.toString();
	} }, el("input", { name: "class", placeholder: "class", value: p.get("class") || "" }),
	el("select", { name: "status" }, ["", "success", "failed"].map((s) => el("option", { value: s, selected: (p.get("status") || "") === s }, s || "any status"))),
	el("button", { type: "submit" }, "Filter"));
	if (!r.ok) return setMain(el("h1", {}, "History"), form, el("p", { class: "muted" }, (r.data && r.data.error) || "unavailable"));
	const d = r.data;
	const chart = svg("svg", { class: "chart", id: "days", viewBox: "0 0 " + CHART_W + " 180", preserveAspectRatio: "none" });
	const byDay = new Map(d.daily.map((x) => [x.day, x]));
	const days = [];
	for (let i = 13; i >= 0; i--) {
		const day = new Date(Date.now() - i * 86400000).toISOString().slice(0, 10);
		const x = byDay.get(day) || { success: 0, failed: 0 };
		days.push({ ok: x.success, bad: x.failed, label: day.slice(5) });
	}
	bars(chart, days);
	const rows = d.runs.map((x) => typeof x !== "object" || x === null
		? el("tr", {}, el("td", { colspan: "10", class: "code" }, "(unreadable) " + String(x)))
		: el("tr", { "data-jid": x.jid || "" }, timeCell(x.finished_at),
			el("td", {}, el("span", { class: "tag " + (x.status === "success" ? "good" : "bad") }, x.status || "?")),
			el("td", {}, x.class || "?"), el("td", {}, x.queue || "-"),
			el("td", { class: "code" }, x.jid ? el("a", { href: "/jobs/" + encodeURIComponent(x.jid) }, x.jid) : "-"),
			el("td", { class: "num" }, x.finished_at && x.started_at ? fmtDuration(x.finished_at - x.started_at) : "-"),
			el("td", { class: "num" }, fmtCpu(x.cpu_s)), el("td", { class: "num" }, fmtBytes(x.maxrss_bytes)),
			el("td", { class: "code args" }, x.args === undefined ? "" : cut(compactJSON(x.args), 120)),
			el("td", {}, cut(errorText(x), 200))));
	setMain(el("h1", {}, "History"), el("h2", {}, "Per day, last 14 days (UTC)"), el("div", { class: "panel" }, chart,
		el("div", { class: "legend" }, el("span", { class: "p" }, "■ success"), el("span", { class: "f" }, "■ failed"))),
	el("h2", {}, "Runs, newest first"), form,
	d.runs.length ? table(["Finished", "Status", "Class", "Queue", "Job", "Took", "CPU", "Peak RSS", "Args", "Error"], rows, [5, 6, 7])
		: el("p", { class: "muted" }, "No runs recorded (history is written by daemons with history_retention_days > 0)."),
	el("div", { class: "pager" }, from > 0 ? el("a", { href: pageHref(0) }, "« newest") : null,
		d.next !== null ? el("a", { href: pageHref(d.next), id: "next" }, "older ›") : null));
}

async function drawMetrics() {
	const r = await api("/api/metrics");
	setMain(el("h1", {}, "Metrics"), el("p", { class: "muted" },
		"cogworker's eight fleet-wide metrics, as `cogworkerctl metrics` prints them (each daemon's own /metrics has more)."),
	el("pre", { class: "light", id: "metrics" }, r.ok ? r.data : (r.data && r.data.error) || "unavailable"));
}

// ---- login ----

function showLogin() {
	if (timer) clearInterval(timer);
	const user = el("input", { id: "user", name: "user", autocomplete: "username", required: true });
	const pw = el("input", { id: "password", name: "password", type: "password", autocomplete: "current-password", required: true });
	const msg = el("p", { class: "muted", id: "login-msg" });
	const form = el("form", { class: "login panel", onsubmit: async (ev) => {
		ev.preventDefault();
		const r = await api("/api/login", { post: true, form: { user: user.value, password: pw.value } });
		if (r.ok) {
			state.session = r.data;
			if (location.pathname === "/login") location.replace("/");
			else start();
		} else {
			msg.textContent = r.data && r.data.error ? r.data.error : "login failed";
		}
	} }, el("h1", {}, "Log in"), el("label", { for: "user" }, "User"), user,
	el("label", { for: "password" }, "Password"), pw, el("p", {}, el("button", { class: "primary", type: "submit" }, "Log in")), msg);
	setMain(form);
	user.focus();
}

// ---- start ----

function drawHeader() {
	const nav = document.getElementById("nav");
	nav.replaceChildren(...pages.filter((p) => p.nav !== false).map((p) =>
		el("a", { href: p.path, class: location.pathname === p.path ? "current" : null }, p.title)));
	const who = document.getElementById("who");
	const s = state.session;
	const footer = document.getElementById("footer");
	footer.hidden = !(s && s.insecure_http);
	footer.textContent = footer.hidden ? "" : "Plain HTTP (--insecure-http): passwords and "
		+ "session cookies are safe only behind a proxy that speaks HTTPS to your browser.";
	who.replaceChildren();
	if (s && s.user) {
		who.append(s.user + (s.read_only ? " · read-only" : ""));
		if (s.auth) who.append(el("button", { type: "button", id: "logout", onclick: async () => {
			await api("/api/logout", { post: true });
			location.replace("/login");
		} }, "Log out"));
	}
}

function route() {
	const p = location.pathname.replace(/\/+$/, "") || "/";
	for (const page of pages) {
		if (page.match ? page.match(p) : page.path === p) return page;
	}
	return null;
}

async function render() {
	const page = route();
	if (!page) return setMain(el("h1", {}, "Not found"), el("p", {}, "No page here."));
	document.title = page.title + " · cogworkerd";
	await page.draw();
	// When the page was drawn, in ms from the start of its navigation (the tests read it).
	document.documentElement.dataset.drawn = String(Math.round(performance.now()));
}

async function start() {
	const r = await api("/api/session");
	state.session = r.ok ? r.data : null;
	drawHeader();
	if (state.session && state.session.auth && !state.session.user) return showLogin();
	if (!state.session) return;
	await render();
}

document.addEventListener("DOMContentLoaded", start);
