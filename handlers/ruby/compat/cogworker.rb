# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# A stand-in for the cogworker gem's worker API, for an app run by cogworkerd through
# handlers/ruby/cogworker_app.rb where the gem is not installed (Debian packages none). It
# is on the load path only when `require "cogworker"` found no gem, and it provides what a
# worker class uses as it loads and runs: `include Cogworker::Worker` (or Cogworker::Job),
# `cogworker_options` (kept, merged, inherited; cogworkerd's conf decides retries,
# timeouts and queues), `cogworker_retry_in` and `cogworker_retries_exhausted` (kept, not
# called), the instance's `jid`, and `logger` (to stderr: the job's output). Pushing a job
# (perform_async, perform_in, perform_at) needs the gem's client and Redis: it raises
# NotImplementedError saying so.
require "logger"

module Cogworker
  def self.logger
    @logger ||= Logger.new($stderr)
  end

  def self.logger=(logger)
    @logger = logger
  end

  # `include Cogworker::Job` (alias Cogworker::Worker).
  module Job
    def self.included(base)
      base.extend(ClassMethods)
      base.include(InstanceMethods)
    end

    module ClassMethods
      def cogworker_options(opts = {})
        cogworker_options_hash.merge!(opts.transform_keys(&:to_sym))
        cogworker_options_hash
      end

      def cogworker_options_hash
        @cogworker_options_hash ||=
          superclass.respond_to?(:cogworker_options_hash) ? superclass.cogworker_options_hash.dup : {}
      end

      def cogworker_retry_in(&block)
        raise ArgumentError, "cogworker_retry_in needs a block" unless block

        @cogworker_retry_in_block = block
      end

      def cogworker_retries_exhausted(&block)
        raise ArgumentError, "cogworker_retries_exhausted needs a block" unless block

        @cogworker_retries_exhausted_block = block
      end

      def perform_async(*)
        raise NotImplementedError, "#{name}.perform_async: pushing a job needs the cogworker " \
                                   "gem (this is cogworkerd's stand-in for its worker API)"
      end
      alias perform_in perform_async
      alias perform_at perform_async
    end

    module InstanceMethods
      attr_accessor :jid

      def logger
        Cogworker.logger
      end
    end
  end

  Worker = Job
end
