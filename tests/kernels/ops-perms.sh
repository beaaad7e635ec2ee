#!/bin/bash
# A transcript of what other users may do in directory $1 (empty; run as
# root): root sets up files and directories of several owners and modes,
# then uid 65534 and uid 64001 try reads, writes, creates, deletes, renames,
# chmod/chown and executes.  Compared between the backing filesystem and
# dcfs on it like ops-files.sh: on exFAT (no owners or modes) the native
# answers differ from ext4's, and dcfs must give the same ones.
# shellcheck source=ops-lib.sh
. "$(dirname "$0")/ops-lib.sh"
cd "$1" || exit 2
export LC_ALL=C
chmod 755 .


# as() UID CMD...: the command as that user and group, no supplementary groups
as() {
	local u=$1
	shift
	t setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}

t mkdir pub priv sticky own
t chmod 755 pub
t chmod 700 priv
t chmod 1777 sticky
t chown 65534:65534 own
echo secret > priv/s
echo public > pub/p
echo root600 > pub/r600
t chmod 600 pub/r600
printf '#!/bin/sh\necho ran\n' > pub/x
t chmod 711 pub/x
printf '#!/bin/sh\necho ran\n' > pub/noexec
t chmod 644 pub/noexec
as 64001 sh -c 'echo a > sticky/a64001'
as 65534 sh -c 'echo b > sticky/b65534'
t stat -c '%n %a %u %g %s' sticky/a64001 sticky/b65534

for u in 65534 64001; do
	echo "== uid $u"
	as "$u" cat pub/p
	as "$u" cat pub/r600
	as "$u" cat priv/s
	as "$u" ls priv
	as "$u" sh -c 'echo x >> pub/p'
	as "$u" touch pub/new
	as "$u" mkdir pub/newdir
	as "$u" rm pub/p
	as "$u" mv pub/p pub/q
	as "$u" ./pub/x
	as "$u" ./pub/noexec
	as "$u" chmod 777 pub/p
	as "$u" chown "$u" pub/p
	as "$u" touch -d 2001-01-01 pub/p
	as "$u" touch own/mine
	as "$u" rm sticky/a64001
	as "$u" rm sticky/b65534
	as "$u" mv sticky/a64001 sticky/c
	as "$u" sh -c 'echo y > sticky/new'
	as "$u" truncate -s 0 pub/r600
done
echo "== set-id bits cleared by a write of another user"
t chown 65534:65534 own
t sh -c 'echo data > own/sid && chown 65534:65534 own/sid && chmod 6775 own/sid'
t stat -c '%a' own/sid
as 65534 sh -c 'echo more >> own/sid'
# after the attribute timeout (1 s): a write the kernel makes through FUSE
# passthrough clears the bits on the backing file while the mount may show
# them until then (dcfs(8), DATA COHERENCE)
sleep 1.2
t stat -c '%a' own/sid
echo "== umask"
as 65534 sh -c 'umask 027; mkdir own/um && touch own/um/f && stat -c "%a" own/um own/um/f'
find . -mindepth 1 | sort | while read -r f; do stat -c '%n %F %a %u %g %s' "$f"; done
