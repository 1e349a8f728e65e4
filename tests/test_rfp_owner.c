/*
 * tests/test_rfp_owner.c — remote fetch trusts only segments of its own
 * user (docs/rpc.md, "Remote fetch: who owns the segment").
 *
 * A forked server offers "t.echo" over shm; the client uses RCP_RPC_FETCH.
 * The server waits for a go byte before it creates its rpc context, so the
 * test can first plant a file at the segment name the server will use
 * (/rcp-rfp-NS-PID-0: this process never serves, so the child's
 * per-process counter starts at 0); or, once the server is up, the test
 * alters its segment before the client's first call (which attaches).
 * - server: a name taken by another uid is refused, left untouched, and
 *   counted (server stats.rfp_refused, sent back by "t.quit"); clients
 *   stay in server-reply.  A stale file of our own uid at the name is
 *   replaced, and the new segment has mode 0600 even under umask 0277.
 * - client: a segment with mode 0644, of another uid, or one page shorter
 *   than the geometry the server announced, or a symlink at its name is
 *   refused (client stats.rfp_refused), never mapped (checked
 *   in /proc/self/maps), and every call still completes by server-reply.
 * - sweep: a new server removes segments of exited servers only if they
 *   are files of its own uid.
 * Rows that need another uid (fchown to 65534) run only as root.
 * Pipes carry addresses and counts only; nothing waits on time.
 */
#include <signal.h>
#include <sys/stat.h>

#include <rcp/rpc.h>

#include "testutil.h"

#define WAIT_NS (60ll * 1000000000)
#define NOBODY  65534

RCP_PROC_DEFINE(proc_u64, uint64_t, rcp_proc_u64(p, v))

static uint64_t id_echo, id_quit;

static void reg(rcp_rpc *rpc)
{
	assert_int_equal(rcp_rpc_register(rpc, "t.echo", proc_u64, proc_u64, &id_echo), 0);
	assert_int_equal(rcp_rpc_register(rpc, "t.quit", NULL, proc_u64, &id_quit), 0);
}

static int open_ep(const char *tag, unsigned flags, rcp_ep **ep)
{
	char addr[64];
	struct rcp_ep_config ec = {0};
	ec.flags = flags;
	snprintf(addr, sizeof addr, "shm:rfpo-%d-%s", (int)getpid(), tag);
	return rcp_ep_open(addr, &ec, ep);
}

/* ---- server (child) ---- */

struct server {
	rcp_rpc *rpc;
	int quit;
};

static void h_echo(rcp_rpc_handle *h, void *arg)
{
	uint64_t v = 0;
	(void)arg;
	if (rcp_rpc_get_input(h, &v)) {
		rcp_rpc_respond(h, NULL, RCP_EPROTO);
		return;
	}
	v++;
	rcp_rpc_respond(h, &v, 0);
}

static void h_quit(rcp_rpc_handle *h, void *arg)
{
	struct server *s = arg;
	struct rcp_rpc_stats st;
	rcp_rpc_get_stats(s->rpc, &st);
	rcp_rpc_respond(h, &st.rfp_refused, 0);
	s->quit = 1;
}

static int server_main(const char *tag, int gofd, int wfd)
{
	rcp_ep *ep;
	struct server s = {0};
	char me[RCP_NIC_ADDRSTR_MAX] = {0}, go;
	if (read(gofd, &go, 1) != 1)
		return 9;
	if (open_ep(tag, RCP_EP_ACCEPT, &ep) || rcp_rpc_create(ep, NULL, &s.rpc))
		return 10;
	reg(s.rpc);
	rcp_rpc_set_handler(s.rpc, id_echo, h_echo, &s);
	rcp_rpc_set_handler(s.rpc, id_quit, h_quit, &s);
	rcp_ep_addr(ep, me, sizeof me);
	if (write(wfd, me, sizeof me) != (ssize_t)sizeof me)
		return 11;
	while (!s.quit)
		if (rcp_rpc_loop(s.rpc, WAIT_NS) < 0)
			return 12;
	rcp_rpc_destroy(s.rpc);
	rcp_ep_close(ep);
	return 0;
}

struct srv {
	pid_t pid;
	int go, rd;
	char addr[RCP_NIC_ADDRSTR_MAX];
	char seg[96]; /* /dev/shm path of its segment (counter 0) */
};

/* Our pid namespace (its inode), as in segment names. */
static unsigned pidns(void)
{
	struct stat st;
	assert_int_equal(stat("/proc/self/ns/pid", &st), 0);
	return (unsigned)(uint32_t)st.st_ino;
}

