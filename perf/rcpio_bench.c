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
 *     c close and open again (r/o after it read a file already cached),
 *     d drop the file from the page cache (every rank: fdatasync, then
 *       posix_fadvise DONTNEED; not timed, no line): the next read goes
 *       to the disk, not to memory,
 *     z compute: BENCH_COMPUTE_MS (default 1000) ms asleep — the cores
 *       computing are not this 2-core machine's; a background writer
 *       runs meanwhile,
 *     k the job dies (SIGKILL on every rank after a barrier), as a job
 *       killed after its checkpoint.
 * One CSV line per phase on rank 0: pattern,phase,nprocs,xfer,bytes,
 * seconds,MBps (slowest rank's time; bytes of all ranks); w, r and o time
 * the MPI-IO calls only, as IOR does: filling a piece with its pattern and
 * checking it byte by byte (a scalar loop of ~1 byte a ns) stay outside
 * the clock — until session 18 they were inside it and capped every read
 * near 2.5 GB/s for 4 ranks on this 2-core machine; first a line
 * of phase O, the first MPI_File_open (rcpio: recovery from the pools).
 * Reads are checked byte for byte; exit 1 on a mismatch.
 */
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void report(const char *pattern, char phase, int size, long long xfer, double bytes,
                   double t)
{
	double tmax;
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (!rank)
		printf("%s,%c,%d,%lld,%.0f,%.6f,%.1f\n", pattern, phase, size, xfer, bytes, tmax,
		       bytes ? bytes / tmax / 1e6 : 0.0);
	fflush(stdout);
}

/* Phase d: the next read of PATH must come from the disk. */
static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		fdatasync(fd);
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
	MPI_Barrier(MPI_COMM_WORLD);
}

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
	if (phases[0] == 'd') /* before the open: a new job reading from the disk */
		drop_cache(argv[1]);
	MPI_Barrier(MPI_COMM_WORLD);
	{
		double t0 = MPI_Wtime();
		MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR,
		              MPI_INFO_NULL, &fh);
		report(argv[2], 'O', size, xfer, 0, MPI_Wtime() - t0);
	}
	for (const char *ph = phases; *ph; ph++) {
		double t0, t, tio;
		int who = *ph == 'o' ? (rank + 1) % size : rank;
		if (*ph == 'd') {
			if (ph != phases)
				drop_cache(argv[1]);
			continue;
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (*ph == 'k') {
			fflush(stdout);
			raise(SIGKILL);
		}
		t0 = MPI_Wtime();
		tio = 0;
		for (long long i = 0; i < n && (*ph == 'w' || *ph == 'r' || *ph == 'o'); i++) {
			long long off = strided ? (i * size + who) * xfer : who * per + i * xfer;
			double a;
			if (*ph == 'w') {
				for (long long k = 0; k < xfer; k++)
					buf[k] = pat(off + k);
				a = MPI_Wtime();
				MPI_File_write_at(fh, off, buf, (int)xfer, MPI_BYTE,
				                  MPI_STATUS_IGNORE);
				tio += MPI_Wtime() - a;
			} else {
				memset(buf, 0, (size_t)xfer);
				a = MPI_Wtime();
				MPI_File_read_at(fh, off, buf, (int)xfer, MPI_BYTE,
				                 MPI_STATUS_IGNORE);
				tio += MPI_Wtime() - a;
				for (long long k = 0; k < xfer; k++)
					if (buf[k] != pat(off + k)) {
						bad = 1;
						break;
					}
			}
		}
		if (*ph == 's')
			MPI_File_sync(fh);
		if (*ph == 'z') {
			const char *e = getenv("BENCH_COMPUTE_MS");
			long ms = e ? atol(e) : 1000;
			struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
			while (nanosleep(&ts, &ts))
				;
		}
		if (*ph == 'c') {
			MPI_File_close(&fh);
			MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
		}
		t = MPI_Wtime() - t0;
		if (*ph == 'w' || *ph == 'r' || *ph == 'o')
			t = tio; /* the MPI-IO calls only, as IOR times them */
		report(argv[2], *ph, size, xfer,
		       (*ph == 'w' || *ph == 'r' || *ph == 'o') ? (double)per * size : 0, t);
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
