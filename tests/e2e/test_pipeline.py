#!/usr/bin/env python3
"""Event pipelines end to end: squall's NATS and MQTT load, the counting sink beside it, and a
pipeline with known loss, duplicates and delay between them.

Real peers, started and stopped here by PID on free loopback ports: Debian's nats-server (with
JetStream on a temporary store and its monitoring port, whose /varz and /jsz counts are the
server's own) and mosquitto (a generated config: one loopback listener, no persistence). The
relay is this file's own: a NATS subscriber that forwards each event as an HTTP POST to the
sink, holding it 20 ms, dropping every 100th and sending every 50th twice, so the sink's lost,
duplicate and latency figures have exact expected values.

Runs in about 35 s (plain build); every load is bounded by -n or -d.
"""

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import textwrap
import threading
import time
import http.client as httpclient
import unittest

import jsonschema

import sqtest
from sqtest import HOST
free_port = sqtest.free_port

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "result.schema.json")
with open(SCHEMA_PATH) as _f:
    SCHEMA = json.load(_f)

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def wait_port(port, proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited (%s) before listening" % proc.returncode)
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %d after %.0fs" % (port, timeout))


def stop_proc(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class NatsClient:
    """A blocking NATS client of the text protocol, enough for the tests' own side."""

    def __init__(self, port):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.buf = b""
        self._line()  # INFO
        self.sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        while self._line() != b"PONG":
            pass

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("NATS closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("NATS closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def next_msg(self):
        """The next MSG's (subject, payload); answers PINGs on the way."""
        while True:
            line = self._line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                parts = line.split()
                return parts[1].decode(), self._take(int(parts[-1]))
            elif line.startswith(b"-ERR"):
                raise RuntimeError(line.decode())

    def subscribe(self, subject, sid):
        self.sock.sendall(b"SUB %s %d\r\nPING\r\n" % (subject.encode(), sid))
        while self._line() != b"PONG":
            pass

    def request(self, subject, payload):
        """Publishes with a reply inbox and returns the reply (the JetStream API)."""
        self.subscribe("_INBOX.sqtest", 99)
        self.sock.sendall(b"PUB %s _INBOX.sqtest %d\r\n%s\r\n" % (subject.encode(), len(payload),
                                                                   payload))
        _, reply = self.next_msg()
        self.sock.sendall(b"UNSUB 99\r\n")
        return json.loads(reply)

    def close(self):
        self.sock.close()


class Relay(threading.Thread):
    """NATS subject -> HTTP POSTs to a sink: the i-th event (from 0) is held `delay` seconds,
    dropped when i % drop_every == drop_every - 1, sent twice when i % dup_every == 0 (0: never)."""

    def __init__(self, nats_port, subject, sink_port, delay=0.02, drop_every=100, dup_every=50):
        super().__init__(daemon=True)
        self.nc = NatsClient(nats_port)
        self.nc.subscribe(subject, 1)
        self.sink_port = sink_port
        self.delay, self.drop_every, self.dup_every = delay, drop_every, dup_every
        self.q = queue.Queue()
        self.received = self.dropped = self.duplicated = self.posted = 0
        self.held = []  # per event posted: seconds from its receipt here to its first POST
        self.dropped_payloads = []
        self.errors = []
        self.sender = threading.Thread(target=self._send, daemon=True)
        self.sender.start()

    def run(self):
        try:
            while True:
                _, payload = self.nc.next_msg()
                i = self.received
                self.received += 1
                if self.drop_every and i % self.drop_every == self.drop_every - 1:
                    self.dropped += 1
                    self.dropped_payloads.append(payload)
                    continue
                copies = 2 if self.dup_every and i % self.dup_every == 0 else 1
                self.duplicated += copies - 1
                now = time.monotonic()
                self.q.put((now + self.delay, payload, copies, now))
        except (OSError, ConnectionError):
            pass  # closed by stop()

    def _send(self):
        conn = httpclient.HTTPConnection(HOST, self.sink_port, timeout=10)
        while True:
            item = self.q.get()
            if item is None:
                return
            due, payload, copies, got = item
            left = due - time.monotonic()
            if left > 0:
                time.sleep(left)
            self.held.append(time.monotonic() - got)
            for _ in range(copies):
                try:
                    conn.request("POST", "/events", body=payload,
                                 headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    if r.status != 202:
                        self.errors.append(r.status)
                    self.posted += 1
                except OSError as e:
                    self.errors.append(repr(e))
                    conn.close()
                    conn = httpclient.HTTPConnection(HOST, self.sink_port, timeout=10)

    def stop(self):
        self.q.put(None)
        self.sender.join(timeout=10)
        self.nc.close()


class Brokers(unittest.TestCase):
    """One nats-server (JetStream, monitoring) and one mosquitto for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq-pipeline-")
        cls.nats_port, cls.nats_mon = free_port(), free_port()
        cls.nats = subprocess.Popen(
            [NATS, "-a", HOST, "-p", str(cls.nats_port), "-m", str(cls.nats_mon), "-js", "-sd",
             os.path.join(cls.dir, "js")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.mq_port = free_port()
        conf = os.path.join(cls.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\npersistence false\nlog_dest none\n"
                    "max_queued_messages 100000\n" % (cls.mq_port, HOST))
        cls.mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_port(cls.nats_port, cls.nats)
            wait_port(cls.nats_mon, cls.nats)
            wait_port(cls.mq_port, cls.mq)
        except Exception:
            cls.tearDownClass()
            raise
        cls.nats_url = "nats://%s:%d" % (HOST, cls.nats_port)
        cls.mqtt_url = "mqtt://%s:%d" % (HOST, cls.mq_port)

    @classmethod
    def tearDownClass(cls):
        stop_proc(cls.nats)
        stop_proc(cls.mq)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def mon(self, path):
        c = httpclient.HTTPConnection(HOST, self.nats_mon, timeout=10)
        c.request("GET", path)
        doc = json.loads(c.getresponse().read())
        c.close()
        return doc

    def squall(self, *args, timeout=60):
        p, doc, _ = sqtest.run_json(*args, timeout=timeout)
        if doc is not None:  # every document, with its nats / mqtt / stamps / sink blocks
            jsonschema.validate(doc, SCHEMA)
        return p, doc


class NatsLoad(Brokers):
    def test_core_publish_counts_equal_the_servers(self):
        before = self.mon("/varz")["in_msgs"]
        p, doc = self.squall(self.nats_url + "/bench.core", "-n", "20000", "--payload", "x" * 64)
        self.assertEqual(p.returncode, 0, p.stderr)
        after = self.mon("/varz")["in_msgs"]
        r = doc["requests"]
        self.assertEqual(r["completed"], 20000)
        self.assertEqual(r["failed"], 0)
        self.assertEqual(after - before, 20000)  # the server's own count, exactly
        self.assertEqual(doc["nats"]["mode"], "publish")
        # the reads whose answers covered every ping out: at least the last one (it answers
        # all that were left), at most one per ping
        self.assertGreaterEqual(doc["nats"]["drained"], 1)
        self.assertLessEqual(doc["nats"]["drained"], doc["nats"]["pings"])

    def test_jetstream_publish_waits_for_each_puback(self):
        nc = NatsClient(self.nats_port)
        try:
            created = nc.request("$JS.API.STREAM.CREATE.SQJS",
                                 b'{"name":"SQJS","subjects":["sqjs.>"],"storage":"memory"}')
            self.assertNotIn("error", created)
            p, doc = self.squall(self.nats_url + "/sqjs.orders", "--jetstream", "-n", "3000",
                                 "--window", "16", "--payload", '{"t":"{{$stamp}}"}')
            self.assertEqual(p.returncode, 0, p.stderr)
            info = nc.request("$JS.API.STREAM.INFO.SQJS", b"")
        finally:
            nc.close()
        self.assertEqual(doc["requests"]["completed"], 3000)
        self.assertEqual(doc["nats"]["acks"], 3000)
        self.assertEqual(info["state"]["messages"], 3000)  # what the stream holds
        self.assertGreater(doc["latency"]["p50_us"], 0)
        # a subject no stream takes: every publish fails as no_responders, the run goes on
        p, doc = self.squall(self.nats_url + "/nostream.x", "--jetstream", "-n", "50")
        self.assertEqual(p.returncode, 1, p.stderr)  # nothing succeeded
        self.assertEqual(doc["errors"]["no_responders"], 50)

    def test_request_reply_counts_replies(self):
        """--request: each message completes on its reply, and the summary and the document
        call them replies (not acks; the `acks` key stays, as docs/json-schema.md says)."""
        nc = NatsClient(self.nats_port)
        nc.subscribe("sqsvc.echo", 7)
        stop = threading.Event()

        def respond():  # the test's own responder: echoes each request to its reply inbox
            try:
                while not stop.is_set():
                    line = nc._line()
                    if line == b"PING":
                        nc.sock.sendall(b"PONG\r\n")
                    elif line.startswith(b"MSG "):
                        parts = line.split()
                        data = nc._take(int(parts[-1]))
                        if len(parts) == 5:
                            nc.sock.sendall(b"PUB %s %d\r\n%s\r\n" % (parts[3], len(data), data))
            except OSError:
                pass  # closed at the end

        t = threading.Thread(target=respond, daemon=True)
        t.start()
        try:
            p, doc = self.squall(self.nats_url + "/sqsvc.echo", "--request", "-n", "500")
        finally:
            stop.set()
            nc.close()
            t.join(timeout=5)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["nats"]["mode"], "request")
        self.assertEqual(doc["requests"]["completed"], 500)
        self.assertEqual((doc["nats"]["replies"], doc["nats"]["acks"]), (500, 500))
        line = [x for x in p.stderr.splitlines() if x.startswith("NATS ")]
        self.assertEqual(len(line), 1, p.stderr)
        self.assertIn(" · 500 replies", line[0])
        self.assertNotIn("acks", line[0])

    def test_quick_sink_counts_what_the_load_stamped(self):
        p, doc = self.squall(self.nats_url + "/sq.orders", "-r", "1000", "-d", "2s", "--payload",
                             '{"id":1,"t":"{{$stamp}}"}', "--sink", self.nats_url + "/sq.orders",
                             "--sink-stamp", "json:$.t", "--sink-settle", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["sink"]
        self.assertEqual(doc["requests"]["arrivals"], 2000)
        # every publish written carried a stamp; the last few may still wait for their PONG at
        # the end: those are unfinished (not sent, never lost), and were written all the same
        self.assertEqual(s["stamped"], doc["requests"]["sent"])
        self.assertEqual(s["sent"], doc["requests"]["completed"])
        self.assertEqual(s["sent"] + s["unfinished"], s["stamped"])
        self.assertEqual(s["delivered"], s["stamped"])
        self.assertEqual(s["unfinished_delivered"], s["unfinished"])
        self.assertEqual((s["lost"], s["duplicates"], s["unstamped"]), (0, 0, 0))
        self.assertEqual(s["latency"]["count"], s["delivered"])
        self.assertEqual(doc["stamps"]["stamped"], s["stamped"])
        # the summary's first line answers "did anything get lost?"
        first = p.stderr.lstrip().splitlines()[0]
        self.assertRegex(first, r"^sent [0-9,]+ · delivered 2,000 · lost 0( · unfinished \d+)? · "
                                r"e2e p50 ")


    def test_a_signal_during_the_sinks_settle_is_a_signal_stop(self):
        """The load ends in milliseconds; its events go where the sink does not listen, so the
        sink would wait its whole 60 s settle. SIGINT during that wait: exit 105 at once, the
        missing events lost, the document says so."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = subprocess.Popen(
                [sqtest.squall_path(), self.nats_url + "/sq.settle.a", "-n", "20", "-c", "1",
                 "--payload", '{"t":"{{$stamp}}"}', "--sink", self.nats_url + "/sq.settle.b",
                 "--sink-settle", "60s", "--json", out],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                time.sleep(2)
                self.assertIsNone(p.poll(), "the sink's settle did not wait")
                t0 = time.monotonic()
                p.send_signal(signal.SIGINT)
                err = p.communicate(timeout=30)[1]
                took = time.monotonic() - t0
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            self.assertEqual(p.returncode, 105, err)
            self.assertLess(took, 10)
            with open(out) as f:
                doc = json.load(f)
        jsonschema.validate(doc, SCHEMA)
        self.assertEqual(doc["signal"]["name"], "SIGINT")
        s = doc["sink"]
        self.assertIs(s["settle_stopped"], True)
        self.assertEqual((s["sent"], s["delivered"], s["lost"]), (20, 0, 20))


class MqttLoad(Brokers):
    def test_qos1_publish_delivered_to_the_sink(self):
        p, doc = self.squall(self.mqtt_url + "/sq/orders", "--qos", "1", "-n", "1000",
                             "--window", "32", "--payload", '{"t":"{{$stamp}}"}', "--sink",
                             self.mqtt_url + "/sq/#", "--sink-settle", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 1000)
        self.assertEqual(doc["mqtt"]["acks"], 1000)  # a PUBACK for each
        s = doc["sink"]
        self.assertEqual((s["sent"], s["delivered"], s["lost"]), (1000, 1000, 0))

    def test_qos2_publishes_in_flight_at_the_deadline_are_unfinished_not_lost(self):
        # QoS 2, 8 in flight on each of 2 connections, at a rate past what they carry: the
        # window is full at the deadline, so publishes are still out (no PUBCOMP yet) when the
        # load stops. Those were never sent in full: the sink counts them `unfinished`, never
        # lost, and its `sent` is the publishes that completed. (Each connection stays within
        # mosquitto's max_inflight_messages, 20: past it, mosquitto 2.0 completes the QoS 2
        # exchange of a 3.1.1 client's publish and delivers nothing, a real loss.)
        if not shutil.which("mosquitto_sub"):
            self.skipTest("mosquitto_sub (mosquitto-clients) is not installed")
        sub = subprocess.Popen(["stdbuf", "-oL", "mosquitto_sub", "-h", HOST, "-p",
                                str(self.mq_port), "-t", "sq/unf/#", "-q", "1", "-d"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines, subacked = [], threading.Event()

        def read():
            for line in sub.stdout:
                lines.append(line)
                if "SUBACK" in line:
                    subacked.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            self.assertTrue(subacked.wait(10), "mosquitto_sub never subscribed: %r" % lines)
            p, doc = self.squall(self.mqtt_url + "/sq/unf/o", "--qos", "2", "--window", "8",
                                 "-c", "2", "-r", "100000", "-d", "1s", "--payload",
                                 '{"t":"{{$stamp}}"}', "--sink", self.mqtt_url + "/sq/unf/#",
                                 "--sink-settle", "2s")
            self.assertEqual(p.returncode, 0, p.stderr)
            r, s = doc["requests"], doc["sink"]
            # the sink's figures against the load's own
            self.assertEqual(s["stamped"], r["sent"])
            self.assertEqual(s["sent"], r["completed"])
            self.assertEqual(s["sent"] + s["unfinished"], s["stamped"])
            self.assertEqual(s["unfinished"], r["in_flight"] + r["failed"])
            self.assertGreater(s["unfinished"], 0, "no publish was in flight at the deadline")
            # nothing the broker completed went missing, and what arrived adds up
            self.assertEqual(s["lost"], 0, s["lost_seqs"])
            self.assertEqual(s["delivered"], s["sent"] - s["lost"] + s["unfinished_delivered"])
            self.assertLessEqual(s["unfinished_delivered"], s["unfinished"])
            self.assertEqual(sum(x["unfinished"] for x in s["streams"]), s["unfinished"])
            self.assertIn("unfinished %d" % s["unfinished"], p.stderr)
            # an independent count: mosquitto_sub's distinct stamps (it subscribed first). It
            # sees what the sink saw, and perhaps an unfinished publish the broker passed on
            # after the sink stopped (its settle ends once every sent one is in), no more.
            stamp = re.compile(r"sq1\.[0-9a-z]+\.[0-9a-z]+\.[0-9a-z]+")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                seen = {m.group(0) for line in list(lines) for m in stamp.finditer(line)}
                if len(seen) >= s["delivered"]:
                    break
                time.sleep(0.1)
            late = s["unfinished"] - s["unfinished_delivered"]
            self.assertGreaterEqual(len(seen), s["delivered"])
            self.assertLessEqual(len(seen), s["delivered"] + late)
        finally:
            stop_proc(sub)
            reader.join(timeout=10)
            sub.stdout.close()

    def test_round_trip_times_publish_to_delivery(self):
        p, doc = self.squall(self.mqtt_url + "/sq/rt", "--qos", "1", "--round-trip", "-n", "2000",
                             "--window", "16")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 2000)
        self.assertEqual(doc["mqtt"]["delivered"], 2000)
        # two connections on the topic: each also receives the other's messages (the broker
        # fans out), counted as others_delivered (`foreign`, its older name, the same figure)
        p, doc = self.squall(self.mqtt_url + "/sq/rt2", "--qos", "1", "--round-trip", "-n", "2000",
                             "-c", "2", "--window", "16")
        self.assertEqual(p.returncode, 0, p.stderr)
        m = doc["mqtt"]
        self.assertEqual(m["delivered"], 2000)
        self.assertGreater(m["others_delivered"], 0, m)
        self.assertLessEqual(m["others_delivered"], 2000, m)
        self.assertEqual(m["foreign"], m["others_delivered"])
        line = [x for x in p.stderr.splitlines() if x.startswith("MQTT ")]
        self.assertEqual(len(line), 1, p.stderr)
        self.assertRegex(line[0], r" · [\d,]+ delivered of other connections' or publishers' "
                                  r"messages")
        self.assertNotIn("foreign", line[0])


class SinkSources(Brokers):
    def test_jetstream_durable_consumer_counts_what_the_stream_took(self):
        nc = NatsClient(self.nats_port)
        try:
            created = nc.request("$JS.API.STREAM.CREATE.SQSINK",
                                 b'{"name":"SQSINK","subjects":["sqsink.>"],"storage":"memory"}')
            self.assertNotIn("error", created)
        finally:
            nc.close()
        sink = subprocess.Popen(
            [sqtest.squall_path(), "sink", "--nats", self.nats_url + "/sqsink.orders", "--stream",
             "SQSINK", "--durable", "sqtest", "--count", "1500", "-d", "20s", "--json", "-", "-q"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # the consumer exists once the sink is subscribed: wait for it on the JetStream API
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                nc = NatsClient(self.nats_port)
                info = nc.request("$JS.API.CONSUMER.INFO.SQSINK.sqtest", b"")
                nc.close()
                if "error" not in info:
                    break
                time.sleep(0.1)
            self.assertNotIn("error", info)
            p, doc = self.squall(self.nats_url + "/sqsink.orders", "--jetstream", "-n", "1500",
                                 "--window", "16")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["nats"]["acks"], 1500)
            out, err = sink.communicate(timeout=30)
        finally:
            stop_proc(sink)
        self.assertEqual(sink.returncode, 0, err)
        s = json.loads(out)["sink"]
        self.assertEqual((s["delivered"], s["duplicates"], s["unstamped"]), (1500, 0, 0))
        self.assertIsNone(s["sent"])  # the sink alone does not know what was sent
        self.assertEqual(s["lost"], 0)  # no gap below the highest sequence number seen
        self.assertEqual(s["sources"][0]["messages"], 1500)


class BrokerRestart(unittest.TestCase):
    """mosquitto stopped mid-run and started again on the same port: messages out on the lost
    connection fail as `closed`, refused reconnects count as `connect`, the run goes on, the
    reconnect is counted, and the run still exits 0."""

    def test_mqtt_broker_restarted_mid_run(self):
        d = tempfile.mkdtemp(prefix="sq-pipeline-restart-")
        port = free_port()
        conf = os.path.join(d, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\npersistence false\nlog_dest none\n"
                    % (port, HOST))
        mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        run = None
        try:
            wait_port(port, mq)
            run = subprocess.Popen(
                [sqtest.squall_path(), "mqtt://%s:%d/sq/restart" % (HOST, port), "--qos", "1",
                 "-r", "500", "-d", "3s", "--window", "8", "--json", "-", "-q"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(1.0)
            stop_proc(mq)
            time.sleep(0.4)
            mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            wait_port(port, mq)
            out, err = run.communicate(timeout=30)
        finally:
            if run:
                stop_proc(run)
            stop_proc(mq)
            shutil.rmtree(d, ignore_errors=True)
        self.assertEqual(run.returncode, 0, err)
        doc = json.loads(out)
        r = doc["requests"]
        self.assertEqual(r["arrivals"], 1500)
        self.assertEqual(r["arrivals"], r["sent"] + r["dropped"])
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertGreaterEqual(doc["mqtt"]["reconnects"], 1)
        self.assertGreater(doc["errors"]["connect"] + doc["errors"]["closed"], 0)
        self.assertGreater(r["completed"], 500)  # before the stop, and after the restart
        self.assertEqual(doc["connections"]["opened"], 1 + doc["mqtt"]["reconnects"])
        jsonschema.validate(doc, SCHEMA)


class BadInput(Brokers):
    def test_bad_urls_and_options_exit_2(self):
        cases = [
            ([self.nats_url + "/"], "no subject"),
            ([self.mqtt_url + "/a/+"], "without '+' or '#'"),
            ([self.mqtt_url + "/a", "--qos", "3"], "--qos"),
            ([self.nats_url + "/a", "--qos", "1"], "--qos"),
            ([self.nats_url + "/a", "-b", "x"], "-b"),
            (["http://127.0.0.1:1/", "--payload", "x"], "--payload"),
            (["http://127.0.0.1:1/", "--sink", "http://127.0.0.1:9"], "stamps no event"),
            (["http://127.0.0.1:1/", "-b", "{{$stamp}}", "--http2"], "not with --http2"),
            (["http://127.0.0.1:1/", "-b", "{{$nosuch}}"], "-b"),
            ([self.nats_url + "/a", "--sink", "ftp://x"], "--sink"),
            ([self.nats_url + "/a", "--sink-stamp", "json:t"], "--sink-stamp"),
            ([self.nats_url + "/a", "--sink", self.nats_url + "/a", "--sink-stamp", "xml:t"],
             "--sink"),
        ]
        for args, word in cases:
            p, _ = sqtest.run_squall(*args, "-d", "1s")
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(word, p.stderr, args)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_no_broker_is_counted_not_a_crash(self):
        port = free_port()  # nothing listens there
        p, doc = self.squall("nats://127.0.0.1:%d/a" % port, "-d", "1s", "--payload", "x")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertGreater(doc["errors"]["connect"], 0)


class Pipeline(Brokers):
    """squall -> NATS -> relay (20 ms, drops every 100th, doubles every 50th) -> squall's HTTP
    sink, in one squall process."""

    def run_through_relay(self, subject, **relay_args):
        sink_port = free_port()
        relay = Relay(self.nats_port, subject, sink_port, **relay_args)
        try:
            # the relay starts posting once the sink listens (started by the run below)
            relay.start()
            # settle 3 s: this Python relay falls behind on a busy machine, and an event it
            # posts later than the settle counts as lost (docs/sink.md)
            p, doc = self.squall(self.nats_url + "/" + subject, "-r", "200", "-d", "3s",
                                 "--payload", '{"order":7,"stamp":"{{$stamp}}"}', "--sink",
                                 "http://127.0.0.1:%d" % sink_port, "--sink-stamp",
                                 "json:$.stamp", "--sink-settle", "3s")
        finally:
            relay.stop()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(relay.errors, [])
        return relay, p, doc

    def test_known_loss_and_duplicates(self):
        relay, p, doc = self.run_through_relay("pipe.loss")
        r, s = doc["requests"], doc["sink"]
        # 600 arrivals, each published or counted dropped; a publish completes when the PONG
        # behind its batch is back, which a busy machine may leave in flight at the end, but
        # it was written: the relay reads it. So the relay's share is what was sent (600 on a
        # quiet machine), and what follows is exact for that count.
        self.assertEqual(r["arrivals"], 600)
        self.assertEqual(r["sent"] + r["dropped"], 600, r)
        self.assertEqual(r["failed"], 0, r)
        self.assertEqual(r["completed"] + r["in_flight"], r["sent"], r)
        n = r["sent"]
        self.assertGreater(n, 500, r)  # 200/s: a small load
        self.assertEqual(relay.received, n)
        dropped = [i for i in range(n) if i % 100 == 99]
        dups = [i for i in range(n) if i % 50 == 0 and i % 100 != 99]
        # The publishes still waiting for their PONG at the end (the last batch: the highest
        # sequence numbers) are unfinished, never lost; the sink's sent is the completed ones.
        self.assertEqual((s["stamped"], s["sent"]), (n, r["completed"]))
        self.assertEqual(s["sent"] + s["unfinished"], n)
        # exactly 1% lost, and the lost ones are the ones the relay dropped: seq 99, 199, ...
        # (but for one the relay dropped among the unfinished at the very end: not lost)
        lost = [e["seq"] for e in s["lost_seqs"]]
        self.assertEqual(s["lost"], len(lost))
        self.assertEqual(relay.dropped, len(dropped))
        self.assertEqual(lost, [i for i in dropped if i in set(lost)])
        spared = [i for i in dropped if i not in set(lost)]
        self.assertLessEqual(len(spared), s["unfinished"] - s["unfinished_delivered"], spared)
        self.assertTrue(all(i >= n - 10 for i in spared), spared)  # at most the last batch
        # the relay's second copies are duplicates, never delivered twice
        self.assertEqual(s["duplicates"], len(dups))
        self.assertEqual(relay.duplicated, len(dups))
        self.assertEqual(s["delivered"], n - len(dropped))
        self.assertEqual(s["delivered"], s["sent"] - s["lost"] + s["unfinished_delivered"])
        self.assertEqual(s["out_of_order"], 0)
        self.assertEqual(s["sources"][0]["requests"], n - len(dropped) + len(dups))
        lat = s["latency"]
        self.assertEqual(lat["count"], n - len(dropped))
        self.assertGreaterEqual(lat["min_us"], 20000)  # the relay held each one 20 ms
        self.assertIn("lost %d" % len(lost), p.stderr.lstrip().splitlines()[0])

    def test_latency_truth(self):
        # the relay holds every event 20 ms and drops none: the sink's latency is what the
        # relay held each event (20 ms, and later when a busy machine wakes the relay late: it
        # times that itself) plus the two hops, load to NATS to relay and relay to sink, a few
        # hundred µs on a quiet machine. So the sink's p50 is at least 20 ms and at most the
        # relay's own p50 plus 10 ms for the hops: a stamp read against a wrong clock, or a
        # latency in the wrong unit, misses it.
        relay, _, doc = self.run_through_relay("pipe.delay", drop_every=0, dup_every=0)
        s = doc["sink"]
        # (the publishes whose PONG was still out at the end are unfinished, not sent)
        self.assertEqual(s["sent"] + s["unfinished"], 600)
        self.assertEqual((s["stamped"], s["delivered"], s["lost"], s["duplicates"]),
                         (600, 600, 0, 0))
        lat = s["latency"]
        self.assertGreaterEqual(lat["min_us"], 20000)
        self.assertGreaterEqual(lat["p50_us"], 20000)
        held_p50_us = sorted(relay.held)[len(relay.held) // 2] * 1e6
        self.assertEqual(len(relay.held), 600)
        self.assertLessEqual(lat["p50_us"], held_p50_us + 10000, (lat, held_p50_us))


class PlanSteps(Brokers):
    def test_publish_then_subscribe_with_a_sink_section(self):
        d = tempfile.mkdtemp(prefix="sq-pipeline-plan-")
        try:
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""\
                    target: http://127.0.0.1:1
                    sink:
                      nats: %s/plan.events
                      stamp: json:$.t
                      settle: 1s
                    scenarios:
                      events:
                        executor: per-vu-iterations
                        vus: 4
                        iterations: 50
                        flow:
                          - publish:
                              url: %s/plan.events
                              json: { t: "{{$stamp}}", kind: order }
                          - subscribe:
                              url: %s/plan.events
                              timeout: 5s
                    """ % (self.nats_url, self.nats_url, self.nats_url)))
            p, doc = self.squall("run", path)
            pv, _ = sqtest.run_squall("validate", path)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(pv.returncode, 0, pv.stderr)
        self.assertIn("sink nats %s/plan.events" % self.nats_url, pv.stdout)
        # the steps' own counts (the requests block counts HTTP requests: none here)
        steps = {st["method"]: st for st in doc["steps"]}
        self.assertEqual((steps["PUB"]["requests"], steps["PUB"]["failed"]), (200, 0))
        self.assertEqual((steps["SUB"]["requests"], steps["SUB"]["failed"]), (200, 0))
        self.assertEqual(doc["scenarios"][0]["iterations"], 200)
        s = doc["sink"]
        self.assertEqual((s["sent"], s["delivered"], s["lost"], s["duplicates"]), (200, 200, 0, 0))

    def test_a_bad_sink_section_names_its_place(self):
        d = tempfile.mkdtemp(prefix="sq-pipeline-plan-")
        try:
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write("target: http://127.0.0.1:1\nsink:\n  nats: %s/\nscenarios:\n"
                        "  s:\n    executor: per-vu-iterations\n    flow:\n"
                        "      - publish: { url: %s/x }\n" % (self.nats_url, self.nats_url))
            for cmd in ("run", "validate"):
                p, _ = sqtest.run_squall(cmd, path)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("plan.yaml:3:3: sink: nats: ", p.stderr)
                self.assertIn("no subject", p.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


class StampedHttpAndWs(sqtest.TargetCase):
    """{{$stamp}} in the quick face's HTTP body and in WebSocket messages (the quick face's
    --message and a plan's ws: send), against squall target's POST /webhook and /ws (whose own
    counts say what arrived), and the HTTP load beside its sink."""

    def squall(self, *args, timeout=60):
        p, doc, _ = sqtest.run_json(*args, timeout=timeout)
        if doc is not None:
            jsonschema.validate(doc, SCHEMA)
        return p, doc

    def test_http_body_is_a_template_the_target_counts(self):
        self.reset()
        p, doc = self.squall(self.base + "/webhook", "-m", "POST", "-n", "600", "-c", "4",
                             "-t", "2", "-b", '{"stamp":"{{$stamp}}","vu":{{$vu}}}')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual((doc["requests"]["completed"], doc["status"]["2xx"]), (600, 600))
        self.assertEqual(doc["stamps"]["stamped"], 600)
        wh = self.stats()["webhook"]
        self.assertEqual((wh["events"], wh["stamped"]), (600, 600))
        # a body with no dynamic part is sent as written (the static request, no stamps block)
        self.reset()
        p, doc = self.squall(self.base + "/webhook", "-m", "POST", "-n", "50", "-b",
                             '{"stamp":"sq1.1.1.1"}')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("stamps", doc)
        wh = self.stats()["webhook"]
        self.assertEqual((wh["events"], wh["stamped"]), (50, 50))

    def test_http_load_beside_its_sink_delivered_equals_sent(self):
        # the load posts to the sink's own listener: every stamped request is one event
        port = free_port()
        p, doc = self.squall("http://127.0.0.1:%d/webhook" % port, "-m", "POST", "-n", "3000",
                             "-c", "8", "-t", "2", "-b", '{"id":1,"stamp":"{{$stamp}}"}',
                             "--sink", "http://127.0.0.1:%d" % port, "--sink-stamp",
                             "json:$.stamp", "--sink-settle", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["sink"]
        self.assertEqual(doc["requests"]["completed"], 3000)
        self.assertEqual((s["sent"], s["delivered"], s["lost"], s["duplicates"], s["unstamped"]),
                         (3000, 3000, 0, 0, 0))
        self.assertEqual(s["latency"]["count"], 3000)
        self.assertIn("sent 3,000 · delivered 3,000 · lost 0", p.stderr.lstrip().splitlines()[0])

    def test_ws_message_stamps(self):
        # the quick face: each message is one event with its own stamp
        p, doc = self.squall(self.base.replace("http", "ws", 1) + "/ws", "-n", "40", "-c", "2",
                             "--message", '{"t":"{{$stamp}}"}')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 40)
        self.assertEqual(doc["stamps"]["stamped"], 40)
        # a plan's ws: send: the echoed message carries the stamp, extracted and posted on to
        # /webhook, where the target finds it
        self.reset()
        d = tempfile.mkdtemp(prefix="sq-pipeline-ws-")
        try:
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write(textwrap.dedent("""\
                    target: %s
                    scenarios:
                      s:
                        executor: shared-iterations
                        vus: 2
                        iterations: 20
                        flow:
                          - ws: { connect: /ws }
                          - name: say
                            ws: { send: '{"t":"{{$stamp}}"}', reply: true, timeout: 2s }
                            check: { body_contains: '"t":"sq1.' }
                            extract: { t: { json: $.t } }
                          - ws: { close: 1000 }
                          - request: { method: POST, url: /webhook, body: '{"echo":"{{t}}"}' }
                    """ % self.base))
            p, doc = self.squall("run", path)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["stamps"]["stamped"], 20)
        checks = {c["step"]: c for c in doc["checks"]}
        self.assertEqual((checks["say"]["passed"], checks["say"]["failed"]), (20, 0))
        wh = self.stats()["webhook"]
        self.assertEqual((wh["events"], wh["stamped"]), (20, 20))


if __name__ == "__main__":
    sqtest.main()
