#!/usr/bin/env python3
"""The subscriber side as a load (`--subscribers N`): N subscriber connections beside squall's
own publishers, or alone (`--subscribe-only`) against a publisher written here.

Real peers, started and stopped here by PID on free loopback ports: Debian's nats-server with
its monitoring port (whose /varz in_msgs and out_msgs are the server's own count of what came in
and what it delivered) and mosquitto (a generated config: one loopback listener, no persistence,
a queue deep enough that QoS 1 fan-out drops nothing). Every load is bounded by -n or -d; no
assertion depends on timing.
"""

import http.client as httpclient
import json
import os
import shutil
import socket
import subprocess
import tempfile
import textwrap
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

NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def nats_publish(port, subject, n):
    """An independent publisher: n PUBs of a stamp-free payload, then PING / PONG (the server
    has read them all)."""
    with socket.create_connection((HOST, port), timeout=10) as s:
        f = s.makefile("rb")
        f.readline()  # INFO
        s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        s.sendall(b"".join(b"PUB %s %d\r\n%s\r\n" % (subject.encode(), len(p), p)
                           for p in (b"ext-%d" % i for i in range(n))) + b"PING\r\n")
        while True:
            line = f.readline()
            if not line:
                raise ConnectionError("NATS closed the connection")
            if line.strip() == b"PONG":
                return


def js_request(port, subject, body):
    """One JetStream API request; returns the answer (raises on an error in it)."""
    payload = json.dumps(body).encode()
    with socket.create_connection((HOST, port), timeout=10) as s:
        f = s.makefile("rb")
        f.readline()  # INFO
        s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB _INBOX.sqt 1\r\n'
                  b"PUB %s _INBOX.sqt %d\r\n%s\r\n" % (subject.encode(), len(payload), payload))
        while True:
            line = f.readline()
            if not line:
                raise ConnectionError("NATS closed the connection")
            if line.startswith(b"MSG "):
                doc = json.loads(f.read(int(line.split()[-1]) + 2))
                if "error" in doc:
                    raise RuntimeError(doc["error"])
                return doc


