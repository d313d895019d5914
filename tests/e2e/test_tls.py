"""End-to-end tests of TLS: `squall target --tls` and https:// runs of the quick face
(verification, --insecure, --cacert, resumption, client certificates, versions, bad flags)."""

import json
import os
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
from sqtest import HOST, run_json, run_squall  # noqa: E402

# `squall target --tls` prints https://; accept both schemes.

VERIFY_MSG = "tls: certificate verify failed: self-signed certificate (depth 0, CN=localhost)"


def have_openssl():
    return shutil.which("openssl") is not None


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca_and_client(d):
    """A CA and a client certificate it signed (EC P-256), made with the openssl CLI."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=squall-test-ca",
            "-days", "1", cwd=d)
    openssl("req", *ec, "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=client",
            cwd=d)
    openssl("x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "client.pem", "-days", "1", cwd=d)


def https_get(port, path, cafile, host="localhost", cert=None):
    ctx = ssl.create_default_context(cafile=cafile)
    if cert:
        ctx.load_cert_chain(*cert)
    with socket.create_connection((HOST, port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data, s.version(), s.selected_alpn_protocol()


class TlsCase(unittest.TestCase):
    def assert_schema(self, doc):
        try:
            import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)
        except ImportError:
            return
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "docs", "result.schema.json")) as f:
            jsonschema.validate(doc, json.load(f))

    def check_accounting(self, doc):
        r = doc["requests"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        e = doc["errors"]
        request_errors = e["timeout"] + e["closed"] + e["parse"] + e["write"] + e.get("decode", 0)
        request_errors += e["tls"] - doc["tls"]["handshake_errors"]
        self.assertEqual(request_errors, r["failed"], doc)
        self.assertEqual(doc["latency"]["count"], r["completed"])


class GeneratedCertTest(TlsCase):
    """A target with the certificate it generates at start."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq_tls_")
        cls.cert = os.path.join(cls.dir, "target.pem")
        cls.proc, cls.port = sqtest.start_target("-t", "1", "-q", "--tls", "--cert-out", cls.cert)

    @classmethod
    def tearDownClass(cls):
        assert sqtest.stop(cls.proc) == 0
        shutil.rmtree(cls.dir, ignore_errors=True)

    def url(self, host=HOST, path="/fast"):
        return "https://%s:%d%s" % (host, self.port, path)

    def test_cert_out_and_plain_clients(self):
        with open(self.cert) as f:
            pem = f.read()
        self.assertTrue(pem.startswith("-----BEGIN CERTIFICATE-----"), pem[:40])
        for host in ("localhost", "127.0.0.1"):
            data, version, alpn = https_get(self.port, "/fast", self.cert, host=host)
            self.assertTrue(data.startswith(b"HTTP/1.1 200 OK\r\n"), data[:40])
            self.assertTrue(data.endswith(b"hello world"))
            self.assertEqual(version, "TLSv1.3")

    def test_insecure_succeeds(self):
        for flag in ("-k", "--insecure"):
            p, doc, _ = run_json(self.url(), "-c", "4", "-t", "2", "-d", "1s", flag)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertGreater(doc["requests"]["completed"], 100)
            t = doc["tls"]
            self.assertEqual(t["version"], "TLSv1.3")
            self.assertEqual(t["alpn"], "http/1.1")
            self.assertTrue(t["cipher"])
            self.assertGreaterEqual(t["handshakes"], 4)
            self.assertIsNone(t["first_error"])
            self.assertEqual(doc["errors"]["tls"], 0)
            self.assertEqual(doc["config"]["url"], self.url())
            self.check_accounting(doc)
        self.assertIn("TLS          TLSv1.3", p.stderr)
        self.assert_schema(doc)

    def test_unverified_fails_with_tls_error(self):
        p, doc, _ = run_json(self.url(), "-c", "2", "-d", "2s")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("squall: no request succeeded: no connection could be made to", p.stderr)
        self.assertIn(VERIFY_MSG, p.stderr)
        self.assertTrue(doc["aborted"])
        self.assertIn(VERIFY_MSG, doc["abort_reason"])
        self.assertGreater(doc["errors"]["tls"], 0)
        self.assertEqual(doc["errors"]["tls"], doc["tls"]["handshake_errors"])
        self.assertEqual(doc["requests"]["sent"], 0)
        self.assertEqual(doc["tls"]["handshakes"], 0)
        self.assertIn("certificate verify failed", doc["tls"]["first_error"])
        # The summary names it too.
        self.assertIn("TLS error    certificate verify failed", p.stderr)
        self.assert_schema(doc)

    def test_cacert_succeeds(self):
        # The name is verified against the certificate; --resolve pins it to loopback, so the
        # test needs no /etc/hosts (a fresh chroot has none).
        pin = ("--resolve", "localhost:%d:127.0.0.1" % self.port)
        for host, extra in (("localhost", pin), ("127.0.0.1", ())):
            p, doc, _ = run_json(self.url(host), "-c", "2", "-n", "200", "--cacert", self.cert,
                                 *extra)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["requests"]["completed"], 200)
            self.check_accounting(doc)

    def test_resumption_across_reconnects(self):
        # The target closes after each response; every reconnect offers the worker's session.
        p, doc, _ = run_json(self.url(), "-c", "2", "-t", "1", "-d", "1s", "-k",
                             "-H", "Connection: close")
        self.assertEqual(p.returncode, 0, p.stderr)
        t = doc["tls"]
        self.assertGreater(doc["connections"]["closed_by_server"], 10)
        self.assertGreater(t["handshakes"], 10)
        self.assertGreater(t["resumed"], 0)
        # Only the first handshake of each connection is a full one (TLS 1.3 tickets are spent
        # once each: the worker keeps one per connection).
        self.assertGreaterEqual(t["resumed"], t["handshakes"] - 4, t)
        self.assertEqual(doc["errors"]["tls"], 0)
        # The client offers AES-128-GCM first (a browser's order); the target follows it.
        self.assertEqual(t["cipher"], "TLS_AES_128_GCM_SHA256")
        self.check_accounting(doc)

    def test_tls12(self):
        p, doc, _ = run_json(self.url(), "-c", "2", "-t", "1", "-d", "1s", "-k", "--tls-max", "1.2",
                             "-H", "Connection: close")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["tls"]["version"], "TLSv1.2")
        self.assertGreater(doc["tls"]["resumed"], 0)
        self.assertEqual(doc["tls"]["cipher"], "ECDHE-ECDSA-AES128-GCM-SHA256")
        p, doc, _ = run_json(self.url(), "-n", "10", "-c", "1", "-k", "--tls-min", "1.3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["tls"]["version"], "TLSv1.3")

    def test_large_bodies_delays_and_open_loop(self):
        # Streamed fill tails and large echoes cross many records and EAGAIN'd writes.
        n = 5 * 1024 * 1024 + 7
        data, _, _ = https_get(self.port, "/bytes/%d" % n, self.cert)
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertEqual(len(body), n)
        pattern = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        self.assertEqual(body[:64], pattern)
        self.assertEqual(body[-7:], pattern[:7])
        p, doc, _ = run_json(self.url(path="/bytes/%d" % n), "-n", "20", "-c", "2", "-k")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 20)
        self.assertGreater(doc["bytes"]["received"], 20 * n)
        with tempfile.NamedTemporaryFile(dir=self.dir, delete=False) as f:
            f.write(b"x" * (700 * 1024))
        p, doc, _ = run_json(self.url(path="/echo"), "-n", "20", "-c", "2", "-k", "-m", "POST",
                             "-b", "@" + f.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["status"]["2xx"], 20)
        self.assertGreater(doc["bytes"]["received"], 20 * 700 * 1024)
        # Parked answers, and the open loop.
        p, doc, _ = run_json(self.url(path="/delay/20"), "-r", "200", "-d", "1s", "-c", "8", "-k")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["sent"] + doc["requests"]["dropped"], 200)
        self.assertGreater(doc["requests"]["completed"], 150)
        self.assertGreaterEqual(doc["latency"]["p50_us"], 20000)
        self.check_accounting(doc)

    def test_plain_http_to_tls_target_and_back(self):
        # http:// at a TLS port: the server drops the connection; nothing succeeds.
        p, doc, _ = run_json("http://%s:%d/fast" % (HOST, self.port), "-c", "1", "-d", "1s",
                             "--timeout", "1s")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertNotIn("tls", doc)
        # https:// at a plain target: the message says the peer is not speaking TLS.
        proc, port = sqtest.start_target("-t", "1", "-q")
        try:
            p, _ = run_squall("https://%s:%d/fast" % (HOST, port), "-c", "1", "-d", "1s", "-k")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("tls: handshake failure:", p.stderr)
            self.assertIn("is the peer speaking TLS?", p.stderr)
        finally:
            sqtest.stop(proc)


