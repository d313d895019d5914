#!/usr/bin/env python3
"""End-to-end tests of HTTP proxies and Unix domain sockets.

Proxies: a real proxy from Debian, tinyproxy, started here on a free loopback port with a
generated config (its log in a temp dir counts what it forwarded), in front of `squall target`.
Plain http goes in absolute-form ("GET http://host:port/path"), https through a CONNECT tunnel;
each test checks that the target's /stats count equals squall's completed requests AND that
tinyproxy's log shows the forwarded requests or CONNECTs. A proxy that wants credentials and
gets none answers 407: a counted `proxy` error (https) or a 407 status (http). The environment's
HTTP_PROXY / HTTPS_PROXY apply to a non-loopback host (this machine's own global address, when
it has one) and not to loopback or a NO_PROXY host.

Unix sockets: `squall target --unix PATH` in a temp dir, `squall URL --unix-socket PATH`.

tinyproxy closes a client connection after each response (without a Connection: close), so a
keep-alive run through it in absolute-form sees the next request on that connection fail as
`closed`; the checks count completed requests, which is what reached the target. Bounded loads
only (a few dozen requests, loopback).
"""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

HOST = sqtest.HOST
run_json = sqtest.run_json


def validate(doc):
    """The document follows docs/result.schema.json (Debian's python3-jsonschema)."""
    import json
    import jsonschema
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "result.schema.json")) as f:
        jsonschema.validate(doc, json.load(f))


