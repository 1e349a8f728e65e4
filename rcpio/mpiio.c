/*
 * rcpio/mpiio.c — the MPI-IO interposer (librcpio.so, docs/rcpio.md).
 *
 * Defines MPI_File_* and MPI_Finalize over the profiling interface: a
 * file whose name begins with RCPIO_PREFIX (read once, at the first open)
 * is opened by MPI as usual — so calls rcpio does not take over still
 * have a real handle — and its data goes through the cache; any other
 * file, and a prefix left unset, goes straight to PMPI_*.
 *
 * Views: the view's filetype is flattened once, at MPI_File_set_view, into
 * runs (offset, length) inside one tile.  The trick: unpack SIZE bytes of
 * 0xff into a zeroed buffer of the filetype's true extent; the bytes that
 * turn 0xff are the data bytes, in order, because MPI-IO requires a
 * filetype's displacements to be monotonically non-decreasing.  Any
 * filetype then works — contiguous, vector, indexed, subarray.  Memory
 * datatypes that are not contiguous are packed/unpacked through a bounce
 * buffer.  Offsets and the individual file pointer count etypes.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <rcp/error.h>

#include "rcpio/cache.h"

#define MAXH 64

struct run {
	MPI_Offset off, len;
};

struct handle {
	MPI_File fh;
	rcpio_file *f;
	MPI_Offset disp, etsize, tsize, extent, pos; /* pos: etypes */
	struct run *runs;
	int nruns;
};

static struct handle hs[MAXH];
static const char *prefix;
static int prefix_read;

static struct handle *find(MPI_File fh)
{
	for (int i = 0; i < MAXH; i++)
		if (hs[i].f && hs[i].fh == fh)
			return &hs[i];
	return NULL;
}

static int cached(const char *name)
{
	if (!prefix_read) {
		prefix = getenv("RCPIO_PREFIX");
		prefix_read = 1;
	}
	return prefix && *prefix && name && !strncmp(name, prefix, strlen(prefix));
}

static void view_default(struct handle *h)
{
	free(h->runs);
	h->runs = NULL;
	h->nruns = 0;
	h->disp = 0;
	h->etsize = h->tsize = h->extent = 1;
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
	int rc = PMPI_File_open(comm, filename, amode, info, fh), i;
	struct handle *h = NULL;
	if (rc != MPI_SUCCESS || !cached(filename))
		return rc;
	for (i = 0; i < MAXH && !h; i++)
		if (!hs[i].f)
			h = &hs[i];
	/* Every rank has the same table (opens are collective): the same
	 * choice everywhere, so the cache's collectives stay matched. */
	if (!h)
		return rc;
	memset(h, 0, sizeof *h);
	view_default(h);
	if (rcpio_cache_open(comm, filename, amode, &h->f)) {
		h->f = NULL;
		PMPI_File_close(fh);
		return MPI_ERR_IO;
	}
	h->fh = *fh;
	return rc;
}

int MPI_File_close(MPI_File *fh)
{
	struct handle *h = find(*fh);
	int rc;
	if (h) {
		rc = rcpio_cache_close(h->f);
		h->f = NULL;
		view_default(h);
		if (rc) {
			PMPI_File_close(fh);
			return MPI_ERR_IO;
		}
	}
	return PMPI_File_close(fh);
}

int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                      const char *datarep, MPI_Info info)
{
	struct handle *h = find(fh);
	int rc = PMPI_File_set_view(fh, disp, etype, filetype, datarep, info), size, esize, pos = 0;
	MPI_Aint lb, extent, tlb, text;
	unsigned char *mask, *ones;
	if (rc != MPI_SUCCESS || !h)
		return rc;
	view_default(h);
	PMPI_Type_size(etype, &esize);
	PMPI_Type_size(filetype, &size);
	PMPI_Type_get_extent(filetype, &lb, &extent);
	PMPI_Type_get_true_extent(filetype, &tlb, &text);
	if (esize <= 0 || size <= 0 || text <= 0 || text > (1 << 26))
		return MPI_ERR_TYPE;
	mask = calloc(1, (size_t)text);
	ones = malloc((size_t)size);
	if (!mask || !ones) {
		free(mask);
		free(ones);
		return MPI_ERR_NO_MEM;
	}
	memset(ones, 0xff, (size_t)size);
	PMPI_Unpack(ones, size, &pos, mask - tlb, 1, filetype, MPI_COMM_SELF);
	for (MPI_Aint i = 0; i < text; i++) {
		if (!mask[i])
			continue;
		if (h->nruns && h->runs[h->nruns - 1].off + h->runs[h->nruns - 1].len == tlb + i) {
			h->runs[h->nruns - 1].len++;
			continue;
		}
		if (!(h->nruns & (h->nruns - 1)) || !h->runs) {
			struct run *r =
			    realloc(h->runs, sizeof *r * (size_t)(h->nruns ? 2 * h->nruns : 1));
			if (!r)
				break;
			h->runs = r;
		}
		h->runs[h->nruns].off = tlb + i;
		h->runs[h->nruns++].len = 1;
	}
	free(mask);
	free(ones);
	/* A contiguous filetype (MPI_INT, a contiguous type...): one stream. */
	if (h->nruns == 1 && h->runs[0].off == 0 && h->runs[0].len == extent) {
		free(h->runs);
		h->runs = NULL;
		h->nruns = 0;
	}
	h->disp = disp;
	h->pos = 0; /* MPI: a new view resets the file pointers */
	h->etsize = esize;
	h->tsize = size;
	h->extent = extent;
	return MPI_SUCCESS;
}

