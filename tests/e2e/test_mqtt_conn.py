#!/usr/bin/env python3
"""MQTT --idle (connect and hold, emqtt-bench's `conn`) against Debian's mosquitto, started
here on a free loopback port and stopped by PID:

  - 200 connections at --connect-rate 400 held for 3 s with a 1 s keep-alive: mosquitto's own
    $SYS/broker/clients/connected (read by mosquitto_sub) sees them all connected during the
    run; squall's mqtt.connect counts 200 CONNACKs, no refusal, keep-alive PINGREQs answered;
    nothing is published. --watch on the broker puts its RSS and descriptors (one a connection)
    in the result (a bus run watches as an HTTP one does).
  - a broker that refuses anonymous clients (allow_anonymous false): the CONNACK refusals are
    counted by reason (not_authorized: 3.1.1's return code 5, 5.0's 0x87) and the run exits 1 with the broker's word.

Runs in about 10 s; every load is bounded by -c and -d.
"""

import json
import os
import shutil
import subprocess
import tempfile
import threading
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


@unittest.skipUnless(os.path.exists(MOSQUITTO) and MOSQUITTO_SUB,
                     "needs mosquitto and mosquitto_sub (scripts/deps.sh)")
class IdleConnections(unittest.TestCase):

    def broker(self, extra):
        d = tempfile.mkdtemp(prefix="sq-mqttconn-")
        self.addCleanup(shutil.rmtree, d, True)
        os.chmod(d, 0o755)  # mosquitto started as root drops to its own user
        port = sqtest.free_port()
        conf = os.path.join(d, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\npersistence false\nlog_dest none\nmax_connections -1\n%s"
                    % (port, HOST, extra))
        os.chmod(conf, 0o644)
        mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        self.addCleanup(stop_proc, mq)
        sqtest.wait_port(port, mq)
        return port, mq

    def squall(self, *args):
        p, doc, _ = sqtest.run_json(*args, timeout=60)
        self.assertIsNotNone(doc, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        return p, doc

    def test_idle_connections_held_and_kept_alive(self):
        port, mq = self.broker("allow_anonymous true\nsys_interval 1\n")
        # the broker's own count of connected clients, every second
        sub = subprocess.Popen([MOSQUITTO_SUB, "-h", HOST, "-p", str(port), "-t",
                                "$SYS/broker/clients/connected"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(stop_proc, sub)
        seen = []

        def read():
            for line in sub.stdout:
                if line.strip().isdigit():
                    seen.append(int(line))

        t = threading.Thread(target=read, daemon=True)
        t.start()
        p, doc = self.squall("mqtt://%s:%d/sq/idle" % (HOST, port), "--idle", "-c", "200",
                             "--connect-rate", "400", "-d", "3s", "--keepalive", "1s",
                             "--watch", str(mq.pid))
        stop_proc(sub)
        t.join(5)
        sub.stdout.close()
        self.assertEqual(p.returncode, 0, p.stderr)
        m = doc["mqtt"]
        self.assertTrue(m["idle"])
        self.assertEqual(m["transport"], "tcp")
        self.assertNotIn("websocket_path", m)
        c = m["connect"]
        self.assertEqual(c["connacks"], 200)
        self.assertEqual(c["refused"], 0)
        self.assertGreater(c["max_us"], 0)
        self.assertLessEqual(c["p50_us"], c["max_us"])
        # a PINGREQ once half the keep-alive passed without a write: several per connection in
        # 3 s; answered, but for those still out at the end
        ka = c["keepalive"]
        self.assertGreaterEqual(ka["pings"], 200)
        self.assertGreaterEqual(ka["pingresps"], 200)
        self.assertLessEqual(ka["pingresps"], ka["pings"])
        self.assertEqual(m["pings"], 0)  # no batch to close: every PINGREQ is a keep-alive
        self.assertEqual(ka["unanswered"], ka["pings"] - ka["pingresps"])
        self.assertEqual(doc["requests"]["sent"], 0)  # nothing published
        self.assertEqual(doc["connections"]["opened"], 200)
        self.assertEqual(sum(doc["errors"].values()), 0)
        # mosquitto saw them: 200, and mosquitto_sub itself
        self.assertTrue(seen, "no $SYS/broker/clients/connected message")
        self.assertGreaterEqual(max(seen), 200, seen)
        self.assertIn("200 CONNACKs", p.stderr)
        # --watch on a bus run: the broker's side (its descriptors: one a connection)
        self.assertGreaterEqual(doc["server"]["fds_max"], 200)
        self.assertGreater(doc["server"]["rss_peak_bytes"], 0)

    def test_refused_connect_counted_by_reason(self):
        port, _ = self.broker("allow_anonymous false\n")
        p, doc = self.squall("mqtt://%s:%d/sq/idle" % (HOST, port), "--idle", "-c", "2",
                             "-d", "1s")
        self.assertEqual(p.returncode, 1, p.stderr)
        c = doc["mqtt"]["connect"]
        self.assertEqual(c["connacks"], 0)
        self.assertGreaterEqual(c["refused"], 2)
        self.assertEqual(c["refused_by"]["not_authorized"], c["refused"])
        self.assertIn("reason 0x05", doc["mqtt"]["first_error"])
        self.assertIn("no request succeeded: mqtt: CONNACK refused", p.stderr)
        self.assertIn("not_authorized", p.stderr)
        # MQTT 5: reason code 0x87, counted as the same reason
        p, doc = self.squall("mqtt://%s:%d/sq/idle" % (HOST, port), "--idle", "-c", "2",
                             "-d", "1s", "--mqtt-version", "5")
        self.assertEqual(p.returncode, 1, p.stderr)
        c = doc["mqtt"]["connect"]
        self.assertGreaterEqual(c["refused_by"]["not_authorized"], 2)
        self.assertEqual(c["refused_by"]["not_authorized"], c["refused"])
        self.assertIn("reason 0x87", doc["mqtt"]["first_error"])

    def test_idle_refuses_publish_flags(self):
        for extra in (["--qos", "1"], ["--round-trip"], ["-r", "10"], ["-n", "5"]):
            p, _ = sqtest.run_squall("mqtt://%s:1/t" % HOST, "--idle", *extra, timeout=30)
            self.assertEqual(p.returncode, 2, (extra, p.stderr))
            self.assertIn("--idle", p.stderr)
        p, _ = sqtest.run_squall("nats://%s:1/t" % HOST, "--idle", timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--idle is for mqtt://", p.stderr)


if __name__ == "__main__":
    unittest.main()
