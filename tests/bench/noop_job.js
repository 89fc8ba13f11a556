#!/usr/bin/node
// SPDX-License-Identifier: MIT
// The Node.js no-op job of the bench's peers figure (tests/bench/peers.py): an empty async
// function run by cogworkerd as a warm handler through the Node.js library (handlers/node),
// the same function BullMQ's Worker runs in-process there.
"use strict";
const path = require("path");
const cw = require(path.join(__dirname, "..", "..", "handlers", "node", "cogworker_handler.js"));

cw.run(async () => {});
