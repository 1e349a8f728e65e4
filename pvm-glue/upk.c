/*
 * pvm-glue/upk.c — large Raw and XDR messages received over RCP unpacked
 * straight from the bytes RCP delivered.
 *
 * ADOPTED BUFFERS.  A packed message in this host's raw encoding used to
 * be rebuilt into a PvmDataRaw buffer with pvm_pkbyte (msgbuf.c): a copy
 * of the whole message into libpvm3's 4 KiB fragments before the user's
 * pvm_upk* copied it out again.  At 4 MiB that copy was a third of the
 * receiver's work and sat on the round trip's critical path (session 20,
 * docs/results.md).  It cannot be avoided inside libpvm3 through pvm3.h:
 * no call lends a buffer memory it does not copy (an in-place buffer
 * would point at ours, but libpvm3 decodes in-place buffers with its
 * "alien" stub, PvmBadMsg; pvm_setminfo cannot change the encoding;
 * pvm_upkmesg copies into a fresh fragment).  So for a message of one
 * fragment and at least PVMRCP_UPK_MIN bytes (64 KiB) the glue hands the user an
 * EMPTY PvmDataRaw buffer (a real id: pvm_bufinfo, pvm_getrbuf, pvm_freebuf
 * work on it) and serves pvm_upk* of fixed-size types with stride 1 from
 * the bytes it received, with a cursor of its own: raw data is a byte
 * stream to pvm_upk* (inplace.c), so copying cnt * size bytes from the
 * cursor is what libpvm3's raw decoder does.  Anything else touching the
 * buffer's contents first BUILDS it as before (pvm_pkbyte of all the
 * bytes) and moves libpvm3's cursor to ours (pvm_setrbuf rewinds a buffer
 * just packed, an unpack of the bytes already read skips them),
 * then calls libpvm3: pvm_upk* past the end or with another stride (so
 * PvmNoData, partial copies and error messages are libpvm3's own),
 * pvm_upkstr, pvm_unpackf, pvm_upkmesg, pvm_pkmesg(body) of it,
 * pvm_setsbuf of it (to send or pack into it).  pvm_setrbuf of it moves
 * neither cursor: libpvm3 rewinds only a buffer not yet unpacking
 * (lpvmpack.c, dec_raw_init), and ours was made the receive buffer before
 * anything was read.  pvm_freebuf and the glue's own frees drop it.
 *
 * XDR (session 21).  A relinked sender now sends a Raw or XDR message as
 * one fragment (frags.c), so XDR messages of PVMRCP_UPK_MIN bytes are
 * adopted too, in an empty PvmDataDefault buffer; before, the receiver
 * copied them twice (pvm_pkbyte into a raw buffer, then pvm_upkmesg).
 * The served calls decode as libpvm3 does through glibc's XDR (lpvmpack.c
 * dec_xdr_*): bytes copied, then the position rounded up to 4; shorts,
 * ints and floats one big-endian 32-bit word each (a short the word's low
 * half, as xdr_short casts); doubles one 64-bit word; complexes two of
 * their parts.  Longs are not served: their XDR width depends on how
 * libpvm3 was built (Debian's reads 32 bits back unsigned), so they build
 * the buffer and libpvm3 decodes them.  Building packs the bytes with
 * pvm_pkbyte into the XDR buffer, which stores them unchanged (an XDR
 * message is a multiple of 4 bytes: no padding added), and skipping the
 * bytes already read keeps 4-byte steps, as the served position does.
 *
 * Which buffer is ours is checked, not assumed: libpvm3 frees the receive
 * buffer behind our back in a few calls (pvm_recvinfo), and its id may
 * then come back for another buffer.  Each adopted buffer carries a stamp
 * in its dst field (pvm_setminfo; the glue's pvm_getminfo reports this
 * task as dst, as for every RCP message, msgbuf.c's syn[]), and a buffer
 * is served only while libpvm3 still reports that stamp and length 0.
 */
#include <dlfcn.h>
#include <endian.h>
#include <pvm3.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <rcp/pvmrcp.h>

#include "pvm-glue/glue.h"
#include "pvm-glue/upk.h"
#include "pvm-glue/real.h"

struct lz {
	int bufid, stamp, xdr;
	void *mem;
	const char *p;
	size_t len, pos;
};

static struct lz *lzs;
static int nlz, caplz;
static unsigned stamps;
unsigned long pvmrcpi_upk_adopted, pvmrcpi_upk_served, pvmrcpi_upk_built;

static int real_setsbuf(int id)
{
	REAL(pvm_setsbuf);
	return real_(id);
}

static int real_setrbuf(int id)
{
	REAL(pvm_setrbuf);
	return real_(id);
}

static int real_upkbyte(char *p, int cnt, int std)
{
	REAL(pvm_upkbyte);
	return real_(p, cnt, std);
}

static uint32_t rd32(const unsigned char *q)
{
	uint32_t v;
	memcpy(&v, q, sizeof v);
	return v;
}

