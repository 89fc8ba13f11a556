# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# cogworker_app: run a cogworker (or Sidekiq-style) Ruby app's own worker classes as one
# cogworkerd warm handler, without rewriting a job. The app is loaded once per process;
# each job runs by its class name: the name resolved to a constant, a new instance, and
# perform(*args), as the cogworker gem's processor does (CogworkerHandler.run_by_class).
# cogworkerd's hard timeouts, cancel, retries and recycling apply on top.
#
#     handlers = (
#       { class = "*"; warm = true;
#         command = ["ruby", "/usr/share/cogworkerd/handlers/ruby/cogworker_app.rb",
#                    "/srv/app/config/environment.rb"]; }
#     );
#
# Each argument is a file to require, in order (what loads the app and its worker
# classes). When the app has the cogworker gem it is used as is; without it (Debian
# packages none), handlers/ruby/compat/cogworker.rb stands in for it, so that
# `require "cogworker"`, `include Cogworker::Worker` (or Cogworker::Job) and
# `cogworker_options` load; what the shim cannot do (push a job: perform_async) says so.
$LOAD_PATH.unshift __dir__
require "cogworker_handler"

begin
  require "cogworker"
rescue LoadError
  $LOAD_PATH.push(File.join(__dir__, "compat")) # after every other path: never over a gem
  require "cogworker"
end

ARGV.each { |file| require File.expand_path(file) }
CogworkerHandler.run_by_class
