/* SPDX-License-Identifier: MIT */
/*
 * state.c: the state the daemon's threads share (state.h).
 *
 * The conf is reference-counted rather than guarded by a lock held while reading: a
 * fetcher keeps its snapshot for the whole run of a job (minutes, maybe), and a reload
 * must not wait for that, nor free a handler a running job still points into. So the
 * current conf holds one reference, every reader takes one, and the last release frees.
 *
 * The records are small arrays searched linearly under D.mu: there are at most
 * `concurrency` entries, and the lock is held only for the search.
 *
 * The thread registry lets /healthz tell a thread that returned (a bug: every loop is
 * meant to run until the stop) from one that is alive, without the threads reporting in.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "state.h"

struct daemon D;

/* ---- the conf, reference-counted ---- */

struct conf_ref {
	struct conf c;              /* first: a struct conf * is a struct conf_ref * */
	int refs;
};
static struct conf_ref *current_conf;
static pthread_mutex_t conf_mu = PTHREAD_MUTEX_INITIALIZER;

struct conf *conf_acquire(void)
{
	pthread_mutex_lock(&conf_mu);
	struct conf_ref *r = current_conf;
	r->refs++;
	pthread_mutex_unlock(&conf_mu);
	return &r->c;
}

void conf_release(struct conf *c)
{
	struct conf_ref *r = (struct conf_ref *)c;
	pthread_mutex_lock(&conf_mu);
	int gone = --r->refs == 0;
	pthread_mutex_unlock(&conf_mu);
	if (gone) {
		conf_free(&r->c);
		free(r);
	}
}

/* cppcheck-suppress constParameter ; the new conf takes over what *c owns */
void conf_install(struct conf *c)
{
	struct conf_ref *r = xcalloc(1, sizeof *r);
	r->c = *c;
	r->refs = 1;                /* the "current" reference */
	pthread_mutex_lock(&conf_mu);
	struct conf_ref *old = current_conf;
	current_conf = r;
	pthread_mutex_unlock(&conf_mu);
	if (old)
		conf_release(&old->c);
}

void state_init(struct conf *conf)
{
	pthread_mutex_init(&D.mu, NULL);
	pthread_mutex_init(&D.mode_lock, NULL);
	conf_install(conf);
}

int sleep_unless_stopping(double s)
{
	double end = mono_now() + s;
	while (!atomic_load(&D.stopping)) {
		double left = end - mono_now();
		if (left <= 0)
			return 0;
		sleep_seconds(left < 0.1 ? left : 0.1);
	}
	return 1;
}

/* ---- kickable sleeps ---- */

void wakeup_init(struct wakeup *w)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, &a);
	pthread_condattr_destroy(&a);
	w->kicked = 0;
}

int wakeup_wait(struct wakeup *w, double s)
{
	double end = mono_now() + (s > 0 ? s : 0);
	pthread_mutex_lock(&w->mu);
	while (!w->kicked) {
		double left = end - mono_now();
		if (left <= 0)
			break;
		/* Nobody kicks for the stop (the loops that sleep here are abandoned then): a
		 * stopping process only needs them not to start anything new, soon. */
		if (atomic_load(&D.stopping) && left > 0.25)
			left = 0.25;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long ns = ts.tv_nsec + (long)((left - (double)(long)left) * 1e9);
		ts.tv_sec += (time_t)left + ns / 1000000000L;
		ts.tv_nsec = ns % 1000000000L;
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		if (atomic_load(&D.stopping))
			break;
	}
	int kicked = w->kicked;
	w->kicked = 0;
	pthread_mutex_unlock(&w->mu);
	return kicked;
}

