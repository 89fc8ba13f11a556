/* SPDX-License-Identifier: MIT */
/* config.h: the conf file (libconfig), validated, with command-line and REDIS_URL overrides. */
#ifndef COGWORKERD_CONFIG_H
#define COGWORKERD_CONFIG_H

#include <stddef.h>
#include "group.h"
#include "jobcg.h"
#include "log.h"

#define DEFAULT_CONF_PATH "/etc/cogworkerd/cogworkerd.conf"

struct argv_list {          /* a NULL-terminated argv (v is never NULL in a loaded conf) */
	char **v;
	int n;
	char *at;               /* "file:line" it was read from, for messages; or NULL */
};

/*
 * A handler's confinement (doc/design.md "Confinement", src/confine.c): what its child is
 * kept from, made in the child between the fork and execve. All off by default.
 */
#define CONFINE_MAX_WRITABLE 32     /* writable_paths: the child's array (confine.c) */

struct confinement {
	char *at;                       /* "<file>:<line>" of its first setting turned on, or NULL */
	int network;                    /* 0: its own network namespace, loopback only; default 1 */
	int private_tmp;                /* its own empty /tmp and /var/tmp (tmpfs) */
	int read_only;                  /* every mount read-only but writable_paths and /dev, /proc, /sys */
	struct argv_list writable_paths;    /* absolute; only with read_only */
	int no_new_privileges;          /* PR_SET_NO_NEW_PRIVS: setuid bits and file caps do nothing */
};

/*
 * Caps per handler (doc/design.md "Caps per handler"): each one is enforced by one cgroup
 * controller (src/cgcaps.c), in the order of enum cap_kind. 0 = no cap.
 */
enum cap_kind { CAP_MEMORY, CAP_CPU, CAP_PIDS, NCAPS };
#define CAP_CPU_PERIOD_US 100000        /* cpu_max's period: the kernel's default, 100 ms */

struct handler_caps {
	/* memory_max: bytes the job's processes may hold (more and the kernel kills one);
	 * cpu_max: microseconds of CPU per CAP_CPU_PERIOD_US of wall time ("50%" = 50000,
	 * "2" = 200000); pids_max: processes and threads at once. */
	long long max[NCAPS];
	int dead_on_oom;                /* a job killed for memory goes straight to dead */
	char *where[NCAPS];             /* "<file>:<line>" of each cap set, else NULL */
};

struct handler {
	char *class_name;               /* "*" = fallback for every class without its own */
	struct argv_list command;
	int args_as_argv;
	double timeout;                 /* seconds, 0 = none */
	double kill_grace;              /* default 10 */
	struct argv_list env;           /* "NAME=value" */
	struct argv_list env_passthrough;   /* names copied from the daemon's environment */
	char *cwd;                      /* NULL = inherit */
	char *user, *group;             /* NULL = unchanged (only honoured when root) */
	int *dead_codes, ndead;
	int *discard_codes, ndiscard;
	size_t output_tail;             /* bytes of stderr kept for error_message; default 4096 */
	long long output_keep;          /* bytes of each run's output kept in Redis; 0 = none;
	                                 * default: the global output_keep */
	long long rlimit_cpu, rlimit_as, rlimit_nofile, rlimit_nproc;  /* -1 = unset */
	struct argv_list on_death;      /* empty = none */
	double on_death_timeout;        /* default: the global on_death_timeout (30) */
	/* Limits (doc/protocol.md §7.30): 0 = none. max_concurrency counts this process's
	 * runs of the handler, fleet_concurrency every process's (leases in Redis); the rate
	 * limit allows rate_limit_n starts per rate_limit_window seconds fleet-wide. */
	int max_concurrency;
	int fleet_concurrency;
	int rate_limit_n;
	double rate_limit_window;       /* seconds, > 0 when rate_limit_n > 0 */
	/* Fair share (§7.35): group_by names where a job's group is read (NULL = no groups;
	 * group_path is its parsed form); group_concurrency jobs of one group at once fleet-wide
	 * and group_rate_n starts per group_rate_window seconds per group, 0 = none. */
	char *group_by;
	struct group_path group_path;
	int group_concurrency;
	int group_rate_n;
	double group_rate_window;       /* seconds, > 0 when group_rate_n > 0 */
	/* Deadlines (§7.31): expires_in seconds after enqueued_at, 0 = none; an expired job is
	 * buried as Cogworker::JobExpired, or dropped when expired_discard. */
	double expires_in;
	int expired_discard;
	int on_orphan_dead;             /* on_orphan = "dead": at most once (§7.32) */
	/* Warm handlers (doc/design.md "Warm handlers", doc/protocol.md §1.2): the command runs
	 * as long-lived processes fed one job at a time over fd 3. */
	int warm;
	double warm_start_timeout;      /* seconds from spawn to "ready"; default 30 */
	long long warm_max_jobs;        /* jobs per process (less a jitter), 0 = no limit */
	long long warm_max_rss;         /* bytes of RSS checked after each job, 0 = no limit */
	double warm_max_age;            /* seconds, 0 = no limit */
	double warm_idle_timeout;       /* an idle process exits after this; default 300 */
	double warm_prefetch_hold;      /* seconds a job taken while one of this handler's runs
	                                 * may wait for it (fetcher.c); default 0.05, 0 = none */
	struct confinement confine;
	struct handler_caps caps;
	int line;                       /* where it was declared, for messages */
};

