"""Two threads' blocks of a process-wide override (utils.SharedOverride) opening and closing out
of order: thread A opens, B opens, A closes, B looks, B closes."""

import threading


def overlapping(block, probe):
    """``probe()`` in thread B after A's ``block()`` closed while B's is still open."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def a():
        with block():
            a_in.set()
            b_in.wait(5)
        a_out.set()

    def b():
        a_in.wait(5)
        with block():
            b_in.set()
            a_out.wait(5)
            seen.append(probe())

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 1, "thread B did not finish"
    return seen[0]
