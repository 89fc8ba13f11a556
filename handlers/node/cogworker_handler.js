// SPDX-License-Identifier: MIT
//
// cogworker_handler: run a JavaScript function per job as a cogworkerd warm handler.
//
// A warm handler is one process that runs many jobs, one at a time, so what it loads at
// start (node itself, a framework, an application) is loaded once instead of once per job.
// cogworkerd starts it for a handler block with `warm = true;` and speaks protocol version
// 1 with it on fd 3 (doc/protocol.md §1.2, handlers/README.md). This module speaks that
// protocol; your script only says what to load and what to do per job:
//
//     const cw = require("/usr/share/cogworkerd/handlers/node/cogworker_handler.js");
//     const app = require("./app");      // the warm-up: runs once, before the first job
//
//     cw.run(async (job) => {
//       const [userId] = job.args;       // the job's args as pushed (big ints as BigInt)
//       cw.progress(40, "halfway");      // shows in `cogworkerctl jobs show` and status
//       // a throw: exit 1, its message the job's error
//       await app.sendMail(userId, { signal: job.signal });
//     });
//
// Node.js 18 or later, no other module (tested with Debian 12's nodejs). Per job:
//
// - The function gets a job: job.args, job.jid, job.className, job.queue, job.retryCount,
//   job.payload (the whole job object), job.deadline (epoch seconds by which the daemon
//   cancels the job, or null), job.cancelled and job.signal (an AbortSignal). It may be
//   synchronous or return a promise; the next job waits for it to settle.
// - An integer that a Number cannot hold exactly (beyond 2^53) arrives as a BigInt, so
//   ids reach the job as pushed; every other number is a Number.
// - Returning (or resolving) is success (exit 0). A throw (or rejection) is exit 1: the
//   stack goes to stderr (the job's output) and "Name: message [at ...]" becomes the job's
//   error message. process.exit() ends the process, and the job with it, as a crash.
// - stdout and stderr are flushed before the job is reported done, so everything the job
//   printed is attributed to it.
// - progress(pct, message): pct a number from 0 to 100. Outside a job it does nothing.
// - recycle(): ask to be replaced by a fresh process after this job (a leak, a config
//   change); the process keeps running until the daemon retires it.
// - Cancel (`cogworkerctl jobs cancel`, or the job's timeout): job.cancelled turns true and
//   job.signal aborts (with a Cancelled error as its reason), which stops what was given
//   the signal (fetch, timers/promises, streams, child_process). JavaScript cannot be
//   interrupted otherwise: code that ignores the signal runs on, and the daemon kills the
//   process group kill_grace seconds after the cancel. A cancelled process is replaced
//   after its job in any case.
// - When the daemon closes fd 3 the process exits with status 0 ('exit' listeners run); a
//   job running at that moment is cancelled first, and the exit waits for it to settle.
//
// Run without the daemon (COGWORKER_PROTOCOL is not "1"), run() says so and exits with 2.

"use strict";

const fs = require("fs");
const net = require("net");
const util = require("util");

const PROTOCOL = "1";
// What the daemon reads of one line from us is 1 MiB; messages and errors are cut well
// below it (a character is at most 6 bytes as a JSON escape).
const TEXT_MAX = 100000;

class Cancelled extends Error {
  constructor(message) {
    super(message || "cancelled by cogworkerd");
    this.name = "Cancelled";
  }
}

class Job {
  constructor(payload, deadline) {
    this.payload = payload;
    this.deadline = deadline === undefined ? null : deadline;
    this._abort = null;   // made when the job asks for its signal or is cancelled: most never do
  }

  _controller() {
    if (this._abort === null) this._abort = new AbortController();
    return this._abort;
  }

  _field(key) {
    const p = this.payload;
    return p !== null && typeof p === "object" && !Array.isArray(p) ? p[key] : undefined;
  }

  get args() { return this._field("args") || []; }
  get jid() { return this._field("jid"); }
  get className() { return this._field("class"); }
  get queue() { return this._field("queue"); }

  // Failures recorded so far, 0 on the first run (what COGWORKER_RETRY_COUNT says to a
  // cold handler).
  get retryCount() {
    const n = Number(this._field("retry_count"));
    return Number.isInteger(n) && n > 0 ? n : 0;
  }

  get signal() { return this._controller().signal; }
  get cancelled() { return this._abort !== null && this._abort.signal.aborted; }

  // Throw Cancelled if the job was cancelled (for code between awaits).
  throwIfCancelled() {
    if (this.cancelled) throw new Cancelled();
  }
}

