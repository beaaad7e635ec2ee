/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The release, in one place: the daemon prints it (--version, the
 * Prometheus dcfs_info line), the Makefile reads it for `make deb`, and
 * `make version-check` holds fusefs/debian/changelog to it.  Keep the
 * line's shape: the Makefile reads it with sed.
 */
#ifndef DCFS_VERSION_H
#define DCFS_VERSION_H

#define DCFS_VERSION "0.1.0"

#endif
