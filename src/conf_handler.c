/* SPDX-License-Identifier: MIT */
/*
 * conf_handler.c: the settings of one handler (a group of the handlers list): their
 * defaults, what they take, how they are read, and the checks that concern one handler.
 * conf_settings.c keeps the other settings; the handlers list is one row of its top-level
 * table, read here (conf_read_handlers).
 *
 * - A handler group is walked member by member against handler_specs (apply_group,
 *   conf_read.c): an unknown name is an error. A new handler setting is a row there, a
 *   field in struct handler (config.h), a default in handler_defaults when 0 is not it,
 *   and a free in conf_handler_free when it owns memory.
 * - The settings with a grammar of their own have a reader here: rate_limit, expired,
 *   on_orphan, and the caps (memory_max, cpu_max, pids_max; doc/design.md "Caps per
 *   handler"), whose parsers (conf_parse_bytes, conf_parse_cpu, conf_parse_rate) are
 *   public: fleetlimits.c reads a rate written by another daemon.
 * - What concerns one handler (a class named twice, an exit code both dead and discarded,
 *   args_as_argv on a warm handler, the confinement settings between themselves) is checked
 *   once its group is read, and blames a line inside it.
 *
 * The table is also part of the list of names the man page (man/cogworkerd.conf.5) must
 * document: an integration test (test_service.py) reads the names from every conf_*.c file.
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libconfig.h>

#include "config.h"
#include "config_int.h"
#include "util.h"

#define MAX_OUTPUT_TAIL     (1024 * 1024)

/* --- string checks ---------------------------------------------------------------------- */

static const char *check_env(const char *s)
{
	const char *eq = strchr(s, '=');
	return (!eq || eq == s) ? "is not NAME=value" : NULL;
}

static const char *check_env_name(const char *s)
{
	return (!*s || strchr(s, '=')) ? "is not a variable name" : NULL;
}

static const char *check_abs_path(const char *s)
{
	return s[0] == '/' ? NULL : "is not an absolute path";
}

/* A writable path: absolute, without "." or ".." components (so that what it is under,
 * /tmp for private_tmp, is what it says), and not / itself. */
static const char *check_writable_path(const char *s)
{
	if (s[0] != '/')
		return "is not an absolute path";
	for (const char *p = s; *p; p++)
		if (p[0] == '/' && p[1] == '.' &&
		    (p[2] == '/' || !p[2] || (p[2] == '.' && (p[3] == '/' || !p[3]))))
			return "has a . or .. component (write the path itself)";
	if (strspn(s, "/") == strlen(s))
		return "is the whole file system: leave read_only off instead";
	return NULL;
}

/* --- rate_limit, expired, on_orphan ------------------------------------------------------ */

int conf_parse_rate(const char *s, int *n, double *window)
{
	char *end;
	errno = 0;
	long count = isdigit((unsigned char)*s) ? strtol(s, &end, 10) : 0;
	if (count < 1 || count > 1000000 || errno || *end != '/' ||
	    !isdigit((unsigned char)end[1]))
		return -1;
	const char *w = end + 1;
	double secs = strtod(w, &end);
	double unit = 1;
	if (*end == 's' || *end == 'm' || *end == 'h') {
		unit = *end == 'm' ? 60 : *end == 'h' ? 3600 : 1;
		end++;
	}
	if (*end || !(secs > 0) || secs * unit > 86400)
		return -1;
	*n = (int)count;
	*window = secs * unit;
	return 0;
}

/* A string that must be one of words (NULL-terminated); *index = its position. */
static int read_word(struct loader *L, const config_setting_t *s, const char *name,
                     const char *const *words, int *index)
{
	const char *v = config_setting_type(s) == CONFIG_TYPE_STRING
	                ? config_setting_get_string(s) : NULL;
	for (int i = 0; v && words[i]; i++)
		if (strcmp(v, words[i]) == 0) {
			*index = i;
			return 0;
		}
	char list[128] = "";
	for (int i = 0; words[i]; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? " or " : "",
		         words[i]);
	return failf(L, s, "%s must be %s", name, list);
}

/* "N/W" into *n and *w ("" = none: 0 and 0), rate_limit's grammar for both rate settings. */
static int read_rate(struct loader *L, const config_setting_t *s, const char *name, int *n,
                     double *w)
{
	const char *v = NULL;
	if (read_string(L, s, name, &v) < 0)
		return -1;
	if (!*v) {
		*n = 0;
		*w = 0;
		return 0;
	}
	if (conf_parse_rate(v, n, w) != 0)
		return failf(L, s, "%s: '%s' is not N/W, starts per window (e.g. \"10/60s\", "
		             "\"100/1m\"; N from 1 to 1000000, W up to a day)", name, v);
	return 0;
}

