# tests/cluster_lib.sh — the setup every cluster test script shares, sourced
# (`. "${srcdir:-.}/tests/cluster_lib.sh"`) by tests/cluster*.sh.
#
# Why one file: each script brings up its own rcp-cluster (tools/rcp-cluster,
# docs/cluster.md) under a name of its own, and must take it down however
# it ends (pass, fail, a hang killed by timeout, ^C); a copy of that setup
# per script drifted (a trap missing, a status lost).  What the scripts run
# on the hosts stays in each script.
#
# Sets top (the source tree, absolute), b (the build tree), rcpc (the
# rcp-cluster tool) and C (rcp-cluster on this script's cluster, named by
# $name, which the script sets before it calls C).  Functions:
#   cl_tmp TAG        first cl_sweep (below); then a private directory $tmp
#                     (TMPDIR/TAG.XXXXXX, exit 99 if none), and traps: on
#                     exit the cluster goes down and $tmp is removed; HUP
#                     INT PIPE TERM exit 130
#   cl_up ARGS...     rcp-cluster up ARGS; if it fails, its output is printed
#                     and the script exits with its status (77: no root or
#                     no namespaces, a SKIP)
#   cl_pvm FILES...   FILES copied into $tmp/ep and a PVM virtual machine
#                     started on the hosts with it as their ep=; exits as
#                     cl_up does if `rcp-cluster pvm start` fails
#   cl_lsan_pvm       LeakSanitizer told to ignore what libpvm3 keeps until
#                     exit (not ours to fix; tests/pvm/run.sh does the same)
#   cl_pvm_halt N     the VM halted; one TAP line: ok if no pvmd or task is
#                     left in the namespaces of h1..hN, else not ok and rc=1
# shellcheck disable=SC2034,SC2154 # set for, and by, the script that sources this
top=$(cd "${srcdir:-.}" && pwd)
b=${abs_builddir:-$PWD}
rcpc="$top/tools/rcp-cluster"
C() { "$rcpc" --name "$name" "$@"; }

cl_cleanup() { C down >/dev/null 2>&1; rm -rf "$tmp"; }

# cl_sweep: the clusters of test scripts killed outright (SIGKILL, a
# killed make: no trap ran) are taken down.  A script's cluster is named
# by a letter and its pid (t$$, p$$, ...), so one whose pid is gone is a
# leftover; a live pid (this run's other scripts, or a pid reused) is
# left alone.  Called by cl_tmp, so every cluster script sweeps first.
cl_sweep() {
	for n in $(ip netns list 2>/dev/null | sed -n 's/^rcpc-\([a-z][0-9][0-9]*\)-sw\( .*\)\{0,1\}$/\1/p'); do
		kill -0 "${n#?}" 2>/dev/null && continue
		"$rcpc" --name "$n" down >/dev/null 2>&1
	done
}

cl_tmp() {
	cl_sweep
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 99
	trap cl_cleanup EXIT
	trap 'exit 130' HUP INT PIPE TERM
}

cl_up() {
	out=$(C up "$@" 2>&1)
	st=$?
	[ $st -eq 0 ] || { echo "$out"; exit $st; }
}

cl_pvm() {
	mkdir -p "$tmp/ep"
	cp "$@" "$tmp/ep/" || exit 99
	out=$(C pvm start --ep "$tmp/ep" 2>&1)
	st=$?
	[ $st -eq 0 ] || { echo "$out"; exit $st; }
}

cl_lsan_pvm() {
	printf 'leak:libpvm3\nleak:libgpvm3\nleak:pvm_\n' >"$tmp/lsan.supp"
	export LSAN_OPTIONS="suppressions=$tmp/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
}

# cl_pvm_halt N: halts the VM on hosts h1..hN; one TAP line, rc=1 if a pvmd
# or task is left in a host's namespace
cl_pvm_halt() {
	C pvm halt
	left=$(i=1; while [ $i -le "$1" ]; do ip netns pids "rcpc-$name-h$i" 2>/dev/null; i=$((i + 1)); done)
	if [ -z "$left" ]; then echo "ok - pvm halt: no pvmd or task left"; else
		echo "not ok - pvm halt left processes: $left"; rc=1; fi
}
