#!/usr/bin/env python3
"""End-to-end tests of `batch:` (docs/plans.md, Parallel requests).

Concurrency is proved by counting, not by timing: a small server here holds every /held/ request
until four of them are in flight at once (a barrier of four, with a generous timeout); requests
sent one after another never reach four, the barrier times out and they are answered 504, which
the plan's checks and the test count as failures. Each response carries an id that a batch's
request extracts and the step after the batch sends back, so extractors of a batch apply. A
batch wider than batchConnections never has more requests in flight than that (the server
counts the most at once), and every request squall counts is one the server counted, per path.
Against `squall target`, over HTTP/1.1, HTTP/2 and HTTP/3, the order of the answers shows the same
(BatchTarget). Bounded by iteration counts.
"""
import http.server
import json
import os
import socketserver
import sys
import tempfile
import textwrap
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

ITERS = 3
WIDTH = 4


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(WIDTH, timeout=20)
        self.counts = {}
        self.inflight = 0
        self.most = 0
        self.broken = 0


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        s = self.server
        path = self.path
        key = path.rsplit("/", 1)[0] if path.startswith("/after/") else path
        with s.lock:
            s.counts[key] = s.counts.get(key, 0) + 1
            s.inflight += 1
            s.most = max(s.most, s.inflight)
        status = 200
        if path.startswith("/held/"):
            try:
                s.barrier.wait()
            except threading.BrokenBarrierError:
                with s.lock:
                    s.broken += 1
                status = 504
        elif path.startswith("/slow/"):
            time.sleep(0.05)
        body = b"ok\n"
        with s.lock:
            s.inflight -= 1
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Id", "id" + path.rsplit("/", 1)[1])
        self.end_headers()
        self.wfile.write(body)


class Batch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.srv = Server()
        self.thr = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thr.start()
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()
        self.tmp.cleanup()

    def run_plan(self, body, *extra):
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(f"target: {self.base}\n" + textwrap.dedent(body))
        return sqtest.run_json("run", path, "-q", *extra, timeout=120)

    def steps(self, doc):
        return {s["step"]: s for s in doc["steps"]}

    def test_batch_is_sent_at_once(self):
        p, doc, _ = self.run_plan(f"""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 1
                iterations: {ITERS}
                flow:
                  - name: first
                    request: {{ url: /slow/0 }}
                  - batch:
                      - name: a
                        request: {{ url: /held/1 }}
                        check: {{ status: 200 }}
                        extract: {{ id: {{ header: X-Id }} }}
                      - name: b
                        request: {{ url: /held/2 }}
                        check: {{ status: 200 }}
                      - name: c
                        request: {{ url: /held/3 }}
                        check: {{ status: 200 }}
                      - name: d
                        request: {{ url: /held/4 }}
                        check: {{ status: 200 }}
                  - name: after
                    request: {{ url: "/after/{{{{id}}}}" }}
            """)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(self.srv.broken, 0, "the batch's requests were not all in flight at once")
        self.assertGreaterEqual(self.srv.most, WIDTH)
        total = ITERS * (WIDTH + 2)
        self.assertEqual(r["completed"], total, r)
        self.assertEqual(r["failed"], 0, r)
        self.assertEqual(sum(self.srv.counts.values()), total, self.srv.counts)
        st = self.steps(doc)
        for i, name in enumerate("abcd", 1):
            self.assertEqual(self.srv.counts[f"/held/{i}"], ITERS)
            self.assertEqual(st[name]["requests"], ITERS, st[name])
        self.assertEqual(st["after"]["requests"], ITERS)
        # the extractor of a batch's request set the variable the next step sent
        self.assertEqual(self.srv.counts.get("/after", 0), ITERS, self.srv.counts)
        self.assertEqual(sum(c["passed"] for c in doc["checks"]), ITERS * WIDTH, doc["checks"])
        self.assertEqual(sum(c["failed"] for c in doc["checks"]), 0, doc["checks"])
        self.assertEqual(doc["metrics"]["iterations"]["count"], ITERS)

    def test_batch_connections_cap(self):
        p, doc, _ = self.run_plan(f"""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 2
                iterations: {ITERS}
                batchConnections: 2
                flow:
                  - batch:
                      - request: {{ url: /slow/1 }}
                      - request: {{ url: /slow/2 }}
                      - request: {{ url: /slow/3 }}
                      - request: {{ url: /slow/4 }}
                      - request: {{ url: /slow/5 }}
            """)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        total = 2 * ITERS * 5
        self.assertEqual(r["completed"], total, r)
        self.assertEqual(sum(self.srv.counts.values()), total, self.srv.counts)
        # two VUs, each at most two requests of its batch out at once
        self.assertLessEqual(self.srv.most, 4)
        for i in range(1, 6):
            self.assertEqual(self.srv.counts[f"/slow/{i}"], 2 * ITERS)