@unittest.skipUnless(have_openssl(), "needs the openssl command")
class ClientCertTest(TlsCase):
    """A target that requires client certificates signed by a test CA."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq_tls_cc_")
        make_ca_and_client(cls.dir)
        cls.ca = os.path.join(cls.dir, "ca.pem")
        cls.cert = os.path.join(cls.dir, "client.pem")
        cls.key = os.path.join(cls.dir, "client.key")
        cls.proc, cls.port = sqtest.start_target("-t", "1", "-q", "--tls", "--client-ca", cls.ca)
        cls.url = "https://%s:%d/fast" % (HOST, cls.port)

    @classmethod
    def tearDownClass(cls):
        assert sqtest.stop(cls.proc) == 0
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_without_client_cert_tls13(self):
        p, doc, _ = run_json(self.url, "-c", "2", "-d", "1s", "-k")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertGreater(doc["errors"]["tls"], 0)
        self.assertIn("certificate required", doc["tls"]["first_error"])
        self.assertIn("squall: no request succeeded: tls: ", p.stderr)
        self.assertIn("certificate required", p.stderr)
        self.check_accounting(doc)

    def test_without_client_cert_tls12(self):
        p, doc, _ = run_json(self.url, "-c", "2", "-d", "1s", "-k", "--tls-max", "1.2")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("tls: handshake failure: ", p.stderr)
        self.assertTrue(doc["aborted"])
        self.assertGreater(doc["errors"]["tls"], 0)

    def test_with_client_cert(self):
        for extra in ((), ("--tls-max", "1.2")):
            p, doc, _ = run_json(self.url, "-c", "2", "-n", "300", "-k", "--cert", self.cert,
                                 "--key", self.key, *extra)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["requests"]["completed"], 300)
            self.assertEqual(doc["errors"]["tls"], 0)
            self.check_accounting(doc)
        # Resumption works with client certificates too.
        p, doc, _ = run_json(self.url, "-c", "1", "-d", "1s", "-k", "--cert", self.cert, "--key",
                             self.key, "-H", "Connection: close")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(doc["tls"]["resumed"], 0)

    def test_target_with_given_cert(self):
        # The CA's own certificate and key served by the target; a client trusting the CA.
        proc, port = sqtest.start_target("-t", "1", "-q", "--cert", self.ca, "--key",
                                         os.path.join(self.dir, "ca.key"))
        try:
            p, doc, _ = run_json("https://%s:%d/fast" % (HOST, port), "-n", "50", "-c", "1",
                                 "--cacert", self.ca)
            # The CA certificate names no host: the name check fails, with a clear message.
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("certificate verify failed: IP address mismatch", p.stderr)
            p, doc, _ = run_json("https://%s:%d/fast" % (HOST, port), "-n", "50", "-c", "1", "-k")
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            sqtest.stop(proc)


@unittest.skipUnless(have_openssl(), "needs the openssl command")
class OpenSSLServerTest(TlsCase):
    """`openssl s_server` (another program on OpenSSL's defaults, which follow the client's
    order): squall negotiates AES-128-GCM first, in TLS 1.3 and 1.2, and resumes."""

    def test_suite_order_and_resumption(self):
        d = tempfile.mkdtemp(prefix="sq_tls_")
        try:
            openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out",
                    "c.pem", "-subj", "/CN=localhost", "-days", "1", cwd=d)
            port = sqtest.free_port()
            srv = subprocess.Popen(["openssl", "s_server", "-accept", "%s:%d" % (HOST, port),
                                    "-cert", "c.pem", "-key", "k.pem", "-www", "-quiet",
                                    "-naccept", "1000"],
                                   cwd=d, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
            try:
                url = "https://%s:%d/" % (HOST, port)
                for _ in range(100):
                    try:
                        socket.create_connection((HOST, port), timeout=1).close()
                        break
                    except OSError:
                        time.sleep(0.1)
                for extra, version, cipher in (((), "TLSv1.3", "TLS_AES_128_GCM_SHA256"),
                                               (("--tls-max", "1.2"), "TLSv1.2",
                                                "ECDHE-RSA-AES128-GCM-SHA256")):
                    # s_server -www answers and closes: every request is a new connection.
                    p, doc, _ = run_json(url, "-n", "20", "-c", "1", "-k", *extra)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    t = doc["tls"]
                    self.assertEqual((t["version"], t["cipher"]), (version, cipher), t)
                    self.assertEqual(doc["requests"]["completed"], 20)
                    self.assertGreaterEqual(t["handshakes"], 20, t)
                    self.assertGreater(t["resumed"], 0, t)
            finally:
                sqtest.stop_proc(srv)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class FlagTest(unittest.TestCase):
    def expect_usage(self, args, *needles, target=False):
        p, _ = run_squall(*(("target", "--port", "0") if target else ()), *args, timeout=20)
        self.assertEqual(p.returncode, 2, (args, p.stderr))
        for n in needles:
            self.assertIn(n, p.stderr)

    def test_quick_flags(self):
        url = "https://127.0.0.1:1/"
        self.expect_usage((url, "--tls-min", "1.3", "--tls-max", "1.2"),
                          "--tls-min 1.3 is above --tls-max 1.2")
        self.expect_usage((url, "--tls-min", "1.1"), "--tls-min: '1.1' is not a TLS version")
        self.expect_usage((url, "--tls-max", "x"), "--tls-max: 'x' is not a TLS version")
        self.expect_usage((url, "--cacert", "/nonexistent/ca.pem"),
                          "--cacert: '/nonexistent/ca.pem': No such file or directory")
        self.expect_usage((url, "--key", "k.pem"), "--key needs --cert")
        self.expect_usage((url, "--cacert"), "--cacert needs a value")

    def test_target_flags(self):
        self.expect_usage(("--cert", "/x.pem"), "--cert needs --key", target=True)
        self.expect_usage(("--key", "/x.pem"), "--key needs --cert", target=True)
        self.expect_usage(("--cert", "/nonexistent.pem", "--key", "/nonexistent.key"),
                          "--cert: '/nonexistent.pem'", target=True)
        self.expect_usage(("--client-ca",), "--client-ca needs a value", target=True)
        self.expect_usage(("--tls", "--cert-out", "/nonexistent/dir/x.pem"),
                          "--cert-out: '/nonexistent/dir/x.pem'", target=True)


if __name__ == "__main__":
    sqtest.main()
