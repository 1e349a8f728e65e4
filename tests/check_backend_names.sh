#!/bin/sh
# tests/check_backend_names.sh — layers above the nic choose by capability
# (rcp_nic_info.caps), never by the backend's name: wrappers change the
# name ("faults+shm", "auth+udp"), so a name compared as a string silently
# turns a feature off under them (issue 19: remote fetch did).  Fails on a
# string comparison that mentions a backend name field in the library's
# sources outside nic/ (nic/ builds the names), its tools and examples.
top=${srcdir:-.}
hits=$(cd "$top" && grep -nE '(strn?cmp|strn?casecmp|strstr|memcmp)[[:space:]]*\([^;]*\bbackend\b' \
	rcp/*.c rcp/*.h rpc/*.c rpc/*.h bulk/*.c bulk/*.h pvm-glue/*.c pvm-glue/*.h common/*.c \
	common/*.h perf/*.c examples/*.c 2>/dev/null)
if [ -n "$hits" ]; then
	echo "FAIL: a backend's name compared as a string (use a RCP_NIC_CAP_* capability):"
	echo "$hits" | sed 's/^/  /'
	exit 1
fi
echo "no backend name compared outside nic/"
