// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Whether a graceful stop is draining the mount (daemon/shutdown.c sets
 * it; the handlers refuse new opens while it is set).  A leaf, so that the
 * handlers can ask without depending on the stop machinery above them.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "ops/ops.h"

static _Atomic bool draining;

void shutdown_set_draining(void)
{
	atomic_store(&draining, true);
}

bool shutdown_draining(void)
{
	return atomic_load(&draining);
}
