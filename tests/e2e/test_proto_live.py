#!/usr/bin/env python3
"""The proto/ codecs against real peers: nats-server (JetStream on, a temp store, its monitoring
port), mosquitto (a generated config: one loopback listener, anonymous, no persistence,
$SYS every second) and a small WebSocket echo server written here on the standard library.
Each server runs on a free loopback port and is stopped by PID. tests/live/proto_live.c speaks
the protocols with the codecs only and prints what it sent; the servers' own counts must agree.
Every run is bounded (a few thousand messages, 5 s socket timeouts).
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402
free_port = sqtest.free_port

HOST = "127.0.0.1"


def live_path():
    p = os.environ.get("SQ_PROTO_LIVE")
    if not p:
        here = os.path.dirname(os.path.abspath(__file__))
        p = os.path.join(here, "..", "..", "build", "tests", "proto_live")
    if not os.path.exists(p):
        raise unittest.SkipTest("proto_live not built (set SQ_PROTO_LIVE)")
    return p


def wait_port(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited (%s) before listening" % proc.returncode)
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on port %d after %.0fs" % (port, timeout))


def stop(proc):
    """SIGTERM to that PID only, SIGKILL after 5 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_live(mode, port, timeout=60):
    p = subprocess.run([live_path(), mode, str(port)], capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode != 0:
        raise AssertionError("proto_live %s failed (%d): %s" % (mode, p.returncode, p.stderr))
    return json.loads(p.stdout)


@unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed (scripts/deps.sh)")
class Nats(unittest.TestCase):
    def setUp(self):
        self.store = tempfile.mkdtemp(prefix="sq-nats-")
        self.port, self.mon = free_port(), free_port()
        self.proc = subprocess.Popen(
            ["nats-server", "-a", HOST, "-p", str(self.port), "-js", "-sd", self.store,
             "-m", str(self.mon)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)
        wait_port(self.mon, self.proc)

    def tearDown(self):
        stop(self.proc)
        shutil.rmtree(self.store, ignore_errors=True)

    def mon_get(self, path):
        with urllib.request.urlopen("http://%s:%d%s" % (HOST, self.mon, path), timeout=5) as r:
            return json.loads(r.read())

    def test_codec_against_nats_server(self):
        out = run_live("nats", self.port)
        # 5 round-trip PUBs, 1 HPUB, the no-responders request, the stream create, 4 JetStream
        # publishes, 20 batches of 1,000.
        self.assertEqual(out["published"], 5 + 1 + 1 + 1 + 4 + 20000, out)
        self.assertEqual(out["round_trip"], 5)
        self.assertEqual((out["acks_ok"], out["acks_duplicate"], out["acks_error"]), (2, 1, 1))
        varz = self.mon_get("/varz")
        self.assertEqual(varz["in_msgs"], out["published"], varz["in_msgs"])
        jsz = self.mon_get("/jsz")
        self.assertEqual(jsz["streams"], 1, jsz)
        self.assertEqual(jsz["messages"], 2, jsz)  # the duplicate and the refused one are not stored


MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto"
                                           if os.path.exists("/usr/sbin/mosquitto") else None)


@unittest.skipUnless(MOSQUITTO, "mosquitto not installed (scripts/deps.sh)")
class Mqtt(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sq-mqtt-")
        self.port = free_port()
        conf = os.path.join(self.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\npersistence false\n"
                    "sys_interval 1\nlog_dest none\n" % (self.port, HOST))
        self.proc = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def tearDown(self):
        stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_codec_against_mosquitto(self):
        out = run_live("mqtt", self.port)
        # Per version: 9 one-at-a-time publishes (3 per QoS) and a window of 500 at QoS 1.
        self.assertEqual(out["delivered_qos0"], 2 * 3, out)
        self.assertEqual(out["delivered_qos1"], 2 * 503, out)
        self.assertEqual(out["delivered_qos2"], 2 * 3, out)
        # The broker's own counts: every packet it read, and the PUBLISHes its publish counter
        # sees (mosquitto 2.0 tests the first byte masked with 0xF5, so QoS 2 is not counted).
        self.assertEqual(out["sys_messages_received"], out["packets_sent"], out)
        self.assertEqual(out["sys_publish_received"], out["publish_counted"], out)
        self.assertEqual(out["publish_counted"], 2 * (3 + 503))


# ---- a WebSocket echo server on the standard library (RFC 6455, server side) ----

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


def read_frame(s):
    """One client frame: (fin, opcode, payload); client frames must be masked."""
    h = recv_exact(s, 2)
    fin, op, masked, n = h[0] >> 7, h[0] & 15, h[1] >> 7, h[1] & 127
    if n == 126:
        n = struct.unpack("!H", recv_exact(s, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(s, 8))[0]
    if not masked:
        raise ValueError("an unmasked client frame")
    mask = recv_exact(s, 4)
    data = bytearray(recv_exact(s, n))
    for i in range(n):
        data[i] ^= mask[i % 4]
    return fin, op, bytes(data)


def frame(op, payload, fin=True, mask=None):
    n = len(payload)
    b = bytes([(0x80 if fin else 0) | op])
    mbit = 0x80 if mask else 0
    if n < 126:
        b += bytes([mbit | n])
    elif n < 65536:
        b += bytes([mbit | 126]) + struct.pack("!H", n)
    else:
        b += bytes([mbit | 127]) + struct.pack("!Q", n)
    if mask:
        b += mask
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
    return b + payload


def serve_ws(conn):
    conn.settimeout(5)
    head = b""
    while b"\r\n\r\n" not in head:
        head += conn.recv(4096)
    key = None
    for line in head.split(b"\r\n")[1:]:
        if line.lower().startswith(b"sec-websocket-key:"):
            key = line.split(b":", 1)[1].strip()
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    while True:
        fin, op, data = read_frame(conn)
        if op == 8:
            conn.sendall(frame(8, data[:2]))
            return
        if op == 10:
            continue
        if op == 9:
            conn.sendall(frame(10, data))
            continue
        if data == b"ping":
            conn.sendall(frame(9, b"srv-ping"))
            _, op2, d2 = read_frame(conn)
            conn.sendall(frame(1, b"pong-ok" if (op2, d2) == (10, b"srv-ping") else b"pong-bad"))
        elif data == b"frag":
            conn.sendall(frame(1, b"hello", fin=False) + frame(9, b"p2") +
                         frame(0, b" wor", fin=False) + frame(0, b"ld"))
        elif data == b"close1011":
            conn.sendall(frame(8, struct.pack("!H", 1011) + b"bye"))
        elif data == b"masked":
            conn.sendall(frame(1, b"masked!", mask=b"\x01\x02\x03\x04"))
        else:
            conn.sendall(frame(op, data))


class WebSocket(unittest.TestCase):
    def setUp(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.done = False
        self.errors = []
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def accept_loop(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return

            def run(conn=c):
                try:
                    serve_ws(conn)
                except (EOFError, OSError, ValueError) as e:
                    self.errors.append(repr(e))
                finally:
                    conn.close()

            threading.Thread(target=run, daemon=True).start()

    def tearDown(self):
        self.done = True
        self.thread.join(timeout=5)
        self.sock.close()

    def test_codec_against_an_echo_server(self):
        out = run_live("ws", self.port)
        self.assertEqual(out["messages_sent"], 6, out)
        self.assertEqual(out["echoes"], 4, out)  # hello, 70,000 bytes, pong-ok, the fragments
        self.assertEqual(out["pings_answered"], 2, out)
        self.assertEqual(out["close_code"], 1011, out)
        # Connections idle between messages give their wslay context back: two suffice.
        self.assertLessEqual(out["wslay_contexts"], 3, out)


if __name__ == "__main__":
    sqtest.main()
