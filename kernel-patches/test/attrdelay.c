// SPDX-License-Identifier: GPL-2.0
/*
 * attrdelay: test module for issue 37's B2 (fuse_pt_test attrrace, x86-64
 * guests only; loaded by fuse-pt-guest.sh).
 *
 * fuse_passthrough_copyattr() (patch 0028) reads the backing inode's
 * attributes with vfs_getattr_nosec() and then stores them in the FUSE
 * inode under fi->lock.  The completions of two asynchronous passthrough
 * writes run it at the same time from workqueues on two CPUs, so a
 * snapshot read first can be stored last.  Between the read and the store
 * there are a few instructions only: no number of rounds hits that under
 * TCG.  This module widens the window without changing what the code does:
 * a kretprobe on vfs_getattr_nosec() busy-waits delay_ms after each call
 * that a workqueue worker on CPU cpu makes from fuse_passthrough_*(), that
 * is after that completion took its snapshot and before it stores it.  The
 * other write of the pair, submitted from the other CPU, completes there
 * meanwhile and stores a newer snapshot.  A copy that orders snapshots
 * (the fixed 0028) keeps the newer one; one that does not (the old 0028)
 * leaves the older size behind.
 *
 * Parameters: delay_ms (20), cpu (0).  /sys/module/attrdelay/parameters/
 * delayed counts the delays (read-only).
 */
#include <linux/atomic.h>
#include <linux/delay.h>
#include <linux/kallsyms.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/sched.h>
#include <linux/smp.h>
#include <linux/string.h>

static unsigned int delay_ms = 20;
module_param(delay_ms, uint, 0644);
MODULE_PARM_DESC(delay_ms, "busy-wait after a matching vfs_getattr_nosec()");

static unsigned int cpu;
module_param(cpu, uint, 0644);
MODULE_PARM_DESC(cpu, "delay only calls made on this CPU");

static unsigned int delayed;
module_param(delayed, uint, 0444);
MODULE_PARM_DESC(delayed, "delays so far");

/* A snapshot taken by fuse_passthrough_copyattr() (or the function it was
 * inlined into) in a workqueue worker on the chosen CPU? */
static bool from_copyattr(struct kretprobe_instance *ri)
{
	char sym[KSYM_SYMBOL_LEN];

	if (!(current->flags & PF_WQ_WORKER) ||
	    raw_smp_processor_id() != READ_ONCE(cpu))
		return false;
	sprint_symbol_no_offset(sym, get_kretprobe_retaddr(ri));
	return strstarts(sym, "fuse_passthrough_");
}

static int getattr_returned(struct kretprobe_instance *ri,
			    struct pt_regs *regs)
{
	if (from_copyattr(ri)) {
		WRITE_ONCE(delayed, READ_ONCE(delayed) + 1);
		mdelay(READ_ONCE(delay_ms));
	}
	return 0;
}

static struct kretprobe getattr_probe = {
	.kp.symbol_name = "vfs_getattr_nosec",
	.handler = getattr_returned,
	.maxactive = 16,
};

static int __init attrdelay_init(void)
{
	return register_kretprobe(&getattr_probe);
}

static void __exit attrdelay_exit(void)
{
	unregister_kretprobe(&getattr_probe);
}

module_init(attrdelay_init);
module_exit(attrdelay_exit);
MODULE_DESCRIPTION("dcfs test: widen the attribute copy window of FUSE passthrough");
MODULE_LICENSE("GPL");
