/*
 * examples/rpc_write — the Mercury paper's remote write.
 *
 * The client exposes a scattered buffer (several segments of odd sizes) as
 * one READ_ONLY bulk handle and calls "example.write" with the handle and a
 * file name.  The server pulls the data with a pipeline of DEPTH chunks of
 * CHUNK bytes in flight (rcp_bulk_pipeline); as each chunk lands it is
 * written to the file at its offset (pwrite), so disk and transfer
 * overlap.  It answers with the bytes written; the client then reads the
 * file back and checks every byte against its segments.
 *
 * usage: rpc_write [--transport shm|udp] [--size BYTES] [--chunk BYTES]
 *                  [--depth N] [--file PATH]
 * Runs the server in a forked child.  Exit 0 when the file matches.
 */
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rcp/bulk.h>
#include <rcp/rpc.h>

struct write_in {
	rcp_bulk *data;
	const char *path;
	uint64_t chunk;
	uint32_t depth;
};
RCP_PROC_DEFINE(proc_write_in, struct write_in, rcp_proc_bulk(p, &v->data);
                rcp_proc_string(p, &v->path); rcp_proc_u64(p, &v->chunk);
                rcp_proc_u32(p, &v->depth))
RCP_PROC_DEFINE(proc_u64, uint64_t, rcp_proc_u64(p, v))

struct job {
	rcp_rpc_handle *h;
	rcp_bulk *remote, *local;
	unsigned char *buf;
	int fd;
	uint64_t written;
	int err;
};

static rcp_bulk_ctx *g_bulk;
static int g_quit;

static int on_chunk(void *arg, int status, size_t index, uint64_t off, size_t len)
{
	struct job *j = arg;
	(void)index;
	if (status)
		return status;
	if (pwrite(j->fd, j->buf + off, len, (off_t)off) != (ssize_t)len) {
		j->err = RCP_ESYS;
		return RCP_ESYS; /* stops the pipeline */
	}
	j->written += len;
	return 0;
}

static void on_done(void *arg, int status)
{
	struct job *j = arg;
	if (!status && j->err)
		status = j->err;
	close(j->fd);
	rcp_rpc_respond(j->h, &j->written, status);
	rcp_bulk_free(j->remote);
	rcp_bulk_free(j->local);
	free(j->buf);
	free(j);
	g_quit = 1;
}