// ---------------------------------------------------------------------------------------
// JSON with exact integers. JSON.parse turns 12345678901234567890 into
// 12345678901234567000; a message holding a run of 16 digits or more (the only way such
// an integer can appear) goes through this parser instead, which keeps those as BigInt.
// Strings are left to JSON.parse, so escapes are decoded exactly as it does.

function parseExact(text) {
  let i = 0;
  const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

  function fail(what) {
    throw new SyntaxError(`${what} at position ${i} of the message`);
  }
  function skipSpace() {
    for (;;) {
      const c = text.charCodeAt(i);
      if (c === 32 || c === 9 || c === 10 || c === 13) i++;
      else return;
    }
  }
  function string() {
    let end = i + 1;
    for (;;) {
      end = text.indexOf('"', end);
      if (end < 0) fail("unterminated string");
      let backslashes = 0;
      while (text.charCodeAt(end - 1 - backslashes) === 92) backslashes++;
      if (backslashes % 2 === 0) break;
      end++;
    }
    const s = JSON.parse(text.slice(i, end + 1));
    i = end + 1;
    return s;
  }
  function number() {
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) fail("unexpected character");
    i = NUMBER.lastIndex;
    const n = Number(m[0]);
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) return BigInt(m[0]);
    return n;
  }
  function literal(word, value) {
    if (text.startsWith(word, i)) {
      i += word.length;
      return value;
    }
    return fail("unexpected character");
  }
  function value() {
    skipSpace();
    switch (text[i]) {
      case "{": {
        i++;
        const o = {};
        skipSpace();
        if (text[i] === "}") { i++; return o; }
        for (;;) {
          skipSpace();
          if (text[i] !== '"') fail("expected a key");
          const k = string();
          skipSpace();
          if (text[i++] !== ":") fail("expected ':'");
          const v = value();
          // as JSON.parse does: "__proto__" is an own property, not the prototype
          Object.defineProperty(o, k,
            { value: v, enumerable: true, writable: true, configurable: true });
          skipSpace();
          const c = text[i++];
          if (c === "}") return o;
          if (c !== ",") fail("expected ',' or '}'");
        }
      }
      case "[": {
        i++;
        const a = [];
        skipSpace();
        if (text[i] === "]") { i++; return a; }
        for (;;) {
          a.push(value());
          skipSpace();
          const c = text[i++];
          if (c === "]") return a;
          if (c !== ",") fail("expected ',' or ']'");
        }
      }
      case '"': return string();
      case "t": return literal("true", true);
      case "f": return literal("false", false);
      case "n": return literal("null", null);
      default: return number();
    }
  }
  const v = value();
  skipSpace();
  if (i !== text.length) fail("unexpected text after the value");
  return v;
}

function parseMessage(text) {
  return /\d{16}/.test(text) ? parseExact(text) : JSON.parse(text);
}

// ---------------------------------------------------------------------------------------

let channel = null;
let current = null;
let recycleAsked = false;
let retired = false;
const inbox = [];
let busy = false;
let perform = null;

function refuse(message) {
  process.stderr.write(`cogworker_handler: ${message}\n`);
  process.exit(2);
}

function openChannel() {
  const version = process.env.COGWORKER_PROTOCOL;
  if (version === undefined) {
    refuse("COGWORKER_PROTOCOL is not set: this program is a warm handler, to be run by " +
      "cogworkerd from a handler block with `warm = true;` (it takes its jobs on fd 3, not " +
      "on stdin)");
  }
  if (version !== PROTOCOL) {
    refuse(`COGWORKER_PROTOCOL is ${JSON.stringify(version)}: this library speaks version ` +
      `${PROTOCOL} of the warm protocol; use the library that comes with this cogworkerd`);
  }
  try {
    if (!fs.fstatSync(3).isSocket()) throw new Error("not a socket");
    return new net.Socket({ fd: 3, readable: true, writable: true });
  } catch (e) {
    return refuse(`fd 3 is not the socket to cogworkerd (${e.message}): is this run by cogworkerd?`);
  }
}

function send(msg) {
  channel.write(JSON.stringify(msg) + "\n");
}

