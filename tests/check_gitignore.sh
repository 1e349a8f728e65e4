#!/bin/sh
# tests/check_gitignore.sh — every file this build made would be ignored by
# git if it were made in the source tree, so an in-tree build (autoreconf;
# ./configure; make; make check) leaves `git status --porcelain` clean.  It
# asks git about each file of the build directory (out of tree or not);
# files git tracks are sources, not products.  Skips outside a git checkout
# (a release tarball, make distcheck) or without git.
top=$(cd "${srcdir:-.}" && pwd)
build=$(pwd)
if ! command -v git >/dev/null 2>&1 ||
	[ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" != "$top" ]; then
	echo "SKIP: not a git checkout"
	exit 77
fi
list=$(mktemp "${TMPDIR:-/tmp}/rcp-gitignore.XXXXXX") || exit 99
trap 'rm -f "$list"' EXIT
# Build products: programs, objects, libraries, configure's outputs, test
# logs (not data a user may have written here, such as perf CSVs), outside
# the dist directory; in an in-tree build, tracked files are sources.
(cd "$build" && find . -type f ! -path './rcp-*/*' ! -path './.git/*' \( -perm -u+x -o \
	-name '*.log' -o -name '*.trs' -o -name '*.pids' -o -name '*.o' -o -name '*.lo' -o \
	-name '*.la' -o -name '*.a' -o -name '*.so*' -o -name '*.pc' -o -name '*.sh' -o \
	-name Makefile -o -name 'config.*' -o -name 'stamp-h*' -o -name libtool \) |
	sed 's|^\./||' | sort) >"$list.all"
git -C "$top" ls-files | sort >"$list.tracked"
[ "$build" = "$top" ] && comm -23 "$list.all" "$list.tracked" >"$list" || cp "$list.all" "$list"
rm -f "$list.all" "$list.tracked"
bad=$(git -C "$top" check-ignore --no-index --stdin -v -n <"$list" | awk -F'\t' '$1 == "::" { print $2 }')
if [ -n "$bad" ]; then
	echo "FAIL: build products .gitignore does not cover (an in-tree build leaves them untracked):"
	echo "$bad" | sed 's/^/  /'
	exit 1
fi
echo "all $(wc -l <"$list") files of this build are ignored by .gitignore"
