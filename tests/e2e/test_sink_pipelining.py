#!/usr/bin/env python3
"""The sink's HTTP/1.1 intake under pipelining: many stamped POSTs per write on keep-alive
connections, answered in order, counted exactly.

`squall sink --http` is started here on a free loopback port (stopped by PID, or by its own
--idle); this file is the client: it renders stamps in the documented format
(docs/internals/proto.md: sq1.<run base32>.<seq base36>.<ns base36>), one stream per connection
(the run id's low 12 bits), writes requests back to back without waiting for answers, and reads
the answers. The sink's result document must say delivered == sent, nothing lost, duplicated,
out of order or unstamped; the client must read exactly one 202 per request, in order.

Two shapes: whole batches (100 requests per sendall on three connections), and one connection
whose bytes (Content-Length and chunked requests mixed) are written in pieces of odd sizes
(1, 2, 3, 5, 7 ... bytes, with pauses so they reach the server as separate reads), so that
request heads, bodies, chunk-size lines and the CRLF between them are cut at every kind of
place. And squall's own client pipelining (`squall wrk -s bench/sink_pipeline.lua`, 16 stamped
POSTs per write for 1 s): delivered = its requests sent. Runs in about 8 s (plain build); every
load is a fixed count or 1 s.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import sqtest
from sqtest import HOST
free_port = sqtest.free_port

B32 = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford, lowercase
B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def enc(v, alphabet):
    base = len(alphabet)
    out = ""
    while True:
        out = alphabet[v % base] + out
        v //= base
        if v == 0:
            return out


def stamp(run, seq, ns):
    return "sq1.%s.%s.%s" % (enc(run, B32), enc(seq, B36), enc(ns, B36))


def post(port, body, chunked=False):
    head = "POST /events HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n" % (
        HOST, port)
    if not chunked:
        return (head + "Content-Length: %d\r\n\r\n" % len(body) + body).encode()
    # two chunks, cut inside the body, with a chunk extension on the first
    k = len(body) // 2
    return (head + "Transfer-Encoding: chunked\r\n\r\n%x;x=1\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" %
            (k, body[:k], len(body) - k, body[k:])).encode()


class Answers:
    """Reads HTTP/1.1 answers from a socket; each must be a 202 with a Content-Length body."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.count = 0

    def read(self, n, test, timeout=20.0):
        deadline = time.monotonic() + timeout
        while self.count < n:
            while True:
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = self.buf[:end].decode("latin-1").split("\r\n")
                test.assertTrue(head[0].startswith("HTTP/1.1 202"), head[0])
                cl = 0
                for line in head[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        cl = int(value)
                if len(self.buf) < end + 4 + cl:
                    break
                self.buf = self.buf[end + 4 + cl:]
                self.count += 1
            if self.count >= n:
                break
            left = deadline - time.monotonic()
            test.assertGreater(left, 0, "%d of %d answers" % (self.count, n))
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            test.assertTrue(chunk, "closed after %d of %d answers" % (self.count, n))
            self.buf += chunk
        test.assertEqual(self.count, n)


class SinkPipelining(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="sq-sink-pipe-")
        self.out = os.path.join(self.dir, "sink.json")
        self.sink = subprocess.Popen(
            [sqtest.squall_path(), "sink", "--http", "%s:%d" % (HOST, self.port), "-t", "2",
             "--idle", "1s", "--json", self.out, "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while True:
            self.assertIsNone(self.sink.poll(), "the sink exited before listening")
            try:
                socket.create_connection((HOST, self.port), timeout=0.5).close()
                break
            except OSError:
                self.assertLess(time.monotonic(), deadline, "the sink never listened")
                time.sleep(0.05)
        # a run id of this test's own (60 bits), streams in its low 12 bits
        self.run_id = random.getrandbits(48) << 12

    def tearDown(self):
        if self.sink.poll() is None:
            self.sink.kill()
            self.sink.wait()
        self.sink.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def connect(self):
        s = socket.create_connection((HOST, self.port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def result(self):
        """Waits for the sink to stop on its own (--idle 1s after the last event)."""
        try:
            rc = self.sink.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.fail("the sink did not stop after its idle time")
        self.assertEqual(rc, 0, self.sink.stderr.read().decode())
        with open(self.out) as f:
            return json.load(f)["sink"]

    def assert_exact(self, s, sent):
        self.assertEqual((s["delivered"], s["lost"], s["duplicates"], s["out_of_order"],
                          s["unstamped"]), (sent, 0, 0, 0, 0), s)
        self.assertEqual(s["latency"]["count"], sent)

    def test_batches_of_pipelined_posts_counted_exactly(self):
        conns, per, batch = 3, 2000, 100
        socks = [self.connect() for _ in range(conns)]
        answers = [Answers(s) for s in socks]
        for b in range(0, per, batch):
            for c, s in enumerate(socks):
                ns = time.time_ns()
                s.sendall(b"".join(
                    post(self.port, '{"t":"%s"}' % stamp(self.run_id | c, seq, ns))
                    for seq in range(b, b + batch)))
            # at most two batches in flight per connection
            for a in answers:
                a.read(b + (batch if b else 0), self)
        for a in answers:
            a.read(per, self)
        for s in socks:
            s.close()
        self.assert_exact(self.result(), conns * per)

    def test_requests_cut_at_odd_boundaries(self):
        n = 300
        ns = time.time_ns()
        # every 3rd request chunked; the stamp sits at different offsets
        reqs = [post(self.port, '{"pad":"%s","t":"%s"}' % ("x" * (seq % 7),
                                                            stamp(self.run_id | 7, seq, ns)),
                     chunked=(seq % 3 == 2)) for seq in range(n)]
        data = b"".join(reqs)
        sizes = [1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 64, 127, 251, 509, 1021]
        s = self.connect()
        a = Answers(s)
        off, k = 0, 0
        while off < len(data):
            piece = sizes[k % len(sizes)]
            s.sendall(data[off:off + piece])
            off += piece
            k += 1
            # pause after most small pieces, so each is one read on the server's side
            if piece < 64 and k < 600:
                time.sleep(0.002)
        a.read(n, self)
        s.close()
        self.assert_exact(self.result(), n)

    def test_squalls_own_client_pipelines_stamped_events(self):
        # bench/sink_pipeline.lua: wrk's pipeline.lua with a stamp per request, 16 per write
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                              "sink_pipeline.lua")
        p = subprocess.run([sqtest.squall_path(), "wrk", "-s", script, "-t", "2", "-c", "4",
                            "-d", "1s", "--json", "-", "http://%s:%d/e" % (HOST, self.port),
                            "--", "16"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)["requests"]
        self.assertEqual(r["failed"], 0)
        self.assertGreater(r["completed"], 16)
        s = self.result()
        # every request written arrives, those still in flight at the end too; one stream per
        # thread over two connections, so batches may overtake each other (out of order)
        self.assertEqual((s["delivered"], s["lost"], s["duplicates"], s["unstamped"]),
                         (r["sent"], 0, 0, 0), s)


if __name__ == "__main__":
    sqtest.main()
