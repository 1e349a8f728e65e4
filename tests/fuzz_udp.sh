#!/bin/sh
# libFuzzer target tests/fuzz_udp.c, briefly (tests/fuzz_run.sh, docs/fuzzing.md).
exec "${srcdir:-.}/tests/fuzz_run.sh" udp