static struct lz *find(int bufid)
{
	for (int i = 0; i < nlz; i++)
		if (lzs[i].bufid == bufid)
			return &lzs[i];
	return NULL;
}

static void drop(struct lz *z)
{
	free(z->mem);
	*z = lzs[--nlz];
}

long pvmrcpi_upk_min(void)
{
	static long min = -2;
	if (min == -2) {
		const char *e = getenv("PVMRCP_UPK_MIN");
		min = e && *e ? strtol(e, NULL, 0) : 65536;
		if (min < -1)
			min = -1;
	}
	return min;
}

int pvmrcpi_upk_adopt(int bufid, int xdr, void *mem, const char *p, size_t len)
{
	struct pvmminfo mi;
	struct lz *z;

	if (pvmrcpi_real.getminfo(bufid, &mi) < 0)
		return PvmSysErr;
	if (nlz == caplz) {
		int nc = caplz ? 2 * caplz : 8;
		struct lz *g = realloc(lzs, (size_t)nc * sizeof *g);
		if (!g)
			return PvmNoMem;
		lzs = g;
		caplz = nc;
	}
	mi.dst = (int)(0x5a000000u | (++stamps & 0xffffffu));
	if (pvm_setminfo(bufid, &mi) < 0)
		return PvmSysErr;
	if ((z = find(bufid)) != NULL)
		drop(z);
	lzs[nlz++] = (struct lz){bufid, mi.dst, xdr, mem, p, len, 0};
	pvmrcpi_upk_adopted++;
	return 0;
}

void pvmrcpi_upk_drop(int bufid)
{
	struct lz *z = nlz ? find(bufid) : NULL;
	if (z)
		drop(z);
}

/* Our record of BUFID if libpvm3 still holds that buffer, empty. */
static struct lz *valid(int bufid)
{
	struct lz *z = bufid > 0 ? find(bufid) : NULL;
	struct pvmminfo mi;
	if (!z)
		return NULL;
	if (pvmrcpi_real.getminfo(bufid, &mi) < 0 || mi.dst != z->stamp || mi.len != 0) {
		drop(z); /* freed behind our back, the id given out again */
		return NULL;
	}
	return z;
}

/* Gives libpvm3 the bytes of Z (ADOPTED BUFFERS) and forgets Z; 0 or a
 * PVM code (then Z is kept). */
static int build(struct lz *z)
{
	int id = z->bufid, rbuf = pvm_getrbuf(), sbuf, rc;
	size_t skip = z->pos;

	sbuf = real_setsbuf(id); /* also makes it no longer the receive buffer */
	rc = sbuf < 0 ? sbuf : pvm_pkbyte((char *)z->p, (int)z->len, 1);
	if (sbuf >= 0)
		real_setsbuf(sbuf);
	if (rc < 0) {
		if (rbuf == id)
			real_setrbuf(id);
		return rc;
	}
	drop(z);
	pvmrcpi_upk_built++;
	if (rbuf != id && !skip)
		return 0; /* libpvm3 will start it at 0, as it starts ours */
	/* libpvm3's cursor to ours: the buffer was just packed, so making it
	 * the receive buffer rewinds it; then the bytes read are skipped */
	real_setrbuf(id);
	while (skip > 0 && rc >= 0) {
		char scratch[4096];
		int n = skip < sizeof scratch ? (int)skip : (int)sizeof scratch;
		rc = real_upkbyte(scratch, n, 1);
		skip -= (size_t)n;
	}
	if (rbuf != id)
		real_setrbuf(rbuf); /* unpacking already: not rewound */
	return rc < 0 ? rc : 0;
}

/* Builds buffer BUFID if it is one of ours; 0 or a PVM code. */
static int build_id(int bufid)
{
	struct lz *z = nlz ? valid(bufid) : NULL;
	return z ? build(z) : 0;
}

/* ---- the wrappers ---- */

/* XDR: the item decoded at Q (W bytes on the wire) into the native item
 * at OUT of SIZE bytes, as glibc's xdr_short/int/float/double do on this
 * host: big-endian 32-bit words (shorts are the low half of one, as
 * xdr_short casts), doubles one 64-bit word. */
static void xdr_item(void *out, const unsigned char *q, int w, size_t size)
{
	if (w == 8) {
		uint64_t v = (uint64_t)be32toh(rd32(q)) << 32 | be32toh(rd32(q + 4));
		memcpy(out, &v, sizeof v);
	} else if (size == sizeof(short)) {
		short v = (short)(int32_t)be32toh(rd32(q));
		memcpy(out, &v, sizeof v);
	} else {
		uint32_t v = be32toh(rd32(q));
		memcpy(out, &v, sizeof v);
	}
}

/* Serves an unpack of CNT items of SIZE bytes with stride STD from Z
 * (ADOPTED BUFFERS): W is an item's bytes in an XDR message (0: XDR not
 * served), PARTS 2 for a complex (two words of W / 2).  1 served, 0 not
 * (the caller builds and calls libpvm3). */
