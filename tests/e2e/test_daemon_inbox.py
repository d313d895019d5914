#!/usr/bin/env python3
"""End-to-end tests of the daemon's webhook inbox (`squall serve`, /inbox; docs/daemon.md):
2 s of webhook posts at 1,000/s from squall itself to /inbox/hooks/..., every one captured (the
inbox's counts and a polling reader during the load agree with the load's result), the daemon's
API answering while it captures; the captured path without /inbox, any content type accepted,
bodies cut at 64 KiB and flagged, the path filter, clearing, the SSE stream; with a token, the
inbox needs it like every other endpoint; the stamped posts matched to their sends (received,
no gap, no duplicate, latency per path); --inbox-max-captures, --inbox-max-body and
--inbox-stamp-header, and their refusals. The loads are bounded (2 s); the file takes ~12 s.
"""

import http.client as httpclient
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, http, run_json, run_squall  # noqa: E402

TOKEN = "inbox-test-token-0123456789abcdef"


def get_json(port, path, headers=None):
    status, h, data = http(port, "GET", path, headers=headers)
    if status != 200:
        raise AssertionError("GET %s: %d %r" % (path, status, data[:200]))
    assert h["content-type"].startswith("application/json"), h
    return json.loads(data)


def stop_serve(proc, tmp):
    """Stops a daemon a test started (SIGTERM), removes its log and data; returns its status."""
    rc = sqtest.stop(proc)
    try:
        os.unlink(proc.log_path)
    except OSError:
        pass
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


