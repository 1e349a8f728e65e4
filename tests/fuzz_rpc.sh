#!/bin/sh
# libFuzzer target tests/fuzz_rpc.c, briefly (tests/fuzz_run.sh, docs/fuzzing.md).
exec "${srcdir:-.}/tests/fuzz_run.sh" rpc
