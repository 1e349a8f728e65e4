#!/bin/sh
# docs/config.md must list exactly the RCP_* variables of common/env.c.
top=${srcdir:-.}
code=$(grep -o '{"RCP_[A-Z0-9_]*"' "$top/common/env.c" | tr -d '{"' | sort -u)
doc=$(grep -o '^| `RCP_[A-Z0-9_]*`' "$top/docs/config.md" | tr -d '|` ' | sort -u)
if [ "$code" != "$doc" ]; then
	echo "docs/config.md and common/env.c disagree:"
	diff -u /dev/fd/3 /dev/fd/4 3<<E1 4<<E2
$code
E1
$doc
E2
	exit 1
fi
echo "config doc lists all $(echo "$code" | wc -l) variables"
echo "1 passed, 0 failed"
