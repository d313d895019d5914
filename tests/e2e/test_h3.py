#!/usr/bin/env python3
"""End-to-end tests of squall's HTTP/3 client (--http3) against an independent peer: Debian's
ngtcp2-server (gtlsserver, by ngtcp2's authors) serving a directory over QUIC with a certificate
made here. Every load is bounded by -n, on loopback.

Skipped (not failed), with the reason, when this squall was built without HTTP/3 (no ngtcp2,
nghttp3 or GnuTLS at build time) or gtlsserver is not installed. The flag checks run either way:
a build without HTTP/3 must say so for --http3, with the usage exit code.
"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402

GTLSSERVER = shutil.which("gtlsserver") or (
    "/usr/sbin/gtlsserver" if os.path.exists("/usr/sbin/gtlsserver") else None)
OPENSSL = shutil.which("openssl")
NO_H3 = "this build of squall has no HTTP/3"


def build_has_h3():
    p, _ = sqtest.run_squall("https://127.0.0.1:1/", "--http3", "--bogus-flag-for-probe")
    return NO_H3 not in p.stderr


HAS_H3 = build_has_h3()


class H3FlagTest(unittest.TestCase):
    def test_without_h3_the_flag_says_so(self):
        p, _ = sqtest.run_squall("https://127.0.0.1:1/", "--http3", "-n", "1")
        if HAS_H3:
            # built with HTTP/3: the flag is taken (nothing listens there: no request succeeds)
            self.assertNotIn(NO_H3, p.stderr)
            self.assertNotEqual(p.returncode, 2, p.stderr)
        else:
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(NO_H3, p.stderr)

    @unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
    def test_http3_needs_https(self):
        p, _ = sqtest.run_squall("http://127.0.0.1:1/", "--http3", "-n", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("give an https:// URL", p.stderr)

    @unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
    def test_h3_0rtt_needs_http3(self):
        p, _ = sqtest.run_squall("https://127.0.0.1:1/", "--h3-0rtt", "-n", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--h3-0rtt: resumes HTTP/3 sessions; add --http3", p.stderr)

    @unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
    def test_batch_over_h3_is_refused(self):
        # a batch's lanes are h2 streams or h1 connections; over h3 they were not carried (the
        # run crashed): refused before any packet, for `run --http3` and `protocol: h3`
        plan = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "batch.yaml")
        with open(plan) as f:
            text = f.read()
        text = "\n".join("target: https://127.0.0.1:1" if l.startswith("target:") else l
                         for l in text.splitlines())
        with tempfile.TemporaryDirectory() as d:
            for name, body, extra in (
                    ("flag.yaml", text, ["--http3"]),
                    ("proto.yaml", text.replace("executor:", "protocol: h3\n    executor:", 1), [])):
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(body)
                p, _ = sqtest.run_squall("run", path, "-k", *extra)
                self.assertEqual(p.returncode, 2, (name, p.stderr))
                self.assertIn("protocol: h3 cannot carry a batch", p.stderr)

    @unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
    def test_missing_library_is_named(self):
        """The QUIC libraries are loaded when --http3 is used (base/h3lib.c): one that cannot be
        loaded (here an empty file found first through LD_LIBRARY_PATH) fails the setup with its
        name, before anything is sent; a run without HTTP/3 does not load it at all."""
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "libnghttp3.so.3"), "w").close()
            env = dict(os.environ, LD_LIBRARY_PATH=d)
            p = subprocess.run([sqtest.squall_path(), "https://127.0.0.1:1/", "--http3", "-n",
                                "1"], capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("libnghttp3.so.3 could not be loaded", p.stderr)
            p = subprocess.run([sqtest.squall_path(), "target", "--http3", "-p", "0", "-t", "1"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("--http3: HTTP/3: libnghttp3.so.3 could not be loaded", p.stderr)
            p = subprocess.run([sqtest.squall_path(), "http://127.0.0.1:1/", "-n", "1"],
                               capture_output=True, text=True, timeout=60, env=env)
            self.assertNotIn("libnghttp3", p.stderr)
            self.assertNotIn("error while loading", p.stderr)


class VersionNegotiator:
    """A UDP responder that speaks no QUIC v1: each long-header datagram is answered with a
    Version Negotiation packet (RFC 9000 17.2.1) listing one version nobody speaks (a reserved
    0x?a?a?a?a one, RFC 9000 15). Counts what it answered."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.answered = 0
        self.done = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done:
            try:
                pkt, peer = self.sock.recvfrom(65535)
            except socket.timeout:
                continue
            if len(pkt) < 7 or not pkt[0] & 0x80:
                continue
            dlen = pkt[5]
            dcid = pkt[6:6 + dlen]
            slen = pkt[6 + dlen]
            scid = pkt[7 + dlen:7 + dlen + slen]
            # the client's source ID is our destination ID and the other way round
            vn = (bytes([0x80 | 0x2a]) + b"\0\0\0\0" + bytes([len(scid)]) + scid +
                  bytes([len(dcid)]) + dcid + struct.pack(">I", 0x1a2a3a4a))
            self.sock.sendto(vn, peer)
            self.answered += 1

    def close(self):
        self.done = True
        self.thread.join(timeout=5)
        self.sock.close()


@unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
class H3VersionNegotiationTest(unittest.TestCase):
    def test_version_negotiation_is_its_own_kind(self):
        """A server that answers with Version Negotiation: counted as quic_version_negotiation
        (not quic_handshake), no request lost, the summary says why."""
        vn = VersionNegotiator()
        try:
            p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/" % vn.port, "--http3", "-k",
                                        "-t", "1", "-c", "1", "-d", "1s", timeout=60)
        finally:
            vn.close()
        self.assertIsNotNone(doc, p.stderr)
        self.assertGreater(vn.answered, 0)
        e, r = doc["errors"], doc["requests"]
        self.assertGreater(e["quic_version_negotiation"], 0, e)
        self.assertEqual(e["quic_handshake"], 0, e)
        self.assertEqual((r["completed"], r["failed"]), (0, 0), r)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertIn("Version Negotiation", json.dumps(doc.get("error_messages")) + p.stderr)


@unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
@unittest.skipUnless(GTLSSERVER, "gtlsserver (Debian's ngtcp2-server) not installed")
@unittest.skipUnless(OPENSSL, "openssl not installed (the test makes its certificate)")
class H3AgainstGtlsserverTest(unittest.TestCase):
    SIZE = 1000

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq-h3-")
        cls.www = os.path.join(cls.dir, "www")
        os.mkdir(cls.www)
        cls.body = os.urandom(cls.SIZE)
        with open(os.path.join(cls.www, "f.bin"), "wb") as f:
            f.write(cls.body)
        cls.key = os.path.join(cls.dir, "key.pem")
        cls.cert = os.path.join(cls.dir, "cert.pem")
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                        cls.key, "-out", cls.cert, "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       check=True, capture_output=True, timeout=60)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.start_server()

    def start_server(self, *extra):
        self.port = sqtest.free_port()
        self.log = open(os.path.join(self.dir, "server-%d.log" % self.port), "w+")
        # gtlsserver prints each request's head (":path: /f.bin") on stdout: its own count
        self.srv = subprocess.Popen([GTLSSERVER, "-d", self.www, *extra, "127.0.0.1",
                                     str(self.port), self.key, self.cert], stdout=self.log,
                                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # it prints "Using document root" once bound
            self.log.flush()
            with open(self.log.name) as f:
                if "document root" in f.read():
                    break
            self.assertIsNone(self.srv.poll(), "gtlsserver exited")
            time.sleep(0.05)

    def tearDown(self):
        sqtest.stop(self.srv)
        self.log.close()

    def served(self, path):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read().count("[:path: %s]" % path)

    def assert_schema(self, doc):
        try:
            import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)
        except ImportError:
            self.skipTest("python3-jsonschema not installed")
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "docs", "result.schema.json")) as f:
            jsonschema.validate(doc, json.load(f))

    def check_clean(self, doc, n):
        self.assert_schema(doc)
        r = doc["requests"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual((r["sent"], r["completed"], r["failed"], r["in_flight"]), (n, n, 0, 0))
        self.assertEqual(doc["status_codes"], {"200": n})
        self.assertEqual(sum(doc["errors"].values()), 0, doc["errors"])

    def test_requests_equal_what_the_server_answered(self):
        n = 200
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/f.bin" % self.port, "--http3", "-k",
                                    "-n", str(n), "-c", "2", "--streams", "4", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.check_clean(doc, n)
        self.assertEqual(doc["config"]["protocol"], "h3")
        self.assertEqual(doc["tls"]["alpn"], "h3")
        self.assertEqual(self.served("/f.bin"), n)
        # every body whole: what the file holds, once per completed request
        self.assertEqual(doc["bodies"]["decoded_bytes"], self.SIZE * n, doc["bodies"])
        # the QUIC handshake is the setup's TLS phase (on each connection's first request); UDP
        # has no connect
        self.assertGreater(doc["phases"]["tls_handshaking"]["max_us"], 0, doc["phases"])
        self.assertEqual(doc["phases"]["connecting"]["max_us"], 0, doc["phases"])
        self.assertEqual(doc["tls"]["handshakes"], 2)
        # ngtcp2's figures of the two connections, read as they closed at the run's end
        q = doc["quic"]
        self.assertEqual(q["connections"], 2, q)
        self.assertGreater(q["datagrams_received"], 0)
        self.assertGreater(q["cwnd_bytes"]["max"], 0)

    def test_0rtt_resumption(self):
        """--h3-0rtt: gtlsserver (its idle timeout 1 s: a paced client's connections end between
        requests, new ones are made) issues tickets and accepts 0-RTT; the connections after the
        first resume with early data, and what it served equals what squall completed."""
        sqtest.stop(self.srv)
        self.log.close()
        self.start_server("--timeout=1s")
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/f.bin" % self.port, "--http3",
                                    "--h3-0rtt", "-k", "-t", "1", "-c", "1", "-r", "0.5", "-d",
                                    "5s", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.assert_schema(doc)
        r, q = doc["requests"], doc["quic"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual((r["failed"], r["in_flight"]), (0, 0), doc["errors"])
        self.assertGreater(r["completed"], 0)
        self.assertEqual(self.served("/f.bin"), r["completed"])
        self.assertGreater(q["connections"], 1, q)
        self.assertGreater(q["resumed"], 0, q)
        self.assertGreater(q["early_data_accepted"], 0, q)
        self.assertEqual(q["early_data_rejected"], 0, q)
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            self.assertIn("type=0RTT", f.read())  # the server's own log: early packets read

    def test_run_h3_0rtt_flag(self):
        """`squall run --http3 --h3-0rtt`: a plan's HTTP/3 connections resume with 0-RTT."""
        sqtest.stop(self.srv)
        self.log.close()
        self.start_server("--timeout=1s")
        path = os.path.join(self.dir, "plan-0rtt-%d.yaml" % self.port)
        with open(path, "w") as f:
            f.write("target: https://127.0.0.1:%d\n"
                    "scenarios:\n"
                    "  api:\n"
                    "    executor: constant-arrival-rate\n"
                    "    rate: 1\n"
                    "    timeUnit: 2s\n"
                    "    duration: 5s\n"
                    "    preAllocatedVUs: 1\n"
                    "    flow:\n"
                    "      - request: { url: /f.bin }\n" % self.port)
        p, doc, _ = sqtest.run_json("run", path, "--http3", "--h3-0rtt", "-k", "-t", "1",
                                    timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.assert_schema(doc)
        r, q = doc["requests"], doc["quic"]
        self.assertEqual((r["failed"], r["in_flight"]), (0, 0), doc["errors"])
        self.assertEqual(self.served("/f.bin"), r["completed"])
        self.assertGreater(q["early_data_accepted"], 0, q)

    def test_cacert_verifies_the_server(self):
        n = 20
        p, doc, _ = sqtest.run_json("https://localhost:%d/f.bin" % self.port, "--http3",
                                    "--resolve", "localhost:%d:127.0.0.1" % self.port,
                                    "--cacert", self.cert, "-n", str(n), timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.check_clean(doc, n)
        self.assertEqual(self.served("/f.bin"), n)

    def plan(self, protocol_line):
        path = os.path.join(self.dir, "plan-%d.yaml" % self.port)
        with open(path, "w") as f:
            f.write("target: https://127.0.0.1:%d\n"
                    "scenarios:\n"
                    "  api:\n"
                    "    executor: shared-iterations\n"
                    "%s"
                    "    vus: 4\n"
                    "    iterations: 60\n"
                    "    flow:\n"
                    "      - request: { url: /f.bin }\n"
                    "        check: { status: 200 }\n" % (self.port, protocol_line))
        return path

    def check_plan(self, doc):
        self.check_clean(doc, 60)
        self.assertEqual(doc["config"]["protocol"], "h3")
        self.assertEqual([s["protocol"] for s in doc["scenarios"]], ["h3"])
        self.assertEqual([(c["passed"], c["failed"]) for c in doc["checks"]], [(60, 0)])
        self.assertEqual(self.served("/f.bin"), 60)

    def test_plan_protocol_h3(self):
        p, doc, _ = sqtest.run_json("run", self.plan("    protocol: h3\n"), "-k", "--streams", "2",
                                    timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.check_plan(doc)

    def test_run_http3_flag(self):
        p, doc, _ = sqtest.run_json("run", self.plan(""), "--http3", "-k", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.check_plan(doc)

    def test_untrusted_certificate_fails_the_handshake(self):
        p, doc, _ = sqtest.run_json("https://127.0.0.1:%d/f.bin" % self.port, "--http3",
                                    "-n", "1", "-d", "2s", timeout=120)
        self.assertIsNotNone(doc, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertGreater(doc["errors"]["quic_handshake"], 0, doc["errors"])
        self.assertIn("not trusted", p.stderr)
        self.assertEqual(self.served("/f.bin"), 0)


if __name__ == "__main__":
    sqtest.main()
