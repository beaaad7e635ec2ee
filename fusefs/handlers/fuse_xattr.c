// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * FUSE extended attribute handlers.  They act on the backing object
 * through its /proc/self/fd link, because O_PATH fds do not take f*xattr()
 * calls.  Resolving that magic link lands on the very object the O_PATH fd
 * holds and goes no further: for a symlink, the link itself, never its
 * target (the kernel's nd_jump_link(); glibc's fchmodat() relies on the
 * same).  So trusted.* and security.* attributes of symlinks (setfattr -h,
 * as root) work as natively, without a name that could be swapped in
 * between; the kernel refuses user.* on a symlink before dcfs sees it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

#include "handlers/handlers.h"

/*
 * user.dcfs.* names are answered by dcfs itself and never reach the
 * backing files: user.dcfs.policy on a file says what an open would do
 * with it now and why; on the mount root it names the config; and
 * user.dcfs.stats (JSON) / user.dcfs.stats.table /
 * user.dcfs.stats.prometheus on the root show the counters, and
 * user.dcfs.files on the root lists the open files.
 *
 * Who sees what: the policy of a file is shown to anyone who may read the
 * file's attributes (it follows from its name, size and the rules); the
 * config file's path and the mount-wide counters (other users' traffic)
 * only to root.  Others get the root's summary without the path, and
 * EACCES for the counters.  The open files are listed per caller: FUSE
 * tells the daemon the uid of whoever asks, root gets every handle, anyone
 * else only the handles they opened themselves.
 */
#define VIRTUAL_PREFIX "user.dcfs."

static bool is_virtual(const char *name)
{
	return strncmp(name, VIRTUAL_PREFIX, strlen(VIRTUAL_PREFIX)) == 0;
}

/* A failed reload is what the admin most needs to see there. */
static char *with_reload_failure(char *text)
{
	char why[320], *more = NULL;

	if (!text || !reload_failure(why, sizeof(why)))
		return text;
	if (asprintf(&more, "%s; last reload %s (these rules stay)", text, why) < 0)
		return text;
	free(text);
	return more;
}

static char *root_policy_text(bool privileged)
{
	struct dcfs_config *cfg = config_get();
	char when[64], summary[512], *text = NULL;
	struct tm tm;

	gmtime_r(&cfg->loaded, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	config_summary(cfg, summary, sizeof(summary));
	if (privileged) {
		if (asprintf(&text, "config %s loaded %s; %s",
			     cfg->path ? cfg->path : "(built-in defaults)", when, summary) < 0)
			text = NULL;
	} else {
		const char *rules = strstr(summary, ": OK: ");

		if (asprintf(&text, "config %s loaded %s; %s",
			     cfg->path ? "(path shown to root only)" : "(built-in defaults)", when,
			     rules ? rules + 6 : "") < 0)
			text = NULL;
	}
	config_put(cfg);
	/* The message names the file: root only, like the path. */
	return privileged ? with_reload_failure(text) : text;
}

static char *file_policy_text(fuse_req_t req, struct dcfs_inode *inode)
{
	struct dcfs_decision d;
	struct dcfs_config *cfg;
	struct stat st;
	char buf[256];

	if (inode_stat(inode, &st) < 0 || !S_ISREG(st.st_mode))
		return NULL;
	io_select_policy(req, inode, st.st_size, false, &d, &cfg);
	policy_describe(&d, buf, sizeof(buf));
	if (d.policy == POLICY_DONTCACHE || d.policy == POLICY_DONTCACHE_WRITE) {
		/* "dontcache (...); writes by the kernel (passthrough), written behind" */
		char mode[224], *v = NULL;

		/* The asker's memory cgroup, as the opener's at an open. */
		io_describe_writes(inode, cfg, d.deferred, fuse_req_ctx(req)->pid, mode,
				   sizeof(mode));
		config_put(cfg);
		if (asprintf(&v, "%s; %s", buf, mode) < 0)
			v = NULL;
		return v;
	}
	config_put(cfg);
	if (d.policy == POLICY_CACHE) {
		/* "cache (passthrough; class …)", "cache (forwarded: why; …)" */
		char mode[160], *v = NULL;

		io_describe_cached(inode, mode, sizeof(mode));
		if (asprintf(&v, "cache (%s; %s", mode, buf + strlen("cache (")) < 0)
			v = NULL;
		return v;
	}
	return strdup(buf);
}

/* Returns the value (malloc'd) or NULL with *err set. */
static char *virtual_value(fuse_req_t req, struct dcfs_inode *inode, const char *name, int *err)
{
	bool root = inode == &dcfs.root;
	bool privileged = fuse_req_ctx(req)->uid == 0;
	bool stats =
		root && strncmp(name, VIRTUAL_PREFIX "stats", strlen(VIRTUAL_PREFIX "stats")) == 0;
	char *v = NULL;

	*err = ENODATA;
	if (strcmp(name, VIRTUAL_PREFIX "policy") == 0) {
		v = root ? root_policy_text(privileged) : file_policy_text(req, inode);
	} else if (stats && !privileged) {
		*err = EACCES;
	} else if (root && strcmp(name, VIRTUAL_PREFIX "stats") == 0) {
		v = report_json();
	} else if (root && strcmp(name, VIRTUAL_PREFIX "stats.table") == 0) {
		v = report_table(false);
	} else if (root && strcmp(name, VIRTUAL_PREFIX "stats.table.wide") == 0) {
		v = report_table(true);
	} else if (root && strcmp(name, VIRTUAL_PREFIX "stats.prometheus") == 0) {
		v = report_prometheus();
	} else if (root && strcmp(name, VIRTUAL_PREFIX "files") == 0) {
		v = report_files(fuse_req_ctx(req)->uid);
	}
	return v;
}

static void reply_virtual(fuse_req_t req, struct dcfs_inode *inode, const char *name, size_t size)
{
	int err;
	char *v = virtual_value(req, inode, name, &err);
	size_t len;

	if (!v) {
		fuse_reply_err(req, err);
		return;
	}
	len = strlen(v);
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, v, len);
	free(v);
}

