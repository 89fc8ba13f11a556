# SPDX-License-Identifier: MIT
# cogworkerd: a plain Makefile.
#   make            build/cogworkerd and build/cogworkerctl
#   make check      deps, unit tests (Check) and integration tests (real redis-server)
#   make lint       deps, static checks (tools/lint.sh: cycles, cppcheck, key names;
#                   tools/check-refs.py: every reference to doc/ and every link of the
#                   docs resolves, the README stays short), and the
#                   sanitizer builds compile
#   make compile_commands.json   the compilation database for clangd & co (needs bear)
#   make run        deps of building and running only (no test tools), then the daemon on
#                   conf/dev.conf (or CONF=your.conf) with a private redis-server
#   make bench      benchmarks (tests/bench), report in build/bench/report.md
#   make deb        the Debian package, build/deb/cogworkerd_<version>_<arch>.deb, lintian-checked
#   make check-systemd   the package installed, purged and run as a service by a real
#                   systemd, in a container (part of make check too)
#   make fuzz       libFuzzer harnesses (tests/fuzz), FUZZ_SECONDS each (not in make check)
#   make fuzz-long  each harness to 10 million executions (doc/hardening.md's figures)
#   make soak       the chaos soak (tests/soak): daemons killed, Redis restarted, jobs counted
#   SANITIZE=address|thread   sanitizer builds (into build/<sanitizer>/)

CC       ?= cc
PKGS     := hiredis libcjson libconfig libsystemd libmicrohttpd libssl libcrypto
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -Wall -Wextra -Werror -pthread -D_GNU_SOURCE \
            $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -pthread -lm
VERSION  := 0.1.0
CFLAGS   += -DCOGWORKERD_VERSION='"$(VERSION)"'

BUILD    := build
ifeq ($(SANITIZE),address)
BUILD    := build/asan
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
ifeq ($(SANITIZE),thread)
BUILD    := build/tsan
CFLAGS   += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=thread
endif

# The daemon's own files (its threads and the state they share) are listed; every other
# src/*.c is library code shared by the daemon, cogworkerctl and the unit tests.
DAEMON_SRC := src/main.c src/manager.c src/fetch.c src/fetcher.c src/settle.c \
            src/heartbeat.c src/scheduled.c src/keyguard.c src/recovery.c src/ticker.c \
            src/deathhook.c src/metrics.c src/state.c src/stoprequeue.c src/outkeep.c \
            src/admission.c src/deadline.c src/sentinelwatch.c src/park.c src/waker.c \
            src/batch.c
