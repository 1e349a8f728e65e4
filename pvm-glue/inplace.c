/*
 * pvm-glue/inplace.c — in-place buffers gathered from the user's memory.
 *
 * A PvmDataInPlace buffer holds no data: libpvm3 keeps, per pvm_pk*
 * call, a fragment that points at the caller's array (lpvmpack.c's
 * enc_inp_any: one fragment of cnt * size bytes, none when the count is
 * 0, PvmNotImpl for a stride other than 1), and pvm_send copies from
 * there.  Those fragments are libpvm3's own structures, declared in no
 * installed header, so the glue cannot walk them; before, it had
 * pvm_pkmesg copy them into a temporary buffer and copied that into the
 * message (twice the data, and a fresh fragment of its size each time:
 * 7x slower than stock at 4 MiB, docs/results.md).
 *
 * So we keep our own record.  pvm_initsend and pvm_mkbuf are wrapped to
 * see in-place buffers being made (a new record, empty; any other
 * encoding drops the record of that id, since libpvm3 reuses ids), and
 * every pvm_pk* of a fixed-size type calls the real one and, if it
 * succeeded and the active send buffer is a recorded in-place one, notes
 * (pointer, bytes).  At pvm_send the record is trusted only if its bytes
 * add up to libpvm3's own length of the buffer (pmsg_setlen, pksend.c):
 * a pack we do not see — pvm_pkstr, pvm_packf, pvm_pkmesg into an
 * in-place buffer, a call made before libpvmrcp was loaded — adds bytes
 * to one and not the other, and the send then takes the pvm_pkmesg path
 * as before.  A pack that adds nothing needs no record.  Everything else
 * is libpvm3's: the real functions are called first and their result is
 * returned unchanged (a strided in-place pack fails as with stock).
 *
 * The gathered message is the one pvm_pkmesg would write, with one
 * fragment for all the data instead of one per pack: a raw message is a
 * byte stream for pvm_upk* (lpvmpack.c's byteupk crosses fragments), so
 * the receiver cannot tell, and it rebuilds a raw buffer from the bytes
 * anyway (recv.c).  pvm_send hands RCP the header and the noted pieces
 * as segments (pvmrcpi_ip_iov, rcp_isendv: since session 19 no copy of
 * the message on the sender's side; RCP reads the pieces as its frames
 * go out, as stock's direct route writev()s them to its socket) and
 * waits for the send, as PVM lets the user change the arrays once
 * pvm_send returns.  pvm_mcast to tasks on the shm endpoint gathers the
 * same segments into one rcp_mcastv (pksend.c, mcast_inplace; session 21);
 * to others it still gathers a copy (pvmrcpi_ip_gather).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <pvm3.h>
#include <stdlib.h>
#include <string.h>

#include "pvm-glue/inplace.h"
#include "pvm-glue/packed.h"
#include "pvm-glue/upk.h"
#include "pvm-glue/real.h"

struct piece {
	const void *p;
	size_t len;
};

struct rec {
	int live; /* an in-place buffer made through our wrappers */
	int bad;  /* a pack we could not note: never trusted */
	size_t n, cap;
	long total; /* bytes noted */
	struct piece *v;
};

/* Indexed by buffer id (libpvm3 hands out small ones, reused once
 * freed); ids past IDS_MAX are not recorded (their sends take the
 * pvm_pkmesg path). */
#define IDS_MAX 65536
static struct rec *recs;
static int nrecs;
static int nlive; /* records live: 0 makes every pack's note one test */

static struct rec *rec_of(int id)
{
	return id > 0 && id < nrecs && recs[id].live ? &recs[id] : NULL;
}

/* Buffer ID was just made with encoding ENC. */
static void made(int id, int enc)
{
	struct rec *r;
	if (id <= 0)
		return;
	pvmrcpi_upk_drop(id); /* an id freed behind our back, given out again */
	if ((r = rec_of(id))) {
		r->live = 0;
		nlive--;
	}
	if (enc != PvmDataInPlace || id >= IDS_MAX)
		return;
	if (id >= nrecs) {
		int nn = nrecs ? nrecs : 64;
		struct rec *g;
		while (nn <= id)
			nn *= 2;
		if (!(g = realloc(recs, (size_t)nn * sizeof *g)))
			return; /* unrecorded: the pvm_pkmesg path */
		memset(g + nrecs, 0, (size_t)(nn - nrecs) * sizeof *g);
		recs = g;
		nrecs = nn;
	}
	r = &recs[id];
	r->live = 1;
	r->bad = 0;
	r->n = 0;
	r->total = 0;
	nlive++;
}

/* A pack of CNT items of SIZE bytes from P with stride STD into the
 * active send buffer returned RC. */
static void note(const void *p, int cnt, int std, int size, int rc)
{
	struct rec *r;
	if (rc < 0 || !nlive || !(r = rec_of(pvm_getsbuf())) || r->bad)
		return;
	if (!p || cnt == 0)
		return; /* libpvm3 adds no fragment either */
	if (cnt < 0 || std != 1 || (long)cnt * size > (long)0x7fffffff - r->total) {
		r->bad = 1; /* not what we model */
		return;
	}
	if (r->n == r->cap) {
		size_t nc = r->cap ? 2 * r->cap : 8;
		struct piece *g = realloc(r->v, nc * sizeof *g);
		if (!g) {
			r->bad = 1;
			return;
		}
		r->v = g;
		r->cap = nc;
	}
	r->v[r->n++] = (struct piece){p, (size_t)cnt * (size_t)size};
	r->total += (long)cnt * size;
}