class BatchTarget(sqtest.TargetCase):
    """Against `squall target`, over HTTP/1.1 and HTTP/2 (h2c: the same port). A batch's first
    request is a /delay/5000, its second a /json/64: both extract their Content-Length into the
    same variable, so the one answered last sets it. Sent at once, the /json is answered while
    the /delay waits, and the variable ends as the /delay's "0"; sent one after the other it
    could only end as "64". The step after the batch counts which (an `if:` on it), and the
    target's counts equal squall's."""

    def run_plan(self, proto, *extra):
        self.reset()
        text = f"target: {self.base}\n" + textwrap.dedent(f"""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 1
                iterations: 2
                {proto}
                flow:
                  - batch:
                      - name: slow
                        request: {{ url: /delay/5000, timeout: 60s }}
                        extract: {{ len: {{ header: Content-Length }} }}
                      - name: quick
                        request: {{ url: /json/64 }}
                        extract: {{ len: {{ header: Content-Length }} }}
                      - name: third
                        request: {{ url: /fast }}
                  - name: concurrent
                    if: "len == 0"
                    request: {{ url: /ok }}
                  - name: sequential
                    if: "len != 0"
                    request: {{ url: /echo }}
            """)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write(text)
            p, doc, _ = sqtest.run_json("run", path, "-q", *extra, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        st = self.stats()
        ep = st["endpoints"]
        self.assertEqual(ep["ok"], 2, ep)   # the /json was answered before the /delay
        self.assertEqual(ep["echo"], 0, ep)
        self.assertEqual(ep["delay"], 2, ep)
        self.assertEqual(ep["json"], 2, ep)
        self.assertEqual(ep["fast"], 2, ep)
        r = doc["requests"]
        self.assertEqual(r["completed"], 8, r)
        self.assertEqual(r["failed"], 0, r)
        self.assertEqual(st["requests"] - ep["stats"], r["completed"], st)
        return st, doc

    def test_h1(self):
        self.run_plan("")

    def test_h2(self):
        st, _ = self.run_plan("protocol: h2")
        # every request of the batch went as a stream on the VU's one connection
        self.assertEqual(st["h2"]["connections"], 1, st["h2"])
        self.assertEqual(st["h2"]["streams"], 8, st["h2"])


def build_has_h3():
    p, _ = sqtest.run_squall("https://127.0.0.1:1/", "--http3", "--bogus-flag-for-probe")
    return "this build of squall has no HTTP/3" not in p.stderr


@unittest.skipUnless(build_has_h3(), "squall was built without HTTP/3 (ngtcp2, nghttp3, GnuTLS)")
class BatchTargetH3(BatchTarget):
    """The same plan over HTTP/3 against `squall target --tls --http3` (its self-signed
    certificate: -k): every request of the batch a stream of the VU's one QUIC connection, the
    /json answered while the /delay waits on the same connection, and the target's h3 block
    counting what squall completed. /stats is read over TCP (TLS), outside the h3 counts."""

    target_args = ("-t", "1", "--tls", "--http3")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.base = f"https://{sqtest.HOST}:{cls.port}"

    def https(self, method, path):
        import http.client
        import ssl
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(sqtest.HOST, self.port, context=ctx, timeout=30)
        try:
            conn.request(method, path)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def reset(self):
        self.assertEqual(self.https("POST", "/stats/reset")[0], 200)

    def stats(self):
        status, body = self.https("GET", "/stats")
        self.assertEqual(status, 200)
        return json.loads(body)

    def check_h3(self, st, doc):
        h3 = st["h3"]
        # 2 iterations of 3 batch requests and 1 after: all 8 streams of one QUIC connection
        self.assertEqual((h3["connections"], h3["requests"], h3["streams"]), (1, 8, 8), h3)
        self.assertEqual(st["h2"]["streams"], 0, st["h2"])
        self.assertEqual(doc["quic"]["connections"], 1, doc["quic"])

    def test_h1(self):
        pass  # the HTTP/1.1 and HTTP/2 runs are BatchTarget's

    def test_h2(self):
        pass

    def test_h3_protocol(self):
        st, doc = self.run_plan("protocol: h3", "-k")
        self.check_h3(st, doc)

    def test_h3_flag(self):
        st, doc = self.run_plan("", "-k", "--http3")
        self.check_h3(st, doc)


if __name__ == "__main__":
    sqtest.main()
