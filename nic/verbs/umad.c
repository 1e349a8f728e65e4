/*
 * nic/verbs/umad.c — port facts, path records and multicast joins as MADs.
 *
 * The SA is an ordinary management agent (class 0x03, version 2) reached
 * at the SM's LID on QP1 with the well-known Q_Key 0x80010000.  A query is
 * one 256-byte MAD: the common header (24 bytes), the RMPP header (12,
 * zero: our queries and their answers fit one MAD), the SA header (SM_Key,
 * attribute offset, component mask: 20 bytes), then the record (200).
 * The component mask says which fields of the record the SA is to match
 * (a query) or take (a join).  libibumad's umad_send with a timeout and
 * retries makes the kernel (or umad2sim) match the answer to the request
 * by transaction id and give back the request itself, status ETIMEDOUT,
 * when none comes.  All multi-byte fields are big endian.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/umad.h>

#include "common/rcp_common.h"
#include "nic/verbs/umad.h"

#define MAD_SIZE      256
#define SA_CLASS      0x03
#define SA_VERSION    2
#define SA_QKEY       0x80010000u
#define M_GET         0x01
#define M_SET         0x02
#define M_GET_RESP    0x81
#define M_DELETE      0x15
#define M_DELETE_RESP 0x95
#define ATTR_PATH     0x0035
#define ATTR_MCMEMBER 0x0038
#define SA_DATA       56 /* the record's offset in the MAD */
#define SA_RETRIES    3

/* Path record component mask bits (IBA 15.2.5.16). */
#define PR_DGID     (1ull << 2)
#define PR_SGID     (1ull << 3)
#define PR_NUMBPATH (1ull << 12)
/* MCMemberRecord component mask bits (IBA 15.2.5.17). */
#define MCR_MGID     (1ull << 0)
#define MCR_PORT_GID (1ull << 1)
#define MCR_QKEY     (1ull << 2)
#define MCR_TCLASS   (1ull << 6)
#define MCR_PKEY     (1ull << 7)
#define MCR_SL       (1ull << 12)
#define MCR_FLOW     (1ull << 13)
#define MCR_JOIN     (1ull << 16)

struct rcpi_umad_sa {
	int fd, agent;
	struct rcpi_umad_port port;
	uint32_t tid;
	uint8_t *buf; /* umad_size() + MAD_SIZE */
};

static int umad_ready(void)
{
	static int done, rc;
	if (!done) {
		rc = umad_init() < 0 ? RCP_ENODEV : 0;
		done = 1;
	}
	return rc;
}

int rcpi_umad_port_query(const char *ca, int port, struct rcpi_umad_port *out)
{
	umad_port_t p;
	uint64_t pre, guid;

	if (!out)
		return RCP_EINVAL;
	if (umad_ready())
		return RCP_ENODEV;
	memset(&p, 0, sizeof p);
	if (umad_get_port(ca, port, &p) < 0)
		return RCP_ENODEV;
	memset(out, 0, sizeof *out);
	memcpy(out->ca, p.ca_name, sizeof out->ca);
	out->ca[sizeof out->ca - 1] = 0;
	out->port = p.portnum;
	out->state = p.state;
	out->phys_state = p.phys_state;
	out->lid = (uint16_t)p.base_lid;
	out->sm_lid = (uint16_t)p.sm_lid;
	out->lmc = (uint8_t)p.lmc;
	out->sm_sl = (uint8_t)p.sm_sl;
	pre = p.gid_prefix; /* both stored big endian: bytes in wire order */
	guid = p.port_guid;
	memcpy(out->gid, &pre, 8);
	memcpy(out->gid + 8, &guid, 8);
	out->pkey = p.pkeys_size && p.pkeys ? p.pkeys[0] : 0xffff;
	out->is_ib = strcmp(p.link_layer, "Ethernet") != 0; /* "InfiniBand", "IB" (umad2sim) */
	umad_release_port(&p);
	return 0;
}

