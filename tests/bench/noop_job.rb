#!/usr/bin/ruby
# SPDX-License-Identifier: MIT
# The Ruby no-op job of the bench's warm figure (tests/bench/bench.py "warm"): NoopJob's
# empty perform, the very method Sidekiq runs in-process there, run by cogworkerd as a warm
# handler through the Ruby handler library (handlers/ruby), Sidekiq's way: a new NoopJob
# per job, its perform called with the job's args.
$LOAD_PATH.unshift File.join(__dir__, "..", "..", "handlers", "ruby")
require "cogworker_handler"

class NoopJob
  def perform; end
end

CogworkerHandler.run(NoopJob)
