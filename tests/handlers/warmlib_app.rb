# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# Test app (not a script): worker classes written as a cogworker app writes them, loaded by
# handlers/ruby/cogworker_app.rb for a handler block of class "*" (test_warm_libs.py,
# WL-12, WL-13). Each perform writes what it saw to $RUNS.d/<jid>.json.
require "cogworker"
require "json"

module AppRecord
  def record(args)
    dir = "#{ENV.fetch('RUNS')}.d"
    Dir.mkdir(dir) unless File.directory?(dir)
    File.write(File.join(dir, "#{jid}.tmp"),
               JSON.generate(pid: Process.pid, class: self.class.name, jid: jid, args: args,
                             types: args.map { |a| a.class.name },
                             options: self.class.cogworker_options_hash))
    File.rename(File.join(dir, "#{jid}.tmp"), File.join(dir, "#{jid}.json"))
  end
end

module Billing
  class ChargeJob
    include Cogworker::Worker
    include AppRecord
    cogworker_options queue: "billing", retry: 3

    def perform(customer_id, amount, currency, paid, note, lines, meta)
      record([customer_id, amount, currency, paid, note, lines, meta])
    end
  end
end

class EchoJob
  include Cogworker::Job
  include AppRecord
  cogworker_retry_in { |count| count * 10 }

  def perform(*args)
    record(args)
  end
end

# Pushing from a job needs the gem's client: the shim says so.
class FollowUpJob
  include Cogworker::Worker

  def perform
    EchoJob.perform_async("next")
  end
end

class NotAWorker
end