int rcpi_umad_sa_open(const char *ca, int port, struct rcpi_umad_sa **out)
{
	struct rcpi_umad_sa *sa;
	int rc;

	*out = NULL;
	sa = calloc(1, sizeof *sa);
	if (!sa)
		return RCP_ENOMEM;
	sa->fd = -1;
	rc = rcpi_umad_port_query(ca, port, &sa->port);
	if (rc)
		goto fail;
	sa->buf = calloc(1, umad_size() + MAD_SIZE);
	if (!sa->buf) {
		rc = RCP_ENOMEM;
		goto fail;
	}
	sa->fd = umad_open_port(sa->port.ca, sa->port.port);
	if (sa->fd < 0) {
		rc = sa->fd == -EACCES || sa->fd == -EPERM ? RCP_EPERM : RCP_ENODEV;
		rcpi_warn("verbs: cannot open the umad device of %s port %d: %s", sa->port.ca,
		          sa->port.port, strerror(-sa->fd));
		goto fail;
	}
	/* No unsolicited methods: we only take answers to our requests. */
	sa->agent = umad_register(sa->fd, SA_CLASS, SA_VERSION, 0, NULL);
	if (sa->agent < 0) {
		rc = RCP_ESYS;
		goto fail;
	}
	sa->tid = (uint32_t)rand() | 1;
	*out = sa;
	return 0;
fail:
	rcpi_umad_sa_close(sa);
	return rc;
}

void rcpi_umad_sa_close(struct rcpi_umad_sa *sa)
{
	if (!sa)
		return;
	if (sa->fd >= 0)
		umad_close_port(sa->fd);
	free(sa->buf);
	free(sa);
}

static void put16(uint8_t *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, 2);
}
static void put32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}
static void put64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}
static uint16_t get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return be16toh(v);
}
static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return be32toh(v);
}

/* A fresh request MAD in SA->buf; returns the MAD (the record is at
 * SA_DATA). */
static uint8_t *mad_start(struct rcpi_umad_sa *sa, uint8_t method, uint16_t attr, uint64_t mask)
{
	uint8_t *mad;

	memset(sa->buf, 0, umad_size() + MAD_SIZE);
	mad = umad_get_mad(sa->buf);
	mad[0] = 1; /* base version */
	mad[1] = SA_CLASS;
	mad[2] = SA_VERSION;
	mad[3] = method;
	put32(mad + 12, ++sa->tid); /* the upper 32 bits: the agent's, see mad_call */
	put16(mad + 16, attr);
	put64(mad + 48, mask);
	return mad;
}

/* Sends the request and waits for its answer, left in SA->buf.  Returns
 * the MAD status (0: the SA agreed) or a negative RCP code. */
static int mad_call(struct rcpi_umad_sa *sa, uint8_t want_method, int timeout_ms)
{
	uint8_t *mad = umad_get_mad(sa->buf);
	uint64_t tid;
	int len, rc;

	memcpy(&tid, mad + 8, 8);
	umad_set_addr(sa->buf, sa->port.sm_lid, 1, sa->port.sm_sl, (int)SA_QKEY);
	if (umad_send(sa->fd, sa->agent, sa->buf, MAD_SIZE, timeout_ms, SA_RETRIES) < 0)
		return RCP_ESYS;
	for (;;) {
		len = MAD_SIZE;
		rc = umad_recv(sa->fd, sa->buf, &len, timeout_ms * (SA_RETRIES + 2));
		if (rc < 0)
			return rc == -ETIMEDOUT ? RCP_ETIMEDOUT : RCP_ESYS;
		if (umad_status(sa->buf) == ETIMEDOUT)
			return RCP_ETIMEDOUT;
		if (umad_status(sa->buf))
			return RCP_ESYS;
		/* The upper 32 bits of the TID are the agent's (ib_umad and
		 * umad2sim put its id there): match the lower 32. */
		if (!memcmp(mad + 12, (const uint8_t *)&tid + 4, 4))
			break;
		/* An answer to an earlier request we gave up on: skip it. */
	}
	if (len < SA_DATA || mad[1] != SA_CLASS || mad[3] != want_method)
		return RCP_EPROTO;
	return get16(mad + 4) & 0x7fff; /* status without the direction bit */
}

