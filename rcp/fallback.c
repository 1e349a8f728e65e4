/*
 * rcp/fallback.c — a message whose RMA transfer could not be done moves
 * by frames instead.  Below msg.c (the frames that ask for it and the
 * bytes that then come) and rma.c (a transfer that comes back failed);
 * it calls only send.c (rcp/core.c, LAYERS).
 *
 * FALLBACK.  An RMA transfer can fail where frames would not: the nic may
 * not be able to start it yet (nic/verbs answers RCP_ENOTSUP while the RC
 * queue pair to that peer is still connecting: nic/verbs/rc.c, "When"), or
 * it may complete in error (a peer that does not answer on the QP, a key
 * the HCA refuses).  Until session 18 the request then failed, and with it
 * the exchange above (tests/test_verbs_rma t_bulk: RCP_EPEER).  Now the
 * message falls back to frames, whatever moved by RMA before: a get or put
 * writes the message's own bytes at their own offsets or nothing, so the
 * stream that follows overwrites nothing but with the same bytes.
 *
 * The receiver asks, by READY|STREAM for the message: "send it all as
 * DATA".  The sender streams it from offset 0 (no first frame: the message
 * has started), and completes on the acks, as after a READY.  The
 * receiver asks only while no transfer of its own for the message is out
 * (its buffer is then written by frames alone, after the sender's half),
 * and completes when every byte has come by frames and, for a split, the
 * sender's FIN(SPLIT) has said its half is back (whatever it moved).  Who
 * starts it:
 *   - the receiver's get (RTS_GET, SPLIT_GET) comes back failed: it asks;
 *   - the sender's put of its half of a split comes back failed: it says
 *     so by FIN(SPLIT|STREAM) instead of FIN(SPLIT, 0), and ignores the
 *     receiver's FIN; the receiver asks once its own half is back (at
 *     once if it is, though its FIN may have gone: the sender ignores it);
 *   - an RTS with a key that the receiver will not pull (no RMA, or no
 *     more on this channel): READY|STREAM at once, as a plain READY is
 *     ignored by a sender that offered a key;
 *   - the put into a READY promise (READY_PUT): the sender streams the
 *     message as if it had never put (start.c, ready_put_out); the receiver
 *     takes either, so nothing is asked.
 * A sender whose own put is still out when the request comes streams
 * when the put is back (RMA_RESEND), after its FIN(SPLIT): a frame the
 * receiver takes before the stream's last one.
 *
 * Bounds.  A message falls back at most once: the receiver asks once
 * (RMA_FRAMES marks the receive, and no transfer of its own is posted
 * after), the sender streams from S_RTS only, which it then leaves.  A READY|STREAM for no such message is stale: ignored, or kept
 * as the promise of a message not started yet, as any READY.  One from a
 * hostile peer only makes us stream a message the peer could have asked
 * for by a plain READY.  What a broken or hostile peer could still cost is
 * one failed transfer per message (on InfiniBand, a QP whose peer does
 * not answer completes in error after its retries: ~0.5 s with nic/verbs'
 * timeout 14 and 7 retries), so each side counts the fallbacks of
 * each channel (stats rma_fallbacks), and after RMA_FALLBACK_MAX the
 * channel stops using RMA both ways: no keys offered or promised, no
 * split, and an RTS with a key gets READY|STREAM.  A channel whose QP was
 * only slow to come up falls back once or twice and keeps its RMA.
 */
#include "common/rcp_common.h"
#include "rcp/chan.h"

/* Fallbacks after which a channel stops using RMA (FALLBACK). */
#define RMA_FALLBACK_MAX 8

/* One more fallback on CH: counted; past the bound, no more RMA. */
void rcpi_fell_back(rcp_chan *ch)
{
	ch->core->st.rma_fallbacks++;
	if (++ch->rma_fallbacks == RMA_FALLBACK_MAX) {
		ch->rma_off = 1;
		rcpi_warn("a channel's RMA transfers failed %u times: its messages go by frames "
		          "from now on",
		          RMA_FALLBACK_MAX);
	}
}

/* Receiver: R (R_RMA, no transfer of ours out) is to come whole by frames:
 * READY|STREAM asks the sender.  Every byte is counted afresh; a failure
 * remembered from the RMA is forgotten.  PEER_DONE: no FIN(SPLIT) is to
 * come (not a split, or it came). */
void rcpi_frames_ask(rcp_chan *ch, rcp_req *r, int peer_done)
{
	struct ctl k = {0};

	rcpi_fell_back(ch);
	r->rma = (uint8_t)(RMA_FRAMES | (peer_done ? RMA_PEER : 0));
	r->got = 0;
	r->error = 0;
	k.type = RCPW_READY;
	k.flags = RCPW_F_STREAM;
	k.msg = r->msg;
	k.tag = r->tag;
	k.arg = r->total;
	if (rcpi_ctl_push(ch, &k))
		rcpi_chan_fail(ch, RCP_ENOMEM);
	chan_dirty(ch);
}

/* Sender: R (S_RTS, no put of ours out) streams whole, from offset 0,
 * without a first frame, and completes on the acks. */
void rcpi_frames_send(rcp_chan *ch, rcp_req *r)
{
	rcpi_fell_back(ch);
	list_del(&r->link);
	r->rma = 0;
	r->error = 0;
	r->reserved_rma = 0;
	r->state = S_STREAM;
	r->next_off = 0;
	list_add_tail(&ch->streamq, &r->link);
	chan_dirty(ch);
}