static int serve(struct lz *z, void *p, int cnt, int std, size_t size, int w, int parts)
{
	size_t n;
	if (std != 1 || cnt < 0)
		return 0;
	if (!z->xdr) {
		n = (size_t)cnt * size;
		if (n > z->len - z->pos)
			return 0;
		if (n)
			memcpy(p, z->p + z->pos, n);
		z->pos += n;
		return 1;
	}
	if (!w || (size_t)cnt > (z->len - z->pos) / (size_t)w)
		return 0;
	n = (size_t)cnt * (size_t)w;
	if (w == 1) { /* bytes, then padding to a word, as dec_xdr_byte */
		if (n)
			memcpy(p, z->p + z->pos, n);
		z->pos += (n + 3) & ~(size_t)3;
		if (z->pos > z->len)
			z->pos = z->len; /* cannot happen: an adopted XDR length is 4-aligned */
		return 1;
	}
	{
		const unsigned char *q = (const unsigned char *)z->p + z->pos;
		int ww = w / parts;
		size_t isz = size / (size_t)parts, items = n / (size_t)ww;
		for (size_t i = 0; i < items; i++)
			xdr_item((char *)p + i * isz, q + i * (size_t)ww, ww, isz);
	}
	z->pos += n;
	return 1;
}

/* XDR (W != 0): bytes 1, shorts, ints and floats 4, doubles and
 * complexes 8, double complexes 16; longs are not served (their XDR
 * width depends on how libpvm3 was built: it decodes them itself). */
#define UPK(fn, T, size, w, parts)                                                                 \
	int fn(T *p, int cnt, int std)                                                             \
	{                                                                                          \
		struct lz *z;                                                                      \
		int rc;                                                                            \
		REAL(fn);                                                                          \
		if (nlz && (z = valid(pvm_getrbuf())) != NULL) {                                   \
			if (serve(z, p, cnt, std, size, w, parts)) {                               \
				pvmrcpi_upk_served++;                                              \
				return 0;                                                          \
			}                                                                          \
			if ((rc = build(z)) < 0)                                                   \
				return rc;                                                         \
		}                                                                                  \
		return real_(p, cnt, std);                                                         \
	}

UPK(pvm_upkbyte, char, 1, 1, 1)
UPK(pvm_upkshort, short, sizeof(short), 4, 1)
UPK(pvm_upkushort, unsigned short, sizeof(unsigned short), 4, 1)
UPK(pvm_upkint, int, sizeof(int), 4, 1)
UPK(pvm_upkuint, unsigned int, sizeof(unsigned int), 4, 1)
UPK(pvm_upklong, long, sizeof(long), 0, 1)
UPK(pvm_upkulong, unsigned long, sizeof(unsigned long), 0, 1)
UPK(pvm_upkfloat, float, sizeof(float), 4, 1)
UPK(pvm_upkdouble, double, sizeof(double), 8, 1)
UPK(pvm_upkcplx, float, 2 * sizeof(float), 8, 2)
UPK(pvm_upkdcplx, double, 2 * sizeof(double), 16, 2)

int pvm_upkstr(char *p)
{
	int rc;
	REAL(pvm_upkstr);
	if (nlz && (rc = build_id(pvm_getrbuf())) < 0)
		return rc;
	return real_(p);
}

int pvm_upkmesg(void)
{
	int rc;
	REAL(pvm_upkmesg);
	if (nlz && (rc = build_id(pvm_getrbuf())) < 0)
		return rc;
	return real_();
}

/* pvm_unpackf decodes through libpvm3's internals, not pvm_upk*: build
 * first, then its va_list twin (exported by libpvm3, not in pvm3.h). */
int pvm_unpackf(const char *fmt, ...)
{
	static int (*vreal)(const char *, va_list);
	va_list ap;
	int rc;
	if (!vreal)
		*(void **)&vreal = dlsym(RTLD_NEXT, "pvm_vunpackf");
	if (!vreal)
		return PvmSysErr;
	if (nlz && (rc = build_id(pvm_getrbuf())) < 0)
		return rc;
	va_start(ap, fmt);
	rc = vreal(fmt, ap);
	va_end(ap);
	return rc;
}

int pvm_pkmesg(int bufid)
{
	int rc;
	REAL(pvm_pkmesg);
	if (nlz && (rc = build_id(bufid)) < 0)
		return rc;
	return real_(bufid);
}

int pvm_pkmesgbody(int bufid)
{
	int rc;
	REAL(pvm_pkmesgbody);
	if (nlz && (rc = build_id(bufid)) < 0)
		return rc;
	return real_(bufid);
}

/* To send it or pack into it, libpvm3 must hold its bytes. */
int pvm_setsbuf(int bufid)
{
	int rc;
	REAL(pvm_setsbuf);
	if (nlz && (rc = build_id(bufid)) < 0)
		return rc;
	return real_(bufid);
}

int pvm_rcp_upkstats(unsigned long *adopted, unsigned long *served, unsigned long *built)
{
	if (adopted)
		*adopted = pvmrcpi_upk_adopted;
	if (served)
		*served = pvmrcpi_upk_served;
	if (built)
		*built = pvmrcpi_upk_built;
	return 0;
}
