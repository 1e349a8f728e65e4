# tests/rcpio_gdb.py — gdb script (gdb -p PID -batch -x tests/rcpio_gdb.py)
# for a hung rcpio rank: every thread's backtrace, then the rcpio and RCP
# counters of both endpoints (from the progress thread's frame) and, for a
# thread waiting in a bulk transfer, the operation it waits for.  Used by
# tests/rcpio_mpi.sh when a job outlives its time limit.
import gdb

gdb.execute("set print pretty off")
gdb.execute("thread apply all bt")
for th in gdb.selected_inferior().threads():
    th.switch()
    f = gdb.newest_frame()
    while f is not None:
        name = f.name()
        sal = f.find_sal()
        mine = sal.symtab is not None and sal.symtab.filename.endswith("xfer.c")
        if name == "progress" and mine:
            f.select()
            try:
                n = gdb.parse_and_eval("(rcpio_net *)arg")
                print("rcpio counters: %s" % n["st"])
                for side in ("cep", "sep"):
                    print("rcp counters, %s: %s" % (side, n[side]["core"]["st"]))
            except gdb.error as e:
                print("rcpio counters: %s" % e)
        elif name == "move" and mine:
            f.select()
            try:
                print("thread %d waits for bulk op %s" % (th.num, gdb.parse_and_eval("*op")))
                ch = gdb.parse_and_eval("op->chan")
                print("thread %d: its channel: %s" % (th.num, ", ".join(
                    "%s %s" % (k, ch[k]) for k in (
                        "peer", "failed", "my_epoch", "peer_epoch", "gone_epoch", "incarn",
                        "tx_una", "tx_next", "unsent", "rx_next", "rx_gaps", "rx_msg_next",
                        "tx_msg_next", "credits_granted", "credits_used", "credits_given",
                        "credits_taken", "last_heard", "backoff", "rto"))))
            except gdb.error as e:
                print("thread %d in move: %s" % (th.num, e))
        f = f.older()
