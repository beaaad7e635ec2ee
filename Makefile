# dcfs — top-level build.  `make` builds the daemon and mount helper,
# `make check` installs missing build/test packages (as root on Debian),
# builds everything and runs the integration suites against real mounts.

PREFIX   ?= /usr/local
SBINDIR  ?= $(PREFIX)/sbin
MANDIR   ?= $(PREFIX)/share/man
SYSCONFDIR ?= /etc
# Where the system looks, whatever PREFIX is: mount(8) runs helpers only
# from /sbin (/sbin/fs.d, /sbin/fs), which is /usr/sbin on merged-/usr
# Debian.  Units go where Debian's packages put them (systemd's own
# systemdsystemunitdir, on every unit path); /etc/systemd/system stays the
# admin's, for drop-ins and overrides, and a unit installed there would
# shadow the package's after a later `apt install`.
HELPERDIR ?= /sbin
SYSTEMDUNITDIR ?= /lib/systemd/system
DOCDIR   ?= $(PREFIX)/share/doc/dcfs
DESTDIR  ?=

CC       ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS   ?= -O2 -g
WARN     := -Wall -Wextra -Werror
# mount.dcfs is standalone and defines its own feature macros.
HELPER_CPPFLAGS := $(CPPFLAGS) -Iinclude -DDCFS_SBINDIR='"$(SBINDIR)"'
CPPFLAGS += -Iinclude -Ifusefs -D_GNU_SOURCE -DDCFS_SBINDIR='"$(SBINDIR)"' -DDCFS_SYSCONFDIR='"$(SYSCONFDIR)"' \
	-DDCFS_HELPERDIR='"$(HELPERDIR)"'
STD      := -std=gnu11

# Debian packages by purpose, installed on demand (as root) by the target
# that needs them: building; the demo (an ext4 image, getfattr); the test
# suites (samba only for the re-export test: its servers are disabled right
# after the install, the test runs smbd from a private config); the extras.
BUILD_PACKAGES := libfuse3-dev fuse3 pkg-config libinih-dev liburing-dev
DEMO_PACKAGES  := $(BUILD_PACKAGES) e2fsprogs util-linux attr
CHECK_PACKAGES := $(DEMO_PACKAGES) check xfsprogs btrfs-progs acl groff-base \
	iproute2 systemd samba smbclient python3 debhelper dpkg-dev lintian \
	clang-format shellcheck
BENCH_PACKAGES := $(DEMO_PACKAGES) btrfs-progs xfsprogs gnuplot-nox strace stress-ng
STRESS_PACKAGES := $(DEMO_PACKAGES) xfsprogs stress-ng
FUZZ_PACKAGES  := $(BUILD_PACKAGES) clang libclang-rt-14-dev
# make check-kernels: QEMU, the guests' initramfs (busybox-static, kmod,
# cpio), the filesystems' tools (mkfs runs on the host, mounts in the
# guests), a kernel nfsd and its helpers for the NFS stages
KERNELS_PACKAGES := $(DEMO_PACKAGES) qemu-system-x86 busybox-static kmod cpio xz-utils \
	xfsprogs btrfs-progs f2fs-tools exfatprogs nfs-kernel-server rpcbind python3
DEB_TOOLS      := $(BUILD_PACKAGES) debhelper dpkg-dev lintian
# Services that packages above enable and start on install (and their
# sockets, which would start them again).
SERVICES_OFF   := smbd nmbd samba-ad-dc nfs-server rpcbind

FUSE_CFLAGS = $(shell $(PKG_CONFIG) --cflags fuse3 2>/dev/null)
FUSE_LIBS   = $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null)
URING_CFLAGS = $(shell $(PKG_CONFIG) --cflags liburing 2>/dev/null)
URING_LIBS   = $(shell $(PKG_CONFIG) --libs liburing 2>/dev/null)
CHECK_CFLAGS = $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

