/*
 * tests/rcpio_mpi — a plain MPI-IO program (nothing rcpio-specific), run by
 * tests/rcpio_mpi.sh with and without LD_PRELOAD=librcpio.so.
 *
 * usage: rcpio_mpi PATH [write|read|both|inv] [RECORD] [RECORDS] [PAUSE_MS]
 * Every rank writes RECORDS records of RECORD bytes, interleaved N-1
 * (record i of rank r at (i*nprocs + r)*RECORD) with MPI_File_write_at,
 * syncs (sync-barrier-sync: MPI's rule for seeing other ranks' writes),
 * then reads the whole file back — mostly bytes other ranks wrote — three
 * ways: read_at in odd-sized pieces, read_all through a contiguous view,
 * read through a strided (vector) view of its own records.  Every byte of
 * the file is a function of its offset, so every check is byte for byte.
 * "read" mode only checks a file written before (restart, recovery).
 * "inv" mode writes the complement of every byte, syncs and reads nothing:
 * a file the next "both" job must overwrite everywhere.
 * "crash" mode overwrites the first half's records with other bytes, never syncs, and
 * kills itself (SIGKILL) on every rank: writes that were never committed.
 * "crash-only0" / "crash-except0": the same, written by rank 0 alone / by
 * every rank but 0.  "touch0": rank 0 alone reads the whole file (so that,
 * on fresh pools, it caches and owns every block).  "crash-all": every
 * rank writes its records (the reference bytes) with the collective
 * MPI_File_write_at_all, never syncs, and is killed: each collective call
 * is a commit point, so the next job recovers all of it.  "views": every
 * rank writes its records through a strided view (vector filetype) with
 * the individual MPI_File_write, other bytes, then the right ones after a
 * seek to the view's start with the collective MPI_File_write_all (in this
 * order: Open MPI 4.1's own independent strided write, run last, was
 * seen leaving another rank's record with its older bytes — presumably a
 * read-modify-write of the extent between our records without a lock —
 * so the final bytes come from the collective call);
 * sync-barrier-sync, the whole file read back with read_at;
 * MPI_File_set_size cuts it to an odd size (get_size must say so, reads
 * stop there), then grows it back to the full size with zeros past the
 * cut (get_size again, bytes read back).
 * PAUSE_MS: between writing and reading back, every rank computes for
 * PAUSE_MS ms, calling neither MPI nor MPI-IO (tests/rcpio_mpi.sh runs it
 * longer than RCP_PEER_TIMEOUT: rcpio must not take a computing rank for
 * dead).
 * Exit 0 when everything matches; rank 0 prints "rcpio_mpi: ok".
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned char pat(long long off)
{
	return (unsigned char)((off * 131 + (off >> 11) * 7 + 5) & 0xff);
}

static int fail(int rank, const char *what, long long at)
{
	fprintf(stderr, "rcpio_mpi: rank %d: %s (at %lld)\n", rank, what, at);
	MPI_Abort(MPI_COMM_WORLD, 1);
	return 1;
}

int main(int argc, char **argv)
{
	int rank, size, rec, nrec, doread, dowrite, pause_ms, inv;
	long long total;
	unsigned char *buf;
	MPI_File fh;
	MPI_Status st;
	MPI_Offset fsize;
	MPI_Datatype vec;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2)
		return fail(
		    rank,
		    "usage: rcpio_mpi PATH [write|read|both|inv] [RECORD] [RECORDS] [PAUSE_MS]", 0);
	dowrite = argc < 3 || strcmp(argv[2], "read");
	doread = argc < 3 || strcmp(argv[2], "write");
	/* "inv": writes the complement of the pattern, reads nothing (a file
	 * that a later "both" must overwrite everywhere). */
	inv = argc > 2 && !strcmp(argv[2], "inv");
	doread = doread && !inv;
	rec = argc > 3 ? atoi(argv[3]) : 3000;
	nrec = argc > 4 ? atoi(argv[4]) : 40;
	pause_ms = argc > 5 ? atoi(argv[5]) : 0;
	total = (long long)rec * nrec * size;
	buf = malloc((size_t)total + 1);

	if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
	                  &fh) != MPI_SUCCESS)
		return fail(rank, "open", 0);
	if (argc > 2 && !strcmp(argv[2], "touch0")) {
		for (long long at = 0; rank == 0 && at < total; at += rec)
			MPI_File_read_at(fh, at, buf, rec, MPI_BYTE, &st);
		MPI_File_close(&fh);
		MPI_Finalize();
		return 0;
	}
	if (argc > 2 && !strcmp(argv[2], "crash-all")) {
		for (int i = 0; i < nrec; i++) {
			long long off = ((long long)i * size + rank) * rec;
			for (int k = 0; k < rec; k++)
				buf[k] = pat(off + k);
			if (MPI_File_write_at_all(fh, off, buf, rec, MPI_BYTE, &st) != MPI_SUCCESS)
				return fail(rank, "write_at_all", off);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		raise(SIGKILL);
	}
	if (argc > 2 && !strncmp(argv[2], "crash", 5)) {
		int writes = !strcmp(argv[2], "crash-only0")     ? rank == 0
		             : !strcmp(argv[2], "crash-except0") ? rank != 0
		                                                 : 1;
		for (int i = 0; writes && i < nrec / 2; i++) {
			long long off = ((long long)i * size + rank) * rec;
			for (int k = 0; k < rec; k++)
				buf[k] = (unsigned char)~pat(off + k);
			MPI_File_write_at(fh, off, buf, rec, MPI_BYTE, &st);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		raise(SIGKILL);
	}
	if (argc > 2 && !strcmp(argv[2], "views")) {
		long long cut = total / 2 + 123;
		int cnt;
		MPI_Type_vector(nrec, rec, rec * size, MPI_BYTE, &vec);
		MPI_Type_commit(&vec);
		MPI_File_set_view(fh, (MPI_Offset)rank * rec, MPI_BYTE, vec, "native",
		                  MPI_INFO_NULL);
		/* First pass: other bytes, through write; the second pass
		 * (write_all after a seek to the view's start) overwrites them. */
		for (int i = 0; i < nrec; i++)
			for (int k = 0; k < rec; k++)
				buf[(long long)i * rec + k] =
				    (unsigned char)~pat(((long long)i * size + rank) * rec + k);
		if (MPI_File_write(fh, buf, rec * nrec, MPI_BYTE, &st) != MPI_SUCCESS)
			return fail(rank, "write through a view", 0);
		for (int i = 0; i < nrec; i++)
			for (int k = 0; k < rec; k++)
				buf[(long long)i * rec + k] =
				    pat(((long long)i * size + rank) * rec + k);
		MPI_File_seek(fh, 0, MPI_SEEK_SET);
		if (MPI_File_write_all(fh, buf, rec * nrec, MPI_BYTE, &st) != MPI_SUCCESS)
			return fail(rank, "write_all through a view", 0);
		MPI_Type_free(&vec);
		MPI_File_sync(fh);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_File_sync(fh);
		MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
		memset(buf, 0, (size_t)total);
		MPI_File_read_at(fh, 0, buf, (int)total, MPI_BYTE, &st);
		for (long long o = 0; o < total; o++)
			if (buf[o] != pat(o))
				return fail(rank, "data written through views differs", o);
		/* Cut to an odd size (once every rank has read: a collective
		 * call need not wait for the others): the size and the reads
		 * say so. */
		MPI_Barrier(MPI_COMM_WORLD);
		if (MPI_File_set_size(fh, cut) != MPI_SUCCESS)
			return fail(rank, "set_size (cut)", cut);
		MPI_File_get_size(fh, &fsize);
		if (fsize != cut)
			return fail(rank, "get_size after the cut", fsize);
		memset(buf, 0, (size_t)total);
		MPI_File_read_at(fh, 0, buf, (int)total, MPI_BYTE, &st);
		MPI_Get_count(&st, MPI_BYTE, &cnt);
		if (cnt != cut)
			return fail(rank, "read past the cut", cnt);
		for (long long o = 0; o < cut; o++)
			if (buf[o] != pat(o))
				return fail(rank, "data before the cut differs", o);
		/* Grow it back: zeros past the cut. */
		MPI_Barrier(MPI_COMM_WORLD);
		if (MPI_File_set_size(fh, total) != MPI_SUCCESS)
			return fail(rank, "set_size (grow)", total);
		MPI_File_get_size(fh, &fsize);
		if (fsize != total)
			return fail(rank, "get_size after growing", fsize);
		memset(buf, 0xaa, (size_t)total);
		MPI_File_read_at(fh, 0, buf, (int)total, MPI_BYTE, &st);
		for (long long o = 0; o < total; o++)
			if (buf[o] != (o < cut ? pat(o) : 0))
				return fail(rank, "data after growing differs", o);
		MPI_File_close(&fh);
		if (rank == 0)
			printf("rcpio_mpi: views ok (%d ranks, %lld bytes, cut at %lld)\n", size,
			       total, cut);
		free(buf);
		MPI_Finalize();
		return 0;
	}
	if (dowrite) {
		for (int i = 0; i < nrec; i++) {
			long long off = ((long long)i * size + rank) * rec;
			for (int k = 0; k < rec; k++)
				buf[k] = inv ? (unsigned char)~pat(off + k) : pat(off + k);
			if (MPI_File_write_at(fh, off, buf, rec, MPI_BYTE, &st) != MPI_SUCCESS)
				return fail(rank, "write_at", off);
		}
		MPI_File_sync(fh);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_File_sync(fh);
	}
	if (pause_ms > 0)
		usleep((useconds_t)pause_ms * 1000); /* computing, not waiting for anything */
	if (doread) {
		/* 1: the whole file with read_at, in pieces of odd sizes. */
		long long at = 0;
		int piece = 777 + 1000 * rank, cnt;
		memset(buf, 0, (size_t)total);
		while (at < total) {
			int n = (int)(total - at < piece ? total - at : piece);
			if (MPI_File_read_at(fh, at, buf + at, n, MPI_BYTE, &st) != MPI_SUCCESS)
				return fail(rank, "read_at", at);
			MPI_Get_count(&st, MPI_BYTE, &cnt);
			if (cnt != n)
				return fail(rank, "read_at short", at);
			at += n;
		}
		for (long long o = 0; o < total; o++)
			if (buf[o] != pat(o))
				return fail(rank, "read_at data differs", o);
		MPI_File_get_size(fh, &fsize);
		if (fsize != total)
			return fail(rank, "get_size", fsize);
		/* 2: read_all of the rank's quarter through a contiguous view of ints. */
		{
			long long q = total / size / 4 * 4, base = q * rank;
			MPI_File_set_view(fh, base, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
			memset(buf, 0, (size_t)q);
			if (MPI_File_read_all(fh, buf, (int)(q / 4), MPI_INT, &st) != MPI_SUCCESS)
				return fail(rank, "read_all", base);
			for (long long o = 0; o < q; o++)
				if (buf[o] != pat(base + o))
					return fail(rank, "read_all data differs", base + o);
		}
		/* 3: its own records through a strided view (vector filetype). */
		MPI_Type_vector(nrec, rec, rec * size, MPI_BYTE, &vec);
		MPI_Type_commit(&vec);
		MPI_File_set_view(fh, (MPI_Offset)rank * rec, MPI_BYTE, vec, "native",
		                  MPI_INFO_NULL);
		memset(buf, 0, (size_t)rec * nrec);
		if (MPI_File_read(fh, buf, rec * nrec, MPI_BYTE, &st) != MPI_SUCCESS)
			return fail(rank, "strided read", 0);
		for (int i = 0; i < nrec; i++)
			for (int k = 0; k < rec; k++)
				if (buf[(long long)i * rec + k] !=
				    pat(((long long)i * size + rank) * rec + k))
					return fail(rank, "strided data differs",
					            (long long)i * rec + k);
		MPI_Type_free(&vec);
	}
	MPI_File_close(&fh);
	/* The file on disk, after close, without MPI. */
	if (rank == 0 && doread) {
		FILE *f = fopen(argv[1], "rb");
		long long n = f ? (long long)fread(buf, 1, (size_t)total + 1, f) : -1;
		if (f)
			fclose(f);
		if (n != total)
			return fail(rank, "file on disk has the wrong size", n);
		for (long long o = 0; o < total; o++)
			if (buf[o] != pat(o))
				return fail(rank, "file on disk differs", o);
		printf("rcpio_mpi: ok (%d ranks, %lld bytes)\n", size, total);
	}
	free(buf);
	MPI_Finalize();
	return 0;
}