static int read_rate_limit(struct loader *L, const config_setting_t *s, const char *name,
                           void *base)
{
	struct handler *h = base;
	return read_rate(L, s, name, &h->rate_limit_n, &h->rate_limit_window);
}

static int read_group_rate_limit(struct loader *L, const config_setting_t *s,
                                 const char *name, void *base)
{
	struct handler *h = base;
	return read_rate(L, s, name, &h->group_rate_n, &h->group_rate_window);
}

/* group_by: its grammar is group.c's (group_path_parse), so the daemon can't read a path
 * the conf accepted differently. */
static int read_group_by(struct loader *L, const config_setting_t *s, const char *name,
                         void *base)
{
	struct handler *h = base;
	const char *v = NULL, *err = NULL;
	if (read_string(L, s, name, &v) < 0)
		return -1;
	group_path_free(&h->group_path);
	free(h->group_by);
	h->group_by = NULL;
	if (!*v)
		return 0;
	if (group_path_parse(v, &h->group_path, &err) != 0)
		return failf(L, s, "%s: '%s' is not a path to the job's group: %s", name, v, err);
	h->group_by = xstrdup(v);
	return 0;
}

static int read_expired(struct loader *L, const config_setting_t *s, const char *name,
                        void *base)
{
	static const char *const words[] = { "dead", "discard", NULL };
	return read_word(L, s, name, words, &((struct handler *)base)->expired_discard);
}

static int read_on_orphan(struct loader *L, const config_setting_t *s, const char *name,
                          void *base)
{
	static const char *const words[] = { "requeue", "dead", NULL };
	return read_word(L, s, name, words, &((struct handler *)base)->on_orphan_dead);
}

/* --- caps (doc/design.md "Caps per handler") --------------------------------------------- */

#define MIN_MEMORY_MAX      (1LL << 20)         /* nothing starts in less than a MiB */
#define MAX_PIDS_MAX        4194304             /* the kernel's PID_MAX_LIMIT */
#define MAX_CPUS            1000000             /* cpu_max in CPUs, far above any host */

/* Each cap's setting, in enum cap_kind order (the table rows below spell the same names). */
static const char *const cap_names[NCAPS] = { "memory_max", "cpu_max", "pids_max" };

const char *conf_cap_name(enum cap_kind k)
{
	return k < NCAPS ? cap_names[k] : "?";
}

/* A decimal number at s (digits, an optional fraction); its end in *end, or -1. */
static int read_decimal(const char *s, double *v, const char **end)
{
	const char *p = s;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.' && isdigit((unsigned char)p[1]))
		for (p++; isdigit((unsigned char)*p); p++)
			;
	if (p == s)
		return -1;
	*v = strtod(s, NULL);
	*end = p;
	return 0;
}

int conf_parse_bytes(const char *s, long long *out)
{
	static const char units[] = "KMGT";
	const char *end, *u;
	double v;
	if (read_decimal(s, &v, &end) < 0)
		return -1;
	if (*end == ' ')
		end++;
	double mult = 1;
	if (*end && (u = strchr(units, *end))) {
		for (const char *k = units; k <= u; k++)
			mult *= 1024;
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
	} else if (*end == 'B') {
		end++;
	}
	/* Whole bytes only, below 2^62 (the kernel's largest limit is about 2^63). */
	if (*end || (mult == 1 && strchr(s, '.')) || v * mult >= 4.6e18)
		return -1;
	*out = (long long)(v * mult);
	return 0;
}

int conf_parse_cpu(const char *s, long long *us)
{
	const char *end;
	double v;
	if (read_decimal(s, &v, &end) < 0)
		return -1;
	if (*end == '%') {
		end++;
		v /= 100;
	}
	if (*end || v > MAX_CPUS)
		return -1;
	*us = (long long)(v * CAP_CPU_PERIOD_US + 0.5);
	return 0;
}

/*
 * memory_max, cpu_max, pids_max: the value and where it was set (the host check blames that
 * line when the controller is missing). memory_max is bytes (an integer) or a size with a
 * unit; cpu_max a share ("50%") or a number of CPUs ("2", 1.5); pids_max an integer.
 */