int rcpi_umad_path_query(struct rcpi_umad_sa *sa, const uint8_t dgid[16],
                         struct rcpi_umad_path *out, int timeout_ms)
{
	uint8_t *mad = mad_start(sa, M_GET, ATTR_PATH, PR_DGID | PR_SGID | PR_NUMBPATH), *r;
	uint32_t hfr;
	int st;

	r = mad + SA_DATA;
	memcpy(r + 8, dgid, 16);
	memcpy(r + 24, sa->port.gid, 16);
	r[49] = 0x80 | 1; /* reversible, one path */
	st = mad_call(sa, M_GET_RESP, timeout_ms);
	if (st < 0)
		return st;
	if (st)
		return RCP_ENOENT; /* e.g. 0x0c "no records" */
	r = mad + SA_DATA;
	memset(out, 0, sizeof *out);
	memcpy(out->dgid, r + 8, 16);
	memcpy(out->sgid, r + 24, 16);
	out->dlid = get16(r + 40);
	out->slid = get16(r + 42);
	hfr = get32(r + 44);
	out->flow_label = (hfr >> 8) & 0xfffff;
	out->hop_limit = (uint8_t)hfr;
	out->tclass = r[48];
	out->pkey = get16(r + 50);
	out->sl = get16(r + 52) & 0xf;
	out->mtu = r[54] & 0x3f;
	out->rate = r[55] & 0x3f;
	return memcmp(out->dgid, dgid, 16) ? RCP_EPROTO : 0;
}

/* Fills an MCMemberRecord for MGID and our port, full member. */
static void mcr_fill(struct rcpi_umad_sa *sa, uint8_t *r, const uint8_t mgid[16], uint32_t qkey)
{
	memcpy(r, mgid, 16);
	memcpy(r + 16, sa->port.gid, 16);
	put32(r + 32, qkey);
	put16(r + 40, sa->port.pkey | 0x8000);
	put32(r + 44, (uint32_t)sa->port.sm_sl << 28); /* SL, flow label 0, hop 0 */
	r[48] = 0x20 | 1; /* scope link-local (2), join state: full member */
}

int rcpi_umad_mc_join(struct rcpi_umad_sa *sa, const uint8_t mgid[16], uint32_t qkey,
                      struct rcpi_umad_mcgroup *out, int timeout_ms)
{
	uint64_t mask = MCR_MGID | MCR_PORT_GID | MCR_QKEY | MCR_TCLASS | MCR_PKEY | MCR_SL |
	                MCR_FLOW | MCR_JOIN;
	uint8_t *mad = mad_start(sa, M_SET, ATTR_MCMEMBER, mask), *r = mad + SA_DATA;
	int st;

	mcr_fill(sa, r, mgid, qkey);
	st = mad_call(sa, M_GET_RESP, timeout_ms);
	if (st < 0)
		return st;
	if (st) {
		rcpi_warn("verbs: the SA refused the multicast join (MAD status 0x%x)", st);
		return RCP_EPERM;
	}
	memset(out, 0, sizeof *out);
	memcpy(out->mgid, r, 16);
	out->qkey = get32(r + 32);
	out->mlid = get16(r + 36);
	out->mtu = r[38] & 0x3f;
	out->pkey = get16(r + 40);
	out->rate = r[42] & 0x3f;
	out->sl = (uint8_t)(get32(r + 44) >> 28);
	if (out->mlid < 0xc000 || out->mlid == 0xffff)
		return RCP_EPROTO;
	return 0;
}

int rcpi_umad_mc_leave(struct rcpi_umad_sa *sa, const uint8_t mgid[16], int timeout_ms)
{
	uint8_t *mad = mad_start(sa, M_DELETE, ATTR_MCMEMBER, MCR_MGID | MCR_PORT_GID | MCR_JOIN);
	int st;

	mcr_fill(sa, mad + SA_DATA, mgid, 0);
	st = mad_call(sa, M_DELETE_RESP, timeout_ms);
	if (st < 0)
		return st;
	return st ? RCP_ENOENT : 0;
}
