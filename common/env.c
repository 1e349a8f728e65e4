/*
 * common/env.c — the RCP_* environment variables.
 *
 * The table below is the single list of variables the library reads; a
 * variable missing from it cannot be read (rcpi_env_str asserts in debug
 * builds), and docs/config.md mirrors it.  On first use the environment
 * is scanned once and every RCP_* name not in the table is warned about,
 * because a misspelt knob that silently does nothing costs users hours.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/rcp_common.h"

extern char **environ;

struct rcpi_env_var {
	const char *name, *def, *doc;
};

static const struct rcpi_env_var vars[] = {
    {"RCP_LOG", "warn", "log level: error, warn, info, debug"},
    {"RCP_FAULTS", "", "fault injection spec for every nic endpoint"},
    {"RCP_SPIN_NS", "50000", "ns to spin before sleeping in waits"},
    {"RCP_SLEEP_SLACK_US", "5000",
     "sleeping endpoints: how late a timer may fire while asleep, us"},
    {"RCP_SHM_RING", "1m", "shm: bytes of each per-sender receive ring"},
    {"RCP_SHM_MTU", "16k", "shm: largest frame"},
    {"RCP_SHM_PEERS", "64", "shm: senders one endpoint accepts"},
    {"RCP_SHM_DIR", "/dev/shm", "shm: where segments live (for checks)"},
    {"RCP_UDP_MTU", "0",
     "udp: largest frame (0: 65000 on loopback, interface "
     "MTU-28 (IPv4) / -48 (IPv6) elsewhere; config.mtu may lower it)"},
    {"RCP_UDP_RCVBUF", "4m", "udp: socket receive buffer (config.rx_bytes overrides)"},
    {"RCP_UDP_SNDBUF", "4m", "udp: socket send buffer"},
    {"RCP_UDP_GSO", "1",
     "udp: send batches with UDP_SEGMENT, take bursts of equal "
     "frames with UDP_GRO, where offered (0: never)"},
    {"RCP_UDP_LANE", "1",
     "udp: send to and receive from the first peer through a second socket connected to it "
     "(0: one socket for all)"},
    {"RCP_XDP_MODE", "auto",
     "xdp: where the XDP program runs: native (the driver), generic (the kernel's skb path) or "
     "auto (generic on veth, else native where the driver has it)"},
    {"RCP_XDP_BUSY_POLL", "0",
     "xdp: busy-poll the socket's NAPI for this many us (SO_BUSY_POLL, prefer busy-poll, budget "
     "64; 0: off, the default: no faster on veth)"},
    {"RCP_PEER_TIMEOUT", "5000", "ms of peer silence before RCP_EPEER"},
    {"RCP_TRANSPORT", "", "force a transport (shm, udp, xdp, verbs)"},
    {"RCP_SESSION", "", "per-job session name; frames of other sessions are dropped"},
    {"RCP_SESSION_KEY", "",
     "job key: every frame carries a Poly1305 MAC under a key derived from this string; "
     "frames without it are dropped (needs libsodium)"},
    {"RCP_CRC", "auto", "payload CRC32C: auto (where the nic does not check), 0, 1"},
    {"RCP_RTO_MIN_US", "250", "smallest retransmission timeout, us"},
    {"RCP_ACK_DELAY_US", "50",
     "how long an ack may wait for a piggyback, us (1000 on a nic that loses nothing)"},
    {"RCP_CREDITS", "64",
     "unexpected messages (eager or RTS) a channel may hold; a sender without a credit waits "
     "(config.credits overrides)"},
    {"RCP_UNEXP_BYTES", "4m",
     "bytes a channel's unexpected messages may hold, a frame buffer and a record each: fewer "
     "credits if it binds (config.unexp_bytes overrides)"},
    {"RCP_SEND_BUF", "1m",
     "bytes of copies that let one-frame sends above the inline size complete at once (0: off)"},
    {"RCP_RMA_MIN", "65536",
     "sender-first messages from this size move by RMA where offered (READY-first: from "
     "RCP_RMA_SPLIT)"},
    {"RCP_RMA_SPLIT", "65536",
     "READY-first RMA messages from this size are copied half by each side (0: off)"},
    {"RCP_WAIT", "", "spin or sleep: force the wait policy of every endpoint"},
    {"RCP_LINGER_MS", "2000",
     "most ms closing waits for frames to be acknowledged and answers a peer's resends (at "
     "most RCP_PEER_TIMEOUT)"},
    {"RCP_TIME_WAIT_MS", "50",
     "closing answers a peer heard less than this ago, which may lack our last ack (0: off; "
     "always 0 on nics that lose nothing, shm)"},
    {"RCP_TEST_EPOCH_PER_ENDPOINT", "0",
     "tests only: 1 keeps the epoch rule before per-peer epochs (a crossing first contact "
     "restarts a channel once any conversation of the endpoint ended)"},
    {"RCP_BULK_RMA", "1", "bulk: use one-sided nic RMA where offered (0: emulate over messages)"},
    {"RCP_BULK_REGCACHE", "1", "bulk: handles over the same memory share one registration"},
    {"RCP_RPC_MSG_MAX", "16k", "rpc: largest eager call message (capped at one nic frame)"},
    {"RCP_RPC_RECVS", "64", "rpc: request receives a server keeps posted"},
    {"RCP_RPC_TIMEOUT_MS", "0", "rpc: default per-call timeout, ms (0: none)"},
    {"RCP_RPC_MODE", "", "rpc: reply or fetch: force the client mode of every context"},
    {"RCP_RPC_BATCH", "1",
     "rpc: calls and answers made in one progress round go several to a message (0: never)"},
    {"RCP_RPC_SPLIT", "2",
     "rpc: a client's calls to a server leave in this many batches (1: one batch a round)"},
    {"RCP_RFP_SLOTS", "64", "rpc remote fetch: request/result slots per client"},
    {"RCP_RFP_FS_MIN", "256", "rpc remote fetch: smallest fetch size FS, bytes"},
    {"RCP_RFP_FS_MAX", "1024", "rpc remote fetch: largest fetch size FS, bytes"},
    {"RCP_RFP_RETRY", "5", "rpc remote fetch: empty fetches T that make a call slow"},
    {"RCP_RFP_FETCH_NS", "1000", "rpc remote fetch: ns between fetches of a result"},
    /* librcpio (rcpio/, docs/rcpio.md) reads these itself, once: listed so
     * the one table names every variable of the project. */
    {"RCPIO_PREFIX", "", "rcpio: files whose path begins with it go through the cache"},
    {"RCPIO_POOL_DIR", "/dev/shm", "rcpio: directory of each rank's pool file"},
    {"RCPIO_POOL_SIZE", "256m", "rcpio: bytes of block area per rank"},
    {"RCPIO_BLOCK", "1m", "rcpio: block size (every rank the same)"},
    {"RCPIO_TRANSPORT", "shm", "rcpio: shm (one host) or udp (across hosts)"},
    {"RCPIO_WRITEBACK_MS", "0", "rcpio: background write-back every N ms (0: off)"},
    {"RCPIO_STATS", "", "rcpio: 1 prints each rank's counters at MPI_Finalize"},
    {"RCPIO_FAIL_COMMIT", "", "rcpio tests: N makes world rank N-1's commits fail"},
    {NULL, NULL, NULL},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;

