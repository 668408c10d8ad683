"""The kernel's floor under a streamed token: the CPU one small loopback TCP write costs.

A streamed token is one SSE chunk of about 240 bytes written to the client's socket
(TCP_NODELAY, one ``writev``). On loopback the kernel runs both ends of it in the
writer's system call: the send, the receive processing, and waking the reader. This
script measures that cost alone: a writer process sends ``--chunks`` chunks of
``--size`` bytes to a reader process that blocks on each (as a streaming client does),
paced ``--gap-us`` apart so that the reader is asleep at each write (as between engine
steps; the pause is a busy loop, so the writer's CPU never sleeps), and reports the
writer's system CPU per write from ``getrusage`` (its user time is the busy loop and
Python's own, not a frontend's).

    python benchmarks/loopback_write.py                   # 20000 chunks of 240 bytes
    python benchmarks/loopback_write.py --gap-us 0        # back to back

Compare the system time per write with vrs-rs's CPU per streamed token in
frontend_overhead.py's paced mode: what is left above it is the frontend's own work.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import socket
import time


def reader(port: int, total: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        received = 0
        while received < total:
            data = conn.recv(65536)
            if not data:
                break
            received += len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--size", type=int, default=240, help="bytes per chunk")
    parser.add_argument("--gap-us", type=float, default=30.0,
                        help="pause between writes (0: back to back)")
    args = parser.parse_args()
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        child = multiprocessing.Process(target=reader, args=(port, args.chunks * args.size))
        child.start()
        conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    chunk = b"x" * args.size
    gap = args.gap_us / 1e6
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for _ in range(args.chunks):
        conn.sendall(chunk)
        if gap:
            until = time.perf_counter() + gap
            while time.perf_counter() < until:
                pass
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    conn.close()
    child.join()
    system = (after.ru_stime - before.ru_stime) / args.chunks * 1e6
    print(f"{args.chunks} writes of {args.size} bytes, {args.gap_us:g} µs apart, "
          f"{wall:.2f} s: system CPU {system:.2f} µs per write (the kernel: the send, the "
          f"loopback receive, the reader's wake-up)")


if __name__ == "__main__":
    main()
