# cogworkerd: a plain Makefile.
#   make            build/cogworkerd and build/cogworkerctl
#   make check      deps, unit tests (Check) and integration tests (real redis-server)
#   make run        deps, then the daemon on conf/dev.conf with a private redis-server
#   make bench      benchmarks (tests/bench), report in build/bench/report.md
#   SANITIZE=address|thread   sanitizer builds (into build/<sanitizer>/)

CC       ?= cc
PKGS     := hiredis libcjson libconfig libsystemd libcrypto
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

# Code shared by the daemon, cogworkerctl and the unit tests.
LIB_SRC  := src/log.c src/util.c src/config.c src/redis.c src/json.c src/job.c src/bookkeeping.c \
            src/handler.c src/cron.c src/scripts.c src/producer.c
DAEMON_SRC := src/main.c src/manager.c src/fetch.c src/fetcher.c src/settle.c \
            src/heartbeat.c src/scheduled.c src/ticker.c src/deathhook.c
CTL_SRC  := $(wildcard src/ctl/*.c)
LUA      := $(wildcard lua/*.lua lua/lib/*.lua)

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/lua_scripts.o
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
CTL_OBJ    := $(CTL_SRC:%.c=$(BUILD)/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all deps check unit integration run bench clean install
all: $(BUILD)/cogworkerd $(BUILD)/cogworkerctl

$(BUILD)/cogworkerd: $(DAEMON_OBJ) $(LIB_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/cogworkerctl: $(CTL_OBJ) $(filter-out $(BUILD)/src/handler.o,$(LIB_OBJ)) $(BUILD)/src/handler.o
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c $(wildcard src/*.h src/ctl/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -c -o $@ $<

# Every lua/*.lua becomes a C string in the binary; "--@include NAME" lines pull in
# lua/lib/NAME.lua, so shared fragments are written once.
$(BUILD)/lua_scripts.c: $(LUA) tools/embed-lua.sh
	@mkdir -p $(dir $@)
	sh tools/embed-lua.sh lua > $@
$(BUILD)/lua_scripts.o: $(BUILD)/lua_scripts.c
	$(CC) $(CFLAGS) -Isrc -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc $(shell pkg-config --cflags check) -o $@ $^ \
	    $(LDFLAGS) $(LDLIBS) $(shell pkg-config --libs check)

deps:
	@sh tools/deps.sh

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: all
	python3 tests/integration/run.py --build $(BUILD) $(if $(JOBS),-j $(JOBS))

check: deps
	$(MAKE) all unit
	$(MAKE) integration

run: deps all
	sh tools/run.sh $(BUILD)

bench: deps all
	python3 tests/bench/bench.py --build $(BUILD)

clean:
	rm -rf build