static const struct rcpi_env_var *find(const char *name, size_t len)
{
	for (const struct rcpi_env_var *v = vars; v->name; v++)
		if (strlen(v->name) == len && !strncmp(v->name, name, len))
			return v;
	return NULL;
}

static void scan(void)
{
	for (char **e = environ; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		if (len > 4 && !strncmp(*e, "RCP_", 4) && !find(*e, len))
			rcpi_warn("unknown variable %.*s ignored (see docs/config.md)", (int)len,
			          *e);
	}
	rcpi_log_init();
}

void rcpi_env_init(void)
{
	pthread_once(&once, scan);
}

const char *rcpi_env_str(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

int64_t rcpi_env_int(const char *name, int64_t def)
{
	const char *v = rcpi_env_str(name);
	char *end;
	long long x;

	if (!v)
		return def;
	x = strtoll(v, &end, 0);
	switch (tolower((unsigned char)*end)) {
	case 'k':
		x *= 1024;
		end++;
		break;
	case 'm':
		x *= 1024 * 1024;
		end++;
		break;
	case 'g':
		x *= 1024ll * 1024 * 1024;
		end++;
		break;
	default: break;
	}
	if (end == v || *end) {
		rcpi_warn("%s=%s is not a number; using %lld", name, v, (long long)def);
		return def;
	}
	return x;
}
