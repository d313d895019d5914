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
STRACE = shutil.which("strace")


def strace_works():
    """strace present and allowed to trace here (a container may forbid ptrace)."""
    if not STRACE:
        return False
    try:
        return subprocess.run([STRACE, "-o", os.devnull, "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False

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

    def run_mode(self, mode, *args, port=None, strace_out=None, timeout=120):
        """squall with SQUALL_UDP_BATCH=mode (None: unset), --json -; optionally under strace."""
        env = dict(os.environ)
        env.pop("SQUALL_UDP_BATCH", None)
        if mode is not None:
            env["SQUALL_UDP_BATCH"] = mode
        argv = [sqtest.squall_path(), "https://127.0.0.1:%d/f.bin" % (port or self.port),
                "--http3", "-k", *args, "--json", "-"]
        if strace_out:
            argv = [STRACE, "-f", "-o", strace_out, "-e",
                    "trace=sendmmsg,sendmsg,sendto,recvmmsg,recvmsg,recvfrom", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
        doc = json.loads(p.stdout) if p.stdout.strip() else None
        self.assertIsNotNone(doc, p.stderr)
        return doc

    def test_batching_on_nogso_and_off_count_the_same(self):
        """The three UDP modes give the same exact counts, equal to gtlsserver's; batching shows
        in the syscalls (fewer than the datagrams), off in one syscall per datagram. POSTs with a
        body so that squall has full-sized packets to send (GSO's matter)."""
        n, body = 120, os.path.join(self.dir, "body.bin")
        with open(body, "wb") as f:
            f.write(os.urandom(20000))
        seen = 0
        for mode in (None, "nogso", "off"):
            doc = self.run_mode(mode, "-n", str(n), "-c", "2", "--streams", "4", "-m", "POST",
                                "-b", "@" + body)
            self.check_clean(doc, n)
            seen += n
            self.assertEqual(self.served("/f.bin"), seen, mode)
            q, u = doc["quic"], doc["quic"]["udp"]
            self.assertEqual(u["batching"], mode or "on")
            self.assertGreaterEqual(u["rcvbuf_bytes"], 1)  # what the kernel granted, reported
            self.assertEqual(u["buffer_requested_bytes"], 4 << 20)
            if mode == "off":
                self.assertEqual((u["gso"], u["gso_sends"]), (False, 0), u)
                self.assertEqual(u["send_calls"], q["datagrams_sent"], q)
                self.assertGreaterEqual(u["recv_calls"], q["datagrams_received"], q)
                continue
            # every body of 20000 bytes is several full packets: one write sends them
            self.assertLess(u["send_calls"], q["datagrams_sent"], q)
            if mode == "nogso":
                self.assertEqual((u["gso"], u["gso_sends"]), (False, 0), u)
            elif u["gso"]:  # the kernel offered GSO (Linux 4.18 on): some sends used it
                self.assertGreater(u["gso_sends"], 0, u)

    @unittest.skipUnless(strace_works(), "strace not installed or not allowed to trace")
    def test_strace_shows_fewer_syscalls_than_datagrams(self):
        """From outside: strace counts the UDP send and receive calls; with batching they are
        fewer than the datagrams the result counts, and they are what the result says."""
        n = 60
        trace = os.path.join(self.dir, "strace-%d.txt" % self.port)
        body = os.path.join(self.dir, "body-s.bin")
        with open(body, "wb") as f:
            f.write(os.urandom(20000))
        doc = self.run_mode(None, "-n", str(n), "-c", "2", "--streams", "4", "-m", "POST",
                            "-b", "@" + body, strace_out=trace, timeout=180)
        self.check_clean(doc, n)
        with open(trace) as f:
            lines = f.read().splitlines()
        calls = {k: sum(1 for ln in lines if (" %s(" % k) in ln or ln.startswith(k + "("))
                 for k in ("sendmmsg", "recvmmsg", "sendto", "recvfrom")}
        q, u = doc["quic"], doc["quic"]["udp"]
        self.assertEqual(calls["sendmmsg"], u["send_calls"], calls)
        self.assertEqual(calls["recvmmsg"], u["recv_calls"], calls)
        self.assertLess(calls["sendmmsg"] + calls["recvmmsg"],
                        q["datagrams_sent"] + q["datagrams_received"], (calls, q))

    def test_bad_batch_switch_is_refused(self):
        env = dict(os.environ, SQUALL_UDP_BATCH="sometimes")
        p = subprocess.run([sqtest.squall_path(), "https://127.0.0.1:%d/f.bin" % self.port,
                            "--http3", "-k", "-n", "1"], capture_output=True, text=True,
                           timeout=60, env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("SQUALL_UDP_BATCH: 'sometimes'", p.stderr)
        self.assertEqual(self.served("/f.bin"), 0)

    def test_lossy_server_counts_lost_packets(self):
        """gtlsserver drops 10% of what it receives and of what it sends (its own loss knob):
        squall declares some of its request packets lost (POST bodies of 20000 bytes: many
        packets) and sends them again, with batching on and off, and every request is still
        counted once, equal to what the server answered."""
        port = sqtest.free_port()
        log = open(os.path.join(self.dir, "lossy-%d.log" % port), "w+")
        srv = subprocess.Popen([GTLSSERVER, "-d", self.www, "--tx-loss=0.1", "--rx-loss=0.1",
                                "127.0.0.1", str(port), self.key, self.cert], stdout=log,
                               stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                log.flush()
                with open(log.name) as f:
                    if "document root" in f.read():
                        break
                time.sleep(0.05)
            body = os.path.join(self.dir, "body-l.bin")
            with open(body, "wb") as f:  # 14 packets each: losses among them are sure
                f.write(os.urandom(20000))
            n, seen = 100, 0
            for mode in (None, "off"):
                doc = self.run_mode(mode, "-n", str(n), "-c", "2", "--streams", "4", "-m", "POST",
                                    "-b", "@" + body, port=port, timeout=180)
                r = doc["requests"]
                self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
                self.assertEqual((r["sent"], r["completed"]), (n, n), (doc["errors"], r))
                seen += n
                log.flush()
                with open(log.name, errors="replace") as f:
                    self.assertEqual(f.read().count("[:path: /f.bin]"), seen, mode)
                q = doc["quic"]
                self.assertGreater(q["packets_lost"], 0, q)
                self.assertGreaterEqual(q["pto_count"], 0, q)
        finally:
            sqtest.stop(srv)
            log.close()
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


@unittest.skipUnless(HAS_H3, "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
class H3FacesAgainstTarget(unittest.TestCase):
    """--http3 with the quick face's other ways in, against `squall target --tls --http3` (its
    self-signed certificate: -k): a URL list goes over QUIC; a proxy, from --proxy or the
    environment, cannot carry QUIC: --proxy is refused before anything is sent (exit 2), the
    environment's HTTPS_PROXY is not used (a note says so) and the requests reach the target;
    a wrk script (-s) is refused (exit 2). The environment's proxy is never taken for a loopback
    host, so those runs name the target sq.test (--resolve to 127.0.0.1); the proxy is a
    port where nothing listens, so a request that went to it would fail."""

    @classmethod
    def setUpClass(cls):
        cls.target, cls.port = sqtest.start_target("-t", "1", "--tls", "--http3")
        cls.dir = tempfile.mkdtemp(prefix="sq_h3f_")
        cls.dead = "http://127.0.0.1:%d" % sqtest.free_port()

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.target)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def https(self, method, path):
        import http.client
        import ssl
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def reset(self):
        self.assertEqual(self.https("POST", "/stats/reset")[0], 200)

    def stats(self):
        return json.loads(self.https("GET", "/stats")[1])

    def squall(self, *args, env=None):
        e = dict(os.environ)
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "NO_PROXY",
                  "no_proxy"):
            e.pop(k, None)
        e.update(env or {})
        p = subprocess.run([sqtest.squall_path(), *args], capture_output=True, text=True,
                           timeout=120, env=e)
        return p

    def test_urls_over_h3(self):
        self.reset()
        lst = os.path.join(self.dir, "urls.txt")
        with open(lst, "w") as f:
            f.write("https://127.0.0.1:%d/fast\n" % self.port)
            f.write("POST https://127.0.0.1:%d/echo {\"a\": 1}\n" % self.port)
        out = os.path.join(self.dir, "urls.json")
        p = self.squall("--urls", lst, "--http3", "-k", "-c", "2", "--streams", "2", "-n", "40",
                        "-q", "--json", out)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            doc = json.load(f)
        r = doc["requests"]
        self.assertEqual((r["sent"], r["completed"], r["failed"]), (40, 40, 0), r)
        urls = {u["url"].split(" ")[-1].rsplit("/", 1)[-1]: u["completed"] for u in doc["urls"]}
        self.assertEqual(sum(urls.values()), 40, doc["urls"])
        st = self.stats()
        self.assertEqual(st["h3"]["requests"], 40, st["h3"])
        self.assertEqual(st["h3"]["connections"], 2, st["h3"])
        self.assertEqual((st["endpoints"]["fast"], st["endpoints"]["echo"]),
                         (urls["fast"], urls["echo"]), (st["endpoints"], urls))
        self.assertEqual(doc["quic"]["connections"], 2, doc["quic"])

    def test_env_proxy_not_used(self):
        self.reset()
        resolve = "sq.test:%d:127.0.0.1" % self.port
        env = {"HTTPS_PROXY": self.dead}
        p = self.squall("https://sq.test:%d/fast" % self.port, "--resolve", resolve, "--http3",
                        "-k", "-n", "10", "-q", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("--http3: HTTPS_PROXY is not used: an HTTP proxy cannot carry QUIC",
                      p.stderr)
        plan = os.path.join(self.dir, "plan.yaml")
        with open(plan, "w") as f:
            f.write("target: https://sq.test:%d\nscenarios:\n  s:\n    protocol: h3\n"
                    "    executor: per-vu-iterations\n    vus: 1\n    iterations: 5\n"
                    "    flow:\n      - request: { url: /fast }\n" % self.port)
        p = self.squall("run", plan, "--resolve", resolve, "-k", "-q", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("HTTP/3: HTTPS_PROXY is not used", p.stderr)
        self.assertEqual(self.stats()["h3"]["requests"], 15)
        # without --http3 the same run takes the proxy (and fails: nothing listens there)
        p = self.squall("https://sq.test:%d/fast" % self.port, "--resolve", resolve, "-k", "-n",
                        "1", "-q", env=env)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        # a plan with an h3 scenario beside one that would take the proxy: refused
        with open(plan, "a") as f:
            f.write("  t:\n    executor: per-vu-iterations\n    vus: 1\n    iterations: 1\n"
                    "    flow:\n      - request: { url: /fast }\n")
        p = self.squall("run", plan, "--resolve", resolve, "-k", "-q", env=env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("HTTPS_PROXY is set for the target, but HTTP/3 scenarios", p.stderr)
        self.assertEqual(self.stats()["h3"]["requests"], 15)

    def test_refused_before_the_run(self):
        self.reset()
        url = "https://127.0.0.1:%d/fast" % self.port
        p = self.squall(url, "--http3", "-k", "-n", "1", "--proxy", self.dead)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--http3 and --proxy: an HTTP proxy cannot carry QUIC", p.stderr)
        script = os.path.join(self.dir, "s.lua")
        with open(script, "w") as f:
            f.write("request = function() return wrk.format() end\n")
        p = self.squall(url, "--http3", "-k", "-n", "1", "-s", script)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--http3 and -s: a wrk script's requests are HTTP/1.1 bytes", p.stderr)
        plan = os.path.join(self.dir, "p.yaml")
        with open(plan, "w") as f:
            f.write("target: https://127.0.0.1:%d\nscenarios:\n  s:\n    executor: "
                    "per-vu-iterations\n    vus: 1\n    iterations: 1\n    flow:\n"
                    "      - request: { url: /fast }\n" % self.port)
        p = self.squall("run", plan, "--http3", "-k", "--proxy", self.dead)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--proxy: HTTP/3 (protocol: h3, --http3) is over QUIC (UDP)", p.stderr)
        st = self.stats()
        self.assertEqual((st["h3"]["requests"], st["h3"]["connections"]), (0, 0), st["h3"])


if __name__ == "__main__":
    sqtest.main()
