/*
 * perf/rcpio_bench — an IOR-like MPI-IO benchmark (IOR is not packaged
 * here), plain MPI-IO: run it as is for Open MPI's own MPI-IO, or with
 * LD_PRELOAD=librcpio.so for the rcpio cache (perf/rcpio_bench.sh does
 * both on the same files).
 *
 * usage: rcpio_bench PATH segmented|strided XFER PER_RANK PHASES
 *   segmented: rank r owns [r*PER_RANK, (r+1)*PER_RANK), written in XFER
 *              pieces; strided: piece i of rank r at (i*nprocs + r)*XFER.
 *   PHASES, a word of letters run in order on one open of the file:
 *     w write all pieces, s MPI_File_sync, r read own pieces back,
 *     o read the pieces of the next rank (bytes another rank wrote),
 *     c close and open again (r/o after it read a file already cached).
 * One CSV line per phase on rank 0: pattern,phase,nprocs,xfer,bytes,
 * seconds,MBps (slowest rank's time; bytes of all ranks).  Reads are
 * checked byte for byte; exit 1 on a mismatch.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char pat(long long off)
{
	return (unsigned char)((off * 131 + (off >> 12) * 7 + 5) & 0xff);
}

int main(int argc, char **argv)
{
	int rank, size, strided, bad = 0;
	long long xfer, per, n;
	unsigned char *buf;
	MPI_File fh;
	const char *phases;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 6) {
		if (!rank)
			fprintf(stderr,
			        "usage: rcpio_bench PATH segmented|strided XFER PER_RANK PHASES\n");
		MPI_Finalize();
		return 2;
	}
	strided = !strcmp(argv[2], "strided");
	xfer = atoll(argv[3]);
	per = atoll(argv[4]) / xfer * xfer;
	n = per / xfer;
	phases = argv[5];
	buf = malloc((size_t)xfer);
	MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
	for (const char *ph = phases; *ph; ph++) {
		double t0, t, tmax;
		int who = *ph == 'o' ? (rank + 1) % size : rank;
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (long long i = 0; i < n && (*ph == 'w' || *ph == 'r' || *ph == 'o'); i++) {
			long long off = strided ? (i * size + who) * xfer : who * per + i * xfer;
			if (*ph == 'w') {
				for (long long k = 0; k < xfer; k++)
					buf[k] = pat(off + k);
				MPI_File_write_at(fh, off, buf, (int)xfer, MPI_BYTE,
				                  MPI_STATUS_IGNORE);
			} else {
				MPI_File_read_at(fh, off, buf, (int)xfer, MPI_BYTE,
				                 MPI_STATUS_IGNORE);
				for (long long k = 0; k < xfer; k++)
					if (buf[k] != pat(off + k)) {
						bad = 1;
						break;
					}
			}
		}
		if (*ph == 's')
			MPI_File_sync(fh);
		if (*ph == 'c') {
			MPI_File_close(&fh);
			MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
		}
		t = MPI_Wtime() - t0;
		MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (!rank) {
			double bytes =
			    (*ph == 'w' || *ph == 'r' || *ph == 'o') ? (double)per * size : 0;
			printf("%s,%c,%d,%lld,%.0f,%.6f,%.1f\n", argv[2], *ph, size, xfer, bytes,
			       tmax, bytes ? bytes / tmax / 1e6 : 0.0);
		}
	}
	MPI_File_close(&fh);
	{
		int any = 0;
		MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		if (any && !rank)
			fprintf(stderr, "rcpio_bench: data mismatch\n");
		bad = any;
	}
	free(buf);
	MPI_Finalize();
	return bad;
}