static int read_cap(struct loader *L, const config_setting_t *s, const char *name, void *base)
{
	struct handler_caps *caps = &((struct handler *)base)->caps;
	const char *short_name = strrchr(name, '.') ? strrchr(name, '.') + 1 : name;
	int k = 0, t = config_setting_type(s);
	while (k < NCAPS && strcmp(cap_names[k], short_name) != 0)
		k++;
	long long v = 0;
	const char *str = t == CONFIG_TYPE_STRING ? config_setting_get_string(s) : NULL;
	switch (k) {
	case CAP_MEMORY:
		if (str ? conf_parse_bytes(str, &v) < 0 : read_integer(L, s, name, &v) < 0)
			return str ? failf(L, s, "%s: \"%s\" is not a size: bytes, or a number with K, "
			                   "M, G or T (powers of 1024), e.g. \"256M\" or \"1G\"", name, str)
			           : -1;
		if (v < MIN_MEMORY_MAX)
			return failf(L, s, "%s must be at least 1M (%lld bytes)", name, MIN_MEMORY_MAX);
		break;
	case CAP_CPU: {
		double d = 0;
		char buf[64] = "";
		if (!str && read_number(L, s, name, &d) == 0)
			snprintf(buf, sizeof buf, "%.6g", d);
		else if (!str)
			return -1;
		if (conf_parse_cpu(str ? str : buf, &v) < 0)
			return failf(L, s, "%s: \"%s\" is not a CPU share: a percentage of one CPU "
			             "(\"50%%\") or a number of CPUs (\"2\", \"0.5\")", name,
			             str ? str : buf);
		if (v < CAP_CPU_PERIOD_US / 100)
			return failf(L, s, "%s must be at least 1%% of a CPU", name);
		break;
	}
	case CAP_PIDS:
		if (read_integer(L, s, name, &v) < 0)
			return -1;
		if (v < 1 || v > MAX_PIDS_MAX)
			return failf(L, s, "%s must be an integer from 1 to %d", name, MAX_PIDS_MAX);
		break;
	default:
		return failf(L, s, "%s: internal error (not a cap)", name);
	}
	caps->max[k] = v;
	free(caps->where[k]);
	caps->where[k] = setting_where(L, s);
	return 0;
}