# One folder per layer (fusefs/README.md); the mount helper is a program of
# its own.
DAEMON_SRCS := $(wildcard fusefs/*/*.c)
DAEMON_SRCS := $(filter-out fusefs/helper/%,$(DAEMON_SRCS))
HEADERS     := $(wildcard include/*.h fusefs/*/*.h)
TEST_SRCS   := $(wildcard tests/*.c)

B := build
DAEMON_OBJS := $(patsubst fusefs/%.c,$(B)/obj/%.o,$(DAEMON_SRCS))

.PHONY: FORCE all deps deps-build deps-demo deps-check deps-bench deps-stress deps-fuzz deps-deb deb deb-check version-check lint check check-asan fuzz demo bench bench-meta bench-writes stress install uninstall clean man-check units-check arch-check deps-kernels check-kernels

# systemd units (fusefs/systemd/*.in): `make install` fills in the install
# paths of that invocation (so PREFIX given only to install is honoured);
# a copy for `systemd-analyze verify` has the built binary as ExecStart:
# verify insists that the command exists.
UNITS := dcfs@.service dcfs-textfile@.service dcfs-textfile@.timer mnt-media.mount
UNIT_SED = sed -e 's|@SBINDIR@|$(1)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g'

all: $(B)/dcfs $(B)/mount.dcfs $(B)/dcfs-io $(B)/fuse-floor

# The binaries embed SBINDIR and SYSCONFDIR: `make install PREFIX=/usr`
# after a plain `make` must rebuild them.  The stamp changes only when the
# paths do.
$(B)/paths: FORCE | $(B)
	@echo '$(SBINDIR) $(SYSCONFDIR) $(HELPERDIR)' | cmp -s - $@ 2>/dev/null || \
		echo '$(SBINDIR) $(SYSCONFDIR) $(HELPERDIR)' > $@
FORCE:

$(B)/obj/%.o: fusefs/%.c $(HEADERS) $(B)/paths | $(B)/obj
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(WARN) $(CFLAGS) $(CPPFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -c -o $@ $<

$(B)/dcfs: $(DAEMON_OBJS)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(FUSE_LIBS) $(URING_LIBS) -linih -lpthread

$(B)/mount.dcfs: fusefs/helper/mount_dcfs.c $(B)/paths | $(B)
	$(CC) $(STD) $(WARN) $(CFLAGS) $(HELPER_CPPFLAGS) $(LDFLAGS) -o $@ $<

$(B)/dcfs-io: tests/bench/dcfs-io.c include/dcfs_sys.h | $(B)
	$(CC) $(STD) $(WARN) $(CFLAGS) $(CPPFLAGS) -o $@ $<

# The least a FUSE server can do per request (tests/bench/fuse-floor.c).
$(B)/fuse-floor: tests/bench/fuse-floor.c | $(B)
	$(CC) $(STD) $(WARN) $(CFLAGS) $(FUSE_CFLAGS) $(LDFLAGS) -o $@ $< $(FUSE_LIBS)

$(B)/dcfs-tests: $(TEST_SRCS) $(wildcard tests/*.h) $(HEADERS) | $(B)
	$(CC) $(STD) $(WARN) $(CFLAGS) $(CPPFLAGS) $(CHECK_CFLAGS) -o $@ $(TEST_SRCS) $(CHECK_LIBS) -pthread

$(B)/systemd-verify/%: fusefs/systemd/%.in Makefile
	@mkdir -p $(dir $@)
	$(call UNIT_SED,$(abspath $(B))) $< > $@

$(B) $(B)/obj:
	mkdir -p $@

# On a fresh Debian machine only gcc and make exist: install the rest,
# with services kept from starting during the install (policy-rc.d) and
# disabled afterwards, so a test-only server never runs at boot.
define apt_install
	@missing=$$(for p in $(1); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then \
			echo "missing packages (run as root to install):" $$missing; exit 1; fi; \
		echo "installing:" $$missing; \
		rc_made=; if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && \
			chmod 755 /usr/sbin/policy-rc.d && rc_made=1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq $$missing >/dev/null; st=$$?; \
		[ -z "$$rc_made" ] || rm -f /usr/sbin/policy-rc.d; \
		[ $$st = 0 ] || exit $$st; \
		for u in $(SERVICES_OFF); do \
			for k in socket service; do \
			systemctl cat $$u.$$k >/dev/null 2>&1 || continue; \
			if [ -d /run/systemd/system ]; then systemctl disable --now -q $$u.$$k; \
			else systemctl disable -q $$u.$$k; fi; \
			echo "disabled $$u.$$k (installed only for the tests)"; \
			done; \
		done; \
	fi
endef

deps: deps-check
deps-build:
	$(call apt_install,$(BUILD_PACKAGES))
deps-demo:
	$(call apt_install,$(DEMO_PACKAGES))
deps-check:
	$(call apt_install,$(CHECK_PACKAGES))
deps-bench:
	$(call apt_install,$(BENCH_PACKAGES))
deps-stress:
	$(call apt_install,$(STRESS_PACKAGES))
deps-fuzz:
	$(call apt_install,$(FUZZ_PACKAGES))
deps-deb:
	$(call apt_install,$(DEB_TOOLS))
deps-kernels:
	$(call apt_install,$(KERNELS_PACKAGES))

# The daemon's layers, from the top down (fusefs/README.md): a file may use
# files of its own folder and of folders below it, never above, and no two
# files may depend on each other through any path.  Read from the objects.
LAYERS := daemon,handlers,io,policy,transport,core,base
# One prefix per file: its name, or the short form given here.  main()
# is its own.
PREFIXES := write_pipe=wpipe readahead=ra keys=cfg_key
arch-check: $(DAEMON_OBJS)
	@python3 tests/arch/depgraph.py --layers $(LAYERS) $(DAEMON_OBJS)
	@python3 tests/arch/prefixes.py $(addprefix --alias ,$(PREFIXES)) $(DAEMON_OBJS)

# make lint: the formatter, every shell script, the layers.
# clang-format (.clang-format: the kernel's style, 100 columns) checks
# every C file of the daemon, its headers and its tests (kernel-patches/
# follows the kernel's own checkpatch instead).
FORMATTED = $(filter %.c %.h,$(shell git ls-files fusefs include tests 2>/dev/null))
# Every tracked file whose first line runs sh, bash or dash.
TRACKED = $(shell git ls-files 2>/dev/null | grep -v '\.png$$')
SHELL_SCRIPTS = $(shell awk 'FNR == 1 { if (/^\#!.*[\/ ](ba|da)?sh( |$$)/) print FILENAME; nextfile }' $(TRACKED))

lint: arch-check
	@[ -n "$(SHELL_SCRIPTS)" ] || { echo "lint: no shell scripts found (not a git checkout?)"; exit 1; }
	@[ -n "$(FORMATTED)" ] || { echo "lint: no C files found (not a git checkout?)"; exit 1; }
	clang-format --dry-run -Werror $(FORMATTED)
	shellcheck -x -S warning $(SHELL_SCRIPTS)
	@echo "lint: $(words $(FORMATTED)) files formatted, $(words $(SHELL_SCRIPTS)) shell scripts clean"

man-check:
	@out=$$(for m in man/*.[58]; do groff -man -ww -z $$m 2>&1 | sed "s|^|$$m: |"; done); \
	if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; echo "man pages render cleanly"

# --man=no: the man pages are not installed yet (man-check renders them).
# Any output (an unknown key is only a warning) fails the check.
units-check: $(B)/dcfs $(addprefix $(B)/systemd-verify/,$(UNITS))
	@out=$$(cd $(B)/systemd-verify && systemd-analyze verify --man=no $(UNITS) 2>&1); \
	if [ -n "$$out" ]; then echo "$$out"; exit 1; fi; echo "systemd units verify cleanly"

# test_install.c installs this tree into a DESTDIR.
TEST_ENV = DCFS_SRCDIR=$(CURDIR) DCFS_SBINDIR=$(SBINDIR)

# First the tests themselves: the five core suites against plain bind
# mounts of the backing dirs (DCFS_TEST_SELF=1), where everything they
# claim must hold natively; then everything against dcfs.  A skipped run
# (77: not root, no /dev/fuse, no loop devices) fails: nothing was tested.
CHECK_RUN = DCFS_BIN=$(abspath $(B)/dcfs) MOUNT_DCFS_BIN=$(abspath $(B)/mount.dcfs) \
	DCFS_UNIT_DIR=$(abspath $(B)/systemd-verify) $(TEST_ENV) $(B)/dcfs-tests
CHECK_STATUS = if [ $$status = 77 ]; then \
	echo "make check: FAILED: the suites were skipped (see the SKIP line above): nothing was tested"; \
	status=1; fi

check: deps-check
	$(MAKE) all $(B)/dcfs-tests man-check units-check lint deb-check
	@echo "make check: the core suites against bind mounts (DCFS_TEST_SELF=1)"
	DCFS_TEST_SELF=1 $(CHECK_RUN); status=$$?; $(CHECK_STATUS); self=$$status; \
	$(CHECK_RUN); status=$$?; $(CHECK_STATUS); \
	if [ $$self != 0 ]; then echo "make check: FAILED: the run against bind mounts (DCFS_TEST_SELF=1) failed"; exit $$self; fi; \
	exit $$status

# dcfs on the kernels its users run (tests/kernels/README.md): Debian 12's
# 6.1, Debian's 6.12 and the patched 6.12 (when make -C kernel-patches x86
# built it) under QEMU, and the host's kernel, on ext4, xfs, btrfs, F2FS,
# exFAT and NFS; a table per kernel x filesystem.  Not part of check (it
# takes most of an hour under TCG).  KERNELS="host 6.1" picks kernels.
check-kernels: deps-kernels
	$(MAKE) all
	tests/kernels/kernels.sh $(KERNELS)

demo: deps-demo
	@$(MAKE) --no-print-directory all
	tests/demo/demo.sh

bench: deps-bench all
	tests/bench/bench.sh $(BENCH_ARGS)
	tests/bench/writes.sh $(WRITES_ARGS)

# Only the stream-write rows (issue 40): native buffered and RWF_DONTCACHE,
# dcfs engine and kernel-served, 4K/64K/1M, ext4/xfs/btrfs, idle and busy,
# hot-set survival: about 30 minutes on 2 CPUs.
bench-writes: deps-bench all
	tests/bench/writes.sh $(WRITES_ARGS)

# Held-out style stress (not part of check: ~6 min per run): every
# stress-ng filesystem stressor as an unprivileged user on a real mount.
stress: deps-stress all
	tests/stress/stress.sh --fs xfs --class cache $(STRESS_ARGS)
	tests/stress/stress.sh --fs ext4 --class dontcache $(STRESS_ARGS)

# Only the metadata part (100 000 and 1 000 000 files, find + stat over
# 1 000 000): about 40 minutes on 2 CPUs.
bench-meta: deps-bench all
	tests/bench/bench.sh --meta-only $(BENCH_ARGS)

# The same suites against a daemon built with AddressSanitizer and UBSan;
# the harness fails a test on any sanitizer report in the daemon's log.
ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
ASAN_OBJS := $(patsubst fusefs/%.c,build-asan/obj/%.o,$(DAEMON_SRCS))

build-asan/obj/%.o: fusefs/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(STD) $(WARN) $(ASAN_FLAGS) $(CPPFLAGS) $(FUSE_CFLAGS) $(URING_CFLAGS) -c -o $@ $<

build-asan/dcfs: $(ASAN_OBJS)
	$(CC) $(ASAN_FLAGS) -o $@ $^ $(FUSE_LIBS) $(URING_LIBS) -linih -lpthread

check-asan: deps-check
	$(MAKE) all $(B)/dcfs-tests build-asan/dcfs units-check
	rm -f build-asan/report.*
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99:log_path=$(abspath build-asan)/report \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(abspath build-asan)/report \
	DCFS_SANITIZED=1 DCFS_BIN=$(abspath build-asan/dcfs) MOUNT_DCFS_BIN=$(abspath $(B)/mount.dcfs) \
	DCFS_UNIT_DIR=$(abspath $(B)/systemd-verify) $(TEST_ENV) \
		$(B)/dcfs-tests; status=$$?; \
	if ls build-asan/report.* >/dev/null 2>&1; then \
		echo "sanitizer reports:"; cat build-asan/report.*; exit 1; fi; \
	exit $$status

# Bounded libFuzzer run of the config parser and matcher.
FUZZ_SECONDS ?= 60
FUZZ_SRCS := fusefs/policy/config.c fusefs/policy/keys.c fusefs/policy/policy.c fusefs/base/log.c
build-fuzz/fuzz_config: tests/fuzz/fuzz_config.c $(FUZZ_SRCS) $(HEADERS)
	@mkdir -p build-fuzz
	clang $(STD) -g -O1 -fsanitize=fuzzer,address,undefined $(CPPFLAGS) $(FUSE_CFLAGS) \
		-o $@ tests/fuzz/fuzz_config.c $(FUZZ_SRCS) $(FUSE_LIBS) -linih -lpthread

fuzz: deps-fuzz build-fuzz/fuzz_config
	@mkdir -p build-fuzz/corpus
	build-fuzz/fuzz_config -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
		-print_final_stats=1 build-fuzz/corpus tests/fuzz/corpus

install: all
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(HELPERDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MANDIR)/man5
	install -m 0755 $(B)/dcfs $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(B)/mount.dcfs $(DESTDIR)$(HELPERDIR)/
	install -m 0644 man/*.8 $(DESTDIR)$(MANDIR)/man8/
	if ls man/*.5 >/dev/null 2>&1; then install -m 0644 man/*.5 $(DESTDIR)$(MANDIR)/man5/; fi
	install -d $(DESTDIR)$(SYSCONFDIR)
	[ -e $(DESTDIR)$(SYSCONFDIR)/dcfs.conf ] || install -m 0644 dcfs.conf $(DESTDIR)$(SYSCONFDIR)/dcfs.conf
	install -d $(DESTDIR)$(SYSCONFDIR)/dcfs $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(DOCDIR)/examples
	for u in dcfs@.service dcfs-textfile@.service dcfs-textfile@.timer; do \
		$(call UNIT_SED,$(SBINDIR)) fusefs/systemd/$$u.in > $(DESTDIR)$(SYSTEMDUNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/$$u || exit 1; done
	$(call UNIT_SED,$(SBINDIR)) fusefs/systemd/mnt-media.mount.in > $(DESTDIR)$(DOCDIR)/examples/mnt-media.mount
	install -m 0644 fusefs/systemd/mnt-media.env $(DESTDIR)$(DOCDIR)/examples/

# A Debian package with Debian's tooling (debhelper, dpkg-buildpackage,
# lintian): the packaging files live in fusefs/debian/ and are copied to
# debian/ in a copy of the tree, so the build runs clean and leaves this
# tree's build/ alone.  -> build/deb/dcfs_VERSION_ARCH.deb
# The version has one source, include/dcfs_version.h (the daemon prints it);
# version-check holds the changelog to it.
VERSION = $(shell sed -n 's/^\#define DCFS_VERSION "\(.*\)"$$/\1/p' include/dcfs_version.h)
DEB_ARCH = $(shell dpkg --print-architecture)
DEB_TREE = $(B)/deb/dcfs-$(VERSION)
DEB_FILE = $(B)/deb/dcfs_$(VERSION)_$(DEB_ARCH).deb

version-check:
	@v=$$(dpkg-parsechangelog -l fusefs/debian/changelog -S Version); \
	if [ -z "$(VERSION)" ] || [ "$$v" != "$(VERSION)" ]; then \
		echo "fusefs/debian/changelog says $$v, include/dcfs_version.h '$(VERSION)'"; exit 1; fi

deb: deps-deb version-check
	rm -rf $(B)/deb && mkdir -p $(DEB_TREE)
	tar -c --exclude=./build --exclude=./build-asan --exclude=./build-fuzz \
		--exclude=./.git --exclude=./kernel-patches . | tar -x -C $(DEB_TREE)
	cp -r fusefs/debian $(DEB_TREE)/debian
	cd $(DEB_TREE) && dpkg-buildpackage -b -us -uc
	lintian --fail-on error $(DEB_FILE)
	@echo "built $(DEB_FILE)"

# The package built and installed into a throw-away root on every `make
# check` (~30 s): its file list, conffile, version, Depends, remove and
# purge (tests/install/deb-root.sh), so a move that breaks the release
# breaks the check.
deb-check: | $(B)
	@$(MAKE) --no-print-directory deb >$(B)/deb.log 2>&1 || { cat $(B)/deb.log; exit 1; }
	@grep -E '^(W|E): ' $(B)/deb.log || true
	tests/install/deb-root.sh $(DEB_FILE) tests/install/deb-files.txt $(VERSION)

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/dcfs $(DESTDIR)$(HELPERDIR)/mount.dcfs
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(wildcard man/*.8)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(wildcard man/*.5)))
	rm -f $(addprefix $(DESTDIR)$(SYSTEMDUNITDIR)/,dcfs@.service dcfs-textfile@.service dcfs-textfile@.timer)
	rm -rf $(DESTDIR)$(DOCDIR)/examples

clean:
	rm -rf $(B) build-asan build-fuzz
