/*
 * tests/verbs_mock_wire.c — a wire between the HCA models of two processes
 * (session 20), so that tests which fork (tests/test_nic.c's conformance
 * suite) can run the verbs backend over tests/verbs_mock.c.
 *
 * Why.  The model keeps its HCAs, QPs and CQs in the memory of the process
 * that made them; after fork() each process has its own copy and a
 * datagram posted in one can never reach a QP in the other.  Real HCAs
 * shared by two processes loop datagrams between them; this file plays
 * that part for UD sends, and nothing else.
 *
 * How.  mock_wire_install() makes one unix datagram socketpair before any
 * fork: the parent keeps end 0, and a pthread_atfork() child handler moves
 * the child to end 1 (side 1).  Each side owns half of the 24-bit QPN
 * space (side 0 below 0x800000, side 1 from 0x800100 up), so the QPN a
 * work request names tells which process holds the QP: a UD send to a QPN
 * of the other side leaves as one socket datagram (a header naming
 * destination LID/GID, QPN, Q_Key, the sender's QPN and HCA, opcode and
 * immediate; then the payload), and a datagram to a QPN of ours is
 * delivered in process as before.  Arrivals are taken off the socket
 * (non-blocking) whenever the model is entered where hardware would have
 * DMAed them already: at every ibv_poll_cq and ibv_get_cq_event; each is
 * handed to mock_deliver_to() exactly as a local send would be (receive
 * queue, GRH bytes, Q_Key check, mock_faults.drop, completion).  So that a
 * process sleeping on its completion channel wakes when a datagram
 * arrives, the model's channel fd becomes an epoll set of the channel's
 * pipe and this socket (verbs_mock.c's m_create_comp_channel): readable
 * when either is; the arm/poll-once-more protocol (nic/verbs/verbs.c
 * vb_arm) then pumps the socket and sees the completion.  Datagrams left
 * in end 1 by a child that exited are dropped when the next child starts.
 *
 * What it does not model: more than two processes, or a grandchild (side
 * 1 forking again keeps side 1: its QPNs would collide with its parent's);
 * RC queue pairs and RDMA READ/WRITE across processes (an RC QP's peer in
 * the other process is never found: its work completes in error, so a
 * backend falls back to frames); multicast across processes (QPN 0xFFFFFF
 * stays in process); loss, delay or reordering on the wire itself (a unix
 * datagram socketpair is reliable and ordered; losses are the model's
 * mock_faults.drop or the faults wrapper's, both counted).  A full socket
 * buffer is a dropped datagram, counted in mock_wire_stats.full (UD may
 * lose; the conformance suite's acknowledged windows keep it empty).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/verbs_mock_int.h"

#define SIDE1_QPN 0x800000u

struct wire_hdr {
	uint32_t dst_qpn, src_qpn, qkey, imm;
	uint16_t dlid;
	uint8_t is_global, src_dev, with_imm, pad[3];
	uint8_t dgid[16];
};

static int sp[2] = {-1, -1};
static int side;
static struct mock_wire_stats wst;

static int my_fd(void)
{
	return sp[side];
}

/* Is QPN a QP of the other process? */
static int remote(uint32_t qpn)
{
	return qpn != 0xffffff && (qpn >= SIDE1_QPN) != (side == 1);
}

static int wire_out(struct mock_qp *s, const struct ibv_send_wr *wr, const struct ibv_ah_attr *a,
                    const uint8_t *data, uint32_t len)
{
	struct wire_hdr h;
	struct iovec iov[2] = {{&h, sizeof h}, {(void *)(uintptr_t)data, len}};
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};

	if (!remote(wr->wr.ud.remote_qpn))
		return 0;
	memset(&h, 0, sizeof h);
	h.dst_qpn = wr->wr.ud.remote_qpn;
	h.src_qpn = s->qp.qp_num;
	h.qkey = wr->wr.ud.remote_qkey;
	h.with_imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
	h.imm = wr->imm_data;
	h.dlid = a->dlid;
	h.is_global = a->is_global;
	memcpy(h.dgid, a->grh.dgid.raw, 16);
	h.src_dev = (uint8_t)s->dev->index;
	if (sendmsg(my_fd(), &m, MSG_DONTWAIT) < 0)
		wst.full++;
	else
		wst.out++;
	return 1;
}

/* Every datagram waiting on our end, delivered into our QPs. */
static void wire_in(void)
{
	static uint8_t buf[sizeof(struct wire_hdr) + 8192];
	ssize_t n;

	while ((n = recv(my_fd(), buf, sizeof buf, MSG_DONTWAIT)) >=
	       (ssize_t)sizeof(struct wire_hdr)) {
		struct wire_hdr h;
		struct ibv_ah_attr a;
		struct ibv_send_wr wr;
		struct mock_qp s;

		memcpy(&h, buf, sizeof h);
		memset(&a, 0, sizeof a);
		a.dlid = h.dlid;
		a.is_global = h.is_global;
		memcpy(a.grh.dgid.raw, h.dgid, 16);
		memset(&wr, 0, sizeof wr);
		wr.opcode = h.with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
		wr.imm_data = h.imm;
		wr.wr.ud.remote_qpn = h.dst_qpn;
		wr.wr.ud.remote_qkey = h.qkey;
		/* The sender as mock_deliver_to reads it: its HCA and QPN. */
		memset(&s, 0, sizeof s);
		s.dev = mock_dev_at(h.src_dev);
		s.qp.qp_num = h.src_qpn;
		wst.in++;
		mock_deliver_to(&s, mock_find_qp(&a, h.dst_qpn), &wr, buf + sizeof h,
		                (uint32_t)((size_t)n - sizeof h));
	}
}

static const struct mock_wire_hooks hooks = {.out = wire_out, .in = wire_in, .fd = my_fd};

static void at_fork_child(void)
{
	if (!mock_wire || side == 1)
		return;
	side = 1;
	memset(&wst, 0, sizeof wst);
	memset(mock_stats(), 0, sizeof *mock_stats()); /* the child's own counts */
	while (recv(sp[1], NULL, 0, MSG_DONTWAIT | MSG_TRUNC) >= 0)
		; /* a previous child's leftovers */
	mock_qpn_base(SIDE1_QPN + 0x100);
}

int mock_wire_install(void)
{
	static int registered;

	if (sp[0] < 0 && socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp))
		return -errno;
	if (!registered && pthread_atfork(NULL, NULL, at_fork_child))
		return -1;
	registered = 1;
	side = 0;
	memset(&wst, 0, sizeof wst);
	mock_wire = &hooks;
	return 0;
}

struct mock_wire_stats *mock_wire_stats(void)
{
	return &wst;
}