/* Moves N bytes of the view's data stream from stream byte K on.  *GOT:
 * bytes read before the end of the file. */
static int view_io(struct handle *h, MPI_Offset k, unsigned char *buf, size_t n, int write,
                   size_t *got)
{
	*got = 0;
	while (n) {
		MPI_Offset tile = k / h->tsize, in = k % h->tsize, off;
		size_t len;
		int r = 0, rc;
		if (h->nruns) {
			/* Find the run holding stream byte IN of the tile. */
			MPI_Offset acc = 0;
			while (r < h->nruns && acc + h->runs[r].len <= in)
				acc += h->runs[r++].len;
			off = h->disp + tile * h->extent + h->runs[r].off + (in - acc);
			len = (size_t)(h->runs[r].len - (in - acc));
		} else {
			off = h->disp + k;
			len = n;
		}
		if (len > n)
			len = n;
		if (write) {
			rc = rcpio_cache_write(h->f, (uint64_t)off, buf, len);
			*got += rc ? 0 : len;
		} else {
			size_t g = 0;
			rc = rcpio_cache_read(h->f, (uint64_t)off, buf, len, &g);
			*got += g;
			if (!rc && g < len)
				return 0;
		}
		if (rc)
			return rc;
		k += (MPI_Offset)len;
		buf += len;
		n -= len;
	}
	return 0;
}

/* One read or write of COUNT DATATYPEs at etype offset OFF of the view. */
static int io(struct handle *h, MPI_Offset off, void *buf, int count, MPI_Datatype dt,
              MPI_Status *st, int write)
{
	int tsize, pos = 0, rc;
	MPI_Aint lb, ext, tlb, text;
	unsigned char *p, *bounce = NULL;
	size_t n, got = 0;

	if (count < 0)
		return MPI_ERR_COUNT;
	PMPI_Type_size(dt, &tsize);
	PMPI_Type_get_extent(dt, &lb, &ext);
	PMPI_Type_get_true_extent(dt, &tlb, &text);
	n = (size_t)tsize * (size_t)count;
	if ((MPI_Aint)tsize == text && (count == 1 || ext == text)) {
		p = (unsigned char *)buf + tlb;
	} else {
		if (!(bounce = malloc(n ? n : 1)))
			return MPI_ERR_NO_MEM;
		if (write)
			PMPI_Pack(buf, count, dt, bounce, (int)n, &pos, MPI_COMM_SELF);
		p = bounce;
	}
	rc = view_io(h, off * h->etsize, p, n, write, &got);
	if (!rc && !write && bounce) {
		pos = 0;
		PMPI_Unpack(bounce, (int)got, &pos, buf, count, dt, MPI_COMM_SELF);
	}
	free(bounce);
	if (st != MPI_STATUS_IGNORE)
		PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)got);
	if (rc) {
		/* MPI_ERR_IO says nothing of why: the RCP code does (an
		 * RCP_EPEER here is a peer taken for dead, docs/rcpio.md). */
		int me = -1;
		PMPI_Comm_rank(MPI_COMM_WORLD, &me);
		fprintf(stderr, "rcpio: rank %d: %s of %zu bytes at %lld: %s\n", me,
		        write ? "write" : "read", n, (long long)(off * h->etsize),
		        rcp_strerror(rc));
	}
	return rc ? MPI_ERR_IO : MPI_SUCCESS;
}

int MPI_File_read_at(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype dt,
                     MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? io(h, offset, buf, count, dt, st, 0)
	         : PMPI_File_read_at(fh, offset, buf, count, dt, st);
}

int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count, MPI_Datatype dt,
                      MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? io(h, offset, (void *)(uintptr_t)buf, count, dt, st, 1)
	         : PMPI_File_write_at(fh, offset, buf, count, dt, st);
}

