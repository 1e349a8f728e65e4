#!/bin/sh
# Runs the libFuzzer target briefly (bounded runs, fixed seed) when it was
# built; otherwise says why it is skipped.
fuzz=./tests/fuzz_wire
if [ ! -x "$fuzz" ]; then
	echo "SKIP: fuzz_wire not built (needs clang with libFuzzer: apt-get install clang libclang-rt-14-dev)"
	exit 77
fi
exec "$fuzz" -seed=1 -runs="${RCP_FUZZ_RUNS:-100000}" -max_len=8192 -rss_limit_mb=1024