/* Forks a server that waits for srv_go(). */
static void srv_fork(struct srv *v, const char *tag)
{
	int g[2], a[2];
	assert_int_equal(pipe(g), 0);
	assert_int_equal(pipe(a), 0);
	v->pid = test_fork();
	assert_true(v->pid >= 0);
	if (v->pid == 0) {
		close(g[1]), close(a[0]);
		_exit(server_main(tag, g[0], a[1]));
	}
	close(g[0]), close(a[1]);
	v->go = g[1];
	v->rd = a[0];
	snprintf(v->seg, sizeof v->seg, "/dev/shm/rcp-rfp-%u-%d-0", pidns(), (int)v->pid);
}

static void srv_go(struct srv *v)
{
	assert_int_equal(write(v->go, "g", 1), 1);
	assert_int_equal(read(v->rd, v->addr, sizeof v->addr), (ssize_t)sizeof v->addr);
	close(v->go), close(v->rd);
}

/* ---- client ---- */

struct cli {
	rcp_ep *ep;
	rcp_rpc *rpc;
	rcp_chan *ch;
};

static void cli_open(struct cli *c, const char *tag, const char *addr)
{
	struct rcp_rpc_config cfg = {0};
	cfg.flags = RCP_RPC_FETCH;
	assert_int_equal(open_ep(tag, 0, &c->ep), 0);
	assert_int_equal(rcp_rpc_create(c->ep, &cfg, &c->rpc), 0);
	reg(c->rpc);
	assert_int_equal(rcp_connect(c->ep, addr, &c->ch), 0);
}

static void echo(struct cli *c, uint64_t v)
{
	rcp_rpc_req *rq;
	uint64_t out = 0;
	assert_int_equal(rcp_rpc_forward(c->rpc, c->ch, id_echo, &v, &out, -1, NULL, NULL, &rq), 0);
	assert_int_equal(rcp_rpc_wait(rq, WAIT_NS), 0);
	assert_true(out == v + 1);
	rcp_rpc_req_free(rq);
}

/* Stops the server; returns its stats.rfp_refused. */
static uint64_t cli_quit(struct cli *c, struct srv *v)
{
	rcp_rpc_req *rq;
	uint64_t refused = 99;
	assert_int_equal(
	    rcp_rpc_forward(c->rpc, c->ch, id_quit, NULL, &refused, -1, NULL, NULL, &rq), 0);
	assert_int_equal(rcp_rpc_wait(rq, WAIT_NS), 0);
	rcp_rpc_req_free(rq);
	rcp_rpc_destroy(c->rpc);
	rcp_ep_close(c->ep);
	assert_int_equal(test_wait_child(v->pid), 0);
	return refused;
}

/* 1 if this process maps file PATH. */
static int mapped(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;
	assert_non_null(f);
	while (fgets(line, sizeof line, f))
		if (strstr(line, path))
			n = 1;
	fclose(f);
	return n;
}

/* Ten calls, then the client's stats. */
static void run_calls(struct cli *c, struct rcp_rpc_stats *st)
{
	for (uint64_t i = 0; i < 10; i++)
		echo(c, i * 7);
	rcp_rpc_get_stats(c->rpc, st);
}

/* ---- server side ---- */

