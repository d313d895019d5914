#!/usr/bin/env python3
"""End-to-end tests of `squall serve` (docs/daemon.md): every endpoint and its errors, each
answer validated against docs/daemon.openapi.json; the stored result against the CLI's for the
same run; the queue, stop, delete, retention; live events; /metrics through promtool; the
Host/Origin/CORS gate; an idle daemon that does not wake; and `squall runs`.

A daemon on a free loopback port with its store in a temp dir, `squall target` as the load's
target; both started and stopped by the test, by PID.
"""

import http.client as httpclient
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
free_port = sqtest.free_port
from openapi_check import OpenAPI  # noqa: E402

HOST = sqtest.HOST
_ID_PATH = re.compile(r"^/runs/\d+")


def template(path):
    """/runs/7/live?x -> /runs/{id}/live"""
    return _ID_PATH.sub("/runs/{id}", path.split("?")[0])


class Client:
    """Talks to one daemon; every answer is checked against the OpenAPI file."""

    def __init__(self, port, oapi, token=None):
        self.port = port
        self.oapi = oapi
        self.token = token

    def call(self, method, path, body=None, headers=None, check=True, raw=False):
        hdrs = dict(headers or {})
        if self.token and "Authorization" not in hdrs:
            hdrs["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            hdrs.setdefault("Content-Type", "application/json")
        status, h, payload = sqtest.http(self.port, method, path, body=data, headers=hdrs,
                                         timeout=30)
        if check:
            self.oapi.validate(method, template(path), status, payload, h.get("content-type"))
        if raw:
            return status, h, payload
        doc = None
        if payload and h.get("content-type", "").startswith("application/json"):
            doc = json.loads(payload)
        return status, doc

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.call("POST", path, body=body, **kw)

    def wait(self, rid, statuses=("finished", "stopped", "failed"), timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            st, run = self.get("/runs/%d" % rid)
            if st == 200 and run["status"] in statuses:
                return run
            if time.monotonic() > deadline:
                raise AssertionError("run %d still %s after %ds" % (rid, run and run["status"], timeout))
            time.sleep(0.1)

    def start(self, quick, name=None):
        body = {"quick": quick}
        if name:
            body["name"] = name
        st, doc = self.post("/runs", body)
        if st != 201:
            raise AssertionError("POST /runs: %d %s" % (st, doc))
        return doc["id"]


def sse(port, rid, token=None, timeout=60, stop_after=None, until="end"):
    """Reads /runs/ID/live; returns [(event, data dict, id or None)] until the end event (or
    the `until` event, or stop_after events)."""
    conn = httpclient.HTTPConnection(HOST, port, timeout=timeout)
    hdrs = {"Authorization": "Bearer " + token} if token else {}
    conn.request("GET", "/runs/%d/live" % rid, headers=hdrs)
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    assert resp.getheader("content-type") == "text/event-stream", resp.getheader("content-type")
    events, cur = [], {}
    try:
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line == "":
                if cur:
                    events.append((cur.get("event"), json.loads(cur["data"]), cur.get("id")))
                    if cur.get("event") in ("end", until) or (stop_after and len(events) >= stop_after):
                        break
                cur = {}
                continue
            k, _, v = line.partition(": ")
            cur[k] = v
    finally:
        conn.close()
    return events


# A plan whose hooks would run Lua in the daemon: refused before the script runs (the loader
# only checks that the file is readable: any readable file will do).
PLAN_WITH_SCRIPT = ("target: http://127.0.0.1:1\n"
                    "script: %s\n" % os.path.abspath(__file__) +
                    "scenarios:\n"
                    "  a: {executor: shared-iterations, vus: 1, iterations: 1,\n"
                    "      flow: [{request: {url: /}}]}\n")


def sink_plan(port, sink_port, stamp="json:$.stamp", settle="1s", n=1):
    """A plan that POSTs n stamped events to port and counts them on a sink listening on
    sink_port (the same port: the load feeds its own sink)."""
    return ("target: http://127.0.0.1:%d\n"
            "sink:\n  http: 127.0.0.1:%d\n  stamp: '%s'\n  settle: %s\n"
            "scenarios:\n"
            "  a: {executor: shared-iterations, vus: 4, iterations: %d,\n"
            "      flow: [{request: {method: POST, url: /events,\n"
            "              body: '{\"id\":1,\"stamp\":\"{{$stamp}}\"}'}}]}\n"
            % (port, sink_port, stamp, settle, n))


def quick(port, **kw):
    q = {"url": "http://%s:%d/fast" % (HOST, port), "connections": 2, "threads": 1}
    q.update(kw)
    return q


class DaemonCase(unittest.TestCase):
    serve_args = ()

    @classmethod
    def setUpClass(cls):
        cls.oapi = OpenAPI()
        cls.tmp = tempfile.mkdtemp(prefix="squall-daemon-")
        cls.data = os.path.join(cls.tmp, "data")
        cls.target, cls.tport = sqtest.start_target("-t", "1")
        cls.proc, cls.port = sqtest.start_serve("--data", cls.data, "--access-log",
                                                *cls.serve_args)
        cls.c = Client(cls.port, cls.oapi)

    @classmethod
    def tearDownClass(cls):
        rc = sqtest.stop(cls.proc)
        sqtest.stop(cls.target)
        try:
            os.unlink(cls.proc.log_path)
        except OSError:
            pass
        shutil.rmtree(cls.tmp, ignore_errors=True)
        assert rc == 0, "squall serve exited %s on SIGTERM" % rc

    def log(self):
        with open(self.proc.log_path, errors="replace") as f:
            return f.read()


class TestApi(DaemonCase):
    def test_health_openapi_page(self):
        st, hh = self.c.get("/health")
        self.assertEqual(st, 200)
        self.assertEqual(hh["status"], "ok")
        self.assertIsNone(hh["run"])
        self.assertGreater(hh["store"]["bytes"], 0)
        st, h, body = self.c.get("/openapi.json", raw=True)
        self.assertEqual(st, 200)
        with open(os.path.join(sqtest.os.path.dirname(__file__), "..", "..", "docs",
                               "daemon.openapi.json"), "rb") as f:
            self.assertEqual(body, f.read())
        st, h, page = self.c.get("/", raw=True)
        self.assertEqual(st, 200)
        self.assertIn("text/html", h["content-type"])
        self.assertIn("default-src 'none'", h["content-security-policy"])
        self.assertIn(b"uPlot", page)
        self.assertNotIn(b"<!--DASH_JS-->", page)
        self.assertNotIn(b"<!--LIVE_JS-->", page)
        self.assertIn(b"squallLive", page)  # live-tables.js, inlined
        self.assertNotIn(b"<script src", page)  # everything inline: nothing fetched

    def test_watch_the_target_live_and_stored(self):
        """A run that watches the target's PID: its server block per second in the live events,
        in the stored series and in the result, as the CLI's --watch gives them."""
        rid = self.c.start(quick(self.tport, duration="2s", watch=[str(self.target.pid)]),
                           name="watched")
        events = sse(self.port, rid)
        seconds = [e[1]["second"] for e in events if e[0] == "second"]
        self.assertGreaterEqual(len(seconds), 2)
        for s in seconds:
            self.assertEqual(s["server"]["processes"], 1, s)
            self.assertGreater(s["server"]["rss_bytes"], 1 << 20, s)
            self.assertIn("cpu_s", s["client"])
        doc = events[-1][1]["result"]
        self.assertEqual(doc["server"]["processes"][0]["pid"], self.target.pid)
        self.assertGreater(doc["server"]["cpu_user_s"] + doc["server"]["cpu_sys_s"], 0)
        st, ser = self.c.get("/runs/%d/series" % rid)
        self.assertEqual([x["server"] for x in ser["series"]][:len(seconds) - 1],
                         [x["server"] for x in seconds][:-1])
        # a PID that is gone is refused before anything runs
        st, body = self.c.call("POST", "/runs", {"quick": quick(self.tport, watch=["999999999"])})
        self.assertEqual(st, 400, body)
        self.assertIn("--watch", json.dumps(body))

    def test_lifecycle_live_and_result(self):
        rid = self.c.start(quick(self.tport, duration="3s"), name="life")
        st, h, _ = self.c.call("GET", "/runs/%d" % rid, raw=True)
        self.assertEqual(st, 200)
        # a late follower: join after the first second, get the seconds so far first
        time.sleep(1.6)
        st, run = self.c.get("/runs/%d" % rid)
        self.assertEqual(run["status"], "running")
        self.assertIsNotNone(run["live"])
        self.assertEqual(run["live"]["workers"], 1)
        self.assertEqual(run["live"]["vus_max"], 2)
        st, hh = self.c.get("/health")
        self.assertEqual(hh["run"]["id"], rid)
        self.assertEqual(hh["run"]["workers"], 1)  # effective, not the CPU count
        self.assertEqual(hh["run"]["vus_max"], 2)
        events = sse(self.port, rid)
        names = [e[0] for e in events]
        self.assertEqual(names[0], "status")
        self.assertEqual(names[-1], "end")
        seconds = [e for e in events if e[0] == "second"]
        self.assertGreaterEqual(len(seconds), 3)
        self.assertEqual([int(e[2]) for e in seconds], list(range(len(seconds))))
        end = events[-1][1]
        self.assertEqual(end["status"], "finished")
        doc = end["result"]
        run = self.c.wait(rid)
        self.assertEqual(run["status"], "finished")
        self.assertEqual(run["name"], "life")
        self.assertEqual(run["request"]["quick"]["duration"], "3s")
        self.assertEqual(run["result"], doc)
        # the events' seconds are the document's series, and the totals add up
        # (the last second's own cost grows by the run's tail after its event went out)
        live = [dict(e[1]["second"]) for e in seconds]
        docs = [dict(e) for e in doc["series"][:len(seconds)]]
        self.assertIn("client", live[0])
        self.assertEqual(live[-1]["client"]["rss_bytes"], docs[len(live) - 1]["client"]["rss_bytes"])
        self.assertLessEqual(live[-1]["client"]["cpu_s"], docs[len(live) - 1]["client"]["cpu_s"])
        del live[-1]["client"], docs[len(live) - 1]["client"]
        self.assertEqual(live, docs)
        self.assertEqual(seconds[-1][1]["totals"]["requests"],
                         sum(s["requests"] for s in doc["series"][:len(seconds)]))
        self.assertEqual(run["summary"]["sent"], doc["requests"]["sent"])
        self.assertEqual(run["summary"]["p99_us"], doc["latency"]["p99_us"])
        # a follower of the ended run gets the same stream at once
        st, h, body = self.c.get("/runs/%d/live" % rid, raw=True)
        self.assertEqual((st, h["content-type"]), (200, "text/event-stream"))
        self.assertTrue(body.endswith(b"\n\n"))
        again = sse(self.port, rid)
        # (the "live" tables are not kept: a replay has the seconds and the end)
        self.assertEqual([e[0] for e in again if e[0] != "status"],
                         [e[0] for e in events if e[0] not in ("status", "live")])
        self.assertEqual(again[-1][1]["result"], doc)
        st, ser = self.c.get("/runs/%d/series" % rid)
        self.assertEqual(len(ser["series"]), len(doc["series"]))
        self.assertEqual(ser["series"][0]["totals"], seconds[0][1]["totals"])
        self.assertEqual(ser["series"][0]["client"], seconds[0][1]["second"]["client"])
        st, res = self.c.get("/runs/%d/result" % rid)
        self.assertEqual(res, doc)
        st, h, html = self.c.get("/runs/%d/report" % rid, raw=True)
        self.assertEqual(st, 200)
        self.assertIn(b"squall-data", html)

    def test_same_document_as_cli(self):
        args = dict(requests=3000)
        rid = self.c.start(quick(self.tport, **args))
        run = self.c.wait(rid)
        d = run["result"]
        p, cli, _ = sqtest.run_json("http://%s:%d/fast" % (HOST, self.tport), "-n", "3000",
                                    "-c", "2", "-t", "1", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(list(d.keys()), list(cli.keys()))
        self.assertEqual(d["config"], cli["config"])
        self.assertEqual(d["requests"]["sent"], 3000)
        self.assertEqual(cli["requests"]["sent"], 3000)
        for k in ("requests", "status", "errors"):
            self.assertEqual(list(d[k].keys()), list(cli[k].keys()), k)
        self.assertEqual(list(d["latency"].keys()), list(cli["latency"].keys()))
        self.assertEqual(list(d["series"][0].keys()), list(cli["series"][0].keys()))
        # squall runs export writes what the CLI writes with --json, byte for byte in shape
        out = os.path.join(self.tmp, "export.json")
        p = subprocess.run([sqtest.squall_path(), "runs", "export", str(rid), "--json", out,
                            "--data", self.data], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(out) as f:
            text = f.read()
        self.assertEqual(json.loads(text), d)
        self.assertTrue(text.startswith('{\n  "schema": "squall.result/1"'), text[:60])

    def test_queue_fifo(self):
        a = self.c.start(quick(self.tport, duration="2s"))
        b = self.c.start(quick(self.tport, duration="1s"))
        st, rb = self.c.get("/runs/%d" % b)
        self.assertEqual(rb["status"], "queued")
        self.assertIsNone(rb["started_at"])
        st, l = self.c.get("/runs?status=queued")
        self.assertIn(b, [r["id"] for r in l["runs"]])
        st, hh = self.c.get("/health")
        self.assertGreaterEqual(hh["queue"], 1)
        # a follower of a queued run waits, then sees it run
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("ev", sse(self.port, b)))
        t.start()
        ra = self.c.wait(a)
        rb = self.c.wait(b)
        t.join(30)
        self.assertEqual(ra["status"], "finished")
        self.assertEqual(rb["status"], "finished")
        self.assertGreaterEqual(rb["started_at"], ra["ended_at"])
        ev = got["ev"]
        self.assertEqual(ev[0][1]["status"], "queued")
        self.assertIn(("status", "running"), [(e[0], e[1].get("status")) for e in ev])
        self.assertEqual(ev[-1][0], "end")

    def test_stop_and_cancel(self):
        a = self.c.start(quick(self.tport, duration="30s"))
        b = self.c.start(quick(self.tport, duration="30s"))
        deadline = time.monotonic() + 20
        while self.c.get("/runs/%d" % a)[1]["status"] != "running":
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        st, doc = self.c.post("/runs/%d/stop" % b)
        self.assertEqual((st, doc["status"]), (200, "stopped"))
        time.sleep(1.2)
        t0 = time.monotonic()
        st, doc = self.c.post("/runs/%d/stop" % a)
        self.assertEqual((st, doc["status"]), (202, "stopping"))
        ra = self.c.wait(a)
        # a graceful stop: the run ends within its second (a sanitizer's loaded CI gets room)
        self.assertLess(time.monotonic() - t0, 15 if sqtest.sanitizer() else 5)
        self.assertEqual(ra["status"], "stopped")
        self.assertEqual(ra["reason"], "stopped by request")
        self.assertIsNotNone(ra["result"])  # a graceful stop keeps what was measured
        self.assertTrue(ra["result"]["aborted"])
        rb = self.c.wait(b)
        self.assertEqual(rb["status"], "stopped")
        self.assertIsNone(rb["started_at"])
        self.assertIsNone(rb["result"])
        st, doc = self.c.post("/runs/%d/stop" % a)
        self.assertEqual(st, 409)
        self.assertIn("stopped", doc["error"])
        st, doc = self.c.post("/runs/999999/stop")
        self.assertEqual(st, 404)

    def test_delete(self):
        a = self.c.start(quick(self.tport, duration="2s"))
        time.sleep(0.3)
        st, doc = self.c.call("DELETE", "/runs/%d" % a)
        self.assertEqual(st, 409)
        self.c.wait(a)
        st, _ = self.c.call("DELETE", "/runs/%d" % a)
        self.assertEqual(st, 204)
        self.assertEqual(self.c.get("/runs/%d" % a)[0], 404)
        self.assertEqual(self.c.get("/runs/%d/series" % a)[0], 404)
        self.assertEqual(self.c.call("DELETE", "/runs/%d" % a)[0], 404)

    def test_list_paging(self):
        ids = [self.c.start(quick(self.tport, requests=50)) for _ in range(3)]
        for i in ids:
            self.c.wait(i)
        st, l = self.c.get("/runs?limit=2")
        self.assertEqual(len(l["runs"]), 2)
        self.assertEqual(l["runs"][0]["id"], ids[-1])
        self.assertIsNotNone(l["next"])
        st, l2 = self.c.get(l["next"])
        self.assertEqual(l2["runs"][0]["id"], ids[0])
        st, l3 = self.c.get("/runs?status=finished,stopped&limit=1000")
        self.assertTrue(all(r["status"] in ("finished", "stopped") for r in l3["runs"]))
        for q, word in (("status=done", "status"), ("limit=0", "limit"), ("limit=1001", "limit"),
                        ("before=x", "before")):
            st, doc = self.c.get("/runs?" + q)
            self.assertEqual(st, 400, q)
            self.assertTrue(doc["error"].startswith(word), doc)

    def test_bad_requests(self):
        cases = [
            (b"{", 400, "the body is not JSON"),
            ({"quick": {"url": "http://127.0.0.1:1/", "connections": 0}}, 400, "--connections"),
            ({"quick": {"url": "http://127.0.0.1:1/", "conections": 2}}, 400, "conections"),
            ({"quick": {"url": "nope"}}, 400, "nope"),
            ({"quick": {"url": "http://127.0.0.1:1/"}, "plan": "x"}, 400, "not both"),
            ({}, 400, "quick"),
            ([], 400, "object"),
            ({"quick": {"url": "http://127.0.0.1:1/", "connections": 20000}}, 400, "max_vus"),
            ({"quick": {"url": "http://127.0.0.1:1/", "rate": 5000000}}, 400, "max_rate"),
            ({"quick": {"url": "http://127.0.0.1:1/", "duration": "2h"}}, 400, "max_duration"),
            ({"quick": {"url": "http://127.0.0.1:1/", "script": "/tmp/x.lua"}}, 400, "script"),
            ({"quick": {"url": "http://127.0.0.1:1/", "control": "7070"}}, 400, "opens no listener"),
            ({"plan": PLAN_WITH_SCRIPT, "file": "h.yaml"}, 400, "h.yaml:2:9: script:"),
            ({"plan": sink_plan(1, 9, stamp="json:t"), "file": "s.yaml"}, 400,
             "s.yaml:3:3: sink: stamp: "),
        ]
        for body, want, word in cases:
            st, doc = self.c.post("/runs", body)
            self.assertEqual(st, want, (body, doc))
            self.assertIn(word, doc["error"], (body, doc))
        st, _ = self.c.call("PUT", "/config", {"max_body": 1000})
        st, doc = self.c.post("/runs", b"x" * 2000)
        self.assertEqual(st, 413)
        self.assertIn("max_body", doc["error"])
        self.assertEqual(self.c.call("PUT", "/config", {"max_body": 1048576})[0], 200)
        # past 1 MiB the server itself refuses (and closes): no body to validate
        st, _, _ = self.c.call("POST", "/runs", b"x" * (1024 * 1024 + 10), check=False, raw=True)
        self.assertEqual(st, 413)
        st, doc = self.c.post("/runs", b'{"quick":{}}', headers={"Content-Type": "text/plain"})
        self.assertEqual(st, 415)
        st, h, _ = self.c.call("PATCH", "/runs", check=False, raw=True)
        self.assertEqual(st, 405)
        self.assertEqual(h["allow"], "GET, HEAD, POST")
        st, h, body = self.c.call("GET", "/nope", check=False, raw=True)
        self.assertEqual(st, 404)
        self.assertEqual(self.c.get("/runs/0")[0], 404)
        self.assertEqual(self.c.get("/runs/123456")[0], 404)

    def test_validate(self):
        st, doc = self.c.post("/validate", {"quick": quick(self.tport, duration="1s")})
        self.assertEqual(st, 200)
        self.assertTrue(doc["ok"])
        st, doc = self.c.post("/validate", {"quick": {"url": "http://x/", "duration": "soon"}})
        self.assertEqual(st, 200)
        self.assertFalse(doc["ok"])
        self.assertIn("--duration", doc["error"])
        st, doc = self.c.post("/validate", {"plan": PLAN_WITH_SCRIPT})
        self.assertEqual(st, 200)
        self.assertFalse(doc["ok"])
        self.assertIn("plan.yaml:2:9: script: the daemon runs no Lua", doc["error"])
        # a plan's sink: section is checked as the sink will check it, and named by its place
        st, doc = self.c.post("/validate", {"plan": sink_plan(1, 9, stamp="xml:t")})
        self.assertEqual(st, 200)
        self.assertFalse(doc["ok"])
        self.assertIn("plan.yaml:3:3: sink: stamp: 'xml:t'", doc["error"])
        st, doc = self.c.post("/validate", {"plan": sink_plan(1, 9)})
        self.assertEqual(st, 200)
        self.assertTrue(doc["ok"], doc)
        self.assertIn("sink http 127.0.0.1:9", doc["description"])
        # a plan's subscribers: run under squall run only: refused by name and place
        st, doc = self.c.post("/validate", {"plan": "target: http://127.0.0.1:1\n"
                                            "subscribers: {url: 'nats://127.0.0.1:1/a'}\n"
                                            "scenarios:\n  a: {executor: per-vu-iterations,\n"
                                            "      flow: [{request: {url: /}}]}\n"})
        self.assertEqual(st, 200)
        self.assertFalse(doc["ok"])
        self.assertIn("plan.yaml:2:14: subscribers: the daemon runs no subscribers", doc["error"])
        st, doc = self.c.post("/validate", b"[1]")
        self.assertEqual(st, 400)
        self.assertIn("object", doc["error"])

    def test_config(self):
        st, cfg = self.c.get("/config")
        self.assertEqual(cfg["max_vus"], {"value": 10000, "applies": "next_run",
                                          "description": cfg["max_vus"]["description"]})
        self.assertEqual(cfg["listen"]["applies"], "restart")
        self.assertEqual(cfg["keep_runs"]["value"], 200)
        self.assertEqual(cfg["auth"]["value"], "none")
        st, cfg2 = self.c.call("PUT", "/config", {"max_vus": 5, "timeout": "3s"})
        self.assertEqual(st, 200)
        self.assertEqual(cfg2["max_vus"]["value"], 5)
        self.assertEqual(cfg2["timeout"]["value"], "3s")
        st, doc = self.c.post("/runs", {"quick": quick(self.tport, connections=6)})
        self.assertEqual(st, 400)
        self.assertIn("max_vus", doc["error"])
        for body, word in (({"treads": 2}, "did you mean 'threads'"),
                           ({"listen": "0.0.0.0:1"}, "restart"),
                           ({"max_vus": 1, "keep_runs": -1}, "keep_runs"),
                           ({"allow_hosts": ["a b"]}, "allow_hosts")):
            st, doc = self.c.call("PUT", "/config", body)
            self.assertEqual(st, 400, body)
            self.assertIn(word, doc["error"])
        st, cfg3 = self.c.get("/config")
        self.assertEqual(cfg3["max_vus"]["value"], 5)  # the refused body changed nothing
        st, _ = self.c.call("PUT", "/config", {"max_vus": "10000", "timeout": 10,
                                                "allow_hosts": ["localhost"]})
        self.assertEqual(st, 200)
        st, doc = self.c.post("/runs", {"quick": quick(self.tport)})
        self.assertEqual(st, 403)
        self.assertIn("allow_hosts", doc["error"])
        st, _ = self.c.call("PUT", "/config", {"allow_hosts": []})
        self.assertEqual(st, 200)

    def test_metrics_promtool(self):
        rid = self.c.start(quick(self.tport, duration="3s"))
        time.sleep(2.2)
        st, h, live = self.c.get("/metrics", raw=True)
        self.assertEqual(st, 200)
        self.assertIn('squall_run_running{run="%d"} 1' % rid, live.decode())
        self.promtool(live)
        run = self.c.wait(rid)
        doc = run["result"]
        st, h, text = self.c.get("/metrics", raw=True)
        self.promtool(text)
        m = self.parse_metrics(text.decode())
        r = str(rid)
        self.assertEqual(m[("squall_run_running", (("run", r),))], 0)
        self.assertEqual(m[("squall_run_requests_total", (("run", r),))], doc["requests"]["sent"])
        self.assertEqual(m[("squall_run_failed_total", (("run", r),))], doc["requests"]["failed"])
        for cls, n in doc["status"].items():
            self.assertEqual(m[("squall_run_responses_total", (("class", cls), ("run", r)))], n)
        for kind, n in doc["errors"].items():
            self.assertEqual(m[("squall_run_errors_total", (("kind", kind), ("run", r)))], n)
        self.assertEqual(m[("squall_run_latency_seconds_count", (("run", r),))],
                         doc["latency"]["count"])
        self.assertEqual(m[("squall_run_latency_seconds_bucket", (("le", "+Inf"), ("run", r)))],
                         doc["latency"]["count"])
        self.assertGreaterEqual(m[("squall_daemon_runs", (("status", "finished"),))], 1)
        self.assertEqual(m[("squall_build_info", (("version", doc["squall_version"]),))], 1)

    def test_custom_metrics_promtool(self):
        """A plan's own metrics in /metrics: one value per metric (by kind) and its samples;
        once the run ended, the document's figures."""
        plan = ("target: http://127.0.0.1:%d\n"
                "metrics: {orders: counter, ok: rate, depth: gauge, cart: trend, unused: trend}\n"
                "scenarios:\n  s:\n    executor: per-vu-iterations\n    vus: 2\n"
                "    iterations: 15\n    flow:\n"
                "      - request: {url: /fast}\n        check: {status: 200}\n"
                "        metric:\n          - {name: orders, add: 2}\n"
                "          - {name: ok, from: checks}\n          - {name: depth, add: 3}\n"
                "          - {name: cart, add: 7}\n"
                "      - think: 50ms\n" % self.tport)
        st, doc = self.c.post("/runs", {"plan": plan, "file": "cm.yaml"})
        self.assertEqual(st, 201, doc)
        rid = doc["id"]
        doc = self.c.wait(rid)["result"]
        cm = doc["custom_metrics"]
        self.assertEqual(cm["orders"]["count"], 60)
        st, h, text = self.c.get("/metrics", raw=True)
        self.promtool(text)
        m = self.parse_metrics(text.decode())
        r = str(rid)

        def val(name, kind):
            return m[("squall_run_custom_value", (("kind", kind), ("metric", name), ("run", r)))]

        self.assertEqual(val("orders", "counter"), cm["orders"]["count"])
        self.assertEqual(val("ok", "rate"), cm["ok"]["rate"])
        self.assertEqual(val("depth", "gauge"), 3)
        self.assertEqual(val("cart", "trend"), cm["cart"]["avg"])
        for name in ("orders", "ok", "depth", "cart"):
            self.assertEqual(m[("squall_run_custom_samples_total", (("metric", name), ("run", r)))],
                             30)
        # no sample yet: its samples (0), no value
        self.assertEqual(m[("squall_run_custom_samples_total", (("metric", "unused"), ("run", r)))],
                         0)
        self.assertNotIn(("squall_run_custom_value", (("kind", "trend"), ("metric", "unused"),
                                                      ("run", r))), m)
        # each second's figures ride in its live "second" event (replayed from the store once
        # the run ended), and add up to the document's
        secs = [e[1]["second"]["custom_metrics"] for e in sse(self.port, rid) if e[0] == "second"]
        self.assertEqual(len(secs), len(doc["series"]))
        self.assertEqual(sum(x["orders"]["count"] for x in secs), cm["orders"]["count"])
        self.assertEqual(sum(x["ok"]["total"] for x in secs), 30)
        self.assertEqual(sum(x["cart"]["count"] for x in secs), 30)
        self.assertEqual(secs[-1]["depth"]["value"], 3)
        self.assertEqual([x["unused"] for x in secs], [{"count": 0, "avg": None}] * len(secs))

    @staticmethod
    def parse_metrics(text):
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
            assert m, line
            labels = tuple(sorted(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or "")))
            v = float(m.group(3))
            out[(m.group(1), labels)] = int(v) if v == int(v) else v
        return out

    def promtool(self, text):
        promtool = shutil.which("promtool")
        self.assertIsNotNone(promtool, "promtool is missing (Debian's prometheus: scripts/deps.sh)")
        p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                           timeout=30)
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())

    def test_compare(self):
        a = self.c.start(quick(self.tport, requests=2000))
        b = self.c.start(quick(self.tport, requests=2000, connections=1))
        self.c.wait(a)
        self.c.wait(b)
        st, cmp = self.c.get("/compare?a=%d&b=%d" % (a, b))
        self.assertEqual(st, 200)
        self.assertEqual((cmp["a"]["id"], cmp["b"]["id"]), (a, b))
        rows = {r["key"]: r for r in cmp["rows"]}
        self.assertEqual(rows["requests.sent"]["a"], 2000)
        self.assertEqual(rows["requests.sent"]["delta"], 0)
        self.assertEqual(rows["latency.p99_us"]["better"], "lower")
        p = cmp["percentiles"]
        self.assertEqual(len(p["x"]), len(p["a"]))
        self.assertEqual(p["a"], sorted(p["a"]))
        self.assertEqual(self.c.get("/compare?a=%d" % a)[0], 400)
        self.assertEqual(self.c.get("/compare?a=%d&b=987654" % a)[0], 404)
        out = subprocess.run([sqtest.squall_path(), "runs", "compare", str(a), str(b), "--data",
                              self.data], capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("requests/s", out.stdout)
        self.assertIn("run %d" % a, out.stdout)
        out = subprocess.run([sqtest.squall_path(), "runs", "compare", str(a), str(b), "--json",
                              "--data", self.data], capture_output=True, text=True, timeout=30)
        cj = json.loads(out.stdout)
        self.assertEqual([r["a"] for r in cj["rows"]], [r["a"] for r in cmp["rows"]])

    def test_runs_cli(self):
        rid = self.c.start(quick(self.tport, requests=500), name="cli-view")
        self.c.wait(rid)

        def runs(*a):
            return subprocess.run([sqtest.squall_path(), "runs", *a, "--data", self.data],
                                  capture_output=True, text=True, timeout=30)

        p = runs("list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"\b%d\s+finished\b" % rid)
        p = runs("list", "--json", "--limit", "1")
        self.assertEqual(json.loads(p.stdout)[0]["id"], rid)
        p = runs("show", str(rid))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("cli-view", p.stdout)
        self.assertRegex(p.stdout, r"Requests +[\d,]+ sent")
        p = runs("show", str(rid), "--json")
        self.assertEqual(json.loads(p.stdout)["result"]["requests"]["sent"], 500)
        self.assertEqual(runs("show", "999999").returncode, 1)
        p = runs("show", "x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("'x' is not a run id", p.stderr)
        self.assertEqual(runs("frob").returncode, 2)
        p = subprocess.run([sqtest.squall_path(), "runs", "list", "--data",
                            os.path.join(self.tmp, "none")], capture_output=True, text=True)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no run store", p.stderr)

    def test_host_and_origin_gate(self):
        st, doc = self.c.get("/health", headers={"Host": "evil.example:%d" % self.port})
        self.assertEqual(st, 403)
        self.assertIn("loopback", doc["error"])
        self.assertEqual(self.c.get("/health", headers={"Host": "localhost:1"})[0], 200)
        st, doc = self.c.post("/runs", {"quick": quick(self.tport)},
                              headers={"Origin": "http://evil.example"})
        self.assertEqual(st, 403)
        self.assertIn("cross-origin", doc["error"])
        st, h, _ = self.c.call("OPTIONS", "/runs", check=False, raw=True)
        self.assertEqual(st, 405)
        self.assertNotIn("access-control-allow-origin", h)

    def test_idle_wakes_nobody(self):
        """An idle daemon has no timer: its threads sleep through 3 s."""
        if sqtest.sanitizer() == "tsan":
            self.skipTest("ThreadSanitizer's own thread wakes every 100 ms")
        time.sleep(1.5)  # let the last answers and the pruning settle

        def switches():
            total = 0
            for t in os.listdir("/proc/%d/task" % self.proc.pid):
                with open("/proc/%d/task/%s/status" % (self.proc.pid, t)) as f:
                    for line in f:
                        if "ctxt_switches" in line:
                            total += int(line.split()[1])
            return total

        with open("/proc/%d/stat" % self.proc.pid) as f:
            cpu0 = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        s0 = switches()
        time.sleep(3)
        s1 = switches()
        with open("/proc/%d/stat" % self.proc.pid) as f:
            cpu1 = sum(int(x) for x in f.read().split(")")[1].split()[11:13])
        self.assertLessEqual(s1 - s0, 3, "the idle daemon woke %d times in 3 s" % (s1 - s0))
        self.assertLessEqual(cpu1 - cpu0, 2, "the idle daemon used %d ticks" % (cpu1 - cpu0))

    def test_mcp_and_inbox_documented(self):
        """POST/DELETE/GET /mcp and the inbox's routes answer as the OpenAPI file says (the
        MCP SDK test, tests/mcp/http.test.mjs, and test_daemon_inbox.py go deeper)."""
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "py", "version": "1"}}}
        acc = {"Accept": "application/json, text/event-stream"}
        st, h, body = self.c.call("POST", "/mcp", init, headers=acc, raw=True)
        self.assertEqual(st, 200, body)
        sid = h["mcp-session-id"]
        self.assertEqual(json.loads(body)["result"]["protocolVersion"], "2025-06-18")
        hs = dict(acc, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"})
        st, doc = self.c.post("/mcp", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                              headers=hs)
        self.assertEqual(st, 200)
        self.assertIn("compare_runs", [t["name"] for t in doc["result"]["tools"]])
        st, _ = self.c.post("/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"},
                            headers=hs)
        self.assertEqual(st, 202)
        st, doc = self.c.post("/mcp", {"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=acc)
        self.assertEqual(st, 400)
        st, _ = self.c.post("/mcp", {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                            headers=dict(acc, **{"Mcp-Session-Id": "nope"}))
        self.assertEqual(st, 404)
        st, _ = self.c.post("/mcp", {"jsonrpc": "2.0", "id": 3, "method": "ping"},
                            headers=dict(hs, Accept="text/html"))
        self.assertEqual(st, 406)
        st, _ = self.c.get("/mcp")
        self.assertEqual(st, 405)
        st, _ = self.c.call("DELETE", "/mcp")
        self.assertEqual(st, 400)
        st, _ = self.c.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 204)
        st, _ = self.c.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 404)

        st, h, body = sqtest.http(self.port, "POST", "/inbox/hooks/doc", body=b"hi",
                                  headers={"Content-Type": "text/plain"})
        self.oapi.validate("POST", "/inbox/{path}", st, body, h.get("content-type"))
        self.assertEqual(st, 200)
        # a stamped one (sq1.<run>.<seq>.<ns>): its stamp in the capture, matched in the stats
        sqtest.http(self.port, "POST", "/inbox/hooks/doc", body=b'{"s":"sq1.k.0.1"}')
        st, doc = self.c.get("/inbox/_inbox/captures?since=0&path=/hooks/doc")
        self.assertEqual([c["body"] for c in doc["captures"]], ["hi", '{"s":"sq1.k.0.1"}'])
        self.assertEqual([c["stamp"] and c["stamp"]["stream"] for c in doc["captures"]],
                         [None, "k"])
        st, doc = self.c.get("/inbox/_inbox/stats")
        self.assertGreaterEqual(doc["paths"]["/hooks/doc"]["count"], 2)
        self.assertIn({"stream": "k", "received": 1, "duplicates": 0, "out_of_order": 0,
                       "missing": 0, "highest_seq": 0, "path": "/hooks/doc"}, doc["streams"])
        conn = httpclient.HTTPConnection(HOST, self.port, timeout=10)
        conn.request("GET", "/inbox/_inbox/stream")
        resp = conn.getresponse()
        self.oapi.validate("GET", "/inbox/_inbox/stream", resp.status, b"",
                           resp.getheader("content-type"))
        conn.close()
        st, doc = self.c.call("DELETE", "/inbox/_inbox/captures")
        self.assertEqual(st, 200)
        self.assertGreaterEqual(doc["cleared"], 1)

    def control(self, rid, body, want=200):
        st, doc = self.c.post("/runs/%d/control" % rid, body)
        self.assertEqual(st, want, doc)
        return doc

    def test_control_rate_pause_accounting(self):
        """An open-loop run changed through POST /runs/{id}/control: the rate raised and lowered
        twice, a pause and a resume. Accounting stays exact (sent + dropped = arrivals, the
        target counted every request sent) and each change is in the result's controls, in
        order, with rising times. Asserts no rate or timing: a busy machine passes it."""
        sqtest.http(self.tport, "POST", "/stats/reset")
        rid = self.c.start(quick(self.tport, rate=100, duration="5s", connections=4, threads=2,
                                 **{"graceful-stop": "5s"}), name="controlled")
        # the run takes changes once its load has started: until then 409 (queued, setting up)
        deadline = time.monotonic() + 30
        while True:
            st, doc = self.c.post("/runs/%d/control" % rid, {"rate": 300})
            if st == 200:
                break
            self.assertEqual(st, 409, doc)
            self.assertLess(time.monotonic(), deadline, doc)
            time.sleep(0.05)
        self.assertEqual((doc["kind"], doc["value"], doc["open"], doc["rate"], doc["paused"]),
                         ("rate", 300, True, 300, False))
        steps = [({"rate": 300}, "rate", 300)]
        for body, kind, value in (({"rate": 40}, "rate", 40), ({"pause": True}, "pause", 0),
                                  ({"resume": True}, "resume", 0), ({"rate": 400}, "rate", 400),
                                  ({"rate": 60}, "rate", 60)):
            time.sleep(0.3)
            doc = self.control(rid, body)
            self.assertEqual((doc["kind"], doc["value"]), (kind, value))
            steps.append((body, kind, value))
            if kind == "pause":
                self.assertEqual((doc["paused"], doc["rate"]), (True, 0))
                # refused while paused: a second pause; VUs of an open loop; bad bodies
                self.control(rid, {"pause": True}, 400)
                self.control(rid, {"vus": 3}, 400)
                self.control(rid, {"rate": 0}, 400)
                self.control(rid, {"rate": 5, "vus": 2}, 400)
                self.control(rid, {"speed": 5}, 400)
                self.control(rid, {"rate": 5, "scenario": "nope"}, 400)
                self.control(rid, [1], 400)
            if kind == "resume":
                self.assertEqual((doc["paused"], doc["rate"]), (False, 40))
        run = self.c.wait(rid)
        self.assertEqual(run["status"], "finished", run)
        self.control(rid, {"rate": 10}, 409)  # over: nothing to change
        self.control(999999, {"rate": 10}, 404)
        st, res = self.c.get("/runs/%d/result" % rid)
        self.assertEqual(st, 200)
        r = res["requests"]
        self.assertGreater(r["sent"], 0, r)
        self.assertEqual(r["sent"] + r["dropped"], r["arrivals"], r)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(r["in_flight"], 0, r)  # the graceful stop let them finish
        self.assertEqual(sqtest.json_get(self.tport, "/stats")["endpoints"]["fast"], r["sent"])
        ctl = res["controls"]
        self.assertEqual([(c["kind"], c["value"]) for c in ctl], [(k, v) for _, k, v in steps])
        times = [c["t_s"] for c in ctl]
        self.assertEqual(times, sorted(times))
        self.assertTrue(all(b > a for a, b in zip(times, times[1:])), times)
        self.assertTrue(all("scenario" not in c for c in ctl), ctl)
        # the arrivals are the changed schedule's, exactly (engine/control.c)
        self.assertEqual(r["arrivals"], sqtest.controlled_arrivals(ctl, 100, 5), (r, ctl))

    def test_zz_coverage(self):
        """Runs last: every documented operation was exercised and validated."""
        done = {(m, p) for (m, p, _) in self.oapi.checked}
        missing = self.oapi.operations() - done
        # checked by the browser test and the report route: the page
        self.assertEqual(missing, set(), "operations no test validated: %s" % sorted(missing))


def live_plan(port, steps=None, duration="3s"):
    """Two request steps (the target answers /nope with 404) and a think; three thresholds: one
    fails on the running figures, one holds, one is tagged (judged at the end)."""
    flow = steps or ("      - name: home\n        request: {url: /fast}\n"
                     "      - name: missing\n        request: {url: /nope}\n")
    return ("target: http://127.0.0.1:%d\n"
            "thresholds:\n"
            "  http_req_failed: [\"rate < 0.1\"]\n"
            "  http_req_duration: [\"p(95) < 60000\"]\n"
            "  \"http_req_duration{step:home}\": [\"p(99) < 60000\"]\n"
            "scenarios:\n"
            "  browse:\n"
            "    executor: constant-vus\n    vus: 2\n    duration: %s\n"
            "    flow:\n%s      - think: 20ms\n" % (port, duration, flow))


class TestLiveTables(DaemonCase):
    """The "live" event: the live tables of a run in progress (docs/daemon.md)."""

    def plan_events(self, plan):
        st, doc = self.c.post("/runs", {"plan": plan, "file": "live.yaml"})
        self.assertEqual(st, 201, doc)
        return doc["id"], sse(self.port, doc["id"])

    def test_plan_rows_and_thresholds(self):
        rid, events = self.plan_events(live_plan(self.tport))
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertGreaterEqual(len(lives), 2, [e[0] for e in events])
        for d in lives:
            self.assertEqual(d["run"], rid)
            self.assertEqual([(r["scenario"], r["name"], r["method"], r["url"]) for r in d["rows"]],
                             [("browse", "home", "GET", "/fast"),
                              ("browse", "missing", "GET", "/nope")])
            self.assertEqual(d["rows_left_out"], 0)
            self.assertEqual(d["thresholds_left_out"], 0)
        # counts so far: they grow, and each follows the second event before it
        reqs = [d["rows"][0]["requests"] for d in lives]
        self.assertEqual(reqs, sorted(reqs))
        self.assertGreater(reqs[-1], reqs[0])
        last = lives[-1]
        home, missing = last["rows"]
        self.assertEqual(missing["failed"], missing["requests"])
        self.assertEqual(missing["status"], {"404": missing["responses"]})
        self.assertEqual(home["failed"], 0)
        self.assertEqual(list(home["status"]), ["200"])
        for r in (home, missing):
            self.assertGreater(r["rps"], 0)
            self.assertLessEqual(r["p50_ms"], r["p95_ms"])
            self.assertLessEqual(r["p95_ms"], r["p99_ms"])
            self.assertLessEqual(r["p99_ms"], r["max_ms"])
        # every live event follows its second: its elapsed time is that second's
        seen = None
        for name, d, _ in events:
            if name == "second":
                seen = d["second"]["t_s"]
            elif name == "live":
                self.assertAlmostEqual(d["t_s"], seen, places=6)
        # the thresholds, judged on the running figures, before the end
        ths = {(t["metric"], t["expr"]): t for t in lives[0]["thresholds"]}
        self.assertEqual(list(ths), [("http_req_failed", "rate < 0.1"),
                                     ("http_req_duration", "p(95) < 60000"),
                                     ("http_req_duration{step:home}", "p(99) < 60000")])
        failed = ths[("http_req_failed", "rate < 0.1")]
        self.assertEqual((failed["live"], failed["ok"]), (True, False))
        self.assertAlmostEqual(failed["value"], 0.5, delta=0.1)
        held = ths[("http_req_duration", "p(95) < 60000")]
        self.assertEqual((held["live"], held["ok"]), (True, True))
        self.assertGreater(held["value"], 0)
        tagged = ths[("http_req_duration{step:home}", "p(99) < 60000")]
        self.assertEqual((tagged["live"], tagged["ok"], tagged["value"]), (False, True, None))
        # the end agrees: the same verdicts, the same step counts (the document's are exact)
        doc = events[-1][1]["result"]
        self.assertTrue(doc["thresholds_failed"])
        steps = {s["step"]: s for s in doc["steps"]}
        self.assertLessEqual(missing["requests"], steps["missing"]["requests"])
        self.assertGreater(missing["requests"], 0)
        # a replay of the ended run has no live tables
        self.assertNotIn("live", [e[0] for e in sse(self.port, rid)])

    def test_rows_are_capped(self):
        steps = "".join("      - name: %s\n        request: {url: /fast}\n"
                        % ("home" if i == 0 else "s%d" % i) for i in range(205))
        _, events = self.plan_events(live_plan(self.tport, steps=steps, duration="2s"))
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertTrue(lives, [e[0] for e in events])
        self.assertEqual(len(lives[-1]["rows"]), 200)
        self.assertEqual(lives[-1]["rows_left_out"], 5)
        self.assertEqual(lives[-1]["rows"][-1]["name"], "s199")

    def test_checks_live(self):
        steps = ("      - name: home\n        request: {url: /fast}\n"
                 "        check: {status: 200}\n"
                 "      - name: missing\n        request: {url: /nope}\n"
                 "        check: {status: 200, duration: {lt: 60s}}\n")
        _, events = self.plan_events(live_plan(self.tport, steps=steps))
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertGreaterEqual(len(lives), 2, [e[0] for e in events])
        for d in lives:
            self.assertEqual([(c["scenario"], c["step"], c["check"]) for c in d["checks"]],
                             [("browse", "home", "status 200"),
                              ("browse", "missing", "status 200"),
                              ("browse", "missing", d["checks"][2]["check"])])
            self.assertEqual(d["checks_left_out"], 0)
        last = {(c["step"], c["check"]): c for c in lives[-1]["checks"]}
        home = last[("home", "status 200")]
        self.assertEqual(home["failed"], 0)
        self.assertGreater(home["passed"], 0)
        miss = last[("missing", "status 200")]
        self.assertEqual(miss["passed"], 0)
        self.assertGreater(miss["failed"], 0)
        dur = [c for k, c in last.items() if k[0] == "missing" and k[1] != "status 200"][0]
        self.assertEqual(dur["failed"], 0)
        self.assertEqual(dur["passed"], miss["failed"])
        # they grow, and never pass what the document counts at the end
        seen = [d["checks"][0]["passed"] for d in lives]
        self.assertEqual(seen, sorted(seen))
        doc = events[-1][1]["result"]
        end = {(c["step"], c["check"]): c for c in doc["checks"]}
        for k, c in last.items():
            self.assertLessEqual(c["passed"], end[k]["passed"])
            self.assertLessEqual(c["failed"], end[k]["failed"])

    def test_failure_samples_live(self):
        secret = "s3cr3t-live-token-9f2"
        steps = ("      - name: home\n        request: {url: /fast}\n"
                 "      - name: missing\n        request: {url: /nope,\n"
                 "          headers: {Authorization: \"Bearer %s\", X-Api-Key: %s}}\n"
                 "      - name: broken\n        request: {url: /status/503}\n"
                 "      - name: slow\n        request: {url: /delay/1500, timeout: 200ms}\n"
                 % (secret, secret))
        _, events = self.plan_events(live_plan(self.tport, steps=steps))
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertGreaterEqual(len(lives), 2, [e[0] for e in events])
        # before the end: a 4xx, a 5xx and a timeout, each with one exchange
        running = lives[-2]
        by = {f["class"]: f for f in running["failure_samples"]}
        self.assertEqual(sorted(by), ["4xx", "5xx", "timeout"], running["failure_samples"])
        self.assertEqual(by["4xx"]["kind"], "status")
        self.assertEqual(by["timeout"]["kind"], "error")
        s4 = by["4xx"]["sample"]
        self.assertEqual(s4["status"], 404)
        self.assertIsNone(s4["error"])
        self.assertTrue(s4["request"]["text"].startswith("GET /nope HTTP/1.1\r\n"), s4)
        self.assertTrue(s4["response"]["head"].startswith("HTTP/1.1 404"), s4)
        s5 = by["5xx"]["sample"]
        self.assertEqual(s5["status"], 503)
        self.assertTrue(s5["request"]["text"].startswith("GET /status/503 HTTP/1.1\r\n"), s5)
        st = by["timeout"]["sample"]
        self.assertEqual((st["status"], st["error"]), (None, "timeout"))
        self.assertTrue(st["request"]["text"].startswith("GET /delay/1500 HTTP/1.1\r\n"), st)
        # redacted as the result's sampled exchanges: no secret in any event
        for name, d, _ in events:
            self.assertNotIn(secret, json.dumps(d), name)
        self.assertIn("Authorization:", s4["request"]["text"])
        # one per class: the first kept stays the same from second to second
        for d in lives[lives.index(running):]:
            later = {f["class"]: f for f in d["failure_samples"]}
            self.assertEqual(later["4xx"], by["4xx"])
        # none for a run without failures
        rid2 = self.c.start(quick(self.tport, duration="2s"))
        clean = [e[1] for e in sse(self.port, rid2) if e[0] == "live"]
        self.assertTrue(clean)
        self.assertEqual([d["failure_samples"] for d in clean], [[]] * len(clean))

    def test_fine_bins_live(self):
        # two workers, a stall-free bounded load: each second's 100 ms bins ride in its event
        rid = self.c.start(quick(self.tport, duration="3s", rate=300, connections=4, threads=2))
        events = sse(self.port, rid)
        secs = [d for name, d, _ in events if name == "second"]
        self.assertGreaterEqual(len(secs), 3, [e[0] for e in events])
        fines = [d["fine"] for d in secs if "fine" in d]
        self.assertEqual(len(fines), len(secs))
        doc = events[-1][1]["result"]
        ref = doc["series_100ms"]
        self.assertEqual(ref["bin_s"], 0.1)
        for d, f in zip(secs, fines):
            self.assertEqual(f["bin_s"], 0.1)
            self.assertEqual(f["t0_s"], int(f["t0_s"]))
            self.assertLess(f["t0_s"], d["second"]["t_s"])
            n = len(f["completed"])
            self.assertTrue(1 <= n <= 10, f)
            self.assertEqual(len(f["failed"]), n)
            self.assertEqual(len(f["max_us"]), n)
        # every whole second's bins are final when it goes out: the document has the same ones
        for f in fines[:-1]:
            i = int(round(f["t0_s"] * 10))
            self.assertEqual(len(f["completed"]), 10, f)
            self.assertEqual(f["completed"], ref["completed"][i:i + 10], f["t0_s"])
            self.assertEqual(f["failed"], ref["failed"][i:i + 10], f["t0_s"])
            self.assertEqual(f["max_us"], ref["max_us"][i:i + 10], f["t0_s"])
        self.assertGreater(sum(sum(f["completed"]) for f in fines), 0)
        # a replay of the ended run has none (its result has series_100ms)
        self.assertNotIn("fine", json.dumps([d for name, d, _ in sse(self.port, rid)
                                             if name == "second"]))

    def test_checks_are_capped(self):
        steps = "".join("      - name: %s\n        request: {url: /fast}\n"
                        "        check: {status: [200, 201]}\n"
                        % ("home" if i == 0 else "s%d" % i) for i in range(205))
        _, events = self.plan_events(live_plan(self.tport, steps=steps, duration="2s"))
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertTrue(lives, [e[0] for e in events])
        self.assertEqual(len(lives[-1]["checks"]), 200)
        self.assertEqual(lives[-1]["checks_left_out"], 5)
        self.assertEqual(lives[-1]["checks"][-1]["step"], "s199")

    def test_quick_run_one_row(self):
        rid = self.c.start(quick(self.tport, duration="2s"))
        events = sse(self.port, rid)
        lives = [e[1] for e in events if e[0] == "live"]
        self.assertGreaterEqual(len(lives), 1, [e[0] for e in events])
        totals = None
        for name, d, _ in events:
            if name == "second":
                totals = d["totals"]
            elif name == "live":
                self.assertEqual(len(d["rows"]), 1)
                r = d["rows"][0]
                self.assertEqual(r["name"], "http://%s:%d/fast" % (HOST, self.tport))
                self.assertEqual(r["requests"], totals["requests"])
                self.assertEqual(r["responses"], totals["completed"])
                self.assertEqual(r["status"], {"2xx": totals["status"]["2xx"]})
                self.assertEqual(d["thresholds"], [])
                self.assertEqual((d["checks"], d["checks_left_out"]), ([], 0))


class TestCors(DaemonCase):
    serve_args = ("--cors-origin", "https://ui.example")

    def test_cors(self):
        st, h, _ = self.c.call("OPTIONS", "/runs", check=False, raw=True,
                               headers={"Origin": "https://ui.example",
                                        "Access-Control-Request-Method": "POST"})
        self.assertEqual(st, 204)
        self.assertEqual(h["access-control-allow-origin"], "https://ui.example")
        self.assertIn("Authorization", h["access-control-allow-headers"])
        st, h, _ = self.c.get("/health", raw=True, headers={"Origin": "https://ui.example"})
        self.assertEqual(h["access-control-allow-origin"], "https://ui.example")
        st, h, _ = self.c.get("/health", raw=True, headers={"Origin": "https://other.example"})
        self.assertNotIn("access-control-allow-origin", h)
        st, doc = self.c.post("/validate", {"quick": quick(self.tport)},
                              headers={"Origin": "https://ui.example"})
        self.assertEqual(st, 200)


class TestSink(DaemonCase):
    """A plan's sink: section run by the daemon beside the load, as `squall run` runs it."""

    def submit(self, plan):
        st, doc = self.c.post("/runs", {"plan": plan, "file": "sink.yaml"})
        self.assertEqual(st, 201, doc)
        return doc["id"]

    def test_load_feeds_its_own_sink(self):
        port = free_port()
        rid = self.submit(sink_plan(port, port, n=2000))
        run = self.c.wait(rid)
        self.assertEqual(run["status"], "finished", run)
        doc = run["result"]
        s = doc["sink"]
        self.assertEqual(doc["requests"]["completed"], 2000)
        self.assertEqual((s["sent"], s["delivered"], s["lost"], s["duplicates"], s["unstamped"]),
                         (2000, 2000, 0, 0, 0))
        self.assertEqual(s["latency"]["count"], 2000)
        self.assertNotIn("settle_stopped", s)

    def test_a_taken_port_fails_that_run_only(self):
        busy = socket.socket()
        busy.bind((HOST, 0))
        busy.listen(1)
        try:
            port = busy.getsockname()[1]
            rid = self.submit(sink_plan(self.tport, port))
            run = self.c.wait(rid)
        finally:
            busy.close()
        self.assertEqual(run["status"], "failed", run)
        self.assertIn("sink.yaml:3:3: sink: http: cannot listen on 127.0.0.1:%d: " % port,
                      run["reason"])
        self.assertIn("in use", run["reason"])
        self.assertIsNone(run.get("result"))
        # the daemon goes on: the next run (a plain one) finishes
        self.assertEqual(self.c.get("/health")[0], 200)
        rid = self.c.start(quick(self.tport, requests=20))
        self.assertEqual(self.c.wait(rid)["status"], "finished")

    def test_stop_during_the_settle(self):
        """The events go to the target, not to the sink: it would wait its whole 60 s settle.
        The live events say when the settle begins; a stop then ends the run at once."""
        rid = self.submit(sink_plan(self.tport, free_port(), settle="60s", n=20))
        events = sse(self.port, rid, timeout=30, until="settle")
        self.assertIn("settle", [e[0] for e in events], events)
        settle = [e for e in events if e[0] == "settle"][0][1]
        self.assertEqual(settle, {"run": rid, "stamped": 20})
        t0 = time.monotonic()
        st, doc = self.c.post("/runs/%d/stop" % rid)
        self.assertEqual((st, doc["status"]), (202, "stopping"), doc)
        run = self.c.wait(rid, timeout=30)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(run["status"], "stopped", run)
        s = run["result"]["sink"]
        self.assertEqual((s["sent"], s["delivered"], s["lost"]), (20, 0, 20))
        self.assertTrue(s["settle_stopped"])

    def test_shutdown_during_the_settle(self):
        """SIGTERM while a run's sink settles: the daemon stops the run, stores it and exits."""
        data = os.path.join(self.tmp, "shutdown")
        proc, port = sqtest.start_serve("--data", data)
        try:
            c = Client(port, self.oapi)
            st, doc = c.post("/runs", {"plan": sink_plan(self.tport, free_port(), settle="60s",
                                                         n=5)})
            self.assertEqual(st, 201, doc)
            rid = doc["id"]
            self.assertEqual(sse(port, rid, timeout=30, until="settle")[-1][0], "settle")
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=30)
            self.assertLess(time.monotonic() - t0, 10)
            self.assertEqual(rc, 0)
        finally:
            sqtest.stop(proc)
            with open(proc.log_path, errors="replace") as f:
                log = f.read()
            os.unlink(proc.log_path)
        self.assertIn("run %d stopped: the daemon shut down" % rid, log)


class TestRetention(DaemonCase):
    serve_args = ("--keep", "2")

    def test_keep_n(self):
        ids = []
        for _ in range(4):
            ids.append(self.c.start(quick(self.tport, requests=20)))
            self.c.wait(ids[-1])
        deadline = time.monotonic() + 10
        while True:
            st, l = self.c.get("/runs")
            got = [r["id"] for r in l["runs"]]
            if got == ids[:-3:-1] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(got, [ids[3], ids[2]])
        self.assertIn("pruned", self.log())
        st, _ = self.c.call("PUT", "/config", {"keep_runs": 0})
        ids.append(self.c.start(quick(self.tport, requests=20)))
        self.c.wait(ids[-1])
        time.sleep(0.5)
        self.assertEqual(len(self.c.get("/runs")[1]["runs"]), 3)


if __name__ == "__main__":
    sqtest.main()