struct periodic_entry {
	char *cron;
	char *class_name;
	char *args_json;                /* a JSON array, as written in the conf (default "[]") */
	char *retry_json;               /* JSON text of the entry's retry: "0" by default */
	char *queue;                    /* where its jobs go: "default" unless set */
	int until_executed;
	int line;
	char *where;                    /* "<file>:<line>" of the entry, for warnings */
};

struct redis_addr {
	char *host;
	int port;
};

/*
 * redis.tls (doc/design.md "Redis"): how the rediss:// connections, and the sentinels'
 * with sentinel_tls, are made. Paths resolved against the conf's directory after load.
 */
struct redis_tls {
	char *ca_file;                  /* the CAs to trust; NULL: the system's store */
	char *cert_file, *key_file;     /* a client certificate and its key, or NULL */
	char *server_name;              /* SNI and the name checked; NULL: the host reached */
	int verify;                     /* check the server's certificate (1) */
	char *verify_where;             /* "<file>:<line>" (or the flag) that turned it off */
	struct ssl_ctx_st *ctx;         /* built at load when TLS is used (tls.h); shared */
};

struct redis_conf {
	char *url;                      /* as configured (after REDIS_URL) */
	char *password_file;            /* after load: resolved against the conf's directory */
	double connect_timeout, command_timeout;
	/*
	 * Redis Sentinel (doc/design.md "Redis"): with sentinels set, the primary's address
	 * comes from them and the url only gives the user, password and db.
	 */
	struct argv_list sentinels;     /* "host[:port]" as written; n = 0: no Sentinel */
	char *master_name;              /* the name the sentinels monitor */
	char *sentinel_password;        /* AUTH to the sentinels (or from the file), or NULL */
	char *sentinel_password_file;   /* after load: resolved against the conf's directory */
	int sentinel_tls;               /* the sentinels are reached in TLS too */
	struct redis_addr *sentinel;    /* parsed from sentinels: sentinels.n of them */
	/* parsed from url (+ password_file) */
	char *host;                     /* NULL for unix sockets */
	int port;
	char *path;                     /* unix socket path, or NULL */
	int db;
	char *user;                     /* ACL user, or NULL */
	char *password;                 /* or NULL */
	char *display;                  /* the target without credentials, for logs */
	int use_tls;                    /* rediss:// */
	struct redis_tls tls;
	int url_from_env;               /* REDIS_URL gave the url */
	int url_in_file;                /* the file set redis.url (REDIS_URL may replace it) */
};

struct conf {
	char *path;                     /* file it was read from, or NULL (defaults only) */
	struct redis_conf redis;
	int concurrency;
	char **queues;                  /* weight-expanded: a queue of weight w appears w times */
	int nqueues;
	char **queue_names;             /* each configured queue once, in conf order */
	int nqueue_names;
	int fetch_basic;
	double shutdown_timeout, poll_interval, heartbeat_interval, process_ttl;
	double orphan_threshold, orphan_check_interval;
	int max_orphanings;
	double lost_dependency_threshold;   /* seconds a dependency with no settled record may
	                                     * be found nowhere before the jobs waiting for it
	                                     * are given up on (lostdeps.h); 0 = never */
	double fetch_idle_max_interval;
	long long max_job_bytes;        /* a longer job is buried unread (doc/protocol.md §7.9);
	                                 * 0 = no limit; 16 MiB */
	double unique_lock_ttl;
	int periodic_catch_up, periodic_replace;
	double tick_interval;           /* the ticker's catch-up look, seconds (default 1) */
	char *tick_interval_where;      /* "<file>:<line>" when the file sets it, else NULL */
	enum log_level log_level;
	enum log_format log_format;     /* text (default) or json */
	char *metrics_listen;           /* "" = off */
	double status_expiration;       /* 0 = off */
	double history_retention_days;  /* 0 = history off; else days kept (a fraction: tests) */
	int history_max_entries, history_daily_retention_days;
	long long output_keep;          /* bytes of each run's output kept; 0 = off; 64 KiB */
	double output_ttl;              /* seconds the kept output lives; 7 days */
	int output_runs;                /* runs kept per job (the newest); 10 */
	struct handler *handlers;
	int nhandlers;
	struct periodic_entry *periodic;
	int nperiodic;
	struct argv_list *on_death;     /* global on_death commands, in conf order */
	int non_death;
	double on_death_timeout;        /* global on_death timeout, default 30 */
	enum jobcg_mode containment;    /* how a job's processes are contained (jobcg.h); auto */
	char *containment_where;        /* "<file>:<line>" when the file sets it, else NULL */
};