/* Another uid created the server's name first. */
static void t_server_squatted(void **state)
{
	struct srv v;
	struct cli c;
	struct rcp_rpc_stats st;
	struct stat fs;
	int fd;
	(void)state;
	if (geteuid() != 0)
		skip(); /* needs fchown to another uid */
	srv_fork(&v, "sq");
	fd = open(v.seg, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
	assert_int_equal(write(fd, "planted", 7), 7);
	close(fd);
	srv_go(&v);
	cli_open(&c, "sqc", v.addr);
	run_calls(&c, &st);
	assert_int_equal(st.rfp_calls, 0); /* the server offered no RFP */
	assert_int_equal(st.rfp_refused, 0);
	assert_int_equal(cli_quit(&c, &v), 1); /* the server refused its name */
	/* Untouched: same owner, contents, not removed. */
	assert_int_equal(stat(v.seg, &fs), 0);
	assert_int_equal(fs.st_uid, NOBODY);
	assert_int_equal(fs.st_size, 7);
	assert_int_equal(unlink(v.seg), 0);
}

/* A stale file of ours at the name (an exited process that had the
 * server's pid) is replaced; the segment is 0600 under umask 0277. */
static void t_server_stale_ours(void **state)
{
	struct srv v;
	struct cli c;
	struct rcp_rpc_stats st;
	struct stat fs;
	mode_t old;
	int fd;
	(void)state;
	old = umask(0277);
	srv_fork(&v, "st");
	umask(old);
	fd = open(v.seg, O_RDWR | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	close(fd);
	srv_go(&v);
	assert_int_equal(stat(v.seg, &fs), 0);
	assert_int_equal(fs.st_uid, geteuid());
	assert_int_equal(fs.st_mode & 07777, 0600);
	assert_true(fs.st_size > 0);
	cli_open(&c, "stc", v.addr);
	run_calls(&c, &st);
	assert_true(st.rfp_calls > 0);
	assert_int_equal(st.rfp_refused, 0);
	assert_int_equal(cli_quit(&c, &v), 0);
}

/* A new server removes the segments of exited servers of its pid
 * namespace, but only files of its own uid: as root it could remove
 * anyone's.  Both files are named after a pid that has exited. */
static void t_sweep_only_ours(void **state)
{
	struct srv v;
	struct cli c;
	struct rcp_rpc_stats st;
	struct stat fs;
	char theirs[96], ours[96];
	pid_t dead;
	int fd;
	(void)state;
	if (geteuid() != 0)
		skip(); /* needs fchown to another uid */
	dead = test_fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(test_wait_child(dead), 0);
	srv_fork(&v, "sw");
	snprintf(theirs, sizeof theirs, "/dev/shm/rcp-rfp-%u-%d-7", pidns(), (int)dead);
	snprintf(ours, sizeof ours, "/dev/shm/rcp-rfp-%u-%d-8", pidns(), (int)dead);
	fd = open(theirs, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
	close(fd);
	fd = open(ours, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	close(fd);
	srv_go(&v); /* its first segment: the sweep ran */
	assert_int_equal(stat(ours, &fs), -1);
	assert_int_equal(stat(theirs, &fs), 0);
	assert_int_equal(fs.st_uid, NOBODY);
	assert_int_equal(unlink(theirs), 0);
	cli_open(&c, "swc", v.addr);
	run_calls(&c, &st);
	assert_true(st.rfp_calls > 0);
	assert_int_equal(cli_quit(&c, &v), 0);
}

/* ---- client side ---- */

enum alter { A_NONE, A_MODE, A_OWNER, A_SHORT, A_SYMLINK };
static const enum alter rows[] = {A_NONE, A_MODE, A_OWNER, A_SHORT, A_SYMLINK};

static void t_client(void **state)
{
	enum alter a = *(const enum alter *)*state;
	struct srv v;
	struct cli c;
	struct rcp_rpc_stats st;
	char moved[128];
	int fd;
	if (a == A_OWNER && geteuid() != 0)
		skip();
	srv_fork(&v, "cl");
	srv_go(&v);
	fd = open(v.seg, O_RDWR | O_NOFOLLOW);
	assert_true(fd >= 0);
	if (a == A_MODE)
		assert_int_equal(fchmod(fd, 0644), 0);
	if (a == A_OWNER)
		assert_int_equal(fchown(fd, NOBODY, NOBODY), 0);
	if (a == A_SHORT) {
		/* One page short: the server only touches the area of the
		 * client it attaches (the first), so only the client's size
		 * check tells. */
		struct stat fs;
		assert_int_equal(fstat(fd, &fs), 0);
		assert_int_equal(ftruncate(fd, fs.st_size - 4096), 0);
	}
	close(fd);
	if (a == A_SYMLINK) {
		/* The name now points at the same (good) file: still refused,
		 * a link could point anywhere. */
		snprintf(moved, sizeof moved, "%s.moved", v.seg);
		assert_int_equal(rename(v.seg, moved), 0);
		assert_int_equal(symlink(moved, v.seg), 0);
	}
	{
		char tag[16]; /* one per row: a failed row leaves its endpoint */
		snprintf(tag, sizeof tag, "clc%d", (int)a);
		cli_open(&c, tag, v.addr);
	}
	run_calls(&c, &st);
	if (a == A_NONE) {
		assert_true(st.rfp_calls > 0);
		assert_int_equal(st.rfp_refused, 0);
		assert_true(mapped(v.seg));
	} else {
		assert_int_equal(st.rfp_calls, 0);
		assert_int_equal(st.rfp_refused, 1);
		assert_false(mapped(v.seg));
	}
	assert_int_equal(cli_quit(&c, &v), 0);
	if (a == A_SYMLINK)
		assert_int_equal(unlink(moved), 0); /* the server removed the link */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_server_squatted),
	    cmocka_unit_test(t_server_stale_ours),
	    cmocka_unit_test(t_sweep_only_ours),
	    TEST_ROW("t_client_ok", t_client, &rows[0]),
	    TEST_ROW("t_client_mode_0644", t_client, &rows[1]),
	    TEST_ROW("t_client_other_uid", t_client, &rows[2]),
	    TEST_ROW("t_client_short", t_client, &rows[3]),
	    TEST_ROW("t_client_symlink", t_client, &rows[4]),
	};
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
