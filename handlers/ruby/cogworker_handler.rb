# SPDX-License-Identifier: MIT
# frozen_string_literal: true
#
# cogworker_handler: run Ruby code per job as a cogworkerd warm handler.
#
# A warm handler is one process that runs many jobs, one at a time, so what it loads at
# start (the interpreter, a framework, an application) is loaded once instead of once per
# job. cogworkerd starts it for a handler block with `warm = true;` and speaks protocol
# version 1 with it on fd 3 (doc/protocol.md §1.2, handlers/README.md). This file speaks that
# protocol; your script only says what to load and what to do per job:
#
#     require "cogworker_handler"        # ruby -I/usr/share/cogworkerd/handlers/ruby
#     require_relative "config/environment"   # the warm-up: runs once, before the first job
#
#     CogworkerHandler.run do |job|
#       user_id, = job.args              # the job's args exactly as pushed (big ints intact)
#       CogworkerHandler.progress(40, "halfway")
#       Mailer.welcome(user_id)          # an exception: exit 1, its message the job's error
#     end
#
# or, Sidekiq's way, a class whose `perform` takes the args (a new instance per job):
#
#     class HardWorker
#       def perform(name, count) ... end
#     end
#     CogworkerHandler.run(HardWorker)
#
# or a whole app's worker classes, each job run by its class name, as cogworker's gem runs
# them (a handler block of class "*"; handlers/ruby/cogworker_app.rb loads the app):
#
#     CogworkerHandler.run_by_class
#
# Ruby 2.6 or later, standard library only (tested with Debian 12's ruby). Per job, in
# the main thread:
#
# - The block gets a Job: job.args, job.jid, job.class_name, job.queue, job.retry_count,
#   job.payload (the whole job Hash), job.deadline (epoch seconds by which the daemon
#   cancels the job, or nil) and job.cancelled?. CogworkerHandler.current_job is the same
#   Job, for code that is not handed it (a worker class's perform).
# - Returning is success (exit 0). An exception is exit 1: its full message and backtrace
#   go to stderr (the job's output) and "Class: message [at file:line:in 'method', ...]"
#   becomes the job's error message. `exit n` ends the job with exit status n, as it would
#   end a cold handler (dead_exit_codes and discard_exit_codes apply), and the process
#   stays. A signal that Ruby turns into an exception (SIGTERM, SIGINT) is let through: the
#   process dies of it, as a cold handler would, and the daemon judges the job by that.
# - $stdout and $stderr are flushed before the job is reported done, so everything the job
#   printed is attributed to it.
# - CogworkerHandler.progress(pct, message = nil): pct a number from 0 to 100. Outside a
#   job it does nothing.
# - CogworkerHandler.recycle: ask to be replaced by a fresh process after this job (a leak,
#   a config change); the process keeps running until the daemon retires it.
# - Cancel (`cogworkerctl jobs cancel`, or the job's timeout): job.cancelled? turns true and
#   CogworkerHandler::Cancelled is raised in the job with Thread#raise, as Timeout does,
#   which interrupts sleep and blocking IO. The daemon's cancel is read by a SIGIO handler
#   (the socket raises SIGIO while a job runs), so the library owns SIGIO; no thread of
#   its own runs beside the job. Cancelled derives from Exception, not
#   StandardError, so a bare `rescue` does not swallow it; use `ensure` to clean up. Code
#   in C that does not return to Ruby meanwhile is not interrupted: the daemon kills the
#   process group kill_grace seconds after the cancel. A cancelled process is replaced
#   after its job in any case, so state the exception left half-changed does not outlive it.
# - When the daemon closes fd 3 the process exits with status 0 (at_exit handlers run); a
#   job running at that moment is cancelled first.
#
# Run without the daemon (COGWORKER_PROTOCOL is not "1"), `run` says so and exits with 2.

require "fcntl"
require "json"

