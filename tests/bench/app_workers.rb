# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# The Ruby app of the bench's peers figure (tests/bench/peers.py): a worker class written
# as a cogworker app writes it, run by cogworkerd through handlers/ruby/cogworker_app.rb
# (a handler block of class "*": each job by its class name), next to Sidekiq running the
# same empty perform in-process.
require "cogworker"

class NoopWorker
  include Cogworker::Worker
  cogworker_options queue: "default", retry: 5

  def perform; end
end