function text(s) {
  // toWellFormed is Node 20's; slicing can split a surrogate pair, which JSON.stringify
  // then writes as an escape the daemon need not accept.
  const t = String(s).slice(0, TEXT_MAX);
  return typeof t.toWellFormed === "function" ? t.toWellFormed()
    : t.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

function progress(pct, message) {
  if (typeof pct !== "number" || !Number.isFinite(pct) || pct < 0 || pct > 100) {
    throw new RangeError(`progress: pct must be a number from 0 to 100, not ${String(pct)}`);
  }
  if (current === null) return;
  const msg = { type: "progress", pct };
  if (message !== undefined && message !== null) msg.message = text(message);
  send(msg);
}

function recycle() {
  recycleAsked = true;
}

function currentJob() {
  return current;
}

// "Name: message [at frame, ...]", innermost frame first, down to the job's code.
function describe(err) {
  if (!(err instanceof Error)) return `thrown: ${util.inspect(err)}`;
  const head = `${err.name}: ${err.message}`;
  const frames = [];
  for (const line of String(err.stack || "").split("\n")) {
    const m = /^\s+at (.*)$/.exec(line);
    if (!m) continue;
    if (m[1].includes(__filename) || frames.length === 5) break;
    frames.push(m[1].replace(/\((?:file:\/\/)?\/(?:[^()]*\/)?([^/()]+)\)$/, "($1)")
      .replace(/^(?:file:\/\/)?\/(?:.*\/)?([^/]+)$/, "$1"));
  }
  return frames.length ? `${head} [at ${frames.join(", ")}]` : head;
}

// Resolves once what was written to stream has gone out. stdout and stderr are pipes from
// the daemon, which Node.js writes synchronously on Linux: when nothing is queued there is
// nothing to wait for, and no empty write (a system call each) is made.
function flushed(stream) {
  if (!stream.writableLength) return null;
  return new Promise((resolve) => {
    try {
      stream.write("", () => resolve());
    } catch (e) {
      resolve();
    }
  });
}

function cancelCurrent() {
  if (current !== null && !current.cancelled) current._controller().abort(new Cancelled());
}

function outputFlushed() {
  const a = flushed(process.stdout);
  const b = flushed(process.stderr);
  return a === null && b === null ? null : Promise.all([a, b]);
}

async function performJob(job) {
  let code = 0;
  let error = null;
  current = job;
  try {
    await perform(job);
  } catch (e) {
    code = 1;
    if (job.cancelled && (e instanceof Cancelled || e === job.signal.reason ||
        (e && e.name === "AbortError"))) {
      error = null;     // the daemon says why: "cancelled on request"
    } else {
      process.stderr.write(`${e instanceof Error ? e.stack : "Uncaught " + util.inspect(e)}\n`);
      error = text(describe(e));
    }
  }
  current = null;
  const out = outputFlushed();
  if (out !== null) await out;
  const done = { type: "done", exit: code };
  if (typeof job.jid === "string") done.jid = job.jid; // so that the daemon can tell a stray "done"
  if (error !== null) done.error = error;
  if (recycleAsked) done.recycle = true;
  if (!retired) send(done);
}

async function pump() {
  if (busy) return;
  busy = true;
  while (inbox.length && !retired) {
    const msg = inbox.shift();
    await performJob(new Job(msg.job, msg.deadline));
  }
  busy = false;
  if (retired) await exitNow();
}

async function exitNow() {
  await outputFlushed();
  process.exit(0);
}

function onLine(line) {
  let msg;
  try {
    msg = parseMessage(line);
  } catch (e) {
    // The two ends disagree: stop here, and say why, rather than leave the daemon waiting
    // for a `done`.
    process.stderr.write(`cogworker_handler: cannot read a message from cogworkerd: ${e.message}\n`);
    process.exit(1);
  }
  if (msg === null || typeof msg !== "object") return;
  if (msg.type === "job") {
    inbox.push(msg);
    pump();
  } else if (msg.type === "cancel") {
    cancelCurrent();
  } // other types: a later protocol's, ignored
}

function onEnd() {
  retired = true;
  cancelCurrent();
  if (!busy) exitNow();
}

// Serve jobs to fn(job) until cogworkerd retires this process.
function run(fn) {
  if (typeof fn !== "function") throw new TypeError("cogworker_handler.run: give a function");
  perform = fn;
  channel = openChannel();
  let pending = [];
  channel.on("data", (chunk) => {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, start)) {
      if (pending.length === 0) {
        onLine(chunk.toString("utf8", start, nl));   // the usual case: no copy first
      } else {
        pending.push(chunk.subarray(start, nl));
        onLine(Buffer.concat(pending).toString("utf8"));
        pending = [];
      }
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  });
  channel.on("end", onEnd);
  channel.on("error", onEnd);        // a broken channel: the daemon is gone
  send({ type: "ready" });
}

module.exports = { run, progress, recycle, currentJob, Cancelled, Job, parseMessage };
