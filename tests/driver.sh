#!/bin/sh
# tests/driver.sh — automake test driver (LOG_DRIVER) for every test in TESTS.
#
#   driver.sh --test-name NAME --log-file LOG --trs-file TRS [automake's
#             --color-tests/--expect-failure/--enable-hard-errors] -- CMD...
#
# Why a driver of our own rather than automake's test-driver:
#
# Counting.  One program holds many tests: a cmocka program dozens of
# cases, tests/pvm/run.sh a TAP line ("ok N name", "not ok N name",
# "ok N name # SKIP why") per case and run.  The driver writes one
# :test-result: line per case into the .trs file, so `make check`'s own
# summary (# TOTAL, # PASS, # SKIP, # FAIL, # ERROR) and quickstart's
# closing line count every case and every skip.  A program with no case
# lines (a shell test) counts once: exit 0 PASS, 77 SKIP, 99 ERROR, else
# FAIL.  A program that exits non-zero although all its cases passed (a
# leak report at exit, a crash after the last case) adds one FAIL; a case
# that started but never finished (the program crashed in it) is an ERROR.
#
# Bounds.  Each test runs in a session of its own (setsid), so its pid is
# its process group and session id.  A watchdog ends the whole group after
# the test's time limit (TERM, then KILL 5 s later) and the driver prints
# "TIMEOUT: NAME after N s" with the log's last lines.  Limits: 900 s for
# tests/pvm/run.sh (its six sections bound themselves at 120 s each), 300 s
# for every other test; RCPTEST_TIMEOUT=N sets one limit for all.
#
# Nothing left behind.  Once the test's main process has ended, any process
# still in its session is reported ("LEFTOVER: NAME left running: ...", a
# failure) and killed; the test helpers' forked children die with their
# parent (PR_SET_PDEATHSIG in tests/testutil.h), so that should not happen.
# Shared-memory segments are named after the pid of a test process
# ("rcp-ts-<pid>-tag"): a segment that appeared during the test and is
# named after the test's pid, a leftover's pid, or a child's pid that the
# test helpers wrote to $RCPTEST_PIDFILE, is removed and reported
# ("LEAK: NAME left /dev/shm/...", a failure).  Segments of other tests
# running in parallel carry other pids and are not touched.
set -u

name=unknown log=/dev/null trs=/dev/null
while [ $# -gt 0 ]; do
	case $1 in
	--test-name) name=$2; shift ;;
	--log-file) log=$2; shift ;;
	--trs-file) trs=$2; shift ;;
	--color-tests | --expect-failure | --enable-hard-errors | --collect-skipped-logs) shift ;;
	--) shift; break ;;
	*) echo "$0: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
[ $# -gt 0 ] || { echo "$0: no test command" >&2; exit 2; }

case $name in
tests/pvm/run.sh) limit=900 ;;
*) limit=300 ;;
esac
[ -n "${RCPTEST_TIMEOUT:-}" ] && limit=$RCPTEST_TIMEOUT

shmdir=/dev/shm
tmark="$log.timeout"
pidfile="$log.pids"
rm -f "$tmark" "$pidfile"
: >"$pidfile"
before=$(ls -1 "$shmdir" 2>/dev/null | sort)

# Not RCP_*: the library warns about every RCP_ variable it does not know.
export RCPTEST_PIDFILE="$pidfile"
t0=$(date +%s)
if command -v setsid >/dev/null 2>&1; then
	# A background child of a shell without job control is not a group
	# leader, so setsid(1) calls setsid() and execs: $! is the test.
	setsid "$@" >"$log" 2>&1 &
else
	"$@" >"$log" 2>&1 &
fi
pid=$!

# kill_group SIG: the test's session and process group (they are one).
kill_group() {
	kill "-$1" "-$pid" 2>/dev/null
	for p in $(members); do kill "-$1" "$p" 2>/dev/null; done
}
# members: live processes of the test's session (zombies do not count).
members() {
	ps -e -o pid= -o sid= -o stat= 2>/dev/null |
		awk -v s="$pid" '$2 == s && $3 !~ /^Z/ { print $1 }'
}

# The watchdog polls rather than sleeping the whole limit: it then ends by
# itself soon after the test, and nothing has to interrupt a long sleep.
(
	end=$(($(date +%s) + limit))
	while kill -0 "$pid" 2>/dev/null; do
		if [ "$(date +%s)" -ge $end ]; then
			: >"$tmark"
			kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid"
			# 5 s of grace in short sleeps: when the driver kills this
			# watchdog, a pending `sleep` child outlives it, and one
			# of 5 s would be reported as left over by a driver above
			# (tests/check_driver.sh runs this driver inside one).
			g=0
			while [ $g -lt 50 ] && kill -0 "-$pid" 2>/dev/null; do
				sleep 0.1
				g=$((g + 1))
			done
			kill -KILL "-$pid" 2>/dev/null
			exit 0
		fi
		sleep 0.5
	done
) &
wd=$!
trap 'kill_group KILL; kill $wd 2>/dev/null; exit 130' INT TERM HUP

wait $pid
rc=$?
kill $wd 2>/dev/null

