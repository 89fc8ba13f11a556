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
//   only the overview refreshes by itself (POLL_MS), and a job's output follows over
//   server-sent events, so an open tab costs a bounded number of Redis commands.
"use strict";

const POLL_MS = 2000;           // overview refresh
const CHART_POINTS = 90;        // 3 minutes of 2-s samples
const PAGE_SIZE = 50;
const JOB_SETS = ["running", "scheduled", "retry", "dead", "waiting", "queued"];

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
	for (const kid of kids.flat()) {
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
	{ path: "/", title: "Overview", draw: drawOverview },
	{ path: "/queues", title: "Queues", draw: drawQueues },
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
		svg("svg", { class: "chart", id: "live", viewBox: "0 0 600 180", preserveAspectRatio: "none" }));
	const hours = el("div", { class: "panel" }, svg("svg", { class: "chart", id: "hours", viewBox: "0 0 600 180", preserveAspectRatio: "none" }));
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
	const xy = (i, v) => (i * 600 / (CHART_POINTS - 1)).toFixed(1) + "," + (170 - v / max * 160).toFixed(1);
	const line = (k, cls) => svg("polyline", { class: cls, points: pts.map((x, i) => xy(i, x[k])).join(" ") });
	g.replaceChildren(
		svg("line", { class: "grid", x1: 0, y1: 170, x2: 600, y2: 170 }),
		svg("line", { class: "grid", x1: 0, y1: 10, x2: 600, y2: 10 }),
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

// Stacked bars (ok below, bad on top), one per item, into an svg of 600×180.
function bars(g, items) {
	const max = Math.max(1, ...items.map((x) => x.ok + x.bad));
	const w = 600 / Math.max(1, items.length);
	const kids = [svg("line", { class: "grid", x1: 0, y1: 160, x2: 600, y2: 160 })];
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
	const r = await api("/api/queues");
	if (!r.ok) return setMain(el("h1", {}, "Queues"), el("p", { class: "muted" }, r.data && r.data.error || "unavailable"));
	setMain(el("h1", {}, "Queues"), queueTable(r.data, true));
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