/* The collective forms are commit points (docs/rcpio.md, "Commit"): the
 * paper's delayed commit batches metadata updates until the program's own
 * synchronisation, and a collective call is one — every rank of the file
 * is in it.  The bytes move first; the commit (write-back, then the
 * all-ranks commit of rcpio_cache_sync) follows on every rank even if
 * this rank's transfer failed, so the collective stays matched.  A commit
 * that fails here is rolled back on every rank like any other, and is not
 * the call's error: the bytes moved, what is not committed stays dirty in
 * the cache, and the next sync or close — whose promise durability is —
 * tries again and reports. */
static int commit_after(struct handle *h, int rc)
{
	(void)rcpio_cache_sync(h->f);
	return rc;
}

int MPI_File_read_at_all(MPI_File fh, MPI_Offset offset, void *buf, int count, MPI_Datatype dt,
                         MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? commit_after(h, io(h, offset, buf, count, dt, st, 0))
	         : PMPI_File_read_at_all(fh, offset, buf, count, dt, st);
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                          MPI_Datatype dt, MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? commit_after(h, io(h, offset, (void *)(uintptr_t)buf, count, dt, st, 1))
	         : PMPI_File_write_at_all(fh, offset, buf, count, dt, st);
}

static int io_fp(struct handle *h, void *buf, int count, MPI_Datatype dt, MPI_Status *st, int write)
{
	MPI_Status mine;
	MPI_Count bytes = 0;
	int rc = io(h, h->pos, buf, count, dt, &mine, write);
	PMPI_Get_elements_x(&mine, MPI_BYTE, &bytes);
	h->pos += bytes / h->etsize;
	if (st != MPI_STATUS_IGNORE)
		*st = mine;
	return rc;
}

int MPI_File_read(MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? io_fp(h, buf, count, dt, st, 0) : PMPI_File_read(fh, buf, count, dt, st);
}

int MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? io_fp(h, (void *)(uintptr_t)buf, count, dt, st, 1)
	         : PMPI_File_write(fh, buf, count, dt, st);
}

int MPI_File_read_all(MPI_File fh, void *buf, int count, MPI_Datatype dt, MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? commit_after(h, io_fp(h, buf, count, dt, st, 0))
	         : PMPI_File_read_all(fh, buf, count, dt, st);
}

int MPI_File_write_all(MPI_File fh, const void *buf, int count, MPI_Datatype dt, MPI_Status *st)
{
	struct handle *h = find(fh);
	return h ? commit_after(h, io_fp(h, (void *)(uintptr_t)buf, count, dt, st, 1))
	         : PMPI_File_write_all(fh, buf, count, dt, st);
}

int MPI_File_seek(MPI_File fh, MPI_Offset offset, int whence)
{
	struct handle *h = find(fh);
	MPI_Offset npos;
	if (!h)
		return PMPI_File_seek(fh, offset, whence);
	if (whence == MPI_SEEK_SET)
		npos = offset;
	else if (whence == MPI_SEEK_CUR)
		npos = h->pos + offset;
	else if (whence == MPI_SEEK_END) {
		/* The end of the file in etypes of the view's data stream. */
		MPI_Offset end = (MPI_Offset)rcpio_cache_size(h->f) - h->disp, tiles, in;
		if (end < 0)
			end = 0;
		tiles = end / h->extent;
		in = end % h->extent;
		end = tiles * h->tsize;
		for (int r = 0; r < h->nruns; r++)
			if (h->runs[r].off < in)
				end += in - h->runs[r].off < h->runs[r].len ? in - h->runs[r].off
				                                            : h->runs[r].len;
		if (!h->nruns)
			end += in;
		npos = end / h->etsize + offset;
	} else
		return MPI_ERR_ARG;
	if (npos < 0)
		return MPI_ERR_ARG;
	h->pos = npos;
	return MPI_SUCCESS;
}

int MPI_File_get_position(MPI_File fh, MPI_Offset *offset)
{
	struct handle *h = find(fh);
	if (!h)
		return PMPI_File_get_position(fh, offset);
	*offset = h->pos;
	return MPI_SUCCESS;
}

int MPI_File_sync(MPI_File fh)
{
	struct handle *h = find(fh);
	if (!h)
		return PMPI_File_sync(fh);
	return rcpio_cache_sync(h->f) ? MPI_ERR_IO : MPI_SUCCESS;
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size)
{
	struct handle *h = find(fh);
	if (h && rcpio_cache_drop(h->f))
		return MPI_ERR_IO;
	return PMPI_File_set_size(fh, size);
}

int MPI_File_get_size(MPI_File fh, MPI_Offset *size)
{
	struct handle *h = find(fh);
	if (!h)
		return PMPI_File_get_size(fh, size);
	*size = (MPI_Offset)rcpio_cache_size(h->f);
	return MPI_SUCCESS;
}

int MPI_Finalize(void)
{
	/* Peers may still pull from our pool until every rank is here. */
	PMPI_Barrier(MPI_COMM_WORLD);
	rcpio_cache_finalize();
	return PMPI_Finalize();
}