/*
 * The /proc path of the inode, pinned: 0, or -errno.  Every 0 is followed
 * by fdcache_unpin() once the call on the path is made.
 */
static int xattr_at(struct dcfs_inode *inode, char path[64])
{
	int fd = fdcache_pin(inode);

	if (fd < 0)
		return fd;
	inode_proc_path(fd, path);
	return 0;
}

/* Replies with the size when asked for it, else with the value; n: -errno. */
static void reply_sized(fuse_req_t req, size_t size, const char *buf, ssize_t n)
{
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* getxattr (name) or listxattr (name NULL) of the backing object: the
 * length, or -errno. */
static ssize_t backing_get(struct dcfs_inode *inode, const char *name, char *buf, size_t size)
{
	char path[64];
	ssize_t n = xattr_at(inode, path);

	if (n < 0)
		return n;
	n = dcfs_err(name ? getxattr(path, name, buf, size) : listxattr(path, buf, size));
	fdcache_unpin(inode);
	return n;
}

/* getxattr and listxattr (name NULL): the size, or the value in a buffer. */
static void reply_backing(fuse_req_t req, struct dcfs_inode *inode, const char *name, size_t size)
{
	char *buf = NULL;

	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_sized(req, size, buf, backing_get(inode, name, buf, size));
	free(buf);
}

static void dcfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct dcfs_inode *inode = inode_of(ino);

	if (is_virtual(name))
		reply_virtual(req, inode, name, size);
	else
		reply_backing(req, inode, name, size);
}

static void dcfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	reply_backing(req, inode_of(ino), NULL, size);
}

/*
 * setxattr (value) or removexattr (value NULL) of name on the backing
 * object: 0 or -errno.  A changed access ACL may have changed the mode
 * (the group class bits): the coherence model hears of it.
 */
static int backing_set(struct dcfs_inode *inode, const char *name, const char *value, size_t size,
		       int flags)
{
	char path[64];
	int err = xattr_at(inode, path);

	if (err < 0)
		return err;
	err = (int)dcfs_err(value ? setxattr(path, name, value, size, flags)
				  : removexattr(path, name));
	fdcache_unpin(inode);
	if (!err && !strncmp(name, "system.posix_acl_access", 23))
		io_mode_changed(inode);
	return err;
}

static void reply_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		      size_t size, int flags)
{
	struct dcfs_inode *inode = inode_of(ino);

	if (is_virtual(name))
		fuse_reply_err(req, EPERM);
	else
		fuse_reply_err(req, -backing_set(inode, name, value, size, flags));
}

static void dcfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			  size_t size, int flags)
{
	/* An empty value is a value: never the NULL of a removal. */
	reply_set(req, ino, name, value ? value : "", size, flags);
}

static void dcfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	reply_set(req, ino, name, NULL, 0, 0);
}

void fuse_xattr_ops(struct fuse_lowlevel_ops *ops)
{
	ops->getxattr = dcfs_getxattr;
	ops->listxattr = dcfs_listxattr;
	ops->setxattr = dcfs_setxattr;
	ops->removexattr = dcfs_removexattr;
}