void wakeup_kick(struct wakeup *w)
{
	pthread_mutex_lock(&w->mu);
	w->kicked = 1;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* ---- in-memory records ---- */

/* Who a record stands for: a performing run by the very text it borrowed, a running payload
 * by digest and length (taken before the lock: it reads the whole payload). */
struct who {
	const char *raw;
	int borrowed;
	uint64_t digest;
	size_t len;
};

static struct who who_of(const char *raw, int borrowed)
{
	struct who w = { raw, borrowed, 0, 0 };
	if (!borrowed) {
		w.len = strlen(raw);
		w.digest = bytes_digest(raw, w.len);
	}
	return w;
}

static struct raw_count *find(struct raw_count *v, int n, const struct who *w)
{
	for (int i = 0; i < n; i++)
		if (w->borrowed ? v[i].raw == w->raw
		    : !v[i].raw && v[i].digest == w->digest && v[i].len == w->len)
			return &v[i];
	return NULL;
}

/* A running record is counted per distinct payload; a performing one borrows raw and is
 * one per run (its text must stay valid while another run of the same payload ends). */
static void count_add(struct raw_count **v, int *n, int *cap, const char *raw, int borrow,
                      const char *jid, const char *pjid, int until_executed)
{
	struct who w = who_of(raw, borrow);
	pthread_mutex_lock(&D.mu);
	struct raw_count *e = borrow ? NULL : find(*v, *n, &w);
	if (e) {
		e->count++;
	} else {
		if (*n == *cap) {
			*cap = *cap ? *cap * 2 : 16;
			*v = xrealloc(*v, (size_t)*cap * sizeof **v);
		}
		e = &(*v)[(*n)++];
		memset(e, 0, sizeof *e);
		e->raw = borrow ? raw : NULL;
		e->digest = w.digest;
		e->len = w.len;
		e->count = 1;
		e->jid = jid ? xstrdup(jid) : NULL;
		e->pjid = pjid ? xstrdup(pjid) : NULL;
		e->until_executed = until_executed;
	}
	pthread_mutex_unlock(&D.mu);
}

/* The array is read under the lock: another thread's count_add may move it (realloc). */
static void count_remove(struct raw_count **vp, int *n, const char *raw, int borrowed)
{
	struct who w = who_of(raw, borrowed);
	pthread_mutex_lock(&D.mu);
	struct raw_count *v = *vp;
	struct raw_count *e = find(v, *n, &w);
	if (e && --e->count == 0) {
		free(e->jid);
		free(e->pjid);
		*e = v[--(*n)];
	}
	pthread_mutex_unlock(&D.mu);
}

struct cancellable {
	char *jid;
	atomic_int *flag;
};

void cancel_register(const char *jid, atomic_int *flag)
{
	pthread_mutex_lock(&D.mu);
	if (D.ncancellable == D.capcancellable) {
		D.capcancellable = D.capcancellable ? D.capcancellable * 2 : 16;
		D.cancellable = xrealloc(D.cancellable,
		                         (size_t)D.capcancellable * sizeof *D.cancellable);
	}
	atomic_store(flag, CANCEL_NONE);
	D.cancellable[D.ncancellable++] = (struct cancellable){ xstrdup(jid), flag };
	pthread_mutex_unlock(&D.mu);
}

void cancel_withdraw(const atomic_int *flag)
{
	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.ncancellable; i++)
		if (D.cancellable[i].flag == flag) {
			free(D.cancellable[i].jid);
			D.cancellable[i] = D.cancellable[--D.ncancellable];
			break;
		}
	pthread_mutex_unlock(&D.mu);
}

int cancel_request(const char *jid, int how)
{
	int n = 0;
	pthread_mutex_lock(&D.mu);
	for (int i = 0; i < D.ncancellable; i++)
		if (strcmp(D.cancellable[i].jid, jid) == 0) {
			int none = CANCEL_NONE;
			/* The first request decides: a second one (dead after discard, or the
			 * same twice) finds the run cancelled already. */
			atomic_compare_exchange_strong(D.cancellable[i].flag, &none, how);
			n++;
		}
	pthread_mutex_unlock(&D.mu);
	return n;
}

void running_add(const char *raw)
{
	count_add(&D.running, &D.nrunning, &D.caprunning, raw, 0, NULL, NULL, 0);
}

void running_remove(const char *raw)
{
	count_remove(&D.running, &D.nrunning, raw, 0);
}

int running_has(const char *raw)
{
	struct who w = who_of(raw, 0);
	pthread_mutex_lock(&D.mu);
	int has = find(D.running, D.nrunning, &w) != NULL;
	pthread_mutex_unlock(&D.mu);
	return has;
}

void performing_add(const char *raw, const char *jid, const char *pjid, int until_executed)
{
	count_add(&D.performing, &D.nperforming, &D.capperforming, raw, 1, jid, pjid,
	          until_executed);
}

void performing_remove(const char *raw)
{
	count_remove(&D.performing, &D.nperforming, raw, 1);
}

/* ---- thread registry ---- */

struct tracked {
	struct tracked *next;
	const char *name;
	void *(*fn)(void *);
	void *arg;
	atomic_int exited;
};
static struct tracked *tracked_threads;
static pthread_mutex_t tracked_mu = PTHREAD_MUTEX_INITIALIZER;

static void mark_exited(void *arg)
{
	atomic_store(&((struct tracked *)arg)->exited, 1);
}

static void *tracked_main(void *arg)
{
	struct tracked *t = arg;
	void *ret;
	pthread_cleanup_push(mark_exited, t);
	ret = t->fn(t->arg);
	pthread_cleanup_pop(1);
	return ret;
}

int thread_start(pthread_t *th, const pthread_attr_t *attr, const char *name,
                 void *(*fn)(void *), void *arg)
{
	struct tracked *t = xcalloc(1, sizeof *t);
	t->name = name;
	t->fn = fn;
	t->arg = arg;
	pthread_mutex_lock(&tracked_mu);
	t->next = tracked_threads;
	tracked_threads = t;
	pthread_mutex_unlock(&tracked_mu);
	int rc = pthread_create(th, attr, tracked_main, t);
	if (rc != 0)
		atomic_store(&t->exited, 1);
	return rc;
}

int thread_start_detached(const char *name, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = thread_start(&t, &attr, name, fn, arg);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

int threads_exited(struct sbuf *why)
{
	int n = 0;
	pthread_mutex_lock(&tracked_mu);
	for (struct tracked *t = tracked_threads; t; t = t->next)
		if (atomic_load(&t->exited)) {
			sb_printf(why, "thread %s is not running\n", t->name);
			n++;
		}
	pthread_mutex_unlock(&tracked_mu);
	return n;
}