module CogworkerHandler
  PROTOCOL = "1"
  # What the daemon reads of one line from us is 1 MiB; messages and errors are cut well
  # below it (a character is at most 6 bytes as a JSON escape).
  TEXT_MAX = 100_000

  # Raised in the job when cogworkerd cancels it (a cancel request or its timeout).
  class Cancelled < Exception # rubocop:disable Lint/InheritException
  end

  # A job whose class names no worker class of the app (run_by_class).
  class UnknownWorker < StandardError
  end

  # One job as the daemon sent it. payload is the job object as pushed.
  class Job
    attr_reader :payload, :deadline

    def initialize(payload, deadline)
      @payload = payload
      @deadline = deadline
      @cancelled = false
    end

    def args
      field("args") || []
    end

    def jid
      field("jid")
    end

    def class_name
      field("class")
    end

    def queue
      field("queue")
    end

    # Failures recorded so far, 0 on the first run (what COGWORKER_RETRY_COUNT says to a
    # cold handler).
    def retry_count
      n = field("retry_count")
      n = Integer(n, exception: false) if n.is_a?(String)
      n.is_a?(Integer) && n.positive? ? n : 0
    end

    def cancelled?
      @cancelled
    end

    # Raise Cancelled if the job was cancelled (for code that rescues Exception broadly).
    def check_cancelled!
      raise Cancelled, "cancelled by cogworkerd" if @cancelled
    end

    # :nodoc: the library's
    def cancel!
      @cancelled = true
    end

    private

    def field(key)
      @payload.is_a?(Hash) ? @payload[key] : nil
    end
  end

  # Linux's values (asm-generic/fcntl.h): Ruby's Fcntl does not name them.
  F_SETOWN = 8
  O_ASYNC = 0o20000

  @send_lock = Mutex.new # a job's own threads may report progress too
  @current = nil
  @recycle = false
  @pending = +"" # what the SIGIO handler read of the channel and did not act on
  @eof = false

  class << self
    # The Job running now, or nil.
    def current_job
      @current
    end

    # Serve jobs until cogworkerd retires this process: to the block, or to
    # worker.new.perform(*args). Never returns.
    def run(worker = nil, &block)
      perform = worker ? ->(job) { worker.new.perform(*job.args) } : block
      raise ArgumentError, "CogworkerHandler.run: give a block or a worker class" unless perform

      @reader, @writer = open_channel
      @main = Thread.current
      watch_channel
      # Cancelled is let into the main thread only while a job runs (see perform_job).
      Thread.handle_interrupt(Cancelled => :never) { serve(perform) }
      flush_output
      exit 0
    end
    # Serve each job to the worker class its "class" names, as cogworker's (and Sidekiq's)
    # own processors do: the name resolved to a constant (namespaced ones too, such as
    # "Billing::ChargeJob"), a new instance (its jid set when it has `jid=`), and
    # perform(*args). For a handler block of class "*" that runs a whole app, loaded once
    # before this is called (handlers/ruby/cogworker_app.rb does that). A name that is no
    # worker class of the app fails its job with UnknownWorker. Never returns.
    def run_by_class
      run do |job|
        worker = worker_class(job.class_name).new
        worker.jid = job.jid if worker.respond_to?(:jid=)
        worker.perform(*job.args)
      end
    end

    # Report the running job's progress: pct from 0 to 100, an optional message.
    def progress(pct, message = nil)
      unless pct.is_a?(Integer) || (pct.is_a?(Numeric) && pct.real? && pct.to_f.finite?)
        raise ArgumentError, "progress: pct must be a number from 0 to 100, not #{pct.inspect}"
      end
      pct = pct.to_f unless pct.is_a?(Integer)
      unless pct.between?(0, 100)
        raise ArgumentError, "progress: pct must be from 0 to 100, not #{pct}"
      end
      return if @current.nil?

      msg = { type: "progress", pct: pct }
      msg[:message] = text(message) unless message.nil?
      send_message(msg)
    end

    # Ask cogworkerd to replace this process after the current (or next) job.
    def recycle
      @recycle = true
    end

    private

    def worker_class(name)
      unless name.is_a?(String) && name.match?(/\A(::)?[A-Z]\w*(::[A-Z]\w*)*\z/)
        raise UnknownWorker, "the job's class #{name.inspect} is not the name of a Ruby class"
      end

      klass = begin
        Object.const_get(name)
      rescue NameError => e
        raise UnknownWorker, "no worker class #{name} in this app (#{e.message[0, 200]})"
      end
      unless klass.is_a?(Class) && klass.method_defined?(:perform)
        raise UnknownWorker, "#{name} is not a worker class (no instance method perform)"
      end

      klass
    end

    def refuse(message)
      warn "cogworker_handler: #{message}"
      exit 2
    end

    def open_channel
      version = ENV["COGWORKER_PROTOCOL"]
      if version.nil?
        refuse "COGWORKER_PROTOCOL is not set: this program is a warm handler, to be run by " \
               "cogworkerd from a handler block with `warm = true;` (it takes its jobs on fd 3, " \
               "not on stdin)"
      end
      if version != PROTOCOL
        refuse "COGWORKER_PROTOCOL is #{version.inspect}: this library speaks version " \
               "#{PROTOCOL} of the warm protocol; use the library that comes with this cogworkerd"
      end
      begin
        reader = IO.for_fd(3, "rb", autoclose: false)
        raise IOError, "not a socket" unless reader.stat.socket?
      rescue SystemCallError, IOError => e
        refuse "fd 3 is not the socket to cogworkerd (#{e.message}): is this run by cogworkerd?"
      end
      # A program the job starts must not inherit the channel: it could write to it, or keep
      # it open after we are gone.
      reader.close_on_exec = true
      # Its own IO object, so a thread of the job that reports progress never waits on a
      # read.
      writer = IO.for_fd(3, "wb", autoclose: false)
      writer.sync = true
      [reader, writer]
    end

    # The main thread reads the channel itself: a job message wakes it and nothing else,
    # with no thread in between. While a job runs the socket raises SIGIO when the daemon
    # writes (O_ASYNC, owned by this process), so a cancel is read and acted on at once
    # by the signal's handler, which Ruby runs in the main thread, interrupting sleep and
    # blocking IO; between jobs the socket raises nothing, so a job costs no signal.
    def serve(perform)
      send_message(type: "ready")
      until @eof
        line = next_line
        break if line.nil?

        msg = parse(line)
        next unless msg.is_a?(Hash) && msg["type"] == "job" # a late cancel, a later protocol's

        job = Job.new(msg["job"], msg["deadline"])
        code, error = perform_job(perform, job)
        flush_output
        done = { type: "done", exit: code }
        done[:jid] = job.jid if job.jid.is_a?(String) # so that the daemon can tell a stray "done"
        done[:error] = error if error
        done[:recycle] = true if @recycle
        send_message(done)
      end
    rescue SystemCallError, IOError
      nil # the channel broke: the daemon is gone
    end

    # The next line from the daemon, or nil at EOF: what the SIGIO handler left first.
    def next_line
      return @reader.gets if @pending.empty?

      nl = @pending.index("\n")
      return @pending.slice!(0, nl + 1) if nl

      line = @pending + (@reader.gets || "")
      @pending = +""
      line
    end

    def watch_channel
      Signal.trap("IO") { on_sigio }
      @reader.fcntl(F_SETOWN, Process.pid)
      @flags = @reader.fcntl(Fcntl::F_GETFL)
    end

    # The socket signals only while a job runs; what came before that is looked at once.
    def arm(job)
      @current = job
      @reader.fcntl(Fcntl::F_SETFL, @flags | O_ASYNC)
      on_sigio
    end

    def disarm
      @current = nil
      @reader.fcntl(Fcntl::F_SETFL, @flags)
    end

    # SIGIO's handler (and the look at the start of a job): read what the daemon wrote;
    # a cancel, or the EOF of a retirement, cancels the job.
    def on_sigio
      return if @current.nil?

      while IO.select([@reader], nil, nil, 0)
        begin
          @pending << @reader.readpartial(65_536)
        rescue EOFError
          @eof = true
          break
        end
      end
      cancel_current if take_cancels || @eof # EOF: the daemon is gone or retires us
    rescue IOError, SystemCallError
      @eof = true
      cancel_current
    end

    # Whether the complete lines read so far hold a cancel; they are used up, but for a
    # job's (which the daemon sends only after our done), left for the main loop.
    def take_cancels
      keep = +""
      cancel = false
      while (nl = @pending.index("\n"))
        line = @pending.slice!(0, nl + 1)
        msg = parse(line)
        cancel ||= msg.is_a?(Hash) && msg["type"] == "cancel"
        keep << line if msg.is_a?(Hash) && msg["type"] == "job"
      end
      @pending = keep << @pending
      cancel
    end

    # A line from the daemon that is not JSON means the two ends disagree: stop here, and
    # say why, rather than leave the daemon waiting for a `done`.
    def parse(line)
      JSON.parse(line, max_nesting: false)
    rescue JSON::ParserError => e
      warn "cogworker_handler: cannot read a message from cogworkerd: #{e.message[0, 200]}"
      $stderr.flush
      exit!(1)
    end

    # From the main thread (the SIGIO handler runs there): raised in the job at once, or,
    # masked while the library itself runs, as soon as the job's code runs again.
    def cancel_current
      job = @current
      return if job.nil? || job.cancelled?

      job.cancel!
      @main.raise(Cancelled, "cancelled by cogworkerd")
    end

    # Run one job; its exit status and error message.
    def perform_job(perform, job)
      arm(job)
      begin
        Thread.handle_interrupt(Cancelled => :immediate) { perform.call(job) }
        [0, nil]
      rescue Cancelled
        [1, nil] # the daemon says why: "cancelled on request"
      rescue SystemExit => e
        [e.status & 0xFF, nil]
      rescue SignalException
        raise
      rescue Exception => e # rubocop:disable Lint/RescueException
        $stderr.write(e.full_message(highlight: false, order: :top))
        [1, text(describe(e))]
      end
    ensure
      disarm
      drain_late_cancel
    end

    # A cancel that came after the job's code ended waits, masked; take it now so that it
    # never lands in the next job.
    def drain_late_cancel
      return unless Thread.pending_interrupt?(Cancelled)

      begin
        Thread.handle_interrupt(Cancelled => :immediate) { nil }
      rescue Cancelled
        nil
      end
    end

    # Class: message [at file:line:in 'method', ...], innermost frame first, down to the
    # job's code (not this library's, nor what called run).
    def describe(err)
      here = File.expand_path(__FILE__)
      frames = (err.backtrace_locations || []).take_while { |l| l.absolute_path != here }
      where = frames.first(5).map do |l|
        "#{File.basename(l.path.to_s)}:#{l.lineno}:in '#{l.label}'"
      end
      head = "#{err.class}: #{err.message}"
      where.empty? ? head : "#{head} [at #{where.join(', ')}]"
    end

    # s as a valid UTF-8 String, cut to size.
    def text(str)
      str.to_s[0, TEXT_MAX].encode("UTF-8", invalid: :replace, undef: :replace).scrub
    end

    def send_message(msg)
      line = "#{JSON.generate(msg)}\n"
      # A cancel must not cut a line in two.
      Thread.handle_interrupt(Cancelled => :never) do
        @send_lock.synchronize { @writer.write(line) }
      end
    end

    def flush_output
      [$stdout, $stderr, STDOUT, STDERR].uniq.each do |io|
        io.flush
      rescue IOError, SystemCallError
        nil
      end
    end
  end
end
