// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * Whether a graceful stop is draining the mount (daemon/shutdown.c sets
 * it; the handlers refuse new opens while it is set).  A leaf, so that the
 * handlers can ask without depending on the stop machinery above them.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "base/base.h"

static _Atomic bool draining;

void drain_begin(void)
{
	atomic_store(&draining, true);
}

bool drain_active(void)
{
	return atomic_load(&draining);
}
