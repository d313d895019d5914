"""Nobody locks the server out (issue 25, section 2): the server core under `squall serve`,
`squall target`, `squall sink` and `squall inbox`.

- The slow-body attack: 1,100 connections, each `POST /runs` with `Content-Length: 1000000`
  and then one byte every 2 s (a connection the server closes comes back 0.2 s later), against
  a loopback daemon and a daemon with a token. A probe asks `GET /health` 20 times over the
  attack on a fresh connection each time and must get 200 within 1 s every time. Before the fix
  the attack held all 1,024 slots and every probe was refused.
- The token is checked once the head is in: a tokenless `POST /runs` announcing 1,000,000 body
  bytes is answered 401 though the client sends no body.
- The core's refusals (400, 408 for a slow head and for a slow body, 413, 431) carry a JSON
  body naming the limit; Host is checked as RFC 9112 3.2 says; `application/jsonp` is not JSON.
- One address holds at most 512 of the daemon's connections: past that, its connection that
  waited longest is closed to make room (a 503 naming why), and a new one still gets in.

Time bounds: "within 1 s" for a probe is what the issue asks; on loopback an answered probe
takes milliseconds even on a busy machine (the slowest of 20 was 50-180 ms here at a load of 10
on 2 CPUs), so the bound is generous, and the failure it guards against is total (refused, or no
answer at all). Under a sanitizer the daemon spends 3-4 times the CPU on each of the attacker's
connections, which a new connection queues behind in the kernel's accept queue, so the bound is
3 s there.
"""

import json
import multiprocessing
import os
import resource
import select
import selectors
import shutil
import socket
import sys
import tempfile
import time
import unittest

import sec

sqtest = sec.sqtest
HOST = "127.0.0.1"
TOKEN = "s3cr3t-token-for-the-limits-test-0123456789"

