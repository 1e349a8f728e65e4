/*
 * rcpio/recover.c — claims at open (recover.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <rcp/error.h>

#include "rcpio/recover.h"

int rcpio_recover(const struct rcpio_recover_in *in, int *fidx, uint64_t *recovered,
                  uint64_t *dropped)
{
	uint32_t n = rcpio_pool_nslots(in->pool);
	int *scount = calloc((size_t)in->size, sizeof(int)),
	    *rcount = calloc((size_t)in->size, sizeof(int));
	int *sdisp = calloc((size_t)in->size, sizeof(int)),
	    *rdisp = calloc((size_t)in->size, sizeof(int));
	uint64_t *sbuf = NULL, *rbuf = NULL;
	struct rcpio_fident id;
	struct stat st;
	int ok = 0, rc = RCP_ENOMEM, total = 0, rtotal = 0;

	if (!scount || !rcount || !sdisp || !rdisp)
		goto out;
	pthread_mutex_lock(in->lock);
	*fidx = rcpio_pool_file_find(in->pool, in->fid);
	if (*fidx >= 0 && !fstat(in->fd, &st) &&
	    !rcpio_pool_file_get(in->pool, (uint32_t)*fidx, &id))
		ok = id.dev == (uint64_t)st.st_dev && id.ino == (uint64_t)st.st_ino &&
		     id.size == (uint64_t)st.st_size &&
		     id.mtime_ns == (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec &&
		     !strncmp(id.path, in->path, sizeof id.path);
	if (*fidx < 0)
		*fidx = rcpio_pool_file_free(in->pool);
	for (uint32_t s = 0; s < n; s++) {
		struct rcpio_slot *sl = rcpio_pool_slot(in->pool, s);
		if (!sl->used || sl->fid != in->fid)
			continue;
		if (ok && sl->committed && sl->lo >= sl->hi &&
		    rcpio_tag_ok(rcpio_pool_data(in->pool, s) + rcpio_pool_block(in->pool), sl->fid,
		                 sl->block, sl->gen)) {
			scount[sl->block % (uint64_t)in->size]++;
			total++;
			continue;
		}
		/* Not provably the file's bytes: never trusted. */
		(*dropped)++;
		rcpio_pool_tag_clear(in->pool, s);
		rcpio_pool_uncommit(in->pool, s);
		rcpio_pool_release(in->pool, s);
	}
	pthread_mutex_unlock(in->lock);
	if (!(sbuf = malloc(3 * sizeof(uint64_t) * (size_t)(total + 1))))
		goto out;
	for (int i = 1; i < in->size; i++)
		sdisp[i] = sdisp[i - 1] + 3 * scount[i - 1];
	{
		int *at = calloc((size_t)in->size, sizeof(int));
		if (!at)
			goto out;
		pthread_mutex_lock(in->lock);
		for (uint32_t s = 0; s < n; s++) {
			struct rcpio_slot *sl = rcpio_pool_slot(in->pool, s);
			int m;
			if (!sl->used || sl->fid != in->fid)
				continue;
			m = (int)(sl->block % (uint64_t)in->size);
			sbuf[sdisp[m] + at[m]++] = sl->block;
			sbuf[sdisp[m] + at[m]++] = s;
			sbuf[sdisp[m] + at[m]++] = sl->gen;
		}
		pthread_mutex_unlock(in->lock);
		free(at);
	}
	for (int i = 0; i < in->size; i++)
		scount[i] *= 3;
	PMPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, in->comm);
	for (int i = 0; i < in->size; i++) {
		rdisp[i] = rtotal;
		rtotal += rcount[i];
	}
	if (!(rbuf = malloc(sizeof(uint64_t) * (size_t)(rtotal + 1))))
		goto out; /* (the collective below is then missed: fatal anyway) */
	PMPI_Alltoallv(sbuf, scount, sdisp, MPI_UINT64_T, rbuf, rcount, rdisp, MPI_UINT64_T,
	               in->comm);
	/* The manager's verdict goes back in place of each claim's block
	 * number: 1 taken, 0 refused (another pool claimed the block first —
	 * possible after a job that did not see this pool; the loser's copy
	 * is dropped, so two committed copies never both live on). */
	pthread_mutex_lock(in->lock);
	for (int src = 0; src < in->size; src++)
		for (int k = rdisp[src]; k + 2 < rdisp[src] + rcount[src]; k += 3)
			rbuf[k] = !rcpio_meta_insert(in->meta, in->fid, rbuf[k], (uint32_t)src,
			                             (uint32_t)rbuf[k + 1], rbuf[k + 2]);
	pthread_mutex_unlock(in->lock);
	PMPI_Alltoallv(rbuf, rcount, rdisp, MPI_UINT64_T, sbuf, scount, sdisp, MPI_UINT64_T,
	               in->comm);
	pthread_mutex_lock(in->lock);
	for (int m = 0; m < in->size; m++)
		for (int k = sdisp[m]; k + 2 < sdisp[m] + scount[m]; k += 3) {
			uint32_t s = (uint32_t)sbuf[k + 1];
			if (sbuf[k]) {
				struct rcpio_slot *sl = rcpio_pool_slot(in->pool, s);
				*rcpio_hint_of(in->hints, in->fid, sl->block) = (struct rcpio_hint){
				    in->fid, sl->block, sl->gen, (uint32_t)in->rank, s};
				continue;
			}
			(*dropped)++;
			total--;
			rcpio_pool_tag_clear(in->pool, s);
			rcpio_pool_uncommit(in->pool, s);
			rcpio_pool_release(in->pool, s);
		}
	pthread_mutex_unlock(in->lock);
	/* No query before every manager holds its claims (a zero-length part
	 * of an all-to-all need not wait for anybody). */
	PMPI_Barrier(in->comm);
	*recovered += (uint64_t)total;
	rc = 0;
out:
	free(scount);
	free(rcount);
	free(sdisp);
	free(rdisp);
	free(sbuf);
	free(rbuf);
	return rc;
}
