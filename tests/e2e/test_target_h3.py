#!/usr/bin/env python3
"""End-to-end tests of HTTP/3 in `squall target --http3`, against an independent peer: Debian's
gtlsclient (package ngtcp2-client, written by ngtcp2's authors) fetches over QUIC with a
certificate made here; the bytes it saved and the target's /stats (read over TCP) must agree.
Then garbage and forged-Initial datagrams at the UDP port: the target stays up, keeps no
connection for them, and a real fetch still works.

Skipped (not failed) when this build has no HTTP/3 or gtlsclient is not installed.
"""
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402

PATTERN = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
GTLSCLIENT = shutil.which("gtlsclient") or (
    "/usr/bin/gtlsclient" if os.path.exists("/usr/bin/gtlsclient") else None)
OPENSSL = shutil.which("openssl")


def pattern(n):
    return (PATTERN * (n // 64 + 1))[:n]


def have_h3():
    p = subprocess.run([sqtest.squall_path(), "target", "--help"], capture_output=True, text=True)
    if "--http3" not in p.stdout:
        return False
    # a build without the QUIC libraries lists the flag but refuses it at once
    p = subprocess.run([sqtest.squall_path(), "target", "--http3", "--port", "0", "--unix", "/"],
                       capture_output=True, text=True, timeout=10)
    return "no HTTP/3" not in p.stderr


H3 = have_h3()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@unittest.skipUnless(H3, "this squall build has no HTTP/3 (scripts/deps.sh installs the libraries)")
@unittest.skipUnless(GTLSCLIENT, "gtlsclient (ngtcp2-client) not installed")
@unittest.skipUnless(OPENSSL, "openssl not installed (the test makes its certificate with it)")
class H3Case(unittest.TestCase):
    """A class's own `squall target --http3` with a certificate made here, and gtlsclient."""
    target_extra = ()

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq_h3_")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        cls.key = os.path.join(cls.dir, "key.pem")
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", cls.key, "-out", cls.cert,
                        "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)
        cls.proc, cls.port = sqtest.start_target("-t", "1", "-q", "--http3", "--cert", cls.cert,
                                                 "--key", cls.key, *cls.target_extra)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)
        shutil.rmtree(cls.dir, ignore_errors=True)

    # ---- over TCP (TLS): /stats and the reset, read with Python's own client ----

    def https(self, method, path):
        ctx = ssl.create_default_context(cafile=self.cert)
        conn = __import__("http.client").client.HTTPSConnection(
            "127.0.0.1", self.port, context=ctx, timeout=30)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            return r.status, dict((k.lower(), v) for k, v in r.getheaders()), r.read()
        finally:
            conn.close()

    def stats(self):
        st, _, body = self.https("GET", "/stats")
        self.assertEqual(st, 200)
        return json.loads(body)

    def reset(self):
        self.assertEqual(self.https("POST", "/stats/reset")[0], 200)

    def gtls(self, paths, extra=()):
        out = tempfile.mkdtemp(dir=self.dir)
        urls = ["https://127.0.0.1:%d%s" % (self.port, p) for p in paths]
        return out, [GTLSCLIENT, "-q", "--exit-on-all-streams-close", "--download=" + out, *extra,
                     "127.0.0.1", str(self.port), *urls]

    @staticmethod
    def read_dir(out):
        got = {}
        for name in os.listdir(out):
            with open(os.path.join(out, name), "rb") as f:
                got[name] = f.read()
        return got

    def fetch(self, paths, extra=(), timeout=60):
        """gtlsclient fetches every path on one QUIC connection; returns {name: bytes}."""
        out, argv = self.gtls(paths, extra)
        p = subprocess.run(argv, capture_output=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace")[-2000:])
        return self.read_dir(out)

    def wait_open_zero(self):
        """The peer's connection closes when gtlsclient exits (its CONNECTION_CLOSE); /stats'
        open gauge follows. Polled, not timed: the bound only ends a hung test."""
        deadline = time.monotonic() + 60
        while True:
            st = self.stats()
            if st["h3"]["open"] == 0 or time.monotonic() > deadline:
                return st
            time.sleep(0.05)


class H3TargetTest(H3Case):
    def test_fetch_bytes_and_counts(self):
        self.reset()
        got = self.fetch(["/bytes/100000", "/bytes/1", "/bytes/3000000", "/fast", "/json/300"])
        self.assertEqual(got["100000"], pattern(100000))
        self.assertEqual(got["1"], pattern(1))
        self.assertEqual(got["3000000"], pattern(3000000))
        self.assertEqual(got["fast"], b"hello world")
        self.assertEqual(len(got["300"]), 300)
        json.loads(got["300"])
        st = self.wait_open_zero()
        h3 = st["h3"]
        self.assertTrue(h3["enabled"])
        self.assertEqual((h3["connections"], h3["requests"], h3["streams"], h3["open"]),
                         (1, 5, 5, 0), h3)
        self.assertEqual(st["endpoints"]["bytes"], 3)
        self.assertEqual(st["endpoints"]["fast"], 1)
        self.assertEqual(st["endpoints"]["json"], 1)
        self.assertEqual(st["requests"], 5)  # the /stats reads over TCP do not count themselves
        self.assertEqual(st["h2"]["streams"], 0)

    def test_quic_libraries_loaded_by_http3(self):
        """The QUIC libraries are loaded (base/h3lib.c) by the target's --http3 and by a client's
        --http3 run, which then loads as it did when they were linked in."""
        want = ("libgnutls", "libngtcp2.", "libngtcp2_crypto_gnutls", "libnghttp3")

        def libs(pid):
            with open("/proc/%d/maps" % pid) as f:
                return {os.path.basename(line.split()[-1]) for line in f
                        if line.split()[-1].startswith("/")}

        for w in want:
            self.assertTrue([n for n in libs(self.proc.pid) if n.startswith(w)], w)
        self.reset()
        proc = subprocess.Popen([sqtest.squall_path(), "https://127.0.0.1:%d/fast" % self.port,
                                 "--http3", "--cacert", self.cert, "-c", "1", "-t", "1", "-d",
                                 "20s"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while self.stats()["h3"]["requests"] == 0 and time.monotonic() < deadline:
                self.assertIsNone(proc.poll(), "squall --http3 ended before its first request")
                time.sleep(0.05)
            self.assertGreater(self.stats()["h3"]["requests"], 0)
            got = libs(proc.pid)
        finally:
            sqtest.stop(proc)
        for w in want:
            self.assertTrue([n for n in got if n.startswith(w)], (w, got))

    def test_delay_status_and_sse(self):
        self.reset()
        got = self.fetch(["/delay/200", "/status/404", "/sse?events=3&interval=50"])
        self.assertEqual(got["200"], b"")
        self.assertEqual(got["404"], b"")
        sse = got["sse?events=3&interval=50"].decode()
        self.assertEqual(sse.count("data: "), 3, sse)
        st = self.wait_open_zero()
        self.assertEqual(st["h3"]["requests"], 3)
        self.assertEqual((st["endpoints"]["delay"], st["endpoints"]["status"],
                          st["endpoints"]["sse"]), (1, 1, 1))

    def test_post_body_echoed(self):
        body = os.path.join(self.dir, "body.bin")
        with open(body, "wb") as f:
            f.write(pattern(5000))
        self.reset()
        got = self.fetch(["/echo"], extra=("--data=" + body,))
        doc = json.loads(got["echo"])
        # gtlsclient sends its --data as the body of a GET
        self.assertEqual((doc["method"], doc["path"], doc["version"], doc["body_len"]),
                         ("GET", "/echo", "HTTP/3", 5000))
        self.assertEqual(doc["body"], pattern(5000).decode())
        self.assertEqual(doc["headers"][0][0], "host")  # :authority, as over HTTP/2
        self.assertEqual(self.wait_open_zero()["endpoints"]["echo"], 1)

    def test_lossy_path(self):
        """10% of packets lost each way (gtlsclient drops them): QUIC's recovery on both sides
        still delivers every byte, and each request is counted once."""
        self.reset()
        got = self.fetch(["/bytes/300000", "/fast"], extra=("--rx-loss=0.1", "--tx-loss=0.1"),
                         timeout=120)
        self.assertEqual(got["300000"], pattern(300000))
        self.assertEqual(got["fast"], b"hello world")
        st = self.wait_open_zero()
        self.assertEqual((st["h3"]["connections"], st["h3"]["requests"]), (1, 2), st["h3"])

    def test_parallel_clients(self):
        self.reset()
        runs = []
        for i in range(4):
            out, argv = self.gtls(["/bytes/%d" % (20000 + i), "/fast", "/ok"])
            runs.append((out, subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.PIPE), i))
        for out, p, i in runs:
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err.decode(errors="replace")[-2000:])
            got = self.read_dir(out)
            self.assertEqual(got["%d" % (20000 + i)], pattern(20000 + i))
            self.assertEqual(got["fast"], b"hello world")
        st = self.wait_open_zero()
        self.assertEqual((st["h3"]["connections"], st["h3"]["requests"], st["h3"]["streams"]),
                         (4, 12, 12), st["h3"])
        self.assertEqual((st["endpoints"]["bytes"], st["endpoints"]["fast"], st["endpoints"]["ok"]),
                         (4, 4, 4))

    def test_alt_svc_on_tcp(self):
        st, hdrs, _ = self.https("GET", "/fast")
        self.assertEqual(st, 200)
        self.assertEqual(hdrs.get("alt-svc"), 'h3=":%d"' % self.port)
        # a handler's own header lines are kept beside it
        st, hdrs, _ = self.https("GET", "/redirect/1")
        self.assertEqual(st, 302)
        self.assertIn("location", hdrs)
        self.assertEqual(hdrs.get("alt-svc"), 'h3=":%d"' % self.port)

    def test_garbage_and_forged_initials(self):
        self.reset()
        rng = random.Random(30)
        before = rss_kib(self.proc.pid)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sent = 0
        try:
            for i in range(3000):
                kind = i % 3
                if kind == 0:  # anything at all
                    d = rng.randbytes(rng.randint(1, 1500))
                elif kind == 1:  # a short header for no connection
                    d = bytes([0x40 | rng.randint(0, 0x3f)]) + rng.randbytes(rng.randint(20, 1300))
                else:  # an Initial's shape (QUIC v1, fresh IDs, no token) that decrypts to nothing
                    dcid, scid = rng.randbytes(8), rng.randbytes(8)
                    d = (bytes([0xc3]) + b"\x00\x00\x00\x01" + bytes([8]) + dcid + bytes([8]) +
                         scid + b"\x00" + b"\x44\xb0" + rng.randbytes(1250))
                s.sendto(d, ("127.0.0.1", self.port))
                sent += 1
                if i % 100 == 99:
                    time.sleep(0.01)  # let the target read: loopback drops what overflows
        finally:
            s.close()
        got = self.fetch(["/bytes/50000"])
        self.assertEqual(got["50000"], pattern(50000))
        self.assertIsNone(self.proc.poll(), "the target died")
        st = self.wait_open_zero()
        h3 = st["h3"]
        self.assertEqual(h3["connections"], 1, h3)  # the real one only
        self.assertEqual(h3["requests"], 1, h3)
        self.assertGreater(h3["dropped"], 0, h3)
        self.assertLessEqual(h3["dropped"], sent, h3)
        grown = rss_kib(self.proc.pid) - before
        self.assertLess(grown, 64 * 1024, "RSS grew by %d KiB" % grown)


class H3CapTest(H3Case):
    """--max-conns 1: a second client's Initials are dropped (counted) while the first holds the
    one place; QUIC's retransmission brings it in once the first has gone."""
    target_extra = ("--max-conns", "1")

    def test_cap(self):
        self.reset()
        out_a, argv_a = self.gtls(["/delay/3000", "/bytes/1000"])
        a = subprocess.Popen(argv_a, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while self.stats()["h3"]["open"] == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            got_b = self.fetch(["/bytes/2000"], timeout=90)
        finally:
            _, err = a.communicate(timeout=60)
        self.assertEqual(a.returncode, 0, err.decode(errors="replace")[-2000:])
        self.assertEqual(self.read_dir(out_a)["1000"], pattern(1000))
        self.assertEqual(got_b["2000"], pattern(2000))
        st = self.wait_open_zero()
        self.assertEqual((st["h3"]["connections"], st["h3"]["requests"]), (2, 3), st["h3"])
        self.assertGreater(st["h3"]["refused"], 0, st["h3"])


class H3SquallClientTest(H3Case):
    """squall's own client against the target, with UDP batching on, without GSO and off
    (SQUALL_UDP_BATCH): the same exact counts on both sides, every byte whole. The target sends
    with GSO here (where the kernel offers it), so each response of 50000 bytes leaves as runs of
    packets the kernel cuts up."""

    def run_client(self, mode, n):
        env = dict(os.environ, SQUALL_UDP_BATCH=mode)
        p = subprocess.run([sqtest.squall_path(), "https://127.0.0.1:%d/bytes/50000" % self.port,
                            "--http3", "--cacert", self.cert, "-n", str(n), "-c", "2",
                            "--streams", "4", "--json", "-"], capture_output=True, text=True,
                           timeout=180, env=env)
        self.assertTrue(p.stdout.strip(), p.stderr)
        return json.loads(p.stdout)

    def test_batching_modes_count_what_the_target_counts(self):
        n = 60
        for mode in ("on", "nogso", "off"):
            self.reset()
            doc = self.run_client(mode, n)
            r = doc["requests"]
            self.assertEqual((r["sent"], r["completed"], r["failed"], r["in_flight"]),
                             (n, n, 0, 0), (mode, doc["errors"]))
            self.assertEqual(doc["bodies"]["decoded_bytes"], 50000 * n, mode)
            self.assertEqual(doc["quic"]["udp"]["batching"], mode)
            st = self.wait_open_zero()
            self.assertEqual((st["h3"]["connections"], st["h3"]["requests"]), (2, n),
                             (mode, st["h3"]))
            self.assertEqual(st["endpoints"]["bytes"], n, (mode, st["endpoints"]))


class H3TargetWithoutGsoTest(H3Case):
    """The target started with SQUALL_UDP_BATCH=off sends one datagram per sendto (the path a
    kernel without GSO takes): a lossy fetch still gets every byte."""

    @classmethod
    def setUpClass(cls):
        old = os.environ.get("SQUALL_UDP_BATCH")
        os.environ["SQUALL_UDP_BATCH"] = "off"
        try:
            super().setUpClass()
        finally:
            if old is None:
                del os.environ["SQUALL_UDP_BATCH"]
            else:
                os.environ["SQUALL_UDP_BATCH"] = old

    def test_lossy_fetch_without_gso(self):
        self.reset()
        got = self.fetch(["/bytes/300000"], extra=("--rx-loss=0.1", "--tx-loss=0.1"),
                         timeout=120)
        self.assertEqual(got["300000"], pattern(300000))
        st = self.wait_open_zero()
        self.assertEqual((st["h3"]["connections"], st["h3"]["requests"]), (1, 1), st["h3"])
class H3ZeroRttTest(H3Case):
    """0-RTT: the target issues session tickets and takes early data. Its QUIC idle timeout is
    short (1 s) so that a paced client's connections end between requests and new ones resume
    (the churn). Counted in /stats' h3 block: resumed, early_data."""
    target_extra = ("--idle-timeout", "1s")

    def test_gtlsclient_second_run_is_0rtt(self):
        """gtlsclient keeps the ticket and transport parameters in files; its second run sends
        its request in 0-RTT packets and the target accepts them."""
        self.reset()
        sess = os.path.join(self.dir, "sess.pem")
        tp = os.path.join(self.dir, "tp.pem")
        files = ("--session-file=" + sess, "--tp-file=" + tp)
        self.assertEqual(self.fetch(["/bytes/100"], extra=files)["100"], pattern(100))
        self.assertTrue(os.path.getsize(sess) > 0 and os.path.getsize(tp) > 0)
        self.wait_open_zero()
        out, argv = self.gtls(["/bytes/200"], files)
        argv.remove("-q")  # its log says which packets carried the request
        p = subprocess.run(argv, capture_output=True, timeout=60)
        log = (p.stdout + p.stderr).decode(errors="replace")
        self.assertEqual(p.returncode, 0, log[-2000:])
        self.assertNotIn("Early data was rejected", log)
        self.assertRegex(log, r"frm tx \d+ 0RTT STREAM\(0x0b\) id=0x0 ")  # the request, early
        self.assertEqual(self.read_dir(out)["200"], pattern(200))
        h3 = self.wait_open_zero()["h3"]
        self.assertEqual((h3["connections"], h3["requests"], h3["resumed"], h3["early_data"]),
                         (2, 2, 1, 1), h3)

    def test_squall_client_resumes_with_0rtt(self):
        """squall's --h3-0rtt against the target: the connections after the first resume and
        their early data is accepted; both sides count the same requests and resumptions."""
        self.reset()
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/fast" % self.port, "--http3",
                                    "--h3-0rtt", "--cacert", self.cert, "-t", "1", "-c", "1",
                                    "-r", "0.5", "-d", "5s", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        r, q = doc["requests"], doc["quic"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual((r["failed"], r["in_flight"]), (0, 0), doc["errors"])
        self.assertGreater(q["resumed"], 0, q)
        self.assertGreater(q["early_data_accepted"], 0, q)
        self.assertEqual(q["early_data_rejected"], 0, q)
        st = self.wait_open_zero()
        h3 = st["h3"]
        self.assertEqual(h3["requests"], r["completed"], h3)
        self.assertEqual(st["endpoints"]["fast"], r["completed"])
        # the server's side of the same handshakes (a connection the run's end cut off in its
        # handshake is the server's only)
        self.assertGreaterEqual(h3["connections"], q["connections"], (h3, q))
        self.assertEqual((h3["resumed"], h3["early_data"]),
                         (q["resumed"], q["early_data_accepted"]), (h3, q))

    def stats_of(self, port):
        ctx = ssl.create_default_context(cafile=self.cert)
        conn = __import__("http.client").client.HTTPSConnection("127.0.0.1", port, context=ctx,
                                                                timeout=30)
        try:
            conn.request("GET", "/stats")
            return json.loads(conn.getresponse().read())
        finally:
            conn.close()

    def test_requests_waiting_go_as_early_data(self):
        """A request whose connection went (here: /delay outlasts the 1 s idle timeout, so each
        request fails as quic_idle_timeout) waits for the next connection, which resumes: the
        request leaves in its first flight, in 0-RTT packets (the target counts request
        streams begun in 0-RTT)."""
        self.reset()
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/delay/1500" % self.port, "--http3",
                                    "--h3-0rtt", "--cacert", self.cert, "-t", "1", "-c", "1",
                                    "-d", "4s", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        r, q = doc["requests"], doc["quic"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual(r["failed"], doc["errors"]["quic_idle_timeout"], doc["errors"])
        self.assertGreater(q["early_data_accepted"], 0, q)
        h3 = self.wait_open_zero()["h3"]
        self.assertEqual(h3["requests"], r["sent"], (h3, r))  # each reached it, once
        self.assertGreater(h3["early_requests"], 0, h3)
        self.assertEqual(h3["early_data"], q["early_data_accepted"], (h3, q))

    def test_rejected_early_data_is_sent_again_once(self):
        """A target restarted on the same port draws a new ticket key: the client's next
        connection offers a ticket it cannot read, its early data is rejected and its requests
        are sent again after the handshake, each still one request."""
        args = ("-t", "1", "-q", "--http3", "--cert", self.cert, "--key", self.key,
                "--idle-timeout", "1s")
        first, port = sqtest.start_target(*args)
        second = None
        out = os.path.join(self.dir, "rejected.json")
        client = subprocess.Popen([sqtest.squall_path(), "https://127.0.0.1:%d/fast" % port,
                                   "--http3", "--h3-0rtt", "--cacert", self.cert, "-t", "1",
                                   "-c", "1", "-r", "1", "-d", "5s", "--json", out, "-q"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            time.sleep(1.5)  # between the second and the third request
            before = self.stats_of(port)["h3"]["requests"]
            sqtest.stop(first)
            second, _ = sqtest.start_target(*args, "--port", str(port))
            _, err = client.communicate(timeout=120)
            h3 = self.stats_of(port)["h3"]
        finally:
            if client.poll() is None:
                client.kill()
            sqtest.stop(first)
            if second:
                sqtest.stop(second)
        with open(out) as f:
            doc = json.load(f)
        r, q = doc["requests"], doc["quic"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual(r["sent"] + r["dropped"], r["arrivals"], r)  # no request twice
        self.assertGreaterEqual(q["early_data_rejected"], 1, (q, err))
        # the new target resumes only sessions of its own tickets (given after the rejection)
        self.assertLessEqual(h3["early_data"], q["early_data_accepted"], (h3, q))
        # what the two targets counted: every completed request, none twice
        self.assertGreaterEqual(before + h3["requests"], r["completed"], (before, h3, r))
        self.assertLessEqual(before + h3["requests"], r["sent"], (before, h3, r))

    def test_without_the_flag_nothing_resumes(self):
        self.reset()
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/fast" % self.port, "--http3",
                                    "--cacert", self.cert, "-t", "1", "-c", "1", "-r", "0.5",
                                    "-d", "3s", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        q = doc["quic"]
        self.assertGreater(q["connections"], 1, q)  # the churn happened
        self.assertEqual((q["resumed"], q["early_data_accepted"]), (0, 0), q)
        self.assertEqual(self.wait_open_zero()["h3"]["resumed"], 0)


if __name__ == "__main__":
    sqtest.main()
