#!/bin/sh
# Every function declared in the public headers of librcp must be defined
# and exported by the shared library (a declared-but-missing function is a
# link error for users, invisible to tests that never call it).
top=${srcdir:-.}
lib=.libs/librcp.so
if [ ! -f "$lib" ]; then
	echo "SKIP: no shared librcp built (--disable-shared)"
	exit 77
fi
want=$(cat "$top/include/rcp/error.h" "$top/include/rcp/nic.h" "$top/include/rcp/rcp.h" "$top/include/rcp/rpc.h" "$top/include/rcp/mcastnet.h" |
	grep -o '\brcp_[a-z0-9_]*(' | tr -d '(' | sort -u)
# bulk/ (include/rcp/bulk.h)
want=$(printf '%s\n%s\n' "$want" "$(grep -o '\brcp_[a-z0-9_]*(' "$top/include/rcp/bulk.h" | tr -d '(')" | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
missing=$(echo "$want" | while read -r f; do echo "$have" | grep -qx "$f" || echo "$f"; done)
if [ -n "$missing" ]; then
	echo "declared in include/rcp but not exported by librcp:"
	echo "$missing"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "all $(echo "$want" | wc -l) public functions exported"
echo "1 passed, 0 failed"