problems=""
note() {
	echo "$1"
	echo "$1" >>"$log"
	problems="$problems
$1"
}

timed_out=0
if [ -f "$tmark" ]; then
	rm -f "$tmark"
	timed_out=1
	echo "TIMEOUT: $name: last lines of its log:"
	tail -n 5 "$log" | sed 's/^/  | /'
	note "TIMEOUT: $name after $limit s (killed with its process group)"
fi

# Processes still running: give those already killed by PR_SET_PDEATHSIG a
# moment to go, then name and kill the rest.
left=$(members)
i=0
while [ -n "$left" ] && [ $i -lt 20 ]; do
	sleep 0.1
	left=$(members)
	i=$((i + 1))
done
leftpids=""
if [ -n "$left" ]; then
	leftpids=$(echo $left)
	note "LEFTOVER: $name left running: $(ps -o pid= -o args= -p "$(echo $left | tr ' ' ,)" 2>/dev/null | tr '\n' ';')"
	kill_group KILL
fi

# Segments named after one of the test's processes.
after=$(ls -1 "$shmdir" 2>/dev/null | sort)
new=$(printf '%s\n' "$after" | grep -vxF -e "$before" 2>/dev/null)
[ -z "$before" ] && new=$after
if [ -n "$new" ]; then
	pids="$pid $leftpids $(cat "$pidfile" 2>/dev/null)"
	for seg in $new; do
		for p in $pids; do
			case "-$seg-" in
			*-"$p"-*)
				# Every process of the test is gone by now: a live P
				# is a reused pid, someone else's segment.
				st=$(ps -o stat= -p "$p" 2>/dev/null)
				[ -n "$st" ] && [ "${st#Z}" = "$st" ] && continue
				rm -f "$shmdir/$seg"
				note "LEAK: $name left $shmdir/$seg (removed)"
				break
				;;
			esac
		done
	done
fi
rm -f "$pidfile"

# One result line per case.  cmocka: "[ RUN      ] x" opens case x, the
# next "[       OK ]", "[  FAILED  ]", "[  SKIPPED ]" or "[  ERROR   ] x"
# closes it (the summary after "[==========] N test(s) run." is not read).
# TAP: "ok ...", "not ok ...", "... # SKIP ...".
results=$(awk '
	function close_case(r) { if (cur != "") { print r " " cur; cur = "" } }
	/^\[ RUN      \] / { close_case("ERROR"); cur = substr($0, 14); next }
	/^\[       OK \] / { close_case("PASS"); next }
	/^\[  FAILED  \] / { close_case("FAIL"); next }
	/^\[  SKIPPED \] / { close_case("SKIP"); next }
	/^\[  ERROR   \] / { if (substr($0, 14, 3) != "---") close_case("FAIL"); next }
	/^\[==========\] [0-9]+ test\(s\) run\./ { close_case("ERROR"); next }
	/^not ok( |$)/ { print "FAIL " substr($0, 8); next }
	/^ok( |$)/ { print (toupper($0) ~ /# SKIP/ ? "SKIP " : "PASS ") substr($0, 4); next }
	END { close_case("ERROR") }' "$log")

{
	if [ -n "$results" ]; then
		printf '%s\n' "$results" | sed 's/^\([A-Z]*\) /:test-result: \1 /'
		if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ $timed_out -eq 0 ] &&
			! printf '%s\n' "$results" | grep -q '^\(FAIL\|ERROR\) '; then
			echo ":test-result: FAIL $name: exit status $rc"
		fi
	else
		case $rc in
		0) echo ":test-result: PASS $name" ;;
		77) echo ":test-result: SKIP $name" ;;
		99) echo ":test-result: ERROR $name" ;;
		*) [ $timed_out -eq 1 ] || echo ":test-result: FAIL $name: exit status $rc" ;;
		esac
	fi
	# TIMEOUT/LEFTOVER/LEAK lines: one failure each
	printf '%s\n' "$problems" | grep . | sed 's/^/:test-result: FAIL /'
} >"$trs.tmp"

np=$(grep -c '^:test-result: PASS' "$trs.tmp")
nf=$(grep -c '^:test-result: \(FAIL\|ERROR\|XPASS\)' "$trs.tmp")
ns=$(grep -c '^:test-result: SKIP' "$trs.tmp")
if grep -q '^:test-result: ERROR' "$trs.tmp"; then
	g=ERROR
elif [ "$nf" -gt 0 ]; then
	g=FAIL
elif [ "$np" -gt 0 ]; then
	g=PASS
else
	g=SKIP
fi
{
	cat "$trs.tmp"
	echo ":global-test-result: $g"
	[ $g = PASS ] || [ $g = SKIP ] && echo ":recheck: no" || echo ":recheck: yes"
	[ $g = PASS ] && echo ":copy-in-global-log: no" || echo ":copy-in-global-log: yes"
} >"$trs"
rm -f "$trs.tmp"
echo "$g: $name ($np passed, $nf failed, $ns skipped; $(($(date +%s) - t0)) s of $limit)"
grep '^:test-result: \(FAIL\|ERROR\)' "$trs" | sed "s|^:test-result: \([A-Z]*\) |  \1: $name: |"
exit 0