class DaemonInbox(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="squall-dinbox-")
        cls.proc, cls.port = sqtest.start_serve("--data", os.path.join(cls.tmp, "d"))

    @classmethod
    def tearDownClass(cls):
        rc = sqtest.stop(cls.proc)
        try:
            os.unlink(cls.proc.log_path)
        except OSError:
            pass
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, "squall serve exited %s on SIGTERM" % rc

    def setUp(self):
        status, _, _ = http(self.port, "DELETE", "/inbox/_inbox/captures")
        self.assertEqual(status, 200)

    def test_load_all_captured(self):
        port = self.port
        url = "http://%s:%d/inbox/hooks/order" % (HOST, port)
        before = get_json(port, "/inbox/_inbox/stats")
        seen, errors, stop = [], [], threading.Event()
        healths = []

        def poll():
            cursor = before["next_seq"] - 1
            try:
                while True:
                    done = stop.is_set()  # the load ended before this page was asked for
                    doc = get_json(port, "/inbox/_inbox/captures?since=%d&limit=1000" % cursor)
                    seen.extend(c["seq"] for c in doc["captures"])
                    cursor = doc["next"]
                    t0 = time.monotonic()
                    st, _, _ = http(port, "GET", "/health")
                    healths.append((st, time.monotonic() - t0))
                    if done and not doc["more"]:
                        break
                    if not doc["captures"]:
                        time.sleep(0.05)
            except Exception as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

        reader = threading.Thread(target=poll, daemon=True)
        reader.start()
        p, doc, _ = run_json(url, "-m", "POST", "-b", '{"event":"paid","s":"{{$stamp}}"}', "-H",
                             "Content-Type: application/json", "-r", "1000", "-d", "2s", "-c",
                             "20", "-t", "1", timeout=60)
        stop.set()
        reader.join(timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        n = doc["requests"]["completed"]
        # (a slow, sanitized daemon drops some arrivals at the client: what was sent counts)
        self.assertGreaterEqual(n, 1000, doc["requests"])
        self.assertEqual(doc["requests"]["failed"], 0, doc["requests"])
        st = get_json(port, "/inbox/_inbox/stats")
        # every completed post was captured (a post cut by the run's end may be too)
        self.assertGreaterEqual(st["captured"] - before["captured"], n, st)
        self.assertLessEqual(st["captured"] - before["captured"], doc["requests"]["sent"], st)
        self.assertEqual(st["evicted"], 0)
        self.assertEqual(st["paths"]["/hooks/order"]["count"], st["captured"] - before["captured"])
        self.assertEqual(errors, [])
        self.assertEqual(sorted(seen), list(range(before["next_seq"], st["next_seq"])))
        self.assertTrue(healths and all(s == 200 for s, _ in healths), healths[:5])
        c = get_json(port, "/inbox/_inbox/captures?since=%d&limit=1" % (before["next_seq"] - 1))
        c = c["captures"][0]
        self.assertEqual((c["method"], c["path"], c["truncated"]), ("POST", "/hooks/order", False))
        self.assertTrue(c["body"].startswith('{"event":"paid","s":"sq1.'), c)
        self.assertIn(["Content-Type", "application/json"], c["headers"])
        # every post matched to its send: one stream (-t 1), all received, no gap, no duplicate
        got = st["captured"] - before["captured"]
        mine = [x for x in st["streams"] if x["stream"] == c["stamp"]["stream"]]
        self.assertEqual(len(mine), 1, st["streams"])
        self.assertEqual((mine[0]["received"], mine[0]["duplicates"], mine[0]["path"]),
                         (got, 0, "/hooks/order"), mine)
        self.assertLessEqual(mine[0]["missing"],
                             doc["requests"]["sent"] - doc["requests"]["completed"], mine)
        po = st["paths"]["/hooks/order"]
        self.assertEqual((po["stamped"], po["latency"]["count"]), (got, got), po)
        self.assertTrue(0 < po["latency"]["p50_us"] <= po["latency"]["max_us"], po)

    def test_paths_bodies_filter_clear(self):
        port = self.port
        big = b"x" * (100 * 1024)
        st, _, _ = http(port, "POST", "/inbox/hooks/big", body=big,
                        headers={"Content-Type": "application/octet-stream"})
        self.assertEqual(st, 200)  # any content type: a webhook is not an API call
        st, _, _ = http(port, "PUT", "/inbox?x=1", body=b"plain",
                        headers={"Content-Type": "text/plain"})
        self.assertEqual(st, 200)
        st, _, _ = http(port, "POST", "/inboxes", body=b"{}",
                        headers={"Content-Type": "application/json"})
        self.assertEqual(st, 404)  # not the inbox: the API's 404
        doc = get_json(port, "/inbox/_inbox/captures?since=0&path=/hooks/")
        self.assertEqual(len(doc["captures"]), 1)
        c = doc["captures"][0]
        self.assertEqual((c["path"], c["body_len"], c["truncated"], len(c["body"])),
                         ("/hooks/big", 100 * 1024, True, 64 * 1024))
        doc = get_json(port, "/inbox/_inbox/captures?since=0")
        self.assertEqual([(x["method"], x["path"]) for x in doc["captures"]],
                         [("POST", "/hooks/big"), ("PUT", "/?x=1")])
        st, _, data = http(port, "GET", "/inbox/_inbox/captures?limit=0")
        self.assertEqual(st, 400, data)
        st, _, data = http(port, "GET", "/inbox/_inbox/nothing")
        self.assertEqual(st, 404, data)
        st, _, data = http(port, "DELETE", "/inbox/_inbox/captures")
        self.assertEqual((st, json.loads(data)), (200, {"cleared": 2}))
        self.assertEqual(get_json(port, "/inbox/_inbox/captures?since=0")["captures"], [])
        self.assertEqual(get_json(port, "/inbox/_inbox/stats")["stored"], 0)

    def test_stream(self):
        port = self.port
        conn = httpclient.HTTPConnection(HOST, port, timeout=10)
        conn.request("GET", "/inbox/_inbox/stream")
        resp = conn.getresponse()
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.getheader("content-type"), "text/event-stream")
        time.sleep(0.2)
        for i in range(2):
            st, _, _ = http(port, "POST", "/inbox/hooks/s%d" % i, body=b"{}",
                            headers={"Content-Type": "application/json"})
            self.assertEqual(st, 200)
        events, cur = [], {}
        deadline = time.monotonic() + 5
        while len(events) < 2 and time.monotonic() < deadline:
            line = resp.readline().decode().rstrip("\n")
            if line == "":
                if cur.get("event") == "capture":
                    events.append(json.loads(cur["data"]))
                cur = {}
                continue
            k, _, v = line.partition(": ")
            cur[k] = v
        conn.close()
        self.assertEqual([e["path"] for e in events], ["/hooks/s0", "/hooks/s1"])