static void h_write(rcp_rpc_handle *h, void *arg)
{
	struct write_in in = {0};
	struct job *j = calloc(1, sizeof *j);
	uint64_t size;
	int rc;
	(void)arg;
	rc = rcp_rpc_get_input(h, &in);
	if (rc || !j || !in.path || !in.chunk || !in.depth) {
		rcp_bulk_free(in.data);
		free(j);
		rcp_rpc_respond(h, NULL, rc ? rc : RCP_EINVAL);
		return;
	}
	size = rcp_bulk_size(in.data);
	j->h = h;
	j->remote = in.data;
	j->buf = malloc(size ? size : 1);
	j->fd = open(in.path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (j->fd < 0 || !j->buf) {
		rcp_bulk_free(in.data);
		free(j->buf);
		free(j);
		rcp_rpc_respond(h, NULL, RCP_ESYS);
		return;
	}
	{
		void *p[1] = {j->buf};
		size_t l[1] = {size};
		rc = rcp_bulk_create(g_bulk, 1, p, l, RCP_BULK_WRITE_ONLY, &j->local);
	}
	if (!rc)
		rc = rcp_bulk_pipeline(g_bulk, rcp_rpc_handle_chan(h), RCP_BULK_PULL, in.data, 0,
		                       j->local, 0, size, in.chunk, (int)in.depth, on_chunk,
		                       on_done, j, NULL);
	if (rc) {
		j->err = rc;
		on_done(j, rc);
	}
}

static int open_all(const char *addr, unsigned flags, rcp_ep **ep, rcp_bulk_ctx **bulk,
                    rcp_rpc **rpc, uint64_t *id)
{
	struct rcp_ep_config ec = {0};
	struct rcp_rpc_config rc = {0};
	int r;
	ec.flags = flags;
	ec.crc = -1;
	if ((r = rcp_ep_open(addr, &ec, ep)) || (r = rcp_bulk_ctx_open(*ep, bulk)))
		return r;
	rc.bulk = *bulk;
	if ((r = rcp_rpc_create(*ep, &rc, rpc)))
		return r;
	return rcp_rpc_register(*rpc, "example.write", proc_write_in, proc_u64, id);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"transport", 1, 0, 't'}, {"size", 1, 0, 's'},
	                                   {"chunk", 1, 0, 'c'},     {"depth", 1, 0, 'd'},
	                                   {"file", 1, 0, 'f'},      {0, 0, 0, 0}};
	const char *transport = "shm";
	char path[256], saddr[64], caddr[64], addr[RCP_NIC_ADDRSTR_MAX];
	size_t size = (8u << 20) + 12345, chunk = 256 << 10;
	int depth = 4, c, fd[2], rc, st;
	uint64_t id, written = 0;
	pid_t pid;

	snprintf(path, sizeof path, "/tmp/rpc_write-%d.out", (int)getpid());
	while ((c = getopt_long(argc, argv, "t:s:c:d:f:", lo, NULL)) != -1) {
		switch (c) {
		case 't': transport = optarg; break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'c': chunk = strtoull(optarg, NULL, 0); break;
		case 'd': depth = atoi(optarg); break;
		case 'f': snprintf(path, sizeof path, "%s", optarg); break;
		default: fprintf(stderr, "usage: see the comment at the top\n"); return 2;
		}
	}
	if (!strcmp(transport, "shm")) {
		snprintf(saddr, sizeof saddr, "shm:rpcw-%d-s", (int)getpid());
		snprintf(caddr, sizeof caddr, "shm:rpcw-%d-c", (int)getpid());
	} else {
		snprintf(saddr, sizeof saddr, "udp:");
		snprintf(caddr, sizeof caddr, "udp:");
	}
	if (pipe(fd))
		return 1;
	pid = fork();
	if (pid == 0) {
		rcp_ep *ep;
		rcp_rpc *rpc;
		close(fd[0]);
		if (open_all(saddr, RCP_EP_ACCEPT, &ep, &g_bulk, &rpc, &id))
			_exit(3);
		rcp_rpc_set_handler(rpc, id, h_write, NULL);
		memset(addr, 0, sizeof addr);
		rcp_ep_addr(ep, addr, sizeof addr);
		if (write(fd[1], addr, sizeof addr) != (ssize_t)sizeof addr)
			_exit(3);
		while (!g_quit)
			if (rcp_rpc_loop(rpc, -1) < 0)
				_exit(4);
		rcp_rpc_destroy(rpc);
		rcp_bulk_ctx_close(g_bulk);
		rcp_ep_close(ep);
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], addr, sizeof addr) != (ssize_t)sizeof addr)
		return 1;
	{
		rcp_ep *ep;
		rcp_bulk_ctx *bulk;
		rcp_rpc *rpc;
		rcp_chan *ch;
		rcp_rpc_req *rq;
		struct write_in in;
		/* A scattered buffer: three segments of odd sizes. */
		size_t lens[3] = {size / 3 + 7, size / 5 + 1, 0};
		void *ptrs[3];
		unsigned char *file;
		size_t off = 0;
		lens[2] = size - lens[0] - lens[1];
		for (int i = 0; i < 3; i++) {
			ptrs[i] = malloc(lens[i] ? lens[i] : 1);
			for (size_t k = 0; k < lens[i]; k++)
				((unsigned char *)ptrs[i])[k] =
				    (unsigned char)((off + k) * 131 + 7);
			off += lens[i];
		}
		if ((rc = open_all(caddr, 0, &ep, &bulk, &rpc, &id)) ||
		    (rc = rcp_connect(ep, addr, &ch)) ||
		    (rc = rcp_bulk_create(bulk, 3, ptrs, lens, RCP_BULK_READ_ONLY, &in.data))) {
			fprintf(stderr, "rpc_write: setup: %s\n", rcp_strerror(rc));
			return 1;
		}
		in.path = path;
		in.chunk = chunk;
		in.depth = (uint32_t)depth;
		rc = rcp_rpc_forward(rpc, ch, id, &in, &written, -1, NULL, NULL, &rq);
		if (!rc)
			rc = rcp_rpc_wait(rq, -1);
		if (rc) {
			fprintf(stderr, "rpc_write: call: %s\n", rcp_strerror(rc));
			return 1;
		}
		rcp_rpc_req_free(rq);
		/* Check the file against the segments. */
		file = malloc(size ? size : 1);
		{
			int f = open(path, O_RDONLY);
			if (f < 0 || read(f, file, size) != (ssize_t)size || written != size) {
				fprintf(stderr, "rpc_write: file short (%llu of %zu written)\n",
				        (unsigned long long)written, size);
				return 1;
			}
			close(f);
		}
		off = 0;
		for (int i = 0; i < 3; i++) {
			if (memcmp(file + off, ptrs[i], lens[i])) {
				fprintf(stderr, "rpc_write: segment %d differs\n", i);
				return 1;
			}
			off += lens[i];
			free(ptrs[i]);
		}
		free(file);
		unlink(path);
		printf("rpc_write: %zu bytes in 3 segments pulled in %zu-byte chunks, %d in "
		       "flight, written and verified\n",
		       size, chunk, depth);
		rcp_bulk_free(in.data);
		rcp_rpc_destroy(rpc);
		rcp_bulk_ctx_close(bulk);
		rcp_ep_close(ep);
	}
	while (waitpid(pid, &st, 0) < 0)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