/* Command-line overrides, applied on top of the file (command line > file > defaults). */
struct conf_overrides {
	int concurrency;                /* 0 = none */
	char **queues;                  /* "name[,weight]" strings from -q, or NULL */
	int nqueues;
	/* cogworkerctl's --tls-* flags: each replaces its redis.tls setting when set */
	const char *tls_ca_file, *tls_cert_file, *tls_key_file, *tls_server_name;
	int tls_no_verify;
};

/*
 * Load and validate path (NULL: defaults only, then REDIS_URL). On error returns -1 and
 * writes one line "<file>:<line>: <what is wrong>" (or "<file>: ..." when no line applies)
 * into err. On success 0; the conf must be released with conf_free.
 */
int conf_load(const char *path, const struct conf_overrides *ov, struct conf *out,
              char *err, size_t errlen);
void conf_free(struct conf *c);
/* Put back into a reloaded conf the settings that take effect only at a restart. */
void conf_keep_restart_settings(struct conf *fresh, const struct conf *running);

/*
 * What a conf that loads may still get wrong, one line each, "<file>:<line>: <text>": a
 * periodic entry whose class has no handler here ("periodic job class X can't be
 * resolved") or whose queue this conf does not read, a setting whose meaning changed
 * (tick_interval), and a warm handler's rlimit that does not mean what it would for a cold
 * one (rlimit_cpu over a process's life; warm_max_rss above rlimit_as). --check prints them and the daemon logs them at start and reload; none
 * is an error (another process of the fleet may run the class, or read the queue).
 * Returns how many, in *out (free with conf_warnings_free).
 */
int conf_warnings(const struct conf *c, char ***out);
void conf_warnings_free(char **v, int n);

/* The handler for a class: its own, else the "*" fallback, else NULL. */
const struct handler *conf_find_handler(const struct conf *c, const char *class_name);

/*
 * Parse "redis://[user[:password]@]host[:port][/db]" (user and password percent-decoded;
 * port 6379 and db 0 by default; IPv6 as [addr]) or "unix:///path[?db=N]" into rc's parsed
 * fields (host, port, path, db, user, password, display), replacing earlier ones; url,
 * password_file and the timeouts are left alone. On error returns -1, rc unchanged, and a
 * message that never repeats the url (it may hold a password).
 */
int redis_url_parse(const char *url, struct redis_conf *rc, char *err, size_t errlen);
/* Free every string of rc (the password is wiped first) and zero it. */
void redis_conf_clear(struct redis_conf *rc);
/* A deep copy of src into dst (each connection keeps its own: a reload may free src). */
void redis_conf_copy(struct redis_conf *dst, const struct redis_conf *src);
/*
 * With rc->sentinels set: parse them into rc->sentinel and make rc->display name the
 * master and its sentinels. A url that is not redis:// is refused (the sentinels give a
 * TCP address). 0, or -1 with the reason in err.
 */
int redis_sentinels_parse(struct redis_conf *rc, char *err, size_t errlen);
/* "host", "host:port" or "[v6addr]:port" (port 26379 when left out): NULL when valid, else
 * what is wrong with it; with host non-NULL the parts are returned (*host malloc'd). */
const char *redis_addr_parse(const char *s, char **host, int *port);

/*
 * A rate limit as the conf writes it, "N/W" with W in seconds and an optional unit s, m or h
 * ("10/60s", "100/1m", "5/2.5s"): 0 with *n (1..1000000) and *window (seconds, > 0, at
 * most a day); -1 when it does not read so.
 */
int conf_parse_rate(const char *s, int *n, double *window);
/* memory_max's grammar: bytes, or a number with K, M, G or T (powers of 1024, "iB" or "B"
 * allowed after them: "256M", "1.5G", "512MiB"); cpu_max's: "50%" of one CPU or a number of
 * CPUs ("2", "0.5"), as microseconds per CAP_CPU_PERIOD_US. 0, or -1 when s is not one. */
int conf_parse_bytes(const char *s, long long *out);
int conf_parse_cpu(const char *s, long long *us);
/* The setting of a cap ("memory_max", …). */
const char *conf_cap_name(enum cap_kind k);

/*
 * The one rule for a queue name, wherever one is given (the queues setting, a periodic
 * entry's queue, cogworkerctl's arguments): QUEUE_NAME_RULE. A comma would read as a
 * weight in the queues setting, and a space or control character could not be written
 * there or read back from a log line. queue_name_ok: 1 when the len bytes at s keep it.
 */
#define QUEUE_NAME_RULE "a queue name is not empty and has no spaces, control characters " \
                        "or commas"
int queue_name_ok(const char *s, size_t len);

/* Derived TTLs (doc/protocol.md §7.17): whole seconds, rounded up. */
long conf_queued_ttl(const struct conf *c);
long conf_active_ttl(const struct conf *c);

#endif
