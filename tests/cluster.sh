#!/bin/sh
# tests/cluster.sh — tools/rcp-cluster (issue 20): a 4-host cluster comes
# up, names resolve, UDP crosses it both ways and over IPv4 and IPv6, an RCP
# udp ping-pong runs between two hosts, the shaping qdiscs carry the
# traffic, the loss rule drops about the fraction asked of a counted
# stream, and `down` leaves no namespace, /etc/netns entry or state
# behind.  No timing is asserted: counters only (tc, nft, datagrams).
# Skips (77) without root or network namespaces.  TAP, one line a check.
set -u
. "${srcdir:-.}/tests/cluster_lib.sh"
udp="$b/tests/cluster-udp"
pp="$b/perf/rcp-pingpong"
name="t$$"
X() { "$rcpc" --name "$name" exec "$@"; }

cl_tmp rcpc-test

out=$(C up 4 --rate 1gbit --loss 0 2>&1)
st=$?
if [ $st -eq 77 ]; then
	echo "$out"
	exit 77
fi
k=0 failed=0
ok() { k=$((k + 1)); echo "ok $k - $1"; }
nok() { k=$((k + 1)); failed=$((failed + 1)); echo "not ok $k - $1"; }
check() { # check DESC CMD...: one TAP line for CMD's status
	d=$1; shift
	if "$@"; then ok "$d"; else nok "$d"; fi
}
[ $st -eq 0 ] && ok "up 4" || { echo "$out"; nok "up 4"; exit 1; }
quiet() { "$@" >/dev/null; }
check "up is idempotent" quiet C up 4 --rate 1gbit --loss 0

