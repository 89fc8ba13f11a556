/* SPDX-License-Identifier: MIT */
/*
 * deathhook.h: on_death commands (deathhook.c, doc/protocol.md §7.19). The caller that
 * filed a job into dead runs the notification after settling, so a hook never delays the
 * settlement it reports on.
 */
#ifndef COGWORKERD_DEATHHOOK_H
#define COGWORKERD_DEATHHOOK_H

void on_death_run(const char *cls, const char *jid, const char *dead_entry);

#endif
