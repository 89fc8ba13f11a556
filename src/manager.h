/* SPDX-License-Identifier: MIT */
/*
 * manager.h: the main thread (manager.c): boot, the loop of signals and beats, the stop.
 */
#ifndef COGWORKERD_MANAGER_H
#define COGWORKERD_MANAGER_H

#include "config.h"

int manager_run(const char *path, const struct conf_overrides *ov, struct conf *conf);

#endif
