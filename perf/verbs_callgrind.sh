#!/bin/sh
# perf/verbs_callgrind.sh [BUILD_DIR] — instructions of an 8 B send +
# receive through the verbs backend on the model of an HCA (issue 23's
# closing figure; session 20 made it one command).
#
# Runs `tests/test_verbs --pingpong N` under valgrind --tool=callgrind for
# N = 1,000 and 11,000 (each round: one 8 B frame a -> b sent, received,
# released, and one back) and takes the difference, so that opening,
# closing and the first-touch costs cancel: what is left is 10,000 round
# trips, i.e. 20,000 sends + receives.  Splits the instructions by where
# they run (callgrind_annotate, self cost per file):
#   backend  nic/verbs/*.c               (what runs on a real HCA too)
#   nic.c    nic/nic.c's dispatch        (rcp_nic_send/recv/release)
#   model    tests/verbs_mock*.c         (a real provider replaces it:
#                                         mlx5 writes a WQE, rings a
#                                         doorbell, reads a CQE)
#   other    the loop, libc
# and prints them per send + receive (one frame) and per round trip.
# Counts depend on the compiler and flags; the model is not a provider.
# Exits 77 with "SKIP: reason" without valgrind or test_verbs.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=${1:-${BUILD:-$top/build/check}}
tv=$BUILD/tests/test_verbs
command -v valgrind >/dev/null || { echo "SKIP: no valgrind"; exit 77; }
command -v callgrind_annotate >/dev/null || { echo "SKIP: no callgrind_annotate"; exit 77; }
[ -x "$tv" ] || { echo "SKIP: no $tv (configure found no rdma-core?)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n1=1000
n2=11000

# Self instructions per group, for one run of N round trips.
run() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" "$tv" --pingpong "$1" \
		>"$tmp/log.$1" 2>&1 || { cat "$tmp/log.$1" >&2; exit 1; }
	callgrind_annotate --inclusive=no --auto=no --threshold=100 "$tmp/cg.$1" 2>/dev/null |
		awk -v n="$1" '
		/^ *[0-9,]+ .*:/ {
			c = $1; gsub(",", "", c)
			if ($0 ~ /\/nic\/verbs\//) g = "backend"
			else if ($0 ~ /\/nic\/nic\.c:/) g = "nic.c"
			else if ($0 ~ /verbs_mock/) g = "model"
			else g = "other"
			s[g] += c; t += c
		}
		END { printf "%s %d %d %d %d %d\n", n, s["backend"], s["nic.c"], s["model"], s["other"], t }'
}
a=$(run $n1)
b=$(run $n2)
echo "$a
$b" | awk -v d=$((n2 - n1)) '
	NR == 1 { for (i = 2; i <= 6; i++) x[i] = $i }
	NR == 2 {
		split("backend nic.c model other total", name, " ")
		printf "%-8s %12s %12s\n", "", "per send+recv", "per round trip"
		for (i = 2; i <= 6; i++)
			printf "%-8s %12.1f %12.1f\n", name[i - 1], ($i - x[i]) / d / 2, ($i - x[i]) / d
	}'
echo "(callgrind, tests/test_verbs --pingpong $n2 minus $n1, $((n2 - n1)) round trips of two 8 B frames)"
