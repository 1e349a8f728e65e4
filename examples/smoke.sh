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
echo "5 passed, 0 failed"