ATTACKERS = 1100
PROBES = 20
PROBE_EVERY = 1.0  # s: the probes spread over the attack
PROBE_BOUND = 3.0 if sqtest.sanitizer() else 1.0  # s: connect to status line, each probe


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 20000) if hard != resource.RLIM_INFINITY else 20000
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def attack(port, n, head, ready, stop, out):
    """Holds n connections, each sending head then one byte every 2 s; a connection the server
    closes is opened again 0.2 s later. Runs in its own process (no GIL shared with the probe).
    Puts {"connects", "closed_by_server", "answers": {status: count}} on out at the end."""
    sel = selectors.DefaultSelector()
    state = {}  # socket -> [phase, next_drip]
    pending = []  # (when, count) reopenings due
    stats = {"connects": 0, "closed_by_server": 0, "answers": {}}
    payload = b"{" + b" " * 1000

    def open_one():
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((HOST, port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            pending.append(time.monotonic() + 0.2)
            return
        stats["connects"] += 1
        state[s] = ["connecting", 0.0, 0]
        sel.register(s, selectors.EVENT_WRITE)

    def drop(s, by_server=True):
        st = state.pop(s, None)
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()
        if by_server:
            stats["closed_by_server"] += 1
        if st is not None:
            pending.append(time.monotonic() + 0.2)

    for _ in range(n):
        open_one()
    signalled = False
    while not stop.is_set():
        now = time.monotonic()
        for when in [w for w in pending if w <= now]:
            pending.remove(when)
            open_one()
        for key, ev in sel.select(0.05):
            s = key.fileobj
            st = state.get(s)
            if st is None:
                continue
            if st[0] == "connecting":
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    drop(s)
                    continue
                try:
                    s.send(head)
                except OSError:
                    drop(s)
                    continue
                st[0], st[1] = "dripping", time.monotonic() + 2.0
                sel.modify(s, selectors.EVENT_READ)
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if data.startswith(b"HTTP/1.1 "):
                code = data[9:12].decode("latin-1")
                stats["answers"][code] = stats["answers"].get(code, 0) + 1
            if not data:
                drop(s)
        now = time.monotonic()
        for s, st in list(state.items()):
            if st[0] == "dripping" and st[1] <= now:
                try:
                    s.send(payload[st[2] % len(payload):][:1])
                    st[1], st[2] = now + 2.0, st[2] + 1
                except OSError:
                    drop(s)
        if not signalled and sum(1 for st in state.values() if st[0] == "dripping") >= min(n, 1000):
            ready.set()
            signalled = True
    for s in list(state):
        drop(s, by_server=False)
    out.put(stats)


def probe(port, token=None):
    """GET /health on a fresh connection: (status or None, seconds, what went wrong)."""
    t0 = time.monotonic()
    auth = b"Authorization: Bearer %s\r\n" % token.encode() if token else b""
    try:
        s = socket.create_connection((HOST, port), timeout=PROBE_BOUND)
        try:
            s.settimeout(max(0.01, PROBE_BOUND - (time.monotonic() - t0)))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sConnection: close\r\n\r\n"
                      % (port, auth))
            got = b""
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    return None, time.monotonic() - t0, "closed with %r" % got[:80]
                got += chunk
            return int(got.split(b" ")[1]), time.monotonic() - t0, ""
        finally:
            s.close()
    except OSError as e:
        return None, time.monotonic() - t0, repr(e)


def stop_serve(proc):
    """Stops a daemon; it must exit 0 (a sanitizer's report would make it non-zero)."""
    rc = sqtest.stop(proc)
    with open(proc.log_path, errors="replace") as f:
        log = f.read()
    os.unlink(proc.log_path)
    assert rc == 0, "squall serve exited %s: %s" % (rc, log[-4000:])


def metrics(port, token=None):
    hdrs = {"Authorization": "Bearer " + token} if token else {}
    status, _, body = sqtest.http(port, "GET", "/metrics", headers=hdrs)
    assert status == 200, status
    out = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def request(port, data, timeout=5.0):
    """Sends raw bytes on a fresh connection; returns (status, headers, body, closed after)."""
    s = sqtest.raw_connect(port, timeout=timeout)
    try:
        s.sendall(data)
        rd = sqtest.RawReader(s)
        status, hdrs, body, _ = rd.response()
        return status, hdrs, body, rd.at_eof(timeout)
    finally:
        s.close()


class Daemons(unittest.TestCase):
    """A loopback daemon without a token, and one with a token."""

    @classmethod
    def setUpClass(cls):
        raise_nofile()  # the attacker's 1,100 sockets; the daemons inherit it
        cls.tmp = tempfile.mkdtemp(prefix="squall-limits-")
        cls.tokfile = os.path.join(cls.tmp, "token")
        with open(cls.tokfile, "w") as f:
            f.write(TOKEN + "\n")
        cls.open_proc, cls.open_port = sqtest.start_serve("--data", os.path.join(cls.tmp, "a"))
        cls.tok_proc, cls.tok_port = sqtest.start_serve("--data", os.path.join(cls.tmp, "b"),
                                                        "--token-file", cls.tokfile)

    @classmethod
    def tearDownClass(cls):
        for p in (cls.open_proc, cls.tok_proc):
            stop_serve(p)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def slow_body_attack(self, port, token=None):
        head = (b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1000000\r\n\r\n" % port)
        ctx = multiprocessing.get_context("fork")
        ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
        p = ctx.Process(target=attack, args=(port, ATTACKERS, head, ready, stop, out))
        p.start()
        results = []
        try:
            self.assertTrue(ready.wait(60), "the attacker could not open its connections")
            time.sleep(2.0)  # the attack holds: every connection sent its head
            for _ in range(PROBES):
                t0 = time.monotonic()
                results.append(probe(port, token))
                time.sleep(max(0.0, PROBE_EVERY - (time.monotonic() - t0)))
        finally:
            stop.set()
            stats = out.get(timeout=60)
            p.join(30)
        failed = [r for r in results if r[0] != 200 or r[1] >= PROBE_BOUND]
        slowest = max((r[1] for r in results), default=0.0)
        print("\n  attack on :%d: %s; probes %d/%d ok, slowest %.1f ms"
              % (port, stats, len(results) - len(failed), len(results), slowest * 1e3),
              file=sys.stderr)
        self.assertEqual(failed, [], "%d of %d probes failed under the attack (%s)"
                         % (len(failed), len(results), stats))
        self.assertGreaterEqual(stats["connects"], ATTACKERS)
        return stats

    def test_slow_body_attack_on_a_loopback_daemon(self):
        before = metrics(self.open_port)
        stats = self.slow_body_attack(self.open_port)
        after = metrics(self.open_port)
        # the probes got in because attackers' connections made room: one address holds at
        # most 512 of the 1,024, and its longest-waiting connection is the one closed
        evicted = 'squall_daemon_api_connections_total{event="evicted"}'
        self.assertGreaterEqual(after[evicted] - before[evicted], ATTACKERS - 512, stats)
        self.assertGreater(stats["answers"].get("503", 0), 0, stats)
        self.assertEqual(sqtest.http(self.open_port, "GET", "/health")[0], 200)

    def test_slow_body_attack_on_a_token_daemon(self):
        before = metrics(self.tok_port, TOKEN)
        stats = self.slow_body_attack(self.tok_port, TOKEN)
        after = metrics(self.tok_port, TOKEN)
        # every attacker was answered 401 at its head, before any body byte
        at_head = 'squall_daemon_api_rejected_total{reason="at_head"}'
        self.assertGreaterEqual(after[at_head] - before[at_head], ATTACKERS, stats)
        self.assertGreaterEqual(stats["answers"].get("401", 0), ATTACKERS, stats)

    def test_401_before_the_body(self):
        # the head alone, announcing 1,000,000 bytes: the answer comes without the body
        s = sqtest.raw_connect(self.tok_port, timeout=5.0)
        self.addCleanup(s.close)
        s.sendall(b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000000\r\n\r\n")
        rd = sqtest.RawReader(s)
        try:
            status, hdrs, body, _ = rd.response()
        except socket.timeout:
            self.fail("no answer before the body: the body is read before the token is checked")
        self.assertEqual(status, 401)
        self.assertEqual(hdrs.get("content-type"), "application/json")
        self.assertIn("bearer token", json.loads(body)["error"])
        self.assertIn("Bearer", hdrs.get("www-authenticate", ""))
        self.assertEqual(hdrs.get("connection"), "close")
        self.assertTrue(rd.at_eof())
        # chunked, and the same with a wrong token
        for extra in (b"Transfer-Encoding: chunked\r\n",
                      b"Authorization: Bearer wrong\r\nContent-Length: 1000000\r\n"):
            status, _, body, closed = request(
                self.tok_port, b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n" + extra + b"\r\n")
            self.assertEqual((status, closed), (401, True), extra)
        # with the token the body is read and the route answers
        status, _, body, _ = request(
            self.tok_port, b"POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\nConnection: close\r\n\r\n{}")
        self.assertNotIn(status, (401, 408, 415), body)

    def test_only_application_json_is_json(self):
        body = json.dumps({"quick": {"url": "http://127.0.0.1:1/"}}).encode()
        for ctype, refused in (("application/jsonp", True), ("application/json5", True),
                               ("text/json", True), ("application/json", False),
                               ("Application/JSON; charset=utf-8", False)):
            status, hdrs, data = sqtest.http(self.open_port, "POST", "/validate", body=body,
                                             headers={"Content-Type": ctype})
            if refused:
                self.assertEqual(status, 415, (ctype, data))
                self.assertIn("application/json", json.loads(data)["error"])
            else:
                self.assertNotEqual(status, 415, (ctype, data))

    def test_host_on_the_daemon(self):
        for head in (b"Host: 127.0.0.1\r\nHost: evil.example\r\n", b"Host: [::1]anything\r\n", b""):
            status, hdrs, body, closed = request(
                self.open_port, b"GET /health HTTP/1.1\r\n" + head + b"\r\n")
            self.assertEqual((status, closed), (400, True), head)
            self.assertEqual(hdrs.get("content-type"), "application/json")
            self.assertIn("bad Host", json.loads(body)["error"])


class PerPeer(unittest.TestCase):
    """One address holds at most 512 of the daemon's 1,024 connections; past that its
    connection that waited longest makes room."""

    @classmethod
    def setUpClass(cls):
        raise_nofile()
        cls.tmp = tempfile.mkdtemp(prefix="squall-peer-")
        cls.proc, cls.port = sqtest.start_serve("--data", os.path.join(cls.tmp, "d"))

    @classmethod
    def tearDownClass(cls):
        stop_serve(cls.proc)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_one_address_holds_at_most_512(self):
        before = metrics(self.port)
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for i in range(520):
            s = sqtest.raw_connect(self.port)
            s.sendall(b"GET /health HTTP/1.1\r\nHo")  # a head that never ends
            socks.append(s)
            if i % 32 == 31:
                time.sleep(0.005)  # distinct arrival times (the server's clock is in ms)
        # the 8 that waited longest were closed, each with a 503 saying why
        for s in socks[:8]:
            s.settimeout(5.0)
            got = b""
            try:
                while True:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    got += chunk
            except ConnectionResetError:
                pass
            except socket.timeout:
                self.fail("one of the 8 oldest of 520 connections from one address is still "
                          "open: nothing caps what one address holds")
            self.assertTrue(got.startswith(b"HTTP/1.1 503 "), got)
            self.assertIn(b"too many connections", got)
        # the other 512 are untouched
        poll = select.poll()
        for s in socks[8:]:
            poll.register(s, select.POLLIN)
        closed = poll.poll(200)
        self.assertEqual(len(closed), 0, "%d of the newest 512 were closed" % len(closed))
        # and a new one gets in (making room in turn)
        self.assertEqual(probe(self.port)[0], 200)
        after = metrics(self.port)
        evicted = 'squall_daemon_api_connections_total{event="evicted"}'
        self.assertGreaterEqual(after[evicted] - before[evicted], 9)


class Followers(unittest.TestCase):
    """A live follower holds its connection (no newcomer can make room from it), so the daemon
    takes at most 256 at once: 300 followers of a running run leave room for everyone else."""

    @classmethod
    def setUpClass(cls):
        raise_nofile()
        cls.tmp = tempfile.mkdtemp(prefix="squall-follow-")
        cls.target, cls.tport = sqtest.start_target("-t", "1")
        cls.proc, cls.port = sqtest.start_serve("--data", os.path.join(cls.tmp, "d"))

    @classmethod
    def tearDownClass(cls):
        stop_serve(cls.proc)
        sqtest.stop(cls.target)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_at_most_256_followers(self):
        body = json.dumps({"quick": {"url": "http://127.0.0.1:%d/fast" % self.tport,
                                     "connections": 1, "threads": 1, "rate": 20,
                                     "duration": "30s"}}).encode()
        st, _, data = sqtest.http(self.port, "POST", "/runs", body=body,
                                  headers={"Content-Type": "application/json"})
        self.assertEqual(st, 201, data)
        rid = json.loads(data)["id"]
        self.addCleanup(sqtest.http, self.port, "POST", "/runs/%d/stop" % rid)
        socks, codes = [], {}
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(300):
            s = sqtest.raw_connect(self.port, timeout=5.0)
            s.sendall(b"GET /runs/%d/live HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % rid)
            socks.append(s)
        for s in socks:
            got = b""
            while b"\r\n\r\n" not in got or (got.startswith(b"HTTP/1.1 503") and b"}" not in got):
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            code = got[9:12].decode()
            codes[code] = codes.get(code, 0) + 1
            if code == "503":
                self.assertIn(b"too many live followers", got)
        self.assertEqual(codes, {"200": 256, "503": 44})
        self.assertEqual(metrics(self.port)["squall_daemon_live_followers"], 256)
        self.assertEqual(probe(self.port)[0], 200)


class Refusals(unittest.TestCase):
    """The core's refusals, on `squall target` (the same core as the daemon, sink and inbox)."""

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = sqtest.start_target("-t", "1", "--header-timeout", "0.5")

    @classmethod
    def tearDownClass(cls):
        assert sqtest.stop(cls.proc) == 0  # (a sanitizer's report makes it non-zero)

    def refused(self, data, status, words):
        got, hdrs, body, closed = request(self.port, data)
        self.assertEqual((got, closed), (status, True), data[:80])
        self.assertEqual(hdrs.get("content-type"), "application/json", data[:80])
        self.assertEqual(int(hdrs["content-length"]), len(body))
        err = json.loads(body)["error"]
        self.assertIn(words, err)
        return err

    def test_json_bodies(self):
        self.refused(b"GET /fast HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400,
                     "malformed request")
        self.refused(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "smuggling")
        self.refused(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n", 413,
                     "1 MiB")
        self.refused(b"GET /fast HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431,
                     "8 KiB")
        self.refused(b"GET /fast HTTP/1.1\r\nHost: x\r\nX-Slow: a", 408, "header timeout (0.5 s)")

    def test_slow_body_gets_408(self):
        # the head, then a byte every 0.1 s: under 1 KiB/s once the header timeout (0.5 s) has
        # passed, though each byte keeps the connection from being idle
        s = sqtest.raw_connect(self.port, timeout=5.0)
        self.addCleanup(s.close)
        s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
        s.settimeout(0.1)
        got = b""
        t0 = time.monotonic()
        while time.monotonic() - t0 < 8 and b"\r\n\r\n" not in got:
            try:
                s.send(b"x")
                got += s.recv(4096)
            except socket.timeout:
                pass
            except (BrokenPipeError, ConnectionResetError):
                break
        self.assertTrue(got.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), got)
        self.assertIn(b"Content-Type: application/json\r\n", got)
        self.assertIn(b"minimum rate", got)
        st = sqtest.json_get(self.port, "/stats")
        self.assertGreaterEqual(st["timeouts"]["body"], 1)

    def test_host_rules(self):
        for head in (b"Host: a\r\nHost: a\r\n", b"Host: [::1]anything\r\n", b"Host: a b\r\n",
                     b"Host: a:1:2\r\n", b""):
            self.refused(b"GET /fast HTTP/1.1\r\n" + head + b"\r\n", 400, "bad Host")
        for req in (b"GET /fast HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
                    b"GET /fast HTTP/1.1\r\nHost: example.com\r\n\r\n",
                    b"GET /fast HTTP/1.0\r\n\r\n"):
            self.assertEqual(request(self.port, req)[0], 200, req)


if __name__ == "__main__":
    sqtest.main()
