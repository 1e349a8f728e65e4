/*
 * rpc/batch.c — requests and responses queued during a progress round and
 * sent as one rcp message per channel.
 *
 * BATCHES.  Requests forwarded and responses given while the context's
 * progress runs (from callbacks and handlers: the steady state of a client
 * keeping calls in flight and of a server) are not sent one by one: they
 * are appended to a queue of their channel (a request queue per peer; a
 * few response queues by channel hash) and each queue goes out as one rcp
 * message when the round ends, nested rounds included, or earlier when
 * the next one would pass msg_max.  A message thus holds one or more
 * [header, payload] in a row; a lone one is exactly the message of old.
 * rcp's per-message cost (sequence, slot, frame, ack, matching, posting
 * the receive again) is then paid once per batch, which is what lifts the
 * rate at 16 calls in flight.  A receiver checks every header of a
 * message (hdr.c) before it uses any; one bad header drops the whole
 * message (bad_msgs +1).  A request message taken outside a round (the
 * endpoint's own look) is answered in a round of its callback's length
 * (server.c, ONE ANSWER A MESSAGE).  Calls forwarded outside progress go at once, as
 * before (a lone call's latency is unchanged); RCP_RPC_BATCH=0 turns
 * batching off.  One response receive may now carry several calls'
 * responses: the client's surplus receives stay posted while calls are
 * pending and are canceled when none is (rpci_peer_repost, client.c).
 *
 * HALVES (session 19).  With one batch a round the two sides took turns:
 * the client encoded 16 calls while the server waited, the server ran 16
 * handlers while the client waited, so a call cost the sum of both sides'
 * work (perf/rpc_instr.sh counts ~1,000 instructions for the two).  Now a
 * client's batch to a peer leaves once it holds 1/RCP_RPC_SPLIT (default
 * 2) of the calls the peer had in flight (peer->flight: the most pending
 * at once, seen when a response message arrives or a call goes outside a
 * round; 0 again when the peer is idle), and a server sends the answers
 * to each request message as soon as that message's handlers have run,
 * not at the round's end.  So at 16 in flight two messages of 8 travel
 * each way, and each side works on one half while the other side works
 * on the other.  Each message costs rcp's per-message work again (perf/
 * rpc_instr.sh, one thread, so no overlap to gain: 1,027 instructions an
 * empty call with one batch, 1,304 with halves), which two CPUs pay in
 * parallel.  A peer with fewer than HALF_MIN * split calls in flight is
 * not split (a lone call, a small fan: one message as before), and a
 * client that lowers its calls in flight without going idle keeps the
 * larger count: its batches then leave whole at the round's end.  Batches
 * do not merge again by themselves (k answers bring k forwards), which is
 * why the split follows the calls in flight and not the message sizes.
 *
 * Every queued message is sent by the end of the progress round that
 * queued it (rpc.c's progress calls rpci_flush_all).
 *
 * Calls complete.c (a batch of requests that cannot be sent fails its calls)
 * and bufs.c; used by the client, the server and progress.
 */
#include <string.h>

#include "rpc/rpc_int.h"

/* Sends the messages queued on Q as one rcp message (BATCHES above).  If
 * a batch of requests cannot be sent, its calls fail with the error (a
 * batch of responses is lost as a lost message would be: its calls time
 * out or fail with the channel). */
void rpci_flush_q(rcp_rpc *rpc, struct outq *q)
{
	struct peer *p = q->peer;
	rcp_req *held = NULL;
	uint32_t gen;
	int rc;
	if (!q->n)
		return;
	gen = ++q->gen;
	if (q->n > 1)
		rpc->st.batched_out += q->n;
	rc = p && p->failed
	         ? p->failed
	         : rpci_send_msg(q->ch, q->tag, q->buf, q->len, rpci_aux_free_cb, NULL, &held);
	q->len = 0;
	q->n = 0;
	if (held) {
		/* rcp still reads the batch: the buffer goes with the send */
		(void)rpci_aux_add(rpc, held, AUX_SEND_FREE, q->buf, NULL, NULL); /* else leaked */
		q->buf = NULL;
		q->cap = 0;
	}
	if (rc && p)
		for (uint32_t i = 0; i < rpc->nreqs; i++) {
			struct rcp_rpc_req *r = rpc->reqs[i];
			if (r->peer == p && r->qgen == gen &&
			    (r->state == Q_PENDING || r->state == Q_OVF_WAIT)) {
				if (p->expect)
					p->expect--;
				rpci_done(r, rc);
			}
		}
}

void rpci_flush_all(rcp_rpc *rpc)
{
	while (rpc->dirty) {
		struct outq *q = rpc->dirty;
		rpc->dirty = q->next;
		q->dirty = 0;
		rpci_flush_q(rpc, q);
	}
}

/* IN PLACE.  A call forwarded or answered inside a round is written
 * straight into its batch: rpci_queue_room gives the end of the batch,
 * the caller encodes header and payload there, rpci_queue_commit adds it.
 * Before, each was encoded into a buffer of its own (the request's, the
 * handle's) and copied in (rpci_queue_msg, still used where that buffer
 * exists anyway); per empty call the copy, its size checks and the own
 * buffer's growth cost ~60 instructions (perf/rpc_instr.sh).  The common
 * case (room left, buffer grown) is inline in rpc_int.h: as a call it cost
 * ~26 instructions a call on each side, mostly saving registers for the
 * flush it never made (session 19). */
unsigned char *rpci_queue_room_slow(rcp_rpc *rpc, struct outq *q, size_t *room)
{
	if (q->n && q->len + HDR_LEN > rpc->msg_max)
		rpci_flush_q(rpc, q);
	if (q->cap < rpc->msg_max && rpci_grow_buf(&q->buf, &q->cap, rpc->msg_max))
		return NULL;
	*room = rpc->msg_max - q->len;
	return q->buf + q->len;
}

void rpci_queue_commit(rcp_rpc *rpc, struct outq *q, size_t len, uint32_t *gen)
{
	q->len += len;
	if (!q->n++ && !q->dirty) {
		q->dirty = 1;
		q->next = rpc->dirty;
		rpc->dirty = q;
	}
	if (gen)
		*gen = q->gen + 1;
}

/* Appends message MSG (LEN bytes, header included) to Q; its batch number
 * in *GEN (NULL: not wanted).  The batch goes out first if MSG would not
 * fit. */
int rpci_queue_msg(rcp_rpc *rpc, struct outq *q, const void *msg, size_t len, uint32_t *gen)
{
	if (q->n && q->len + len > rpc->msg_max)
		rpci_flush_q(rpc, q);
	if (rpci_grow_buf(&q->buf, &q->cap, q->len + len))
		return RCP_ENOMEM;
	memcpy(q->buf + q->len, msg, len);
	rpci_queue_commit(rpc, q, len, gen);
	return 0;
}
