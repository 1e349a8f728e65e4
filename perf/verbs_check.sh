#!/bin/sh
# perf/verbs_check.sh — on a machine with an InfiniBand/RoCE adapter, one
# command for the verbs backend: its tests on the device, then RCP channels
# over verbs (rcp-pingpong: rendezvous by RDMA READ/WRITE from 64 KiB) next
# to perftest's ib_send_lat and ib_write_bw
# on the same device and port, both over loopback through the HCA.
#
#   perf/verbs_check.sh [BUILD_DIR] [DEVICE[:PORT]]
#
# BUILD_DIR is a configured build (default: build/check); DEVICE defaults to
# the first one ibv_devices lists, PORT to 1.  Prints "SKIP: reason" and
# exits 77 where there is no device.  NOT YET RUN ON HARDWARE: this machine
# has none (docs/nic.md, verbs); read the output with that in mind.
# test_verbs_rma's t_device_rma runs RPC and RCP channels (RDMA from 64 KiB)
# on the device (session 20).  Not here: relinked PVM over the device
# (RCP_TRANSPORT=verbs PVMRCP_VERBS_ADDR=verbs:DEV:PORT across hosts,
# docs/pvm.md); on the model PVM's multicast path is test_verbs_mcast's
# t_pvm_path.
set -u
build=${1:-build/check}
dev=${2:-}
[ -x "$build/tests/test_verbs" ] || { echo "no $build/tests/test_verbs (build first)"; exit 2; }
if [ -z "$dev" ]; then
	dev=$(ibv_devices 2>/dev/null | awk 'NR > 2 { print $1; exit }')
fi
if [ -z "$dev" ]; then
	echo "SKIP: no RDMA device (ibv_devices lists none)"
	exit 77
fi
case $dev in *:*) port=${dev#*:} dev=${dev%%:*} ;; *) port=1 ;; esac
addr="verbs:$dev:$port"
echo "== device $dev port $port"
ibv_devinfo -d "$dev" -i "$port" 2>/dev/null | grep -E 'state|active_mtu|link_layer|port_lid' || true

echo "== the nic conformance suite on the device (test_nic's verbs group: first device, port 1)"
"$build/tests/test_nic" || exit 1
echo "== tests on the device (t_device) and on the model"
"$build/tests/test_verbs" || exit 1
echo "== RMA (RC QPs, keys, the registration cache) and multicast on the model; RPC and channels on the device (t_device_rma)"
"$build/tests/test_verbs_rma" || exit 1
"$build/tests/test_verbs_mcast" || exit 1

echo "== RCP channels over verbs: rcp-pingpong (server and client on $addr)"
log=$(mktemp)
"$build/perf/rcp-pingpong" --transport verbs --listen "$addr" >"$log" 2>&1 &
srv=$!
for _ in $(seq 100); do
	grep -q "serving" "$log" && break
	sleep 0.1 # the server's banner has no other signal
done
saddr=$(sed -n 's/.*serving \([^ ]*\) .*/\1/p' "$log")
if [ -z "$saddr" ]; then
	echo "the server did not start:"; cat "$log"; kill "$srv" 2>/dev/null; rm -f "$log"; exit 1
fi
"$build/perf/rcp-pingpong" --transport verbs --connect "$saddr" --local "$addr" \
	--sizes 8,4096,65536,1M --spin
rc=$?
wait "$srv" 2>/dev/null
rm -f "$log"

echo "== perftest on the same port: ib_send_lat, ib_write_bw (8 B and 64 KiB)"
if command -v ib_send_lat >/dev/null 2>&1; then
	for t in "ib_send_lat -s 8" "ib_write_bw -s 65536"; do
		$t -d "$dev" -i "$port" >/dev/null 2>&1 &
		p=$!
		sleep 1 # perftest's server has no readiness signal either
		$t -d "$dev" -i "$port" localhost | tail -n 3
		wait "$p"
	done
else
	echo "SKIP: perftest not installed (apt-get install perftest)"
fi
exit $rc
