#!/bin/sh
# libFuzzer target tests/fuzz_bulk.c, briefly (tests/fuzz_run.sh, docs/fuzzing.md).
exec "${srcdir:-.}/tests/fuzz_run.sh" bulk
