#!/usr/bin/node
// SPDX-License-Identifier: MIT
// The least a Node.js warm handler can do per job (tests/bench/peers.py): read the
// protocol's lines on fd 3 (doc/protocol.md §1.2), parse each as JSON, answer a job with its
// `done`. No cancel, no output flush, no big integers, no error handling: the yardstick that
// shows what the library (handlers/node) adds to the protocol's own cost in this language.
"use strict";
const net = require("net");

const sock = new net.Socket({ fd: 3, readable: true, writable: true });
let pending = "";
sock.setEncoding("utf8");
sock.on("data", (chunk) => {
  pending += chunk;
  let nl;
  while ((nl = pending.indexOf("\n")) >= 0) {
    const msg = JSON.parse(pending.slice(0, nl));
    pending = pending.slice(nl + 1);
    if (msg.type === "job") sock.write(`{"type":"done","exit":0,"jid":${JSON.stringify(msg.job.jid)}}\n`);
  }
});
sock.on("end", () => process.exit(0));
sock.write('{"type":"ready"}\n');
