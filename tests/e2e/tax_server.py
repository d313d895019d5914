#!/usr/bin/python3
"""A small HTTP/1.1 server with a CPU tax, for tests/e2e/test_instruments.py (`squall ab` telling
two server builds apart). Plain python3 stdlib.

    tax_server.py --port PORT [--work-us US] [--tax FRACTION] [--sleep SECONDS]

Listens on 127.0.0.1:PORT after --sleep seconds (a slow start for `squall measure`), answers
every request on a keep-alive connection with "200 ok", one thread per connection. Each request
costs the same CPU in every build: after the answer is sent, the thread busy-loops until the CPU
time it spent on the request (time.thread_time, user and system, from the end of the previous
request: its reads and its write included) is --work-us (default 200 µs) times (1 + --tax). So
--tax 0.05 is a build whose requests cost 5% more CPU, and both builds run the same code. The test starts it and ends it by PID (SIGTERM).
"""

import argparse
import signal
import socket
import sys
import threading
import time

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


def serve(conn, work, tax):
    buf = b""
    try:
        mark = time.thread_time()  # the thread's CPU time when the previous request was done
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.split(b"\r\n")
            if not lines[0].startswith((b"GET ", b"HEAD ")):
                return
            conn.sendall(OK)
            until = mark + work * (1 + tax)
            now = time.thread_time()
            while now < until:
                now = time.thread_time()
            mark = now
    except OSError:
        return
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--work-us", type=float, default=200.0)
    ap.add_argument("--tax", type=float, default=0.0)
    ap.add_argument("--sleep", type=float, default=0.0)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.sleep:
        time.sleep(a.sleep)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", a.port))
    s.listen(128)
    while True:
        conn, _ = s.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=serve, args=(conn, a.work_us / 1e6, a.tax), daemon=True).start()


if __name__ == "__main__":
    main()
