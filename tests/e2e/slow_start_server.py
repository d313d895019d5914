#!/usr/bin/env python3
"""A server that waits before it listens: `slow_start_server.py PORT DELAY_S`.

For squall measure's cold-start test (test_instruments.py): run with python3 -S, it imports only
what it needs, sleeps DELAY_S, then listens on 127.0.0.1:PORT and answers every request with
200 "ok" and closes the connection, until SIGTERM ends it.
"""
import socket
import sys
import time


def main():
    port, delay = int(sys.argv[1]), float(sys.argv[2])
    time.sleep(delay)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    while True:
        c, _ = s.accept()
        try:
            c.settimeout(2)
            c.recv(4096)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        except OSError:
            pass
        finally:
            c.close()


if __name__ == "__main__":
    main()