#define H(f) offsetof(struct handler, f)
static const struct spec handler_specs[] = {
	{ .name = "class", .kind = K_STRING, .off = H(class_name), .flags = F_NONEMPTY },
	{ .name = "command", .kind = K_ARGV, .off = H(command), .flags = F_NONEMPTY },
	{ .name = "args_as_argv", .kind = K_BOOL, .off = H(args_as_argv) },
	{ .name = "timeout", .kind = K_SECONDS, .off = H(timeout), .max = MAX_SECONDS },
	{ .name = "kill_grace", .kind = K_SECONDS, .off = H(kill_grace), .max = MAX_SECONDS },
	{ .name = "env", .kind = K_ARGV, .off = H(env), .check = check_env },
	{ .name = "env_passthrough", .kind = K_ARGV, .off = H(env_passthrough),
	  .check = check_env_name },
	{ .name = "cwd", .kind = K_OPTSTR, .off = H(cwd), .check = check_abs_path },
	{ .name = "user", .kind = K_OPTSTR, .off = H(user) },
	{ .name = "group", .kind = K_OPTSTR, .off = H(group) },
	{ .name = "dead_exit_codes", .kind = K_CODES, .off = H(dead_codes), .off2 = H(ndead) },
	{ .name = "discard_exit_codes", .kind = K_CODES, .off = H(discard_codes),
	  .off2 = H(ndiscard) },
	{ .name = "output_tail", .kind = K_SIZE, .off = H(output_tail), .max = MAX_OUTPUT_TAIL },
	{ .name = "output_keep", .kind = K_LLONG, .off = H(output_keep), .max = MAX_OUTPUT_KEEP },
	{ .name = "rlimit_cpu", .kind = K_LLONG, .off = H(rlimit_cpu) },
	{ .name = "rlimit_as", .kind = K_LLONG, .off = H(rlimit_as) },
	{ .name = "rlimit_nofile", .kind = K_LLONG, .off = H(rlimit_nofile) },
	{ .name = "rlimit_nproc", .kind = K_LLONG, .off = H(rlimit_nproc) },
	{ .name = "on_death", .kind = K_ARGV, .off = H(on_death) },
	{ .name = "on_death_timeout", .kind = K_SECONDS, .off = H(on_death_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "max_concurrency", .kind = K_INT, .off = H(max_concurrency),
	  .max = MAX_CONCURRENCY },
	{ .name = "fleet_concurrency", .kind = K_INT, .off = H(fleet_concurrency),
	  .max = 1000000 },
	{ .name = "rate_limit", .kind = K_CUSTOM, .read = read_rate_limit },
	{ .name = "group_by", .kind = K_CUSTOM, .read = read_group_by },
	{ .name = "group_concurrency", .kind = K_INT, .off = H(group_concurrency),
	  .max = 1000000 },
	{ .name = "group_rate_limit", .kind = K_CUSTOM, .read = read_group_rate_limit },
	{ .name = "expires_in", .kind = K_SECONDS, .off = H(expires_in), .max = MAX_SECONDS },
	{ .name = "expired", .kind = K_CUSTOM, .read = read_expired },
	{ .name = "on_orphan", .kind = K_CUSTOM, .read = read_on_orphan },
	{ .name = "warm", .kind = K_BOOL, .off = H(warm) },
	{ .name = "warm_start_timeout", .kind = K_SECONDS, .off = H(warm_start_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "warm_max_jobs", .kind = K_LLONG, .off = H(warm_max_jobs) },
	{ .name = "warm_max_rss", .kind = K_LLONG, .off = H(warm_max_rss) },
	{ .name = "warm_max_age", .kind = K_SECONDS, .off = H(warm_max_age), .max = MAX_SECONDS },
	{ .name = "warm_idle_timeout", .kind = K_SECONDS, .off = H(warm_idle_timeout),
	  .max = MAX_SECONDS, .flags = F_EXCL_MIN },
	{ .name = "warm_prefetch_hold", .kind = K_SECONDS, .off = H(warm_prefetch_hold),
	  .max = 60 },
	/* Confinement (doc/design.md "Confinement"); checked together in confinement_rules. */
	{ .name = "network", .kind = K_BOOL, .off = H(confine.network) },
	{ .name = "private_tmp", .kind = K_BOOL, .off = H(confine.private_tmp) },
	{ .name = "read_only", .kind = K_BOOL, .off = H(confine.read_only) },
	{ .name = "writable_paths", .kind = K_ARGV, .off = H(confine.writable_paths),
	  .check = check_writable_path },
	{ .name = "no_new_privileges", .kind = K_BOOL, .off = H(confine.no_new_privileges) },
	{ .name = "memory_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "cpu_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "pids_max", .kind = K_CUSTOM, .read = read_cap },
	{ .name = "dead_on_oom", .kind = K_BOOL, .off = H(caps.dead_on_oom) },
};
#undef H

void conf_handler_free(struct handler *h)
{
	free(h->class_name);
	free(h->group_by);
	group_path_free(&h->group_path);
	argv_free(&h->command);
	argv_free(&h->env);
	argv_free(&h->env_passthrough);
	free(h->cwd);
	free(h->user);
	free(h->group);
	free(h->dead_codes);
	free(h->discard_codes);
	argv_free(&h->on_death);
	free(h->confine.at);
	argv_free(&h->confine.writable_paths);
	for (int k = 0; k < NCAPS; k++)
		free(h->caps.where[k]);
	memset(h, 0, sizeof *h);
}

static void handler_defaults(struct handler *h, int line)
{
	memset(h, 0, sizeof *h);
	h->kill_grace = 10;
	h->output_tail = 4096;
	h->rlimit_cpu = h->rlimit_as = h->rlimit_nofile = h->rlimit_nproc = -1;
	h->on_death_timeout = -1;       /* unset: the global on_death_timeout, see finish() */
	h->output_keep = -1;            /* unset: the global output_keep, see finish() */
	h->warm_start_timeout = 30;
	h->warm_max_jobs = 10000;
	h->warm_idle_timeout = 300;
	h->warm_prefetch_hold = 0.05;
	h->confine.network = 1;
	h->line = line;
}

/* Is path p at or under dir? */
static int path_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(p, dir, n) == 0 && (p[n] == '/' || !p[n]);
}

/*
 * The confinement settings of handler h (group g) between themselves; where the first one
 * turned on was written goes into h->confine.at, for what --check finds later
 * (confine_check_conf).
 */
static int confinement_rules(struct loader *L, const config_setting_t *g, struct handler *h)
{
	static const char *const dirs[] = { "/tmp", "/var/tmp", "/dev/shm" };
	struct confinement *cf = &h->confine;
	const config_setting_t *wp = config_setting_get_member(g, "writable_paths");

	if (wp && !cf->read_only)
		return failf(L, wp, "handler '%s': writable_paths needs read_only = true (without "
		             "it every path the user may write is writable)", h->class_name);
	if (cf->writable_paths.n > CONFINE_MAX_WRITABLE)
		return failf(L, wp, "handler '%s': at most %d writable_paths", h->class_name,
		             CONFINE_MAX_WRITABLE);
	for (int i = 0; cf->private_tmp && i < cf->writable_paths.n; i++)
		for (size_t k = 0; k < sizeof dirs / sizeof *dirs; k++)
			if (path_under(cf->writable_paths.v[i], dirs[k]))
				return failf(L, wp, "handler '%s': writable path %s is under %s, which "
				             "private_tmp replaces with the job's own (writable) one",
				             h->class_name, cf->writable_paths.v[i], dirs[k]);
	int n = config_setting_length(g);
	for (int i = 0; i < n && !cf->at; i++) {
		const config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
		const char *nm = config_setting_name(s);
		if ((!strcmp(nm, "network") && !cf->network) ||
		    (!strcmp(nm, "private_tmp") && cf->private_tmp) ||
		    (!strcmp(nm, "read_only") && cf->read_only) ||
		    (!strcmp(nm, "no_new_privileges") && cf->no_new_privileges))
			cf->at = setting_where(L, s);
	}
	return 0;
}

static int read_handler(struct loader *L, const config_setting_t *g, struct conf *c,
                        struct handler *h)
{
	const config_setting_t *cls;

	if (apply_group(L, g, handler_specs, sizeof handler_specs / sizeof *handler_specs,
	                "handler.", h) < 0)
		return -1;
	if (!h->class_name)
		return failf(L, g, "handler without class (use class = \"*\" for a fallback)");
	cls = config_setting_get_member(g, "class");
	if (h->command.n == 0)
		return failf(L, g, "handler '%s' has no command", h->class_name);
	if (!h->command.v[0][0])
		return failf(L, config_setting_get_member(g, "command"),
		             "handler '%s': the command's program must not be empty", h->class_name);
	for (struct handler *o = c->handlers; o < h; o++)
		if (strcmp(o->class_name, h->class_name) == 0)
			return failf(L, cls, "duplicate handler for class '%s' (first at line %d)",
			             h->class_name, o->line);
	for (int i = 0; i < h->ndead; i++)
		for (int j = 0; j < h->ndiscard; j++)
			if (h->dead_codes[i] == h->discard_codes[j])
				return failf(L, config_setting_get_member(g, "discard_exit_codes"),
				             "handler '%s': exit code %d is in both dead_exit_codes and "
				             "discard_exit_codes", h->class_name, h->dead_codes[i]);
	if (!h->group_by && (h->group_concurrency > 0 || h->group_rate_n > 0))
		return failf(L, config_setting_get_member(g, h->group_concurrency > 0
		                                          ? "group_concurrency" : "group_rate_limit"),
		             "handler '%s': a limit per group needs group_by (where a job's group "
		             "is read)", h->class_name);
	/* One process serves many jobs, so its argv can't carry one job's args. */
	if (h->warm && h->args_as_argv)
		return failf(L, config_setting_get_member(g, "args_as_argv"),
		             "handler '%s': args_as_argv can't apply to a warm handler (its process "
		             "serves many jobs; each gets its args in the job message)",
		             h->class_name);
	return confinement_rules(L, g, h);
}

int conf_read_handlers(struct loader *L, const config_setting_t *s, const char *name,
                       void *base)
{
	struct conf *c = base;
	int t = config_setting_type(s), n = config_setting_length(s);

	if (t != CONFIG_TYPE_LIST && !(t == CONFIG_TYPE_ARRAY && n == 0))
		return failf(L, s, "%s must be a list of groups: ( { class = \"X\"; command = "
		             "[ \"/path\" ]; }, ... )", name);
	for (int i = 0; i < n; i++) {
		const config_setting_t *g = config_setting_get_elem(s, (unsigned)i);
		struct handler *h;
		if (config_setting_type(g) != CONFIG_TYPE_GROUP)
			return failf(L, g, "each handler must be a group { class = ...; command = [...]; }");
		c->handlers = xrealloc(c->handlers, (size_t)(c->nhandlers + 1) * sizeof *c->handlers);
		h = &c->handlers[c->nhandlers++];
		handler_defaults(h, (int)config_setting_source_line(g));
		if (read_handler(L, g, c, h) < 0)
			return -1;
	}
	return 0;
}