LIB_SRC  := $(filter-out $(DAEMON_SRC),$(wildcard src/*.c))
# The dashboard's server (src/web/, `cogworkerctl web`) is a subsystem of its own, linked
# into cogworkerctl: it stands on src/ctl/ (it answers with the commands' own code).
CTL_SRC  := $(wildcard src/ctl/*.c src/web/*.c)
LUA      := $(wildcard lua/*.lua lua/lib/*.lua)
WEB      := $(wildcard web/*)
# cogworkerctl alone hashes passwords (web passwd, the dashboard's logins): libcrypt.
CTL_LIBS := -lcrypt

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/lua_scripts.o
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
CTL_OBJ    := $(CTL_SRC:%.c=$(BUILD)/%.o) $(BUILD)/web_assets.o

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps deps-run check lint unit integration run bench clean install compile_commands.json \
        deb container-root check-systemd fuzz fuzz-build fuzz-long soak
all: $(BUILD)/cogworkerd $(BUILD)/cogworkerctl

$(BUILD)/cogworkerd: $(DAEMON_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/cogworkerctl: $(CTL_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CTL_LIBS)

# -MMD -MP: each object depends on the headers it really includes (build/**/*.d).
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -Isrc -c -o $@ $<

# build/deb and build/container (make deb, the container tree) are package trees, full of
# directories and files named *.d that are no makefiles.
-include $(shell find $(BUILD) \( -path $(BUILD)/deb -o -path $(BUILD)/container \) -prune \
                 -o -name '*.d' -type f -print 2>/dev/null)

# Every lua/*.lua becomes a C string in the binary; "--@include NAME" lines pull in
# lua/lib/NAME.lua, so shared fragments are written once. The expanded scripts are also
# left in $(BUILD)/lua/, where the integration tests read the text the binary embeds.
$(BUILD)/lua_scripts.c: $(LUA) tools/embed-lua.sh
	@mkdir -p $(dir $@)
	rm -rf $(BUILD)/lua
	sh tools/embed-lua.sh lua $(BUILD)/lua > $@.tmp
	mv $@.tmp $@
$(BUILD)/lua_scripts.o: $(BUILD)/lua_scripts.c
	$(CC) $(CFLAGS) -Isrc -c -o $@ $<

# The dashboard's files (web/) become C strings in cogworkerctl (`cogworkerctl web`).
$(BUILD)/web_assets.c: $(WEB) tools/embed-web.sh
	@mkdir -p $(dir $@)
	sh tools/embed-web.sh web > $@.tmp
	mv $@.tmp $@
$(BUILD)/web_assets.o: $(BUILD)/web_assets.c src/web/web.h
	$(CC) $(CFLAGS) -Isrc -Isrc/web -c -o $@ $<

# Unit tests link the daemon's objects too (not main.o), so [unit] behaviours of the
# settle and recovery paths can be driven directly with injected Redis faults.
$(BUILD)/tests/%: tests/unit/%.c tests/unit/unit_redis.h $(LIB_OBJ) $(filter-out $(BUILD)/src/main.o,$(DAEMON_OBJ))
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $(shell pkg-config --cflags check) -o $@ $(filter %.c %.o,$^) \
	    $(LDFLAGS) $(LDLIBS) $(shell pkg-config --libs check)

# tools/deps.sh's sets: `test` (what the checks, tests and benchmarks use, and what running
# needs) for every target that tests; `run` for make run, which wants no test tools.
deps:
	@sh tools/deps.sh test
deps-run:
	@sh tools/deps.sh run

# bear records the compiler calls of a build, so the build is a full one, in a scratch
# directory: every file (unit tests too) gets its entry and build/ is left as it was.
COMPDB := build/compdb
compile_commands.json:
	rm -rf $(COMPDB)
	bear --output $@ -- $(MAKE) BUILD=$(COMPDB) all $(UNIT_SRC:tests/unit/%.c=$(COMPDB)/tests/%)
	rm -rf $(COMPDB)

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: all
	python3 tests/integration/run.py --build $(BUILD) $(if $(JOBS),-j $(JOBS))

check: deps
	$(MAKE) all unit
	$(MAKE) integration

# The link-cycle check reads the objects, so lint builds first; its own tests run before it,
# since a check that cannot fail would pass anything. The sanitizer builds are compiled
# too: their #if branches (fork under TSan, the stack unpoisoning under ASan) are code that
# no other build sees, and -Werror holds there as well.
lint: deps
	$(MAKE) all
	$(MAKE) all SANITIZE=address
	$(MAKE) all SANITIZE=thread
	python3 tests/lint/test_lint.py
	python3 tests/lint/test_docs.py
	sh tools/lint.sh -s src -b $(BUILD)
	python3 tools/check-refs.py

# CONF: the conf make run runs the daemon on.
CONF ?= conf/dev.conf
run: deps-run all
	sh tools/run.sh $(BUILD) $(CONF)

bench: deps all $(BUILD)/bench/spawn_ceiling $(BUILD)/bench/spawn_path $(BUILD)/bench/warm_noop
	python3 tests/bench/bench.py --build $(BUILD)

# The baseline of the throughput figure: posix_spawn + waitpid of /bin/true, N threads.
$(BUILD)/bench/spawn_ceiling: tests/bench/spawn_ceiling.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -pthread

# The warm figure's no-op warm handler (doc/protocol.md §1.2).
$(BUILD)/bench/warm_noop: tests/bench/warm_noop.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $<

# The same loop through the daemon's spawn path (handler_run), no Redis: the split of the
# throughput figure.
$(BUILD)/bench/spawn_path: tests/bench/spawn_ceiling.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DSPAWN_PATH -Isrc -o $@ $(filter %.c %.o,$^) $(LDFLAGS) $(LDLIBS)

# make fuzz [FUZZ_SECONDS=60] [FUZZ_TARGETS="job json conf cron"]: each libFuzzer harness of
# tests/fuzz/ runs FUZZ_SECONDS from its seed corpus (tests/fuzz/corpus/NAME/, kept in the
# repo), under ASan + UBSan. The library is built again with clang for it (build/fuzz/: the
# fuzzer instruments the code under test, not only the harness); new inputs go to
# build/fuzz/corpus/NAME/, crashes to build/fuzz/crash-NAME-*. Not part of make check: a run
# long enough to find anything does not fit its budget.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= job json conf cron warm web
FUZZ_CC      ?= clang
FUZZ_DIR     := build/fuzz
FUZZ_CFLAGS  := $(filter-out -O2 -fsanitize=%,$(CFLAGS)) -O1 -fno-omit-frame-pointer \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB     := $(LIB_SRC:%.c=$(FUZZ_DIR)/%.o) $(FUZZ_DIR)/lua_scripts.o
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

$(FUZZ_DIR)/src/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -Isrc -c -o $@ $<
$(FUZZ_DIR)/lua_scripts.o: $(BUILD)/lua_scripts.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc -c -o $@ $<
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Isrc -o $@ $< $(FUZZ_LIB) $(LDLIBS)
# The dashboard's request parsing lives with its server (src/web/web_http.c), not in the
# library: its harness links that file too.
$(FUZZ_DIR)/fuzz_web: tests/fuzz/fuzz_web.c tests/fuzz/fuzz.h $(FUZZ_DIR)/src/web/web_http.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Isrc -Isrc/web -o $@ $< \
	    $(FUZZ_DIR)/src/web/web_http.o $(FUZZ_LIB) $(LDLIBS)

fuzz-build:
	@sh tests/fuzz/deps.sh
	$(MAKE) $(FUZZ_BIN)

fuzz: fuzz-build
	sh tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# make fuzz-long: the long mode, whose figures doc/hardening.md publishes: each harness to
# FUZZ_RUNS executions (10 million), one after the other, with no time limit, niced (hours on
# a shared machine; `FUZZ_TARGETS=cron` runs one).
FUZZ_RUNS ?= 10000000
fuzz-long: fuzz-build
	FUZZ_ARGS="-runs=$(FUZZ_RUNS) $(FUZZ_ARGS)" nice -n 10 \
	    sh tests/fuzz/run.sh $(FUZZ_DIR) 0 $(FUZZ_TARGETS)

# make soak [SOAK_SECONDS=180] [SOAK_DAEMONS=3] [SOAK_TLS=1] [SANITIZE=address]: the chaos
# soak of tests/soak/ against the build (build/asan with SANITIZE=address), over TLS with
# SOAK_TLS=1; it prints jobs pushed, lost, run twice and left in Redis, and fails on a lost
# job or a sanitizer report.
SOAK_SECONDS ?= 180
SOAK_DAEMONS ?= 3
soak: deps all
	python3 tests/soak/soak.py --build $(BUILD) --seconds $(SOAK_SECONDS) --daemons $(SOAK_DAEMONS) \
	    $(if $(SOAK_TLS),--tls)

clean:
	rm -rf build

# The Debian package (debian/, built by tools/deb.sh from a copy of the tree), remade when a
# file it is built from changed. DEB_BUILD_OPTIONS=nocheck skips its unit-test run.
DEB_VERSION := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)
DEB_ARCH    := $(shell dpkg --print-architecture 2>/dev/null)
DEB         := build/deb/cogworkerd_$(DEB_VERSION)_$(DEB_ARCH).deb
DEB_INPUTS  := Makefile $(wildcard src/*.[ch] src/ctl/*.[ch] src/web/*.[ch]) $(LUA) conf/cogworkerd.conf \
               $(wildcard man/* systemd/* completion/* debian/* debian/source/*) \
               $(wildcard handlers/*/*.py handlers/*/*.rb handlers/*/*.js handlers/*/*.sh) \
               tools/deb.sh tools/embed-lua.sh $(WEB) tools/embed-web.sh
deb: $(DEB)
$(DEB): $(DEB_INPUTS)
	sh tools/deb.sh build/deb

# The Debian tree the container tests boot (tools/container-root.sh): made once, remade
# only when the package's dependencies change.
container-root: $(DEB)
	sh tools/container-root.sh build/container/root $(DEB)

# The tests make both of the above themselves (under a lock, the first one that needs them).
check-systemd: deps
	python3 tests/integration/run.py --build $(BUILD) test_package test_systemd

# make install [PREFIX=/usr/local] [DESTDIR=staging] [SYSCONFDIR=/etc]
#   $(PREFIX)/sbin/cogworkerd, $(PREFIX)/bin/cogworkerctl, $(SYSCONFDIR)/cogworkerd/cogworkerd.conf
#   (only if absent, else cogworkerd.conf.example beside it), the units in
#   $(PREFIX)/lib/systemd/system (paths rewritten for PREFIX and SYSCONFDIR), the sysusers.d and
#   tmpfiles.d snippets in $(PREFIX)/lib, man pages in $(PREFIX)/share/man, bash and zsh
#   completion for cogworkerctl in $(PREFIX)/share, the warm handler libraries (handlers/README.md)
#   in $(PREFIX)/share/cogworkerd/handlers. Without DESTDIR, as
#   root on a systemd host, it also creates the cogworker user and reloads systemd.
PREFIX      ?= /usr/local
SYSCONFDIR  ?= /etc
BINDIR      ?= $(PREFIX)/bin
SBINDIR     ?= $(PREFIX)/sbin
MANDIR      ?= $(PREFIX)/share/man
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
# Where bash-completion and zsh look by default: bash-completion searches
# $XDG_DATA_DIRS/bash-completion/completions (/usr/local/share and /usr/share), and
# Debian's zsh has /usr/local/share/zsh/site-functions on its fpath; under /usr, zsh
# packages use vendor-completions.
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/$(if $(filter /usr,$(PREFIX)),vendor-completions,site-functions)
HANDLERDIR  ?= $(PREFIX)/share/cogworkerd/handlers
INSTALL_SED := sed -e 's|/usr/local/sbin/cogworkerd|$(SBINDIR)/cogworkerd|g' \
               -e 's|/usr/local/bin/cogworkerctl|$(BINDIR)/cogworkerctl|g' \
               -e 's|/usr/local/lib/systemd/system|$(UNITDIR)|g' \
               -e 's|/etc/cogworkerd|$(SYSCONFDIR)/cogworkerd|g'

# The conf may hold a Redis password: its directory is 0750 and the conf 0640, group
# $(SERVICE_GROUP) when that group exists and we may hand files to it (root), so the service
# and the operators in the group read it, and nobody else, on a host without systemd-tmpfiles
# too. Otherwise (a DESTDIR staged by a user) the modes are set and chgrp is left to the host.
SERVICE_GROUP ?= cogworker
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) \
	    $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) \
	    $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -d -m 0750 $(DESTDIR)$(SYSCONFDIR)/cogworkerd
	install -m 0755 $(BUILD)/cogworkerd $(DESTDIR)$(SBINDIR)/cogworkerd
	install -m 0644 completion/cogworkerctl.bash $(DESTDIR)$(BASHCOMPDIR)/cogworkerctl
	install -m 0644 completion/_cogworkerctl $(DESTDIR)$(ZSHCOMPDIR)/_cogworkerctl
	install -m 0755 $(BUILD)/cogworkerctl $(DESTDIR)$(BINDIR)/cogworkerctl
	install -d $(addprefix $(DESTDIR)$(HANDLERDIR)/,python ruby ruby/compat node sh)
	install -m 0644 handlers/python/cogworker_handler.py $(DESTDIR)$(HANDLERDIR)/python
	install -m 0644 handlers/ruby/cogworker_handler.rb $(DESTDIR)$(HANDLERDIR)/ruby
	install -m 0644 handlers/ruby/cogworker_app.rb $(DESTDIR)$(HANDLERDIR)/ruby
	install -m 0644 handlers/ruby/compat/cogworker.rb $(DESTDIR)$(HANDLERDIR)/ruby/compat
	install -m 0644 handlers/node/cogworker_handler.js $(DESTDIR)$(HANDLERDIR)/node
	install -m 0755 handlers/sh/example-warm.sh $(DESTDIR)$(HANDLERDIR)/sh
	@conf=$(DESTDIR)$(SYSCONFDIR)/cogworkerd/cogworkerd.conf; \
	if [ -e "$$conf" ]; then \
	    echo "install: $$conf exists, kept; the new example is $$conf.example"; \
	    install -m 0640 conf/cogworkerd.conf "$$conf.example"; \
	else \
	    install -m 0640 conf/cogworkerd.conf "$$conf"; \
	fi
	for u in cogworkerd.service cogworkerd@.service cogworkerd-web.service; do \
	    $(INSTALL_SED) systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && \
	    chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; \
	done
	install -m 0644 systemd/cogworkerd.sysusers $(DESTDIR)$(SYSUSERSDIR)/cogworkerd.conf
	$(INSTALL_SED) systemd/cogworkerd.tmpfiles > $(DESTDIR)$(TMPFILESDIR)/cogworkerd.conf
	chmod 0644 $(DESTDIR)$(TMPFILESDIR)/cogworkerd.conf
	$(INSTALL_SED) man/cogworkerctl.1 > $(DESTDIR)$(MANDIR)/man1/cogworkerctl.1
	$(INSTALL_SED) man/cogworkerd.conf.5 > $(DESTDIR)$(MANDIR)/man5/cogworkerd.conf.5
	$(INSTALL_SED) man/cogworkerd.8 > $(DESTDIR)$(MANDIR)/man8/cogworkerd.8
	chmod 0644 $(DESTDIR)$(MANDIR)/man1/cogworkerctl.1 $(DESTDIR)$(MANDIR)/man5/cogworkerd.conf.5 \
	    $(DESTDIR)$(MANDIR)/man8/cogworkerd.8
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && [ -d /run/systemd/system ]; then \
	    systemd-sysusers $(SYSUSERSDIR)/cogworkerd.conf && \
	    systemd-tmpfiles --create $(TMPFILESDIR)/cogworkerd.conf && \
	    systemctl daemon-reload && \
	    echo "install: done; edit $(SYSCONFDIR)/cogworkerd/cogworkerd.conf, then: systemctl enable --now cogworkerd"; \
	else \
	    echo "install: done; on the target host run: systemd-sysusers; systemd-tmpfiles --create; systemctl daemon-reload"; \
	fi
	@dir=$(DESTDIR)$(SYSCONFDIR)/cogworkerd; \
	if [ "$$(id -u)" = 0 ] && getent group $(SERVICE_GROUP) >/dev/null; then \
	    chgrp $(SERVICE_GROUP) "$$dir" "$$dir"/cogworkerd.conf*; \
	else \
	    echo "install: $$dir is 0750 and its conf 0640; give them to group $(SERVICE_GROUP) on the target host: chgrp -R $(SERVICE_GROUP) $(SYSCONFDIR)/cogworkerd"; \
	fi