class Subscribers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq-subs-")
        cls.nats_port, cls.nats_mon = sqtest.free_port(), sqtest.free_port()
        cls.nats = subprocess.Popen(
            [NATS, "-a", HOST, "-p", str(cls.nats_port), "-m", str(cls.nats_mon), "-js", "-sd",
             os.path.join(cls.dir, "js")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cls.mq_port = sqtest.free_port()
        conf = os.path.join(cls.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\npersistence false\nlog_dest none\n"
                    "max_queued_messages 100000\nmax_inflight_messages 0\n" % (cls.mq_port, HOST))
        cls.mq = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            sqtest.wait_port(cls.nats_port, cls.nats)
            sqtest.wait_port(cls.nats_mon, cls.nats)
            sqtest.wait_port(cls.mq_port, cls.mq)
        except Exception:
            cls.tearDownClass()
            raise
        cls.nats_url = "nats://%s:%d" % (HOST, cls.nats_port)
        try:
            js_request(cls.nats_port, "$JS.API.STREAM.CREATE.SUBS",
                       {"name": "SUBS", "subjects": ["subs.js.>"], "storage": "memory"})
        except Exception:
            cls.tearDownClass()
            raise
        cls.mqtt_url = "mqtt://%s:%d" % (HOST, cls.mq_port)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop_proc(cls.nats)
        sqtest.stop_proc(cls.mq)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def mon(self, path):
        c = httpclient.HTTPConnection(HOST, self.nats_mon, timeout=10)
        c.request("GET", path)
        doc = json.loads(c.getresponse().read())
        c.close()
        return doc

    def squall(self, *args):
        p, doc, _ = sqtest.run_json(*args, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        return p, doc

    def check_fan_out(self, s, n, published):
        self.assertEqual(s["mode"], "fan_out")
        self.assertEqual(s["count"], n)
        self.assertEqual(s["subscribed"], n)
        self.assertEqual(s["published"], published)
        self.assertEqual([x["messages"] for x in s["per_subscriber"]], [published] * n)
        self.assertEqual([x["lag"] for x in s["per_subscriber"]], [0] * n)
        self.assertEqual(s["received"], n * published)
        self.assertEqual((s["expected"], s["lag"]), (n * published, 0))
        self.assertEqual((s["spread"]["min"], s["spread"]["max"]), (published, published))
        self.assertEqual(s["spread"]["stddev"], 0)
        # every message carried the load's stamp: each one is timed
        self.assertEqual(s["latency"]["count"], n * published)
        self.assertEqual(s["unstamped"], 0)

    def test_nats_fan_out(self):
        before = self.mon("/varz")
        p, doc = self.squall(self.nats_url + "/subs.fan", "-c", "2", "-t", "2", "-n", "2000",
                             "--subscribers", "4")
        after = self.mon("/varz")
        self.assertEqual(doc["requests"]["completed"], 2000)
        s = doc["subscribers"]
        self.check_fan_out(s, 4, 2000)
        self.assertEqual(s["threads"], 2)
        # the server's own count: 2,000 in, 8,000 out (4 copies each, nothing else subscribed)
        self.assertEqual(after["in_msgs"] - before["in_msgs"], 2000)
        self.assertEqual(after["out_msgs"] - before["out_msgs"], 8000)
        self.assertIn("Subscribers  4 × nats subs.fan (fan out) · received 8,000 of 8,000 · lag 0",
                      p.stderr)

    def test_nats_queue_group(self):
        before = self.mon("/varz")
        p, doc = self.squall(self.nats_url + "/subs.q", "-c", "2", "-n", "3000",
                             "--subscribers", "4", "--queue", "workers")
        after = self.mon("/varz")
        s = doc["subscribers"]
        self.assertEqual((s["mode"], s["group"]), ("queue", "workers"))
        self.assertEqual(s["published"], 3000)
        # the group shares the messages: the sum is what was published, exactly once each
        self.assertEqual(sum(x["messages"] for x in s["per_subscriber"]), 3000)
        self.assertEqual((s["received"], s["expected"], s["lag"]), (3000, 3000, 0))
        self.assertEqual(after["in_msgs"] - before["in_msgs"], 3000)
        self.assertEqual(after["out_msgs"] - before["out_msgs"], 3000)
        self.assertIn("queue group workers", p.stderr)

    def test_mqtt_qos1_fan_out(self):
        _, doc = self.squall(self.mqtt_url + "/subs/fan", "-c", "2", "-n", "1000", "--qos", "1",
                             "--window", "8", "--subscribers", "4")
        self.assertEqual(doc["requests"]["completed"], 1000)
        self.check_fan_out(doc["subscribers"], 4, 1000)

    def test_mqtt_shared_subscription(self):
        # mosquitto 2 takes $share/ on 3.1.1 connections as well as on 5.0 ones
        for version in ("3", "5"):
            with self.subTest(version=version):
                _, doc = self.squall(self.mqtt_url + "/subs/shared", "-c", "2", "-n", "1000",
                                     "--qos", "1", "--window", "8", "--mqtt-version", version,
                                     "--subscribers", "3", "--queue", "g1")
                s = doc["subscribers"]
                self.assertEqual((s["mode"], s["subscription"]), ("shared", "$share/g1/subs/shared"))
                self.assertEqual(sum(x["messages"] for x in s["per_subscriber"]), 1000)
                self.assertEqual((s["received"], s["expected"], s["lag"]), (1000, 1000, 0))

    def test_subscribe_only_external_publisher(self):
        subject = "subs.ext"
        done = {}

        def publish():
            # once squall's three subscriptions are on the server (its own count), publish
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                subs = self.mon("/subsz?subs=1").get("subscriptions_list") or []
                if sum(1 for x in subs if x.get("subject") == subject) >= 3:
                    nats_publish(self.nats_port, subject, 500)
                    done["ok"] = True
                    return
                time.sleep(0.05)

        t = threading.Thread(target=publish, daemon=True)
        t.start()
        p, doc = self.squall(self.nats_url + "/" + subject, "--subscribers", "3",
                             "--subscribe-only", "-d", "6s")
        t.join(timeout=60)
        self.assertTrue(done.get("ok"), "the publisher never saw the subscriptions")
        self.assertEqual(doc["requests"]["sent"], 0)
        s = doc["subscribers"]
        self.assertEqual([x["messages"] for x in s["per_subscriber"]], [500] * 3)
        self.assertEqual(s["received"], 1500)
        self.assertIsNone(s["published"])
        self.assertIsNone(s["lag"])
        self.assertEqual(s["unstamped"], 1500)  # a foreign publisher's messages: not timed
        self.assertEqual(s["latency"]["count"], 0)
        self.assertIs(s["subscribe_only"], True)
        # the summary has what a run without a publisher has: no requests, window or latency
        lines = [x for x in p.stderr.splitlines() if x.strip()]
        self.assertRegex(lines[0], r"^squall --subscribe-only nats://127\.0\.0\.1:\d+/subs\.ext"
                                   r" · 3 subscribers · \d+\.\d\ds$")
        self.assertRegex(lines[1], r"^Subscribers  3 × nats subs\.ext \(fan out\) · received "
                                   r"1,500 · [\d,]+ msg/s$")
        self.assertRegex(lines[2], r"^ +per subscriber min 500 · max 500 · stddev 0\.0 · ")
        self.assertEqual(len(lines), 3, p.stderr)

    def test_jetstream_pull_fan_out(self):
        before = self.mon("/jsz?streams=1")
        p, doc = self.squall(self.nats_url + "/subs.js.fan", "-c", "2", "-n", "2000",
                             "--jetstream", "--window", "16", "--subscribers", "3",
                             "--stream", "SUBS", "--batch", "64")
        # every publish stored (its PubAck), then fetched and acked by each of the 3 consumers
        self.assertEqual(doc["requests"]["completed"], 2000)
        s = doc["subscribers"]
        self.check_fan_out(s, 3, 2000)
        js = s["jetstream"]
        self.assertEqual((js["stream"], js["consumer"], js["durable"], js["batch"]),
                         ("SUBS", "pull", None, 64))
        self.assertEqual((js["acks"], js["redelivered"]), (6000, 0))
        self.assertEqual([x["acks"] for x in s["per_subscriber"]], [2000] * 3)
        self.assertGreaterEqual(js["fetches"], 3 * (2000 // 64))
        after = self.mon("/jsz?streams=1")
        self.assertEqual(after["messages"] - before["messages"], 2000)  # the server's count
        self.assertIn("JetStream pull on SUBS · ephemeral consumer each · batch 64", p.stderr)

    def test_jetstream_pull_durable_shared(self):
        _, doc = self.squall(self.nats_url + "/subs.js.grp", "-c", "2", "-n", "2000",
                             "--subscribers", "3", "--stream", "SUBS", "--queue", "workers")
        s = doc["subscribers"]
        self.assertEqual(s["jetstream"]["durable"], "workers")
        # one durable consumer, fetched from by three: each message once, acked once
        self.assertEqual(sum(x["messages"] for x in s["per_subscriber"]), 2000)
        self.assertEqual((s["received"], s["lag"]), (2000, 0))
        self.assertEqual((s["jetstream"]["acks"], s["jetstream"]["redelivered"]), (2000, 0))
        info = js_request(self.nats_port, "$JS.API.CONSUMER.INFO.SUBS.workers", {})
        self.assertEqual(info["ack_floor"]["consumer_seq"], 2000)  # the server saw every ack
        self.assertEqual(info["num_ack_pending"], 0)

    def test_jetstream_push(self):
        # fan-out: an ephemeral push consumer per subscriber, each delivering every message
        p, doc = self.squall(self.nats_url + "/subs.js.push", "-c", "2", "-n", "2000",
                             "--subscribers", "3", "--stream", "SUBS", "--push")
        s = doc["subscribers"]
        self.check_fan_out(s, 3, 2000)
        self.assertEqual((s["jetstream"]["consumer"], s["jetstream"]["acks"]), ("push", 6000))
        self.assertIn("JetStream push on SUBS", p.stderr)
        # one durable push consumer delivering to a deliver group of three: each message once
        _, doc = self.squall(self.nats_url + "/subs.js.pushgrp", "-c", "2", "-n", "2000",
                             "--subscribers", "3", "--stream", "SUBS", "--push",
                             "--queue", "pushers")
        s = doc["subscribers"]
        self.assertEqual(sum(x["messages"] for x in s["per_subscriber"]), 2000)
        self.assertEqual((s["received"], s["lag"], s["jetstream"]["acks"]), (2000, 0, 2000))
        info = js_request(self.nats_port, "$JS.API.CONSUMER.INFO.SUBS.pushers", {})
        self.assertEqual(info["config"]["deliver_group"], "pushers")
        self.assertEqual(info["ack_floor"]["consumer_seq"], 2000)

    def run_plan(self, text, *args):
        """Writes text as a plan and runs it (--json -); returns (process, document)."""
        d = tempfile.mkdtemp(prefix="sq-subs-plan-", dir=self.dir)
        path = os.path.join(d, "plan.yaml")
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        p, doc, _ = sqtest.run_json("run", path, *args, timeout=120)
        return path, p, doc

    def test_plan_nats_fan_out(self):
        # a plan's publish steps publish 1,500; its subscribers: section's 3 each get them all
        before = self.mon("/varz")
        path, p, doc = self.run_plan("""\
            target: http://127.0.0.1:1
            subscribers:
              url: %s/subs.plan
              count: 3
              threads: 2
            scenarios:
              orders:
                executor: shared-iterations
                vus: 2
                iterations: 1500
                flow:
                  - publish:
                      url: %s/subs.plan
                      json: { t: "{{$stamp}}", kind: order }
            """ % (self.nats_url, self.nats_url))
        after = self.mon("/varz")
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        self.assertEqual((doc["steps"][0]["requests"], doc["steps"][0]["failed"]), (1500, 0))
        s = doc["subscribers"]
        self.check_fan_out(s, 3, 1500)
        self.assertEqual(s["threads"], 2)
        self.assertNotIn("subscribe_only", s)
        self.assertEqual(after["in_msgs"] - before["in_msgs"], 1500)
        self.assertEqual(after["out_msgs"] - before["out_msgs"], 4500)
        self.assertIn("Subscribers  3 × nats subs.plan (fan out) · received 4,500 of 4,500 · "
                      "lag 0", p.stderr)
        pv, _ = sqtest.run_squall("validate", path)
        self.assertEqual(pv.returncode, 0, pv.stderr)
        self.assertIn("subscribers 3 × %s/subs.plan" % self.nats_url, pv.stdout)

    def test_plan_queue_group_and_mqtt(self):
        # a NATS queue group shares the plan's publishes: each once over the group
        _, p, doc = self.run_plan("""\
            target: http://127.0.0.1:1
            subscribers: { url: '%s/subs.planq', count: 4, queue: workers }
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 2
                iterations: 500
                flow:
                  - publish: { url: '%s/subs.planq' }
            """ % (self.nats_url, self.nats_url))
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        s = doc["subscribers"]
        self.assertEqual((s["mode"], s["group"], s["published"]), ("queue", "workers", 1000))
        self.assertEqual(sum(x["messages"] for x in s["per_subscriber"]), 1000)
        self.assertEqual((s["received"], s["expected"], s["lag"]), (1000, 1000, 0))
        # MQTT at QoS 1 both ways: each of 2 subscribers gets every publish
        _, p, doc = self.run_plan("""\
            target: http://127.0.0.1:1
            subscribers: { url: '%s/subs/plan', count: 2, qos: 1 }
            scenarios:
              s:
                executor: shared-iterations
                vus: 2
                iterations: 600
                flow:
                  - publish: { url: '%s/subs/plan', qos: 1 }
            """ % (self.mqtt_url, self.mqtt_url))
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        self.check_fan_out(doc["subscribers"], 2, 600)

    def test_subscribers_that_never_subscribe_fail_the_run(self):
        # what they would have counted is not known: exit 1, as a sink that never subscribed
        p, doc, _ = sqtest.run_json(self.nats_url + "/subs.none", "-n", "100", "--subscribers",
                                    "2", "--stream", "NO_SUCH_STREAM", timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 100)
        self.assertEqual(doc["subscribers"]["subscribed"], 0)
        self.assertIn("--subscribers: none of the 2 subscribed", p.stderr)
        dead = "nats://%s:%d/subs.none" % (HOST, sqtest.free_port())
        _, p, doc = self.run_plan("""\
            target: http://127.0.0.1:1
            subscribers: { url: '%s', count: 2 }
            scenarios:
              s:
                executor: per-vu-iterations
                flow:
                  - publish: { url: '%s/subs.none' }
            """ % (dead, self.nats_url))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertEqual(doc["subscribers"]["subscribed"], 0)
        self.assertIn("subscribers: none of the 2 subscribed to %s subs.none" % dead[:-10],
                      p.stderr)

    def test_plan_refusals(self):
        flow = ("scenarios:\n  s:\n    executor: per-vu-iterations\n    flow:\n"
                "      - publish: { url: %s/x }\n" % self.nats_url)
        for section, where, word in (
            ("subscribers:\n  url: %s/x\n  cout: 2\n" % self.nats_url, "4:3",
             "subscribers: unknown key 'cout' (did you mean 'count'?)"),
            ("subscribers:\n  url: %s/\n" % self.nats_url, "3:3", "subscribers: url: '%s/': " % self.nats_url),
            ("subscribers:\n  url: %s/x\n  queue: 'a b'\n" % self.nats_url, "3:3",
             "subscribers: queue: 'a b' is not a group name"),
            ("subscribers:\n  url: %s/x\n  count: 0\n" % self.nats_url, "4:10",
             "subscribers.count: expected a whole number from 1 to 100000"),
            ("subscribers:\n  url: %s/x\n  stream: S\n" % self.mqtt_url, "4:11",
             "subscribers.stream: stream: JetStream consumers are NATS's"),
        ):
            d = tempfile.mkdtemp(prefix="sq-subs-bad-", dir=self.dir)
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write("target: http://127.0.0.1:1\n" + section + flow)
            for cmd in ("run", "validate"):
                with self.subTest(section=section, cmd=cmd):
                    p, _ = sqtest.run_squall(cmd, path, timeout=30)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn("plan.yaml:%s: %s" % (where, word), p.stderr)
        # the subscribers run here: not with --agents (refused before any agent is looked for)
        with open(path, "w") as f:
            f.write("target: http://127.0.0.1:1\nsubscribers: {url: '%s/x'}\n" % self.nats_url
                    + flow)
        p, _ = sqtest.run_squall("run", path, "--agents", "1", "--nats", self.nats_url,
                                 "--agent-wait", "1s", timeout=30)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("plan.yaml:2:14: subscribers: the subscribers run on this machine only",
                      p.stderr)

    def test_refusals(self):
        for args, word in (
            (["http://127.0.0.1:1/", "--subscribers", "2"], "--subscribers"),
            ([self.nats_url + "/x", "--queue", "g"], "--queue applies to --subscribers"),
            ([self.nats_url + "/x", "--subscribers", "2", "--request"], "must publish"),
            ([self.nats_url + "/x", "--subscribers", "0"], "subscriber count"),
            ([self.nats_url + "/x", "--stream", "S"], "--stream applies to --subscribers"),
            ([self.nats_url + "/x", "--subscribers", "2", "--batch", "5"], "--batch applies"),
            ([self.mqtt_url + "/x", "--subscribers", "2", "--stream", "S"], "NATS"),
            ([self.nats_url + "/x", "--subscribers", "2", "--push"], "--push applies"),
        ):
            with self.subTest(args=args):
                p, _ = sqtest.run_squall(*args, timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(word, p.stderr)


if __name__ == "__main__":
    sqtest.main()
