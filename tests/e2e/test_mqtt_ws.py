#!/usr/bin/env python3
"""MQTT over WebSocket (mqtt+ws://HOST:PORT/mqtt?topic=T) against Debian's mosquitto with a plain
listener and a `protocol websockets` one, started here on free loopback ports, stopped by PID:

  - QoS 0, 1 and 2 publishes over the WebSocket listener: squall's completed count equals what
    mosquitto_sub saw on the plain TCP listener (an independent client, the other transport);
  - the round trip (publish, and the delivery back on the connection's own subscription) with
    a 20 KB payload: mosquitto writes a WebSocket frame of at most 4 KiB, so each delivery spans
    several frames and squall reassembles the packet;
  - --idle: the connections are held with keep-alive PINGREQs answered through the frames;
  - the sink subscribed over WebSocket (--sink mqtt+ws://...) counts every event a QoS 1 load
    published on the TCP listener;
  - a plan's publish and subscribe steps over mqtt+ws:// (examples/mqtt-websocket.yaml's shape);
  - mqtt+wss:// against a TLS websockets listener with a self-signed certificate (--cacert),
    and the verification failure without it;
  - the upgrade refused (a path on the plain MQTT listener: not HTTP) is counted and noted.

Runs in about 10 s; every load is bounded by -n or -d.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import jsonschema

import sqtest
from sqtest import HOST

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "result.schema.json")
with open(SCHEMA_PATH) as _f:
    SCHEMA = json.load(_f)

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQUITTO_SUB = shutil.which("mosquitto_sub")


def stop_proc(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@unittest.skipUnless(os.path.exists(MOSQUITTO) and MOSQUITTO_SUB and shutil.which("openssl"),
                     "needs mosquitto, mosquitto_sub and openssl (scripts/deps.sh)")
class MqttOverWebSocket(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq-mqttws-")
        os.chmod(cls.dir, 0o755)  # mosquitto started as root drops to its own user
        cls.port = sqtest.free_port()
        cls.wsport = sqtest.free_port()
        while cls.wsport == cls.port:
            cls.wsport = sqtest.free_port()
        cls.wssport = sqtest.free_port()
        while cls.wssport in (cls.port, cls.wsport):
            cls.wssport = sqtest.free_port()
        # a self-signed certificate for the TLS WebSocket listener (mqtt+wss://)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-keyout", "k.pem",
                        "-out", "c.pem", "-subj", "/CN=%s" % HOST, "-addext",
                        "subjectAltName=IP:%s" % HOST], cwd=cls.dir, check=True,
                       capture_output=True)
        for f in ("k.pem", "c.pem"):
            os.chmod(os.path.join(cls.dir, f), 0o644)
        conf = os.path.join(cls.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("persistence false\nlog_dest none\nallow_anonymous true\n"
                    "listener %d %s\nlistener %d %s\nprotocol websockets\n"
                    "listener %d %s\nprotocol websockets\ncertfile %s/c.pem\nkeyfile %s/k.pem\n"
                    % (cls.port, HOST, cls.wsport, HOST, cls.wssport, HOST, cls.dir, cls.dir))
        os.chmod(conf, 0o644)
        cls.mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        sqtest.wait_port(cls.port, cls.mq)
        sqtest.wait_port(cls.wsport, cls.mq)
        sqtest.wait_port(cls.wssport, cls.mq)

    @classmethod
    def tearDownClass(cls):
        stop_proc(cls.mq)
        shutil.rmtree(cls.dir, True)

    def url(self, topic):
        return "mqtt+ws://%s:%d/mqtt?topic=%s" % (HOST, self.wsport, topic)

    def squall(self, *args):
        p, doc, _ = sqtest.run_json(*args, timeout=90)
        self.assertIsNotNone(doc, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        return p, doc

    def subscriber(self, topic, qos):
        """mosquitto_sub on the plain TCP listener; returns (proc, lines, thread)."""
        sub = subprocess.Popen([MOSQUITTO_SUB, "-h", HOST, "-p", str(self.port), "-t", topic,
                                "-q", str(qos), "-i", "sq-ws-%s" % topic.replace("/", "-")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(sub.stdout.close)  # cleanups run last first: after the stop below
        self.addCleanup(stop_proc, sub)
        lines = []

        def read():
            for line in sub.stdout:
                lines.append(line)

        t = threading.Thread(target=read, daemon=True)
        t.start()
        time.sleep(0.5)  # subscribed before the first publish (a retry below covers a slow one)
        return sub, lines, t

    def wait_count(self, lines, n):
        for _ in range(100):
            if len(lines) >= n:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # and nothing more comes

    def test_publish_counts_match_an_independent_subscriber(self):
        for qos, n in ((0, 3000), (1, 1000), (2, 500)):
            topic = "sq/ws/q%d" % qos
            sub, lines, t = self.subscriber(topic, qos)
            args = [self.url(topic), "-n", str(n), "-c", "2"]
            if qos:
                args += ["--qos", str(qos), "--window", "8"]
            p, doc = self.squall(*args)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["requests"]["completed"], n, p.stderr)
            self.assertEqual(sum(doc["errors"].values()), 0, doc["errors"])
            self.wait_count(lines, n)
            stop_proc(sub)
            t.join(5)
            self.assertEqual(len(lines), n, "qos %d: mosquitto_sub saw %d" % (qos, len(lines)))
            m = doc["mqtt"]
            self.assertEqual(m["transport"], "websocket")
            self.assertEqual(m["websocket_path"], "/mqtt")
            self.assertEqual(m["connect"]["connacks"], 2)
            if qos:
                self.assertEqual(m["acks"], n)
            else:
                self.assertGreater(m["pings"], 0)  # batches closed by PINGREQ / PINGRESP

    def test_round_trip_reassembles_packets_spanning_frames(self):
        pad = "x" * 20000
        p, doc = self.squall(self.url("sq/ws/rt"), "-n", "20", "--round-trip", "--qos", "1",
                             "--payload", '{"s":"{{$stamp}}","pad":"%s"}' % pad)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 20)
        self.assertEqual(doc["mqtt"]["delivered"], 20)
        self.assertEqual(sum(doc["errors"].values()), 0, doc["errors"])
        self.assertGreater(doc["bytes"]["received"], 20 * 20000)

    def test_idle_keepalive_through_frames(self):
        p, doc = self.squall(self.url("sq/ws/idle"), "--idle", "-c", "20", "-d", "2s",
                             "--keepalive", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        c = doc["mqtt"]["connect"]
        self.assertEqual(c["connacks"], 20)
        self.assertGreaterEqual(c["keepalive"]["pings"], 20)
        self.assertGreaterEqual(c["keepalive"]["pingresps"], 20)
        self.assertEqual(doc["connections"]["opened"], 20)

    def test_sink_over_websocket(self):
        p, doc = self.squall("mqtt://%s:%d/sq/ws/sink" % (HOST, self.port), "--qos", "1",
                             "-n", "2000", "--sink", self.url("sq/ws/sink"))
        self.assertEqual(p.returncode, 0, p.stderr)
        sk = doc["sink"]
        self.assertEqual(sk["sent"], 2000)
        self.assertEqual(sk["delivered"], 2000)
        self.assertEqual(sk["lost"], 0)
        self.assertIn("mqtt+ws://", p.stderr)

    def test_plan_steps_over_websocket(self):
        plan = os.path.join(self.dir, "plan.yaml")
        u = self.url("sq/ws/plan")
        with open(plan, "w") as f:
            f.write("target: http://%s:1\nscenarios:\n  s:\n    executor: shared-iterations\n"
                    "    vus: 4\n    iterations: 100\n    flow:\n"
                    "      - publish: { url: \"%s\", json: { t: \"{{$stamp}}\" }, qos: 1 }\n"
                    "      - subscribe: { url: \"%s\", timeout: 5s }\n" % (HOST, u, u))
        p, doc = self.squall("run", plan)
        self.assertEqual(p.returncode, 0, p.stderr)
        steps = {s["method"]: s for s in doc["steps"]}
        self.assertEqual(steps["PUB"]["requests"], 100, steps)
        self.assertEqual(steps["SUB"]["requests"], 100, steps)
        self.assertEqual(steps["SUB"]["failed"], 0, steps)

    def test_over_tls(self):
        u = "mqtt+wss://%s:%d/mqtt?topic=sq/ws/tls" % (HOST, self.wssport)
        sub, lines, t = self.subscriber("sq/ws/tls", 1)
        p, doc = self.squall(u, "--cacert", os.path.join(self.dir, "c.pem"), "--qos", "1",
                             "-n", "1000")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 1000)
        self.wait_count(lines, 1000)
        stop_proc(sub)
        t.join(5)
        self.assertEqual(len(lines), 1000)
        # the certificate checked: without its CA the handshake fails
        p, doc = self.squall(u, "--qos", "1", "-n", "10", "-d", "2s")
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertIn("certificate verify failed", p.stderr)

    def test_upgrade_refused(self):
        # the plain MQTT listener does not speak HTTP: it closes on the GET
        p, doc = self.squall("mqtt+ws://%s:%d/mqtt?topic=t" % (HOST, self.port), "--idle",
                             "-c", "1", "-d", "1s")
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["mqtt"]["connect"]["connacks"], 0)

    def test_url_errors(self):
        for u, why in (("mqtt+ws://%s:1/mqtt" % HOST, "?topic="),
                       ("mqtt+ws://%s:1/a b?topic=t" % HOST, "WebSocket path")):
            p, _ = sqtest.run_squall(u, "-n", "1", timeout=30)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(why, p.stderr)


if __name__ == "__main__":
    unittest.main()