class DaemonInboxFlags(unittest.TestCase):
    def test_caps_and_stamp_header(self):
        tmp = tempfile.mkdtemp(prefix="squall-dinbox-flags-")
        proc, port = sqtest.start_serve("--data", os.path.join(tmp, "d"), "--inbox-max-captures",
                                        "50", "--inbox-max-body", "1KiB", "--inbox-stamp-header",
                                        "X-Stamp")
        try:
            conn = httpclient.HTTPConnection(HOST, port, timeout=10)
            for i in range(60):
                hdrs = {"Content-Type": "text/plain"}
                if i < 3:
                    hdrs["X-Stamp"] = "sq1.z.%d.1" % i
                conn.request("POST", "/inbox/f", body=b"y" * 2000 + b" sq1.q.0.1", headers=hdrs)
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
            conn.close()
            st = get_json(port, "/inbox/_inbox/stats")
            self.assertEqual((st["max_captures"], st["max_body"], st["stamp"]),
                             (50, 1024, "header:X-Stamp"))
            self.assertEqual((st["captured"], st["stored"], st["evicted"], st["truncated"]),
                             (60, 50, 10, 60), st)
            # only the header counts: stream z (3 in order), never the body's q
            self.assertEqual([(x["stream"], x["received"], x["missing"]) for x in st["streams"]],
                             [("z", 3, 0)])
            doc = get_json(port, "/inbox/_inbox/captures?since=0&limit=1")
            self.assertEqual((len(doc["captures"][0]["body"]), doc["oldest"]), (1024, 11))
        finally:
            rc = stop_serve(proc, tmp)
        self.assertEqual(rc, 0)

    def test_bad_flags(self):
        for args, needle in ((["--inbox-max-captures", "0"], "--inbox-max-captures: '0'"),
                             (["--inbox-max-captures", "2000000"],
                              "--inbox-max-captures: '2000000'"),
                             (["--inbox-max-body", "2MiB"], "--inbox-max-body: '2MiB'"),
                             (["--inbox-max-body", "lots"], "--inbox-max-body: 'lots'"),
                             (["--inbox-stamp-header", "a:b"], "--inbox-stamp-header: 'a:b'")):
            p, _ = run_squall("serve", "--listen", "127.0.0.1:0", *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(needle, p.stderr)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)


class DaemonInboxToken(unittest.TestCase):
    def test_needs_the_token(self):
        tmp = tempfile.mkdtemp(prefix="squall-dinbox-tok-")
        tok = os.path.join(tmp, "token")
        with open(tok, "w") as f:
            f.write(TOKEN + "\n")
        proc, port = sqtest.start_serve("--data", os.path.join(tmp, "d"), "--token-file", tok)
        try:
            st, _, _ = http(port, "POST", "/inbox/hooks/a", body=b"{}",
                            headers={"Content-Type": "application/json"})
            self.assertEqual(st, 401)
            auth = {"Authorization": "Bearer " + TOKEN}
            st, _, _ = http(port, "POST", "/inbox/hooks/a", body=b"{}",
                            headers=dict(auth, **{"Content-Type": "application/json"}))
            self.assertEqual(st, 200)
            st, _, _ = http(port, "GET", "/inbox/_inbox/captures")
            self.assertEqual(st, 401)
            doc = get_json(port, "/inbox/_inbox/captures?since=0", headers=auth)
            self.assertEqual([c["path"] for c in doc["captures"]], ["/hooks/a"])
        finally:
            rc = stop_serve(proc, tmp)
        self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