int pvmrcpi_ip_ok(int bufid, long len)
{
	const struct rec *r = rec_of(bufid);
	return r && !r->bad && r->total == len;
}

int pvmrcpi_ip_gather(int bufid, long len, int enc, char **out, size_t *outlen)
{
	const struct rec *r = rec_of(bufid);
	int hdr[PR_PK_HDR] = {(int)len, 0, 0, 0, enc, 0, 0, 0};
	size_t n = sizeof hdr + (len ? sizeof(int) + (size_t)len : 0);
	char *b, *w;

	if (!r || r->total != len)
		return PvmBadMsg;
	if (!(b = malloc(n)))
		return PvmNoMem;
	memcpy(b, hdr, sizeof hdr);
	w = b + sizeof hdr;
	if (len) {
		int frl = (int)len;
		memcpy(w, &frl, sizeof frl);
		w += sizeof frl;
		for (size_t i = 0; i < r->n; i++) {
			memcpy(w, r->v[i].p, r->v[i].len);
			w += r->v[i].len;
		}
	}
	*out = b;
	*outlen = n;
	return 0;
}

int pvmrcpi_ip_iov(int bufid, long len, int enc, unsigned char *head, size_t *headlen,
                   struct rcp_iov **iov, int *n)
{
	const struct rec *r = rec_of(bufid);
	int hdr[PR_PK_HDR + 1] = {(int)len, 0, 0, 0, enc, 0, 0, 0, (int)len};
	struct rcp_iov *v;

	if (!r || r->total != len)
		return PvmBadMsg;
	if (!(v = malloc((r->n + 1) * sizeof *v)))
		return PvmNoMem;
	*headlen = sizeof(int) * (PR_PK_HDR + (len ? 1 : 0));
	memcpy(head, hdr, *headlen);
	v[0] = (struct rcp_iov){head, *headlen};
	for (size_t i = 0; i < r->n; i++)
		v[i + 1] = (struct rcp_iov){r->v[i].p, r->v[i].len};
	*iov = v;
	*n = (int)r->n + 1;
	return 0;
}

/* MEMORY.  A packed message of a MiB or more is a fresh malloc on each
 * side per message (the sender's gathered copy, the receiver's landing
 * buffer), freed when it is sent or unpacked.  glibc serves such sizes
 * by mmap, or, once it has raised its threshold, from the heap top, which
 * it trims again as soon as 2x the last freed size lies free there: in
 * both cases every message faults its pages in afresh (1 MiB in place:
 * 2.5 ms a round trip with glibc's defaults, 0.33 ms with trimming and
 * mmap off; docs/results.md, session 18).  So once, when this task first
 * sends or receives a packed message, the heap keeps freed memory up to
 * KEEP_MB and serves blocks up to it: the task then holds up to that much
 * more memory than it uses, the one thing a relinked program may show
 * differently (PVMRCP_MALLOC_KEEP=0 leaves glibc's defaults alone). */
#define KEEP_MB 32

void pvmrcpi_ip_malloc_setup(void)
{
	static int done;
	const char *e = getenv("PVMRCP_MALLOC_KEEP");
	if (done)
		return;
	done = 1;
	if (e && !strcmp(e, "0"))
		return;
	mallopt(M_MMAP_THRESHOLD, KEEP_MB << 20);
	mallopt(M_TRIM_THRESHOLD, KEEP_MB << 20);
}

/* ---- the wrappers ---- */

int pvm_initsend(int enc)
{
	int id;
	REAL(pvm_initsend);
	id = real_(enc);
	made(id, enc);
	return id;
}

int pvm_mkbuf(int enc)
{
	int id;
	REAL(pvm_mkbuf);
	id = real_(enc);
	made(id, enc);
	return id;
}

#define PK(fn, T, size)                                                                            \
	int fn(T *p, int cnt, int std)                                                             \
	{                                                                                          \
		int rc;                                                                            \
		REAL(fn);                                                                          \
		rc = real_(p, cnt, std);                                                           \
		note(p, cnt, std, size, rc);                                                       \
		return rc;                                                                         \
	}

PK(pvm_pkbyte, char, 1)
PK(pvm_pkshort, short, (int)sizeof(short))
PK(pvm_pkushort, unsigned short, (int)sizeof(unsigned short))
PK(pvm_pkint, int, (int)sizeof(int))
PK(pvm_pkuint, unsigned int, (int)sizeof(unsigned int))
PK(pvm_pklong, long, (int)sizeof(long))
PK(pvm_pkulong, unsigned long, (int)sizeof(unsigned long))
PK(pvm_pkfloat, float, (int)sizeof(float))
PK(pvm_pkdouble, double, (int)sizeof(double))
PK(pvm_pkcplx, float, (int)(2 * sizeof(float)))
PK(pvm_pkdcplx, double, (int)(2 * sizeof(double)))
