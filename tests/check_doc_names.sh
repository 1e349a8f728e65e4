#!/bin/sh
# tests/check_doc_names.sh — docs name only what exists (issue 19 item 6:
# "docs true to the code").  Every `backticked` span of the design docs is
# read for C-style names (a word with an underscore, a word followed by
# "(", or a macro-like word in capitals) and file names (ending .c .h .sh .mk .py); each must occur in the
# tree's sources (any file outside docs/ and *.md, so env variables, stats
# fields, test cases and PVM's own calls count) or, for a file, be a path
# or a basename in the tree.  A renamed or deleted function, macro or file
# then fails here instead of lingering in prose (issue 19's review found
# DUPTHRESH, a dead macro, still described as the loss rule).  Names that
# are meant to be absent (history: "X is gone"; other projects' calls;
# placeholders) go in the allowlist below, with the doc that needs them.
# docs/results.md is a log of past figures and is not read; nor is this
# script as a source (its comments and allowlist would vouch for names).
top=${srcdir:-.}
cd "$top" || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if [ -d .git ] || [ -f .git ]; then
	git ls-files >"$tmp/files" 2>/dev/null
fi
if [ ! -s "$tmp/files" ]; then
	find . -path ./.git -prune -o -path './build*' -prune -o -path ./autom4te.cache -prune \
		-o -type f -print | sed 's|^\./||' >"$tmp/files"
fi
grep -v -e '^docs/' -e '\.md$' -e '\.csv$' -e '^perf/results/' -e '^tests/check_doc_names.sh$' "$tmp/files" |
	while IFS= read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done >"$tmp/src"
tr '\n' '\0' <"$tmp/src" | xargs -0 grep -ohE '[A-Za-z_][A-Za-z0-9_]*' 2>/dev/null |
	sort -u >"$tmp/words"
sed 's|.*/||' "$tmp/files" | sort -u >"$tmp/base"

# Allowed though absent: "doc name", one a line.
cat >"$tmp/allow" <<'ALLOW'
core.md deadline_rough
nic.md sys_enter_sendto
nic.md BPF_F_XDP_HAS_FRAGS
nic.md req_notify
nic.md ibv_fork_init
nic.md key_parse
nic.md path_query
nic.md mc_join
nic.md mc_leave
pvm.md pvm_addmhf
pvm.md pvm_recvf
pvm.md includedir/rcp/pvmrcp.h
pvm.md pvm3.h
cluster.md RCPTEST_CLUSTER_DOWN
rcpio.md MPI_Allgather
rcpio.md MPI_Alltoallv
rcpio.md read_at_all
rcpio.md page_reporting_order
rcpio.md get_position
rcpio.md set_view
rcpio.md MPI_Pack
rcpio.md MPI_Unpack
rcpio.md MPI_File_delete
fuzzing.md tests/fuzz_TARGET.sh
fuzzing.md FUZZ_KNOWN_STALE
rpc.md NO_RFP
nic.md REASON
ALLOW

docs=${RCP_DOC_NAMES_DOCS:-"docs/protocol.md docs/core.md docs/waiting.md docs/nic.md docs/rpc.md
	docs/bulk.md docs/pvm.md docs/config.md docs/cluster.md docs/rcpio.md docs/fuzzing.md"}
# doc line kind name, for every name in a backticked span outside code blocks
for d in $docs; do
	awk -v d="${d##*/}" '
	/^```/ { fence = !fence; open = 0; next }
	fence { next }
	/^[[:space:]]*$/ { open = 0; next } # a span never crosses a paragraph
	{
		# A span may run over a line end: OPEN says one is open as the
		# line starts, so piece I lies inside a span when I + OPEN is even.
		n = split($0, a, "`")
		first = open ? 1 : 2
		open = (open + n - 1) % 2
		for (i = first; i <= n; i += 2) {
			s = a[i]
			while (match(s, /[A-Za-z_][A-Za-z0-9_]*\(/)) {
				print d, NR, "name", substr(s, RSTART, RLENGTH - 1)
				s = substr(s, RSTART + RLENGTH)
			}
			m = split(a[i], t, /[^A-Za-z0-9_.\/+-]+/)
			for (j = 1; j <= m; j++) {
				w = t[j]
				if (w ~ /[A-Za-z0-9_]\.(c|h|sh|mk|py)$/) { print d, NR, "file", w; continue }
				if (w ~ /^[A-Z][A-Z0-9]+$/ && length(w) >= 4) { print d, NR, "name", w; continue }
				while (match(w, /[A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]*/)) {
					x = substr(w, RSTART, RLENGTH)
					w = substr(w, RSTART + RLENGTH)
					if (x !~ /_$/) print d, NR, "name", x # RCP_*: a family
				}
			}
		}
	}' "$d"
done >"$tmp/refs"

bad=$(awk -v W="$tmp/words" -v B="$tmp/base" -v F="$tmp/files" -v A="$tmp/allow" '
	BEGIN {
		while ((getline l < W) > 0) word[l] = 1
		while ((getline l < B) > 0) base[l] = 1
		while ((getline l < F) > 0) { file[l] = 1; n = split(l, p, "/")
			for (i = 2; i <= n; i++) { s = p[i]; for (j = i + 1; j <= n; j++) s = s "/" p[j]; tail[s] = 1 } }
		while ((getline l < A) > 0) allow[l] = 1
	}
	{
		d = $1; k = $3; x = $4
		if ((d " " x) in allow) next
		if (k == "name" && !(x in word)) print "  docs/" d ":" $2 ": " x
		if (k == "file") {
			if (x ~ /\//) { if (!(x in file) && !(x in tail)) print "  docs/" d ":" $2 ": " x }
			else if (!(x in base)) print "  docs/" d ":" $2 ": " x
		}
	}' "$tmp/refs")
if [ -n "$bad" ]; then
	echo "FAIL: docs name what the tree does not have (fix the doc, or allowlist it in $0):"
	printf '%s\n' "$bad"
	exit 1
fi
echo "every name and file the docs mention exists ($(wc -l <"$tmp/refs") references)"
