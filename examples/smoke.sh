#!/bin/sh
# The examples as smoke tests: rpc_write (scattered pull pipeline into a
# file, verified) and kvstore (both modes, values verified) over shm and udp.
set -e
tmp=${TMPDIR:-/tmp}/rpc-smoke-$$
./examples/rpc_write --transport shm --size 3000001 --chunk 65536 --depth 4 --file "$tmp.shm"
./examples/rpc_write --transport udp --size 1000003 --chunk 100000 --depth 3 --file "$tmp.udp"
./examples/kvstore --transport shm --mode reply --ops 20000 --keys 500
./examples/kvstore --transport shm --mode fetch --ops 20000 --keys 500
./examples/kvstore --transport udp --mode reply --ops 5000 --keys 200
# Corrupted frames: the examples open with zeroed configs, which must keep
# the CRC on (issue 18).
RCP_FAULTS=corrupt=0.02,seed=3 ./examples/kvstore --transport shm --ops 5000 --keys 200
RCP_FAULTS=corrupt=0.02,seed=4 ./examples/kvstore --transport udp --ops 2000 --keys 200
# A client killed mid-run takes its forked server with it.
./examples/kvstore --transport shm --ops 100000000 --keys 200 >/dev/null &
client=$!
server=
for _ in $(seq 200); do
	server=$(pgrep -P "$client") && break
	sleep 0.05
done
[ -n "$server" ] || { echo "kvstore: no server process"; kill -9 "$client"; exit 1; }
kill -9 "$client"
wait "$client" 2>/dev/null || :
if ! timeout 10 tail --pid="$server" -s 0.05 -f /dev/null; then
	echo "kvstore: server $server outlived its client"
	kill -9 "$server"
	exit 1
fi
echo "8 passed, 0 failed"
