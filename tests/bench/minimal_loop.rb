#!/usr/bin/ruby
# SPDX-License-Identifier: MIT
# The least a Ruby warm handler can do per job (tests/bench/peers.py): read the protocol's
# lines on fd 3 (doc/protocol.md §1.2), parse each as JSON, answer a job with its `done`.
# No cancel, no output flush, no error handling: the yardstick that shows what the library
# (handlers/ruby) adds to the protocol's own cost in this language.
require "json"

io = IO.for_fd(3, "r+b", autoclose: false)
io.sync = true
io.write(%({"type":"ready"}\n))
while (line = io.gets)
  msg = JSON.parse(line)
  io.write(%({"type":"done","exit":0,"jid":#{JSON.generate(msg['job']['jid'])}}\n)) if msg["type"] == "job"
end
