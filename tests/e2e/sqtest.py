"""Shared helpers for squall's end-to-end tests (plain python3, no third-party modules).

The squall binary comes from $SQUALL (ctest sets it); every server runs on 127.0.0.1 on a port
the kernel picks (`--port 0`), read back from the one line `squall target` prints.
"""

import http.client as httpclient
import json
import math
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HOST = "127.0.0.1"
_LISTEN_RE = re.compile(r"^squall target listening on https?://(.+):(\d+)$")


def squall_path():
    path = os.environ.get("SQUALL")
    if not path:
        here = os.path.dirname(os.path.abspath(__file__))
        for cand in ("build", "build-target"):
            p = os.path.join(here, "..", "..", cand, "squall")
            if os.path.exists(p):
                return os.path.abspath(p)
        raise RuntimeError("set SQUALL to the squall binary")
    return path


def start_target(*args, timeout=10.0):
    """Runs `$SQUALL target --port 0 ARGS...`; returns (Popen, port) once it listens."""
    proc = subprocess.Popen(
        [squall_path(), "target", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    fd = proc.stdout.fileno()
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            stop(proc, kill=True)
            raise RuntimeError("squall target printed no listening line in %.0fs" % timeout)
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            rc = proc.wait(timeout=5)
            raise RuntimeError("squall target exited (%s) before listening: %r" % (rc, line))
        line += chunk
    m = _LISTEN_RE.match(line.decode().strip())
    if not m:
        stop(proc, kill=True)
        raise RuntimeError("unexpected first line: %r" % line)
    return proc, int(m.group(2))


_SERVE_RE = re.compile(r"^squall serve listening on http://(.+):(\d+)/$")


def start_serve(*args, timeout=15.0, env=None):
    """Runs `$SQUALL serve --listen 127.0.0.1:0 ARGS...` (a --listen in ARGS wins); returns
    (Popen, port) once it prints its listening line. Its log (stderr) goes to a file whose path
    is proc.log_path (a pipe nobody reads could fill and stall the daemon)."""
    import tempfile
    log = tempfile.NamedTemporaryFile(prefix="squall-serve-", suffix=".log", delete=False)
    cmd = [squall_path(), "serve"]
    if not any(a in ("-l", "--listen") or str(a).startswith("--listen=") for a in args):
        cmd += ["--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(cmd + [str(a) for a in args], stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, env=env)
    log.close()
    proc.log_path = log.name
    fd = proc.stdout.fileno()
    line = b""
    deadline = time.monotonic() + timeout
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0:
            stop(proc, kill=True)
            raise RuntimeError("squall serve printed no listening line in %.0fs" % timeout)
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            continue
        chunk = os.read(fd, 1)
        if not chunk:
            rc = proc.wait(timeout=5)
            with open(log.name, errors="replace") as f:
                err = f.read()
            raise RuntimeError("squall serve exited (%s) before listening: %r %s" % (rc, line, err))
        line += chunk
    m = _SERVE_RE.match(line.decode().strip())
    if not m:
        stop(proc, kill=True)
        raise RuntimeError("unexpected first line: %r" % line)
    return proc, int(m.group(2))


def sanitizer():
    """'tsan' or 'asan' when $SQUALL was built with that sanitizer (its runtime is linked in),
    else None. ThreadSanitizer's runtime keeps a thread of its own that wakes every 100 ms."""
    with open(squall_path(), "rb") as f:
        data = f.read()
    if b"__tsan_init" in data:
        return "tsan"
    if b"__asan_init" in data:
        return "asan"
    return None


def stop(proc, timeout=10.0, kill=False):
    """Sends SIGTERM (SIGKILL when kill) to that process only and waits; returns its status."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError("squall target did not exit within %.0fs of SIGTERM" % timeout)
    if proc.stdout:
        proc.stdout.close()
    return rc


def free_port():
    """A loopback port free now (the kernel's pick), for a server that takes its port as given."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=10.0):
    """Returns once something accepts on port; raises if proc exits first or after timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("exited (%s) before listening" % proc.returncode)
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError("nothing listens on port %d" % port)


def stop_proc(proc, sig=signal.SIGTERM):
    """Sends sig to that process only and waits; SIGKILL after 10 s. For processes that are not
    squall servers (nats-server, agents), where stop()'s error would hide the test's own."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Agent:
    """One `squall agent` process on its own subject prefix; its log goes to a file the test can
    read."""

    def __init__(self, url, name, prefix, *extra):
        self.log = tempfile.NamedTemporaryFile(prefix="sq-agent-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [squall_path(), "agent", "--nats", url, "--name", name, "--subject-prefix", prefix,
             *extra], stdout=subprocess.DEVNULL, stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while "ready on" not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("agent %s did not come up: %s" % (name, self.text()))
            time.sleep(0.01)

    def text(self):
        with open(self.log.name) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM):
        """Stops it; returns what it logged (sanitizer reports included, under make test-asan)."""
        stop_proc(self.proc, sig)
        text = self.text()
        self.log.close()
        os.unlink(self.log.name)
        return text

    close = stop


def http(port, method, path, body=None, headers=None, timeout=10.0, conn=None):
    """One request; returns (status, {lower-case name: value}, body bytes). A new connection
    each call unless conn (an httpclient.HTTPConnection) is given."""
    own = conn is None
    if own:
        conn = httpclient.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        return resp.status, hdrs, data
    finally:
        if own:
            conn.close()


def json_get(port, path):
    status, _, data = http(port, "GET", path)
    if status != 200:
        raise AssertionError("GET %s: status %d" % (path, status))
    return json.loads(data)


def raw_connect(port, timeout=10.0):
    s = socket.create_connection((HOST, port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


class RawReader:
    """Reads HTTP/1.1 responses (Content-Length framed, or none for HEAD/204/304) off a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = bytearray()

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def response(self, head_request=False):
        """Returns (status, {lower-case name: value}, body, raw head bytes)."""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        end = self.buf.index(b"\r\n\r\n") + 4
        head = bytes(self.buf[:end])
        del self.buf[:end]
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {}
        for ln in lines[1:]:
            if ln:
                k, v = ln.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        n = 0
        if not head_request and status not in (204, 304) and status >= 200:
            n = int(hdrs.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body = bytes(self.buf[:n])
        del self.buf[:n]
        return status, hdrs, body, head

    def at_eof(self, timeout=5.0):
        """True when the peer closed (after any pending bytes are consumed as garbage)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def run_squall(*args, timeout=60):
    """Runs `$SQUALL ARGS...`; returns (CompletedProcess with text output, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.run([squall_path(), *args], capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


def run_json(*args, timeout=60):
    """Runs squall with `--json -`; returns (CompletedProcess, document or None, wall seconds).
    The summary goes to stderr then."""
    p, took = run_squall(*args, "--json", "-", timeout=timeout)
    doc = json.loads(p.stdout) if p.stdout.strip() else None
    return p, doc, took


class TargetCase(unittest.TestCase):
    """A test class with its own `squall target` (started once for the class, stopped by PID)."""

    target_args = ("-t", "1")

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = start_target(*cls.target_args)
        cls.base = f"http://{HOST}:{cls.port}"

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)

    def reset(self):
        http(self.port, "POST", "/stats/reset")

    def stats(self):
        return json_get(self.port, "/stats")

    def assert_accounting(self, doc):
        """The invariants every result document keeps (docs/json-schema.md)."""
        r = doc["requests"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(sum(doc["errors"][k] for k in ("timeout", "closed", "parse", "write", "decode")),
                         r["failed"], doc["errors"])
        self.assertEqual(sum(doc["status"].values()), r["completed"])
        self.assertEqual(doc["latency"]["count"], r["completed"])
        if doc["mode"] == "open-loop":
            self.assertEqual(r["arrivals"], r["sent"] + r["dropped"], r)


def controlled_arrivals(controls, rate, length_s):
    """The arrivals of an open loop at `rate`/s for length_s changed by the result's `controls`
    (engine/control.c's schedule, with its double arithmetic): up to the first change the
    executor's constant rate, then each piece's rate times its length (none while paused),
    rebased at each change on the arrivals expected then; the count is ceil(expected at the
    end), as for an unchanged run."""
    c0, t0, per_ns, cur, first = 0.0, 0, rate * (1.0 / 1e9), None, True
    for c in controls:
        t = round(c["t_s"] * 1e9)
        c0 = per_ns * float(t) if first else c0 + per_ns * float(t - t0)
        t0, first = t, False
        if c["kind"] == "rate":
            cur = per_ns = c["value"] / 1e9
        elif c["kind"] == "pause":
            per_ns = 0.0
        elif c["kind"] == "resume":
            per_ns = cur if cur is not None else rate * (1.0 / 1e9)
    return math.ceil(c0 + per_ns * float(round(length_s * 1e9) - t0) - 1e-6)


def main():
    """Runs the calling module's tests; prints `N passed, M failed`; exits non-zero on failure."""
    module = sys.modules["__main__"]
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    if len(sys.argv) > 1:
        names = set(sys.argv[1:])
        flat = []

        def walk(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                elif t.id().split(".")[-1] in names:
                    flat.append(t)

        walk(suite)
        suite = unittest.TestSuite(flat)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed or not result.testsRun else 0)