# names: each host resolves every other to its addresses; its own name
resolves() { X "$1" getent "$2" "$3" | grep -q "^$4 "; }
check "h1 resolves h3 (IPv4)" resolves h1 ahostsv4 h3 '198\.18\.0\.3'
check "h4 resolves h2 (IPv6)" resolves h4 ahostsv6 h2 '2001:2::2'
whereami() { [ "$(X h2 sh -c 'hostname; pwd')" = "h2
$PWD" ]; }
check "exec: host name h2, caller's directory" whereami

# udp_run FROM TO N SIZE [-4|-6]: N datagrams FROM -> TO; prints
# "received R of N".  The receiver says "ready" before the sender starts.
udp_run() {
	rm -f "$tmp/fifo" && mkfifo "$tmp/fifo" || return 1
	X "$2" "$udp" recv 9000 >"$tmp/fifo" &
	rpid=$!
	exec 3<"$tmp/fifo"
	read -r line <&3
	[ "$line" = ready ] || { exec 3<&-; wait $rpid; return 1; }
	X "$1" "$udp" send "$2" 9000 "$3" "$4" ${5:-}
	read -r line <&3
	exec 3<&-
	wait $rpid || return 1
	echo "$line"
}
r=$(udp_run h1 h2 200 64 -4)
check "udp h1 -> h2, IPv4: 200 of 200 ($r)" [ "$r" = "received 200 of 200" ]
r=$(udp_run h3 h4 200 64 -6)
check "udp h3 -> h4, IPv6: 200 of 200 ($r)" [ "$r" = "received 200 of 200" ]

# RCP over udp between two hosts, every byte verified
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
X h2 "$pp" --listen udp:198.18.0.2:7000 --sleep --verify --no-pin >"$tmp/fifo" 2>"$tmp/srv.out" &
spid=$!
# it prints "serving ..." once its endpoint is open
exec 3<"$tmp/fifo"
read -r line <&3
if X h1 "$pp" --connect udp:198.18.0.2:7000 --local udp:198.18.0.1: --sleep --no-pin \
	--iters 30 --warmup 3 --verify --sizes 8,64k,1M >"$tmp/cli.out" 2>&1 && cat <&3 >/dev/null &&
	wait $spid &&
	grep -q '^verified: ' "$tmp/cli.out"; then
	exec 3<&-
	ok "rcp-pingpong udp h1 <-> h2, verified"
else
	exec 3<&-
	kill $spid 2>/dev/null
	cat "$tmp/cli.out" "$tmp/srv.out"
	nok "rcp-pingpong udp h1 <-> h2, verified"
fi

# kernel TCP between the same hosts (rcp-pingpong tcp:, cluster_bench.sh's
# baseline): a row per size means every round trip of that size came back
rm -f "$tmp/fifo" && mkfifo "$tmp/fifo"
X h2 "$pp" --listen tcp:198.18.0.2:7001 --sleep --no-pin --timeout-ms 5000 >"$tmp/fifo" \
	2>"$tmp/srv.out" &
spid=$!
exec 3<"$tmp/fifo"
read -r line <&3
X h1 "$pp" --connect tcp:198.18.0.2:7001 --sleep --no-pin --timeout-ms 5000 --iters 30 \
	--warmup 3 --sizes 8,64k,1M --csv >"$tmp/cli.out" 2>&1
st=$?
cat <&3 >/dev/null
exec 3<&-
wait $spid
sst=$?
rows=$(grep -c '^tcp,\(8\|65536\|1048576\),30,' "$tmp/cli.out")
if [ $st -eq 0 ] && [ $sst -eq 0 ] && [ "$rows" -eq 3 ]; then
	ok "kernel TCP h1 <-> h2 (rcp-pingpong tcp:): 3 sizes, 30 round trips each"
else
	cat "$tmp/cli.out" "$tmp/srv.out"
	nok "kernel TCP h1 <-> h2 (rcp-pingpong tcp:): client $st, server $sst, $rows rows"
fi

# shaping: the HTB class on h1's link and on the switch port toward h2
# carried that traffic (counted bytes, not time)
sent=$(X h1 tc -s class show dev eth0 | sed -n 's/^ Sent \([0-9]*\) bytes.*/\1/p' | head -1)
check "h1's shaper carried the ping-pong (${sent:-?} bytes > 1 MiB)" [ "${sent:-0}" -gt 1048576 ]
# at 10 mbit a burst of 300 datagrams of 1400 B must queue: overlimits
C up 4 --rate 10mbit --loss 0 >/dev/null
r=$(udp_run h3 h1 300 1400 -4)
ol=$(X h3 tc -s class show dev eth0 | sed -n 's/.*overlimits \([0-9]*\).*/\1/p' | head -1)
check "10 mbit: burst queued in the shaper (overlimits ${ol:-?}), all delivered ($r)" \
	sh -c "[ '${ol:-0}' -gt 0 ] && [ '$r' = 'received 300 of 300' ]"

# loss: 10% of 4000 datagrams: the nft counter and the receiver agree
C up 4 --rate none --loss 10% >/dev/null
r=$(udp_run h2 h3 4000 64 -4)
got=$(echo "$r" | sed -n 's/^received \([0-9]*\) of 4000$/\1/p')
drops=$(ip netns exec "rcpc-$name-sw" nft list table bridge rcpc 2>/dev/null |
	sed -n 's/.*counter packets \([0-9]*\) .* drop$/\1/p')
# binomial(4000, 0.1): mean 400, sd 19; 250..550 is ~8 sd
check "loss 10%: $((4000 - ${got:-4000})) of 4000 lost (250..550)" \
	sh -c "[ -n '$got' ] && [ $((4000 - ${got:-4000})) -ge 250 ] && [ $((4000 - ${got:-4000})) -le 550 ]"
check "loss 10%: the wire's drop counter (${drops:-?}) covers the losses" \
	sh -c "[ -n '$drops' ] && [ '$drops' -ge $((4000 - ${got:-4000})) ]"

# down: nothing of this cluster is left
C down
check "down: no namespaces" sh -c "! ip netns list | grep -q '^rcpc-$name-'"
check "down: no /etc/netns entries" sh -c "! ls -d /etc/netns/rcpc-$name-* 2>/dev/null | grep -q ."
check "down: no state" [ ! -e "/run/rcp-cluster/$name" ]
check "down twice is fine" C down

# a cluster whose script was killed outright (its pid gone) is swept by
# the next script's cl_tmp (cl_sweep)
sh -c 'exit 0' &
dead=$!
wait $dead
"$rcpc" --name "t$dead" up 1 --rate none >/dev/null 2>&1
check "a killed script's cluster is there to sweep" quiet ip netns pids "rcpc-t$dead-sw"
C up 1 --rate none >/dev/null 2>&1 # a live script's cluster: kept
cl_sweep
check "cl_sweep took it down" sh -c "! ip netns list | grep -q '^rcpc-t$dead-'"
check "cl_sweep left a live script's cluster up" quiet ip netns pids "rcpc-$name-sw"
C down >/dev/null 2>&1
echo "1..$k"
[ $failed -eq 0 ]
