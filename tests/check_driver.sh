#!/bin/sh
# tests/check_driver.sh — tests/driver.sh on small fixture tests: it counts
# cmocka cases and TAP lines, kills a hanging test's whole process group
# and names it, kills and reports what a test left running, and removes and
# reports the /dev/shm segments a test left behind.  Prints TAP.
set -u
top=${srcdir:-.}
drv="$top/tests/driver.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rcp-driver.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
n=0 rc=0
ok() { n=$((n + 1)); echo "ok $n $1"; }
bad() { n=$((n + 1)); echo "not ok $n $1"; rc=1; }

# run NAME SCRIPT-BODY: writes the fixture, runs it under the driver
run() {
	printf '#!/bin/sh\n%s\n' "$2" >"$tmp/$1"
	chmod +x "$tmp/$1"
	sh "$drv" --test-name "$1" --log-file "$tmp/$1.log" --trs-file "$tmp/$1.trs" \
		--color-tests no -- "$tmp/$1" >"$tmp/$1.out" 2>&1
}
count() { grep -c "^:test-result: $2" "$tmp/$1.trs"; }
# alive PID: running (a zombie nobody reaps in a container does not count)
alive() {
	st=$(ps -o stat= -p "$1" 2>/dev/null)
	[ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

# Counting: cmocka cases (one crashed: ERROR), TAP lines with a skip.
run cmocka 'cat <<E
[==========] Running 3 test(s).
[ RUN      ] a
[       OK ] a
[ RUN      ] b
[  ERROR   ] --- x != y
[  FAILED  ] b
[ RUN      ] c
[  SKIPPED ] c
[==========] 3 test(s) run.
[  PASSED  ] 1 test(s).
[  FAILED  ] 1 test(s), listed below:
[  FAILED  ] b
ok 1 t1
ok 2 t2 # SKIP no pvm
not ok 3 t3: why
ok example x (2 lines)
E
exit 1'
if [ "$(count cmocka PASS) $(count cmocka FAIL) $(count cmocka SKIP)" = "3 2 2" ] &&
	grep -q '^:global-test-result: FAIL' "$tmp/cmocka.trs"; then
	ok "cases and TAP lines counted one by one"
else
	bad "cases and TAP lines counted one by one"; cat "$tmp/cmocka.trs"
fi
run crash 'echo "[ RUN      ] a"; echo "[       OK ] a"; echo "[ RUN      ] b"; exit 134'
[ "$(count crash PASS) $(count crash ERROR)" = "1 1" ] &&
	grep -q '^:test-result: ERROR b' "$tmp/crash.trs" && ok "a case that never ended is an error" ||
	{ bad "a case that never ended is an error"; cat "$tmp/crash.trs"; }
run leak 'echo "[ RUN      ] a"; echo "[       OK ] a"; exit 23'
[ "$(count leak PASS) $(count leak FAIL)" = "1 1" ] && ok "non-zero exit after passing cases fails" ||
	{ bad "non-zero exit after passing cases fails"; cat "$tmp/leak.trs"; }
run skip 'echo "SKIP: nothing here"; exit 77'
[ "$(count skip SKIP)" = 1 ] && ok "exit 77 is one skip" || bad "exit 77 is one skip"
run plain 'exit 0'
[ "$(count plain PASS)" = 1 ] && ok "a shell test is one test" || bad "a shell test is one test"

# A hanging test and the child it forked: both killed, the test named.
RCPTEST_TIMEOUT=1 run hang 'sleep 1000 & echo "child $!" ; echo "[ RUN      ] stuck"; sleep 1000'
child=$(sed -n 's/^child //p' "$tmp/hang.log")
if grep -q '^TIMEOUT: hang after 1 s' "$tmp/hang.out" &&
	grep -q '^:test-result: ERROR stuck' "$tmp/hang.trs" && [ -n "$child" ] &&
	! alive "$child"; then
	ok "a hanging test is killed with its children and named"
else
	bad "a hanging test is killed with its children and named"; cat "$tmp/hang.out"
	[ -n "$child" ] && kill "$child" 2>/dev/null
fi

# A test that exits leaving a process behind.
run left 'sleep 1000 & echo "child $!"; exit 0'
child=$(sed -n 's/^child //p' "$tmp/left.log")
if grep -q '^LEFTOVER: left left running: *'"$child" "$tmp/left.out" &&
	[ "$(count left FAIL)" = 1 ] && ! alive "$child"; then
	ok "a process left running is killed and reported"
else
	bad "a process left running is killed and reported"; cat "$tmp/left.out"
	[ -n "$child" ] && kill "$child" 2>/dev/null
fi

# A segment named after the test's pid, and one named after a forked
# child's pid as the test helpers record it; another one is not touched.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
	other=/dev/shm/rcp-drvtest-other-$$
	: >"$other"
	run shm 'sh -c '\''echo $$ >>"$RCPTEST_PIDFILE"; : >/dev/shm/rcp-drvtest-$$-c'\''
: >/dev/shm/rcp-drvtest-$$-a
: >/dev/shm/rcp-drvtest-other-$$'
	if [ "$(grep -c '^LEAK: shm left /dev/shm/rcp-drvtest-' "$tmp/shm.out")" = 3 ] &&
		[ "$(count shm FAIL)" = 3 ] && [ -e "$other" ] &&
		! ls /dev/shm | grep -q '^rcp-drvtest-[0-9]'; then
		ok "segments named after the test's processes are removed and reported"
	else
		bad "segments named after the test's processes are removed and reported"
		cat "$tmp/shm.out"
	fi
	rm -f "$other" /dev/shm/rcp-drvtest-*
else
	ok "segments named after the test's processes # SKIP no writable /dev/shm"
fi
echo "1..$n"
exit $rc
