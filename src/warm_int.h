/* SPDX-License-Identifier: MIT */
/*
 * warm_int.h: what the three files of warm handlers share, below warm.h's public face.
 *
 * The files stand in levels: warm_proc.c (a process's life: start, reap, kill, retire,
 * RSS) at the bottom, warm_serve.c (one exchange with a process: waiting for "ready",
 * one job's messages, output and timeout) on it, and warm.c (the pool: which process a
 * job goes to, the per-class start backoff, recycling, the tend between jobs) on top.
 * Nothing here is seen outside them.
 */
#ifndef COGWORKERD_WARM_INT_H
#define COGWORKERD_WARM_INT_H

#include <stdatomic.h>
#include <sys/types.h>

#include "handler.h"
#include "handler_int.h"
#include "usage.h"
#include "util.h"
#include "warm.h"
#include "warm_proto.h"

#define WARM_TICK          0.1      /* longest poll sleep: the abort and cancel flags */
#define WARM_READ_CHUNK    65536
#define WARM_DRAIN_SECS    0.1      /* output read after the group is gone */
#define WARM_REAP_WAIT     1.0      /* after SIGKILL, how long we wait for the exit here */
#define WARM_BACKOFF_MIN   0.5
#define WARM_BACKOFF_MAX   30.0
/* Processes in a row that may end before they have read a whole job: past that, the job
 * itself is the likely cause (it kills what reads it) and fails as a warm fault. */
#define WARM_DELIVERY_TRIES 3
/* EOF on fd 3 is how a dying process looks a moment before its exit does: it is a
 * protocol error only when the process is still there this much later. */
#define WARM_EOF_GRACE     0.5
/* The longest a fetcher with warm processes parks before it looks at them again (a reload
 * that changed their handler, one that died idle): one more blocking fetch per 5 s. */
#define WARM_TEND_IDLE     5.0

struct warm_proc {
	pid_t pid;
	int pidfd;                  /* -1: waitpid(WNOHANG) */
	int sock;                   /* our end of fd 3, non-blocking */
	struct outpipes *o;
	char *rbuf;                 /* what the socket gave that is not a whole line yet */
	size_t rlen, rcap;
	char *cls;
	struct sbuf print;          /* what it was started from (fingerprint) */
	char tag[96];               /* "warm Cls pid=N": its output between jobs */
	struct run_request idle_req;
	double born, used;          /* monotonic: spawned, last job ended */
	long jobs, max_jobs;        /* max_jobs: 0 = no limit (jitter applied) */
	long long max_rss;
	double max_age, idle_timeout, kill_grace, start_timeout;
	int ready;
	int exited, wstatus;
	double kill_at;             /* retiring: SIGKILL to its group then */
	struct jobcg *cg;           /* its cgroup (jobcg.h), or NULL: what it starts ends with it */
	struct capgroup *caps;      /* the cgroups of its caps (cgcaps.h), or NULL */
	struct usage_proc proc;     /* its /proc files, for each job's cost (usage.h) */
	struct warm_proc *next;     /* on the retiring list */
};

struct warm_pool {
	struct warm_proc **procs;   /* one per class in use, or NULL */
	int n;
	struct warm_proc *retiring;
};

enum phase { PH_READY, PH_JOB };
enum kill_why { KW_NONE, KW_TIMEOUT, KW_ABORT, KW_CANCEL };

struct serve {
	struct warm_pool *pool;         /* its retiring processes are tended meanwhile */
	double next_tend;
	enum phase phase;
	const struct run_request *req;  /* the job's (hooks, timeout), or the idle one */
	const char *jid;                /* the job's jid, or NULL */
	const char *msg;                /* the job message, and how much of it went out */
	size_t msglen, off;
	double ready_by;                /* PH_READY: monotonic deadline */
	double deadline;                /* PH_JOB: the job's timeout, monotonic; 0 none */
	enum kill_why why_kill;
	double kill_at;
	int killed;
	int done;                       /* got "done": in done_msg */
	struct warm_msg done_msg;
	/* The job message could not be written whole: the process is gone. The job never
	 * started unless we killed it (a timeout, cancel or abort during the write, as when
	 * the process does not read): then the kill decides, as for any other job. */
	int undelivered;
	int broken;                     /* protocol error or no ready in time: in why */
	double eof_at;                  /* monotonic: fd 3 reached EOF then; 0 not yet */
	double beside_at;               /* PH_JOB: when req->beside is due (monotonic); 0 at
	                                 * once, once the message is out; -1 never */
	char why[300];
};

/* warm_proc.c: a process's life */
struct warm_proc *warm_proc_start(const struct handler *h, const struct run_request *req,
                                  struct run_result *fail);
int warm_same_print(const struct warm_proc *w, const struct handler *h);
void warm_proc_reap(struct warm_proc *w);
int warm_proc_kill(struct warm_proc *w);
void warm_proc_sigkill(struct warm_proc *w);
void warm_proc_free(struct warm_proc *w);
long long warm_proc_rss(pid_t pid);
void warm_status_text(int wstatus, char *out, size_t n);
void warm_drain_after_exit(struct warm_proc *w);
void warm_pool_retire(struct warm_pool *p, struct warm_proc *w);
double warm_tend_retiring(struct warm_pool *p, double now);

/* warm_serve.c: one exchange with a process */
int warm_stop_asked(const struct run_request *req);
int warm_sock_read(struct warm_proc *w, struct serve *s);
void warm_sock_write(struct warm_proc *w, struct serve *s);
void warm_serve(struct warm_proc *w, struct serve *s);

#endif
