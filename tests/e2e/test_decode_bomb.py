"""End-to-end test: a timed run ends on time whatever the bodies are (a gzip bomb).

A small server of our own answers every request with a gzip body that decodes to 1 GB of zeros
(about 1 MB on the wire, prepared once). squall decodes each body up to its
64 MiB cap (an `errors.decode`), and a body still being decoded when the run's hard end comes is
abandoned and stays in flight (docs/internals/engine.md, "Timed runs end on time"). Either way
the run must stop within its duration plus its graceful stop plus a second.
"""

import os
import socket
import struct
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, run_json  # noqa: E402

ZEROS = bytes(1 << 20)


def bomb_body(mib=1024):
    """A gzip member that decodes to `mib` MiB of zeros, built in well under a second: after a
    full flush the deflate state starts over, so every further MiB compresses to the same bytes,
    and the member ends with an empty final block and the CRC-32 and size of the whole."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    first = c.compress(ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    again = c.compress(ZEROS) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(ZEROS, crc)
    return first + again * (mib - 1) + b"\x03\x00" + struct.pack("<II", crc, (mib << 20) & 0xFFFFFFFF)


BODY = bomb_body()  # about 1 MB on the wire


class BombServer:
    """Answers every request with the bomb (gzip, Content-Length), sent from one prepared buffer
    so the server costs next to no CPU."""

    def __init__(self):
        self.ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind((HOST, 0))
        self.ls.listen(256)
        self.port = self.ls.getsockname()[1]
        self.stopping = False
        self.reads = 0
        self.lock = threading.Lock()
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while not self.stopping:
            try:
                s, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(s,), daemon=True).start()

    def serve(self, s):
        buf = b""
        head = (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
                % len(BODY))
        try:
            while not self.stopping:
                while b"\r\n\r\n" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                buf = buf[buf.index(b"\r\n\r\n") + 4:]
                with self.lock:
                    self.reads += 1
                s.sendall(head + BODY)
        except OSError:
            return
        finally:
            s.close()

    def close(self):
        self.stopping = True
        try:
            self.ls.shutdown(socket.SHUT_RDWR)  # wakes accept() before the descriptor goes
        except OSError:
            pass
        self.ls.close()


class DecodeBombCase(unittest.TestCase):
    def run_bomb(self, duration, grace, *flags):
        srv = BombServer()
        try:
            args = [f"http://{HOST}:{srv.port}/", "-q", "-d", f"{duration}s", *flags]
            if grace:
                args += ["--graceful-stop", f"{grace}s"]
            t0 = time.monotonic()
            p, doc, _ = run_json(*args, timeout=120)
            took = time.monotonic() - t0
        finally:
            srv.close()
        self.assertIsNotNone(doc, p.stderr)
        r, e = doc["requests"], doc["errors"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        # every body is a bomb: it fails at the cap, or is abandoned in flight at the end
        self.assertTrue(e["decode"] > 0 or r["in_flight"] > 0, (r, e))
        self.assertEqual(r["completed"], 0, r)
        self.assertEqual(r["failed"], e["decode"], e)
        self.assertLessEqual(took, duration + grace + 1, (took, doc["duration_s"]))
        self.assertLessEqual(doc["duration_s"], duration + grace + 0.5, doc["duration_s"])
        # the series ends where the run did
        self.assertAlmostEqual(doc["series"][-1]["t_s"], doc["duration_s"], places=6)
        return doc

    def test_two_seconds(self):
        self.run_bomb(2, 0, "-c", "16", "-t", "2")

    def test_graceful_stop(self):
        self.run_bomb(1, 1, "-c", "8", "-t", "1")

    def test_many_connections(self):
        self.run_bomb(2, 0, "-c", "64")


if __name__ == "__main__":
    sqtest.main()