def global_ipv4():
    """This machine's first global IPv4 address (not loopback), or None."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else None


class Proxy:
    """tinyproxy on a free loopback port, its config and log in a temp dir."""

    def __init__(self, connect_ports, auth=None):
        self.dir = tempfile.mkdtemp(prefix="sqproxy")
        self.port = sqtest.free_port()
        self.log = os.path.join(self.dir, "tinyproxy.log")
        conf = [f"Port {self.port}", "Listen 127.0.0.1", "Allow 127.0.0.1", "Timeout 30",
                f'LogFile "{self.log}"', f'PidFile "{os.path.join(self.dir, "tp.pid")}"',
                "LogLevel Connect", "MaxClients 64", "DisableViaHeader Yes"]
        conf += [f"ConnectPort {p}" for p in connect_ports]
        if auth:
            conf.append(f"BasicAuth {auth[0]} {auth[1]}")
        path = os.path.join(self.dir, "tinyproxy.conf")
        with open(path, "w") as f:
            f.write("\n".join(conf) + "\n")
        # -d: stays in the foreground, so the PID is ours to stop
        self.proc = subprocess.Popen(["tinyproxy", "-d", "-c", path], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        sqtest.wait_port(self.port, self.proc)

    def url(self, cred=None):
        return f"http://{cred + '@' if cred else ''}127.0.0.1:{self.port}"

    def lines(self, pattern):
        """The log lines tinyproxy wrote for requests matching pattern (a regex)."""
        deadline = time.monotonic() + 5
        with open(self.log) as f:
            text = f.read()
        while time.monotonic() < deadline and "Request" not in text:
            time.sleep(0.1)
            with open(self.log) as f:
                text = f.read()
        return [ln for ln in text.splitlines()
                if "Request (file descriptor" in ln and re.search(pattern, ln)]

    def close(self):
        sqtest.stop_proc(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(shutil.which("tinyproxy"), "tinyproxy is not installed (scripts/deps.sh)")
class ProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.plain, cls.pport = sqtest.start_target("-t", "1")
        cls.tls, cls.tport = sqtest.start_target("-t", "1", "--tls")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.plain)
        sqtest.stop(cls.tls)

    def setUp(self):
        self.proxy = None

    def tearDown(self):
        if self.proxy:
            self.proxy.close()

    def target_count(self, port, tls):
        import http.client
        import ssl
        if tls:
            c = http.client.HTTPSConnection(HOST, port, timeout=10,
                                            context=ssl._create_unverified_context())
        else:
            c = http.client.HTTPConnection(HOST, port, timeout=10)
        c.request("GET", "/stats")
        import json
        doc = json.loads(c.getresponse().read())
        c.close()
        return doc["endpoints"]["fast"]

    def reset(self, port, tls):
        import http.client
        import ssl
        if tls:
            c = http.client.HTTPSConnection(HOST, port, timeout=10,
                                            context=ssl._create_unverified_context())
        else:
            c = http.client.HTTPConnection(HOST, port, timeout=10)
        c.request("POST", "/stats/reset")
        c.getresponse().read()
        c.close()

    def test_http_absolute_form_with_auth(self):
        self.proxy = Proxy([], auth=("sq", "pw0"))
        self.reset(self.pport, False)
        p, doc, _ = run_json(f"http://{HOST}:{self.pport}/fast", "-c", "2", "-n", "40",
                             "--proxy", self.proxy.url("sq:pw0"))
        self.assertIsNotNone(doc, p.stderr)
        done = doc["requests"]["completed"]
        self.assertGreater(done, 0, p.stderr)
        self.assertEqual(doc["status"]["2xx"], done)
        self.assertEqual(self.target_count(self.pport, False), done)
        got = self.proxy.lines(rf"GET http://{HOST}:{self.pport}/fast HTTP/1\.1")
        self.assertEqual(len(got), done)
        self.assertEqual(doc["config"]["proxy"], {"url": self.proxy.url(), "from": "--proxy",
                                                  "mode": "absolute-form", "auth": True})
        self.assertEqual(doc["config"]["address"], f"127.0.0.1:{self.proxy.port}")
        self.assertNotIn("pw0", p.stdout + p.stderr)  # never the password in a report
        validate(doc)
        self.assertIn("Proxy", p.stderr)

    def test_https_connect_tunnel(self):
        self.proxy = Proxy([self.tport], auth=("sq", "pw1"))
        self.reset(self.tport, True)
        p, doc, _ = run_json(f"https://localhost:{self.tport}/fast", "-k", "-c", "2", "-n", "40",
                             "--proxy", self.proxy.url("sq:pw1"))
        self.assertIsNotNone(doc, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 40, p.stderr)
        self.assertEqual(doc["errors"]["proxy"], 0)
        self.assertEqual(self.target_count(self.tport, True), 40)
        tunnels = self.proxy.lines(rf"CONNECT localhost:{self.tport} HTTP/1\.1")
        self.assertEqual(len(tunnels), doc["connections"]["opened"])
        self.assertEqual(doc["config"]["proxy"]["mode"], "connect")
        self.assertEqual(doc["tls"]["handshakes"], doc["connections"]["opened"])
        self.assertNotIn("pw1", p.stdout + p.stderr)
        validate(doc)

    def test_http2_and_websocket_tunnel(self):
        # h2 over TLS, h2c with prior knowledge and a WebSocket: each through a CONNECT tunnel
        self.proxy = Proxy([self.tport, self.pport])
        url = self.proxy.url()
        for args, tport in (((f"https://localhost:{self.tport}/fast", "-k", "--http2"), self.tport),
                            ((f"http://{HOST}:{self.pport}/fast", "--http2"), self.pport),
                            ((f"ws://{HOST}:{self.pport}/ws", "--message", "hi"), self.pport)):
            p, doc, _ = run_json(*args, "-c", "1", "-n", "10", "--proxy", url)
            self.assertIsNotNone(doc, p.stderr)
            self.assertEqual(doc["requests"]["completed"], 10, (args, p.stderr))
            self.assertEqual(doc["config"]["proxy"]["mode"], "connect")
            tunnels = self.proxy.lines(rf"CONNECT [^ ]+:{tport} HTTP/1\.1")
            self.assertGreaterEqual(len(tunnels), 1)
        self.assertEqual(len(self.proxy.lines("CONNECT")), 3)

    def test_407_without_credentials(self):
        self.proxy = Proxy([self.tport], auth=("sq", "pw2"))
        self.reset(self.tport, True)
        p, doc, _ = run_json(f"https://localhost:{self.tport}/fast", "-k", "-c", "1", "-n", "5",
                             "--proxy", self.proxy.url())
        self.assertIsNotNone(doc, p.stderr)
        self.assertNotEqual(p.returncode, 0)
        self.assertGreater(doc["errors"]["proxy"], 0)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertIn("the proxy answered CONNECT with 407", p.stderr)
        self.assertEqual(self.target_count(self.tport, True), 0)
        self.assertFalse(doc["config"]["proxy"]["auth"])
        validate(doc)

    def test_connect_refused_port(self):
        # tinyproxy allows CONNECT only to its ConnectPort list: another port is a 403
        self.proxy = Proxy([1])
        p, doc, _ = run_json(f"https://localhost:{self.tport}/fast", "-k", "-c", "1", "-n", "3",
                             "--proxy", self.proxy.url())
        self.assertGreater(doc["errors"]["proxy"], 0, p.stderr)
        self.assertIn("the proxy answered CONNECT with 403", p.stderr)

    def test_environment(self):
        self.proxy = Proxy([self.tport])
        env = dict(os.environ, HTTPS_PROXY=self.proxy.url())
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
        # loopback is never proxied from the environment: straight to the target
        p = subprocess.run([sqtest.squall_path(), f"https://localhost:{self.tport}/fast", "-k",
                            "-n", "3", "--json", "-"], capture_output=True, text=True, env=env,
                           timeout=60)
        import json
        doc = json.loads(p.stdout)
        self.assertNotIn("proxy", doc["config"])
        self.assertEqual(doc["requests"]["completed"], 3, p.stderr)
        ip = global_ipv4()
        if not ip:
            self.skipTest("no global IPv4 address to reach through the proxy")
        t, port = sqtest.start_target("-t", "1", "--tls", "--host", ip)
        try:
            self.proxy.close()
            self.proxy = Proxy([port])
            env["HTTPS_PROXY"] = self.proxy.url()
            p = subprocess.run([sqtest.squall_path(), f"https://{ip}:{port}/fast", "-k", "-n", "5",
                                "--json", "-"], capture_output=True, text=True, env=env,
                               timeout=60)
            doc = json.loads(p.stdout)
            self.assertEqual(doc["requests"]["completed"], 5, p.stderr)
            self.assertEqual(doc["config"]["proxy"]["from"], "HTTPS_PROXY")
            self.assertEqual(len(self.proxy.lines(rf"CONNECT {re.escape(ip)}:{port} ")),
                             doc["connections"]["opened"])
            # NO_PROXY lists the host: straight there
            env["NO_PROXY"] = f"example.invalid,{ip}"
            p = subprocess.run([sqtest.squall_path(), f"https://{ip}:{port}/fast", "-k", "-n", "2",
                                "--json", "-"], capture_output=True, text=True, env=env,
                               timeout=60)
            doc = json.loads(p.stdout)
            self.assertNotIn("proxy", doc["config"])
            self.assertEqual(doc["requests"]["completed"], 2, p.stderr)
        finally:
            sqtest.stop(t)

    def test_bad_proxy_url(self):
        p, _ = sqtest.run_squall(f"http://{HOST}:{self.pport}/fast", "-n", "1", "--proxy",
                                 "socks5://127.0.0.1:1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--proxy: 'socks5' proxies are not supported", p.stderr)


class FakeProxy:
    """A CONNECT proxy of this test's own, for answers tinyproxy never gives: it reads the
    CONNECT head, writes `answer` one byte at a time (the head split over many reads), and with
    a 2xx relays both ways to the target."""

    def __init__(self, answer, target_port):
        import threading
        self.answer, self.tport, self.heads = answer, target_port, []
        self.s = socket.socket()
        self.s.bind((HOST, 0))
        self.s.listen(16)
        self.port = self.s.getsockname()[1]
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        import threading
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        import threading
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = c.recv(4096)
            if not chunk:
                c.close()
                return
            head += chunk
        self.heads.append(head.decode("latin-1"))
        for b in self.answer:
            c.sendall(bytes([b]))
            time.sleep(0.001)
        if not self.answer.startswith(b"HTTP/1.1 2"):
            c.close()
            return
        t = socket.create_connection((HOST, self.tport))

        def pipe(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for x in (a, b):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pipe, args=(t, c), daemon=True).start()
        pipe(c, t)

    def close(self):
        try:
            self.s.shutdown(socket.SHUT_RDWR)  # wakes accept() before the descriptor goes
        except OSError:
            pass
        self.s.close()


class FakeProxyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tls, cls.tport = sqtest.start_target("-t", "1", "--tls")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.tls)

    def test_answer_split_byte_by_byte(self):
        fp = FakeProxy(b"HTTP/1.1 200\r\nX-A: b\r\n\r\n", self.tport)
        try:
            p, doc, _ = run_json(f"https://localhost:{self.tport}/fast", "-k", "-c", "2", "-n",
                                 "20", "--proxy", f"http://a%3Ab:c@127.0.0.1:{fp.port}")
            self.assertEqual(doc["requests"]["completed"], 20, p.stderr)
            self.assertEqual(doc["errors"]["proxy"], 0)
            self.assertIn(f"CONNECT localhost:{self.tport} HTTP/1.1\r\n", fp.heads[0])
            self.assertIn(f"Host: localhost:{self.tport}\r\n", fp.heads[0])
            # "a:b" percent-decoded in the user, then ":c": base64 of "a:b:c"
            self.assertIn("Proxy-Authorization: Basic YTpiOmM=\r\n", fp.heads[0])
        finally:
            fp.close()

    def test_garbage_answer(self):
        for answer, why in ((b"SSH-2.0-x\r\n\r\n", "not an HTTP/1.x status line"),
                            (b"HTTP/1.1 502 Bad Gateway\r\n\r\n", "answered CONNECT with 502")):
            fp = FakeProxy(answer, self.tport)
            try:
                p, doc, _ = run_json(f"https://localhost:{self.tport}/fast", "-k", "-c", "1",
                                     "-n", "3", "--proxy", f"http://127.0.0.1:{fp.port}")
                self.assertGreater(doc["errors"]["proxy"], 0, p.stderr)
                self.assertEqual(doc["requests"]["completed"], 0)
                self.assertIn(why, p.stderr)
            finally:
                fp.close()


class UnixSocketTest(unittest.TestCase):
    def test_target_and_client_on_a_unix_socket(self):
        d = tempfile.mkdtemp(prefix="squnix")
        path = os.path.join(d, "t.sock")
        proc = subprocess.Popen([sqtest.squall_path(), "target", "-t", "1", "--unix", path],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            line = proc.stdout.readline()
            self.assertIn(f"unix:{path}", line)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            p, doc, _ = run_json("http://squall.test/fast", "-c", "2", "-n", "30",
                                 "--unix-socket", path)
            self.assertIsNotNone(doc, p.stderr)
            self.assertEqual(doc["requests"]["completed"], 30, p.stderr)
            self.assertEqual(doc["config"]["address"], f"unix:{path}")
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(10)
            s.connect(path)
            s.sendall(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            s.close()
            import json
            body = json.loads(data.split(b"\r\n\r\n", 1)[1])
            self.assertEqual(body["endpoints"]["fast"], 30)
        finally:
            sqtest.stop(proc)
            shutil.rmtree(d, ignore_errors=True)

    def test_target_refuses_to_replace_a_file(self):
        d = tempfile.mkdtemp(prefix="squnix")
        path = os.path.join(d, "not-a-socket")
        with open(path, "w") as f:
            f.write("keep me\n")
        try:
            p = subprocess.run([sqtest.squall_path(), "target", "--unix", path],
                               capture_output=True, text=True, timeout=30)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("not a socket", p.stderr)
            with open(path) as f:
                self.assertEqual(f.read(), "keep me\n")
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sqtest.main()
