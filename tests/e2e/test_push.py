#!/usr/bin/env python3
"""End-to-end tests: the per-second series streamed while a run goes (issue 26 §5), against
real receivers from Debian started here on loopback ports:

- `--out prometheus-rw=URL`: Debian's `prometheus` with its remote-write receiver on; the series
  read back through its HTTP API (/api/v1/query) must hold the run's totals: the last
  squall_run_completed_total equals the result's requests.completed, and the 2xx responses too;
- `--out influxdb=URL`: Debian's `influxd` (InfluxDB 1.x) with a generated configuration (its
  directories in a temporary one, reporting off); SELECT sum("count") over the run's points
  equals requests.completed.

Both outputs in one run of each load face (`squall URL`, `squall run PLAN`) and in a distributed
run (agents over a real nats-server). A receiver that is not there (a closed port) or that never
answers (a listener that accepts and reads nothing) neither fails nor holds the run: it ends
with exit 0, the load's figures intact, and every second counted as failed or dropped in the
result's `push` block, within a bounded time after the load's end (the sender's 5 s flush
deadline, with generous slack for a busy machine). A URL the output cannot use is refused
before any load. Every server is started here and stopped by its PID; temporary directories are
removed.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, TargetCase, free_port, run_squall, stop_proc, wait_port  # noqa: E402

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
INFLUXD = shutil.which("influxd") or "/usr/bin/influxd"
with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "result.schema.json")) as f:
    SCHEMA = json.load(f)


def get_json(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def wait_ready(url, proc, timeout=60):
    """Returns once GET url answers 2xx; raises when proc exits first or after timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("exited (%s) before it was ready" % proc.returncode)
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if 200 <= r.status < 300:
                    return
        except OSError as e:
            last = e
        time.sleep(0.1)
    raise RuntimeError("%s not ready within %ds: %s" % (url, timeout, last))


class Receivers:
    """A Prometheus and an influxd of our own, in one temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="sq-push-")
        self.procs = []
        try:
            self._prometheus()
            self._influxd()
        except BaseException:
            self.close()
            raise

    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir, name + ".log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        self.procs.append(p)
        return p

    def _prometheus(self):
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1h\n")  # nothing to scrape: writes come in
        self.prom_port = free_port()
        p = self._spawn("prometheus", [
            PROMETHEUS, "--web.enable-remote-write-receiver",
            "--storage.tsdb.path=" + os.path.join(self.dir, "tsdb"),
            "--web.listen-address=%s:%d" % (HOST, self.prom_port), "--config.file=" + cfg])
        self.prom = "http://%s:%d" % (HOST, self.prom_port)
        wait_ready(self.prom + "/-/ready", p)

    def _influxd(self):
        d = self.dir
        self.influx_port = free_port()
        cfg = os.path.join(d, "influxdb.conf")
        with open(cfg, "w") as f:
            f.write('reporting-enabled = false\nbind-address = "%s:%d"\n'
                    '[meta]\n  dir = "%s/meta"\n'
                    '[data]\n  dir = "%s/data"\n  wal-dir = "%s/wal"\n'
                    '[monitor]\n  store-enabled = false\n'
                    '[http]\n  bind-address = "%s:%d"\n  log-enabled = false\n'
                    % (HOST, free_port(), d, d, d, HOST, self.influx_port))
        p = self._spawn("influxd", [INFLUXD, "-config", cfg])
        self.influx = "http://%s:%d" % (HOST, self.influx_port)
        wait_ready(self.influx + "/ping", p)
        self.influx_query("CREATE DATABASE sq", method="POST")

    def influx_query(self, q, method="GET", db=None):
        args = {"q": q}
        if db:
            args["db"] = db
        data = urllib.parse.urlencode(args)
        if method == "POST":
            req = urllib.request.Request(self.influx + "/query", data=data.encode(), method="POST")
        else:
            req = urllib.request.Request(self.influx + "/query?" + data)
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def influx_sum(self, run, field="count"):
        doc = self.influx_query('SELECT sum("%s") FROM squall_http_reqs WHERE "run" = \'%s\''
                                % (field, run), db="sq")
        series = doc["results"][0].get("series")
        return series[0]["values"][0][1] if series else None

    def prom_value(self, query):
        """The instant query's one sample value (an int), or None when it has no series."""
        doc = get_json(self.prom + "/api/v1/query?" + urllib.parse.urlencode({"query": query}))
        res = doc["data"]["result"]
        if not res:
            return None
        assert len(res) == 1, res
        return int(float(res[0]["value"][1]))

    def close(self):
        for p in self.procs:
            stop_proc(p)
        shutil.rmtree(self.dir, ignore_errors=True)


@unittest.skipUnless(os.path.exists(PROMETHEUS) and os.path.exists(INFLUXD),
                     "prometheus or influxd not installed (scripts/deps.sh test)")
class Push(TargetCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        try:
            cls.rx = Receivers()
        except BaseException:
            super().tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.rx.close()
        super().tearDownClass()

    def outs(self):
        return ["--out", "prometheus-rw=%s/api/v1/write" % self.rx.prom,
                "--out", "influxdb=%s/sq" % self.rx.influx]

    def check_pushed(self, doc, name, both=True):
        """Every second reached each receiver, and what they hold adds up to the result."""
        jsonschema.validate(doc, SCHEMA)
        done = doc["requests"]["completed"]
        self.assertGreater(done, 0)
        kinds = ("prometheus-rw", "influxdb") if both else ("influxdb",)
        for k in kinds:
            b = doc["push"][k]
            self.assertGreater(b["points"], 0, b)
            self.assertEqual((b["sent"], b["failed"], b["dropped"]), (b["points"], 0, 0), b)
            self.assertIsNone(b["last_error"])
        self.assertEqual(self.rx.influx_sum(name), done)
        self.assertEqual(self.rx.influx_sum(name, "sent"), doc["requests"]["sent"])
        if both:
            sel = '{run="%s"}' % name
            self.assertEqual(self.rx.prom_value("squall_run_completed_total" + sel), done)
            self.assertEqual(self.rx.prom_value("squall_run_requests_total" + sel),
                             doc["requests"]["sent"])
            self.assertEqual(
                self.rx.prom_value('squall_run_responses_total{run="%s",class="2xx"}' % name),
                doc["status"].get("2xx", 0))
            # a latency quantile per second: present, in seconds, at most the run's max
            doc_l = get_json(self.rx.prom + "/api/v1/query?" + urllib.parse.urlencode(
                {"query": 'squall_run_interval_latency_seconds{run="%s",quantile="1"}' % name}))
            self.assertEqual(len(doc_l["data"]["result"]), 1, doc_l)

    def test_quick_face_both_receivers(self):
        name = "quick-%d" % os.getpid()
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-q", "-r", "200", "-c", "2", "-t", "1",
                                    "-d", "3s", "--name", name, *self.outs())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_pushed(doc, name)

    def test_plan_face_both_receivers(self):
        name = "plan-%d" % os.getpid()
        plan = os.path.join(self.rx.dir, "plan.yaml")
        with open(plan, "w") as f:
            f.write("target: %s\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
                    "    rate: 100\n    duration: 3s\n    preAllocatedVUs: 4\n"
                    "    flow:\n      - request: { url: /fast }\n" % self.base)
        p, doc, _ = sqtest.run_json("run", plan, "-q", "--name", name, *self.outs())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.check_pushed(doc, name)
        # a plan without metrics: none in its series, none pushed
        self.assertFalse(any("custom_metrics" in s for s in doc["series"]))
        d = self.rx.influx_query('SELECT count(*) FROM squall_custom WHERE "run" = \'%s\'' % name,
                                 db="sq")
        self.assertIsNone(d["results"][0].get("series"))

    def custom_plan(self, extra="", duration="3s"):
        plan = os.path.join(self.rx.dir, "plan-custom.yaml")
        with open(plan, "w") as f:
            f.write("target: %s\nmetrics: { orders: counter, in_stock: rate, depth: gauge, "
                    "cart: trend }\nscenarios:\n  s:\n    executor: constant-arrival-rate\n"
                    "    rate: 50\n    duration: %s\n    preAllocatedVUs: 4\n"
                    "    flow:\n      - request: { url: /ok }\n        metric:\n"
                    "          - { name: orders, add: 2 }\n          - { name: in_stock }\n"
                    "          - { name: depth, add: 3 }\n"
                    "          - { name: cart, add: 7 }\n%s" % (self.base, duration, extra))
        return plan

    def check_custom(self, doc, name, rows):
        """The plan's own metrics reached both receivers, each second's, and what they hold
        equals what --out csv wrote for those seconds (rows), which adds up to the document's
        figures and to what the target answered, to the last request (a last sliver of a second
        that joins the entry before it reaches the streams too: the engine holds a second back
        until no worker can still fold its end into it)."""
        for k in ("prometheus-rw", "influxdb"):
            b = doc["push"][k]
            self.assertEqual((b["sent"], b["failed"], b["dropped"]), (b["points"], 0, 0), b)
        self.assertEqual(len(rows), len(doc["series"]))
        ok = self.stats()["endpoints"]["ok"]
        cm = doc["custom_metrics"]
        self.assertEqual(cm["orders"]["count"], 2 * ok)
        orders = sum(float(r["orders"]) for r in rows)
        passes = sum(int(r["in_stock_passes"]) for r in rows)
        carts = sum(int(r["cart_count"]) for r in rows)
        self.assertEqual(sum(int(r["in_stock_total"]) for r in rows), passes)
        self.assertEqual(carts, passes)
        self.assertEqual(orders, 2 * passes)
        self.assertEqual(passes, ok)
        self.assertTrue(all(float(r["cart_avg"]) == 7 for r in rows if int(r["cart_count"])))
        self.assertEqual(float(rows[-1]["depth"]), 3)
        q = 'SELECT sum("%s") FROM squall_custom WHERE "run" = \'%s\' AND "metric" = \'%s\''

        def isum(field, metric):
            d = self.rx.influx_query(q % (field, name, metric), db="sq")
            series = d["results"][0].get("series")
            return series[0]["values"][0][1] if series else None
        self.assertEqual(isum("count", "orders"), orders)
        self.assertEqual(isum("passes", "in_stock"), passes)
        self.assertEqual(isum("total", "in_stock"), passes)
        self.assertEqual(isum("samples", "cart"), carts)
        d = self.rx.influx_query(
            'SELECT last("value") FROM squall_custom WHERE "run" = \'%s\' AND '
            '"metric" = \'depth\'' % name, db="sq")
        self.assertEqual(d["results"][0]["series"][0]["values"][0][1], 3)
        sel = '{run="%s"}' % name
        self.assertEqual(self.rx.prom_value("squall_custom_orders_total" + sel), orders)
        self.assertEqual(self.rx.prom_value("squall_custom_in_stock_passes_total" + sel), passes)
        self.assertEqual(self.rx.prom_value("squall_custom_in_stock_samples_total" + sel), passes)
        self.assertEqual(self.rx.prom_value("squall_custom_cart_samples_total" + sel), carts)
        self.assertEqual(self.rx.prom_value("squall_custom_depth" + sel), 3)
        self.assertEqual(self.rx.prom_value("squall_custom_cart_avg" + sel), 7)

    def test_plan_metrics_both_receivers_and_csv(self):
        """A plan's own metrics each second: to Prometheus and InfluxDB (read back), and in
        --out csv's columns."""
        self.reset()
        name = "custom-%d" % os.getpid()
        csv_path = os.path.join(self.rx.dir, "custom.csv")
        p, doc, _ = sqtest.run_json("run", self.custom_plan(), "-q", "--name", name,
                                    "--out", "csv=" + csv_path, *self.outs())
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        import csv
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        self.check_custom(doc, name, rows)

    def test_plan_metrics_split_by_tags(self):
        """Two steps with different user tags (merged with their scenario's) add to one counter:
        InfluxDB and Prometheus hold one series per tag set, with the tags as influx tags and
        Prometheus labels (a value with a space and a comma escaped in line protocol), and each
        series' sum is that step's samples: what the target answered on the step's path; the
        series add up to what --out csv (per metric) wrote."""
        self.reset()
        name = "tags-%d" % os.getpid()
        csv_path = os.path.join(self.rx.dir, "tags.csv")
        plan = os.path.join(self.rx.dir, "plan-tags.yaml")
        with open(plan, "w") as f:
            f.write("target: %s\nmetrics: { orders: counter }\nscenarios:\n  s:\n"
                    "    executor: constant-arrival-rate\n    rate: 40\n    duration: 3s\n"
                    "    preAllocatedVUs: 4\n    tags: { team: web }\n    flow:\n"
                    "      - request: { url: /ok }\n        tags: { page: \"home, main\" }\n"
                    "        metric: { name: orders, add: 1 }\n"
                    "      - request: { url: /fast }\n        tags: { page: cart }\n"
                    "        metric: { name: orders, add: 3 }\n" % self.base)
        p, doc, _ = sqtest.run_json("run", plan, "-q", "--name", name,
                                    "--out", "csv=" + csv_path, *self.outs())
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        for k in ("prometheus-rw", "influxdb"):
            b = doc["push"][k]
            self.assertEqual((b["sent"], b["failed"], b["dropped"]), (b["points"], 0, 0), b)
        import csv
        with open(csv_path) as f:
            total = sum(float(r["orders"]) for r in csv.DictReader(f))
        eps = self.stats()["endpoints"]
        ok, fast = eps["ok"], eps["fast"]
        self.assertEqual(doc["custom_metrics"]["orders"]["count"], ok + 3 * fast)
        d = self.rx.influx_query('SELECT sum("count") FROM squall_custom WHERE "run" = \'%s\' '
                                 'GROUP BY "page", "team"' % name, db="sq")
        got = {(x["tags"]["page"], x["tags"]["team"]): x["values"][0][1]
               for x in d["results"][0]["series"]}
        self.assertEqual(set(got), {("home, main", "web"), ("cart", "web")}, got)
        home, cart = got[("home, main", "web")], got[("cart", "web")]
        self.assertEqual((home, cart), (ok, 3 * fast))
        self.assertEqual(home + cart, total)
        sel = 'squall_custom_orders_total{run="%s",team="web",page="%s"}'
        self.assertEqual(self.rx.prom_value(sel % (name, "home, main")), home)
        self.assertEqual(self.rx.prom_value(sel % (name, "cart")), cart)
        self.assertEqual(self.rx.prom_value('count(squall_custom_orders_total{run="%s"})' % name),
                         2)

    def test_run_ending_just_after_a_tick(self):
        """A run that ends 50 ms after a tick: each worker folds that sliver into the second the
        tick closed, and the streams carry it like the result does. Every stream adds up to the
        result's totals: --out csv's rows (and --out hdr has a line per entry), InfluxDB's
        points, Prometheus's last counters, for the quick face (two workers) and for a plan with
        its own metrics. Before the engine held a second back until no worker could fold into
        it, the main thread had handed that second out when the sliver came: the CSV summed 400
        of 410, every time."""
        import csv
        for face in ("quick", "plan"):
            self.reset()
            name = "tail-%s-%d" % (face, os.getpid())
            csv_path = os.path.join(self.rx.dir, "tail-%s.csv" % face)
            hdr_path = os.path.join(self.rx.dir, "tail-%s.hdr" % face)
            outs = ["--out", "csv=" + csv_path, "--out", "hdr=" + hdr_path, *self.outs()]
            if face == "quick":
                p, doc, _ = sqtest.run_json(self.base + "/fast", "-q", "-r", "200", "-c", "2",
                                            "-t", "2", "-d", "2.05s", "--name", name, *outs)
            else:
                p, doc, _ = sqtest.run_json("run", self.custom_plan(duration="2.05s"), "-q",
                                            "--name", name, *outs)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(csv_path) as f:
                rows = list(csv.DictReader(f))
            r = doc["requests"]
            self.assertGreater(r["completed"], 0)
            self.assertEqual(len(rows), len(doc["series"]))
            self.assertEqual(sum(int(x["completed"]) for x in rows), r["completed"])
            self.assertEqual(sum(int(x["requests"]) for x in rows), r["sent"])
            with open(hdr_path) as f:
                hdr = [x for x in f if x.strip() and not x.startswith(("#", '"'))]
            self.assertEqual(len(hdr), len(doc["series"]))
            self.check_pushed(doc, name)
            if face == "plan":
                self.check_custom(doc, name, rows)

    @unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed")
    def test_plan_metrics_distributed(self):
        """Two agents: their seconds' plan metrics reach the controller, whose csv and pushes
        carry every agent's."""
        self.reset()
        nport = free_port()
        nats = subprocess.Popen(["nats-server", "-a", HOST, "-p", str(nport)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agents = []
        try:
            wait_port(nport, nats)
            url = "nats://%s:%d" % (HOST, nport)
            agents = [sqtest.Agent(url, n, "pushm") for n in ("m1", "m2")]
            name = "custom-dist-%d" % os.getpid()
            csv_path = os.path.join(self.rx.dir, "custom-dist.csv")
            p, doc, _ = sqtest.run_json("run", self.custom_plan(), "-q", "--agents", "2",
                                        "--nats", url, "--subject-prefix", "pushm", "--name",
                                        name, "--out", "csv=" + csv_path, *self.outs())
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            for a in agents:
                a.stop()
            stop_proc(nats)
        jsonschema.validate(doc, SCHEMA)
        import csv
        with open(csv_path) as f:
            rows = list(csv.DictReader(f))
        self.check_custom(doc, name, rows)

    @unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed")
    def test_distributed_run(self):
        nport = free_port()
        nats = subprocess.Popen(["nats-server", "-a", HOST, "-p", str(nport)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agents = []
        try:
            wait_port(nport, nats)
            url = "nats://%s:%d" % (HOST, nport)
            agents = [sqtest.Agent(url, n, "push") for n in ("a1", "a2")]
            name = "dist-%d" % os.getpid()
            p, doc, _ = sqtest.run_json(self.base + "/fast", "-q", "-r", "200", "-c", "4",
                                        "-t", "1", "-d", "3s", "--agents", "2", "--nats", url,
                                        "--subject-prefix", "push", "--name", name, *self.outs())
            self.assertEqual(p.returncode, 0, p.stderr)
            self.check_pushed(doc, name)
        finally:
            for a in agents:
                a.stop()
            stop_proc(nats)

    def dead_run(self, url):
        name = "dead-%d-%d" % (os.getpid(), time.monotonic_ns())
        p, doc, took = sqtest.run_json(self.base + "/fast", "-r", "200", "-c", "2", "-t", "1",
                                       "-d", "3s", "--name", name, "--out", "influxdb=" + url)
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        # the load's figures are whole: the same requests as without the output
        self.assertGreater(doc["requests"]["completed"], 0)
        self.assertEqual(doc["requests"]["failed"], 0)
        b = doc["push"]["influxdb"]
        self.assertGreater(b["points"], 0, b)
        self.assertEqual(b["sent"], 0, b)
        self.assertEqual(b["failed"] + b["dropped"], b["points"], b)
        self.assertTrue(b["last_error"], b)
        self.assertIn("squall: --out influxdb: 0 of %d seconds sent" % b["points"], p.stderr)
        # bounded: the 3 s load, the 5 s flush deadline, and slack for a busy machine (a sender
        # that waited for the receiver would hold the run far longer, or for ever)
        self.assertLess(took, 40, took)
        return b

    def test_closed_port_neither_fails_nor_holds_the_run(self):
        b = self.dead_run("http://%s:%d/sq" % (HOST, free_port()))
        self.assertIn("connect", b["last_error"])

    def test_silent_receiver_neither_fails_nor_holds_the_run(self):
        with socket.socket() as ls:
            ls.bind((HOST, 0))
            ls.listen(64)  # accepts (the kernel's backlog) and never answers
            b = self.dead_run("http://%s:%d/sq" % (HOST, ls.getsockname()[1]))
        self.assertIn("no answer", b["last_error"])

    def test_unusable_url_is_refused_before_any_load(self):
        self.reset()
        for out, rc, why in (
                ("influxdb=http://u:%%zz@%s:1/db" % HOST, 2, "a bad %-escape in its user:password"),
                ("prometheus-rw=ftp://x/", 2, "is not an http(s):// URL"),
                ("influxdb=http://no-such-host.invalid/db", 1,
                 "--out influxdb: cannot resolve 'no-such-host.invalid'")):
            p, _ = run_squall(self.base + "/fast", "-d", "1s", "--out", out)
            self.assertEqual(p.returncode, rc, (out, p.stderr))
            self.assertIn(why, p.stderr)
        self.assertEqual(self.stats()["requests"], 0)


class Footprint(TargetCase):
    """libsnappy is C++ and brings libstdc++ (about 1 MB of resident library pages, the base of
    bench/connmem.py's bytes): it is loaded only when --out prometheus-rw is opened."""

    def mapped(self, *args):
        """The shared objects mapped by a running `squall ARGS` (its /proc/PID/maps, read once
        the target has seen its first request: the outputs are open by then)."""
        self.reset()
        proc = subprocess.Popen([sqtest.squall_path(), *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while self.stats()["requests"] == 0 and time.monotonic() < deadline:
                self.assertIsNone(proc.poll(), "squall ended before its first request")
                time.sleep(0.05)
            with open("/proc/%d/maps" % proc.pid) as f:
                maps = f.read()
        finally:
            stop_proc(proc)
        return {os.path.basename(line.split()[-1]) for line in maps.splitlines()
                if line.split()[-1].startswith("/")}

    def test_plain_run_maps_no_cxx_runtime(self):
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue(any(n.startswith("libc.so") for n in libs), libs)
        self.assertFalse([n for n in libs if "snappy" in n], libs)
        if not any(n.startswith(("libasan", "libubsan", "libtsan")) for n in libs):
            # (a sanitizer build's runtimes bring libstdc++ themselves: make test-asan, -tsan)
            self.assertFalse([n for n in libs if "stdc++" in n], libs)

    def test_plain_run_maps_no_quic_libraries(self):
        """GnuTLS (with p11-kit, nettle, gmp...), ngtcp2 and nghttp3 are HTTP/3's: loaded only
        by --http3 (base/h3lib.c), not by a plain run nor by a plain target."""
        quic = ("libgnutls", "libngtcp2", "libnghttp3", "libp11-kit")
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue(any(n.startswith("libc.so") for n in libs), libs)
        self.assertFalse([n for n in libs if n.startswith(quic)], libs)
        with open("/proc/%d/maps" % self.proc.pid) as f:
            target = {os.path.basename(line.split()[-1]) for line in f
                      if line.split()[-1].startswith("/")}
        self.assertFalse([n for n in target if n.startswith(quic)], target)

    def test_plain_run_maps_no_store_yaml_or_lua(self):
        """libsqlite3 (the run store), libfyaml (plans) and LuaJIT (scripts) are loaded only
        where they are used (base/dynlib.h), not by a plain run."""
        lazy = ("libsqlite3", "libfyaml", "libluajit")
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue(any(n.startswith("libc.so") for n in libs), libs)
        self.assertFalse([n for n in libs if n.startswith(lazy)], libs)

    def test_plain_run_maps_no_openssl(self):
        """libssl and libcrypto (1.7 MB of resident pages and most of the start's relocations)
        are TLS's: net/tls.c opens them with the first TLS context, so neither a plain run nor a
        plain target maps them (WebSocket's SHA-1 is base/sha1.c's)."""
        ossl = ("libssl", "libcrypto")
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue(any(n.startswith("libc.so") for n in libs), libs)
        self.assertFalse([n for n in libs if n.startswith(ossl)], libs)
        with open("/proc/%d/maps" % self.proc.pid) as f:
            target = {os.path.basename(line.split()[-1]) for line in f
                      if line.split()[-1].startswith("/")}
        self.assertFalse([n for n in target if n.startswith(ossl)], target)

    def test_plain_run_maps_no_brotli_or_zstd(self):
        """br and zstd (http/codecs.c) are opened when a body first needs one: a plain run does
        not map them (gzip and deflate are zlib's, linked)."""
        codecs = ("libbrotli", "libzstd")
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue(any(n.startswith("libc.so") for n in libs), libs)
        self.assertFalse([n for n in libs if n.startswith(codecs)], libs)

    def test_encoded_responses_load_brotli_and_zstd(self):
        for coding, lib in (("br", "libbrotlidec"), ("zstd", "libzstd")):
            libs = self.mapped(self.base + "/json/5000", "-H", "Accept-Encoding: " + coding,
                               "-c", "1", "-t", "1", "-d", "20s")
            self.assertTrue([n for n in libs if n.startswith(lib)], (coding, libs))

    def test_websocket_run_loads_wslay(self):
        """wslay is opened by the first WebSocket frame context (proto/ws.c), not by a plain
        run."""
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertFalse([n for n in libs if n.startswith("libwslay")], libs)
        ws = "ws" + self.base[len("http"):] + "/ws"
        libs = self.mapped(ws, "--message", "hello", "-c", "1", "-t", "1", "-d", "20s")
        self.assertTrue([n for n in libs if n.startswith("libwslay")], libs)

    def test_http2_run_loads_nghttp2(self):
        """nghttp2 is opened by the first HTTP/2 session (http/nghttp2lib.c), client's or
        target's: neither a plain run nor a target that served only HTTP/1.1 maps it."""
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s")
        self.assertFalse([n for n in libs if n.startswith("libnghttp2")], libs)
        port = free_port()
        target = subprocess.Popen([sqtest.squall_path(), "target", "-q", "-p", str(port), "-t",
                                   "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port, target)
            url = "http://%s:%d/fast" % (HOST, port)
            p, out, _ = sqtest.run_json(url, "-c", "1", "-t", "1", "-n", "5")
            self.assertEqual(p.returncode, 0, p.stderr)
            with open("/proc/%d/maps" % target.pid) as f:
                self.assertNotIn("libnghttp2", f.read())
            p, out, _ = sqtest.run_json(url, "--http2", "-c", "1", "-t", "1", "-n", "5")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(out["requests"]["completed"], 5)
            with open("/proc/%d/maps" % target.pid) as f:
                self.assertIn("libnghttp2", f.read())
        finally:
            stop_proc(target)

    def test_https_run_loads_openssl(self):
        """An https:// run opens them (and works: every request answered over TLS)."""
        port = free_port()
        target = subprocess.Popen([sqtest.squall_path(), "target", "-q", "--tls", "-p",
                                   str(port), "-t", "1"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_port(port, target)
            p, out, _ = sqtest.run_json("https://%s:%d/fast" % (HOST, port), "-k", "-c", "1",
                                        "-t", "1", "-n", "20")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(out["requests"]["completed"], 20)
            self.assertEqual(out["tls"]["handshakes"], 1, out["tls"])
            with open("/proc/%d/maps" % target.pid) as f:
                maps = f.read()
        finally:
            stop_proc(target)
        self.assertIn("libssl", maps)
        self.assertIn("libcrypto", maps)

    def test_plan_run_loads_fyaml(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.yaml")
            with open(plan, "w") as f:
                f.write("target: %s\nscenarios:\n  s:\n    executor: constant-vus\n"
                        "    vus: 1\n    duration: 20s\n    flow:\n"
                        "      - request: { url: /fast }\n" % self.base)
            libs = self.mapped("run", plan)
        self.assertTrue([n for n in libs if n.startswith("libfyaml")], libs)
        self.assertFalse([n for n in libs if n.startswith("libluajit")], libs)
        self.assertFalse([n for n in libs if n.startswith("libpcre2")], libs)  # no regex in it

    def test_plan_with_a_regex_loads_pcre2(self):
        """PCRE2 is opened by the first regex compiled (plan/eval.c), not by a plain run."""
        self.assertFalse([n for n in self.mapped(self.base + "/fast", "-c", "1", "-t", "1",
                                                 "-d", "20s") if n.startswith("libpcre2")])
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.yaml")
            with open(plan, "w") as f:
                f.write("target: %s\nscenarios:\n  s:\n    executor: constant-vus\n"
                        "    vus: 1\n    duration: 20s\n    flow:\n"
                        "      - request: { url: /fast }\n"
                        "        extract: { v: { regex: \"(.)\" } }\n" % self.base)
            libs = self.mapped("run", plan)
        self.assertTrue([n for n in libs if n.startswith("libpcre2")], libs)

    def test_script_run_loads_luajit(self):
        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "s.lua")
            with open(script, "w") as f:
                f.write("request = function() return wrk.format() end\n")
            libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s",
                               "-s", script)
        self.assertTrue([n for n in libs if n.startswith("libluajit")], libs)

    def test_prometheus_output_loads_snappy(self):
        dead = "prometheus-rw=http://%s:%d/api/v1/write" % (HOST, free_port())
        libs = self.mapped(self.base + "/fast", "-c", "1", "-t", "1", "-d", "20s", "--out", dead)
        self.assertTrue([n for n in libs if "snappy" in n], libs)


@unittest.skipUnless(os.path.exists(INFLUXD) and shutil.which("openssl"),
                     "influxd or openssl not installed (scripts/deps.sh test)")
class InfluxAuthTls(TargetCase):
    """--out influxdb=https://user:password@... against a real influxd with HTTPS and auth on:
    the points arrive (queried back with the same credentials), a wrong password fails every
    POST with the server's 401 and never the load, and the password appears nowhere in the
    result."""

    PASSWORD = "s@cret:pw"  # written %-escaped in the URL

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="sq-push-tls-")
        cls.procs = []
        try:
            cls._start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _start(cls):
        d = cls.dir
        cls.cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cls.cert,
                        "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        cls.rx_port = free_port()
        cfg = os.path.join(d, "influxdb.conf")
        with open(cfg, "w") as f:
            f.write('reporting-enabled = false\nbind-address = "%s:%d"\n'
                    '[meta]\n  dir = "%s/meta"\n'
                    '[data]\n  dir = "%s/data"\n  wal-dir = "%s/wal"\n'
                    '[monitor]\n  store-enabled = false\n'
                    '[http]\n  bind-address = "%s:%d"\n  log-enabled = false\n'
                    '  auth-enabled = true\n  https-enabled = true\n'
                    '  https-certificate = "%s"\n  https-private-key = "%s"\n'
                    % (HOST, free_port(), d, d, d, HOST, cls.rx_port, cls.cert, key))
        log = open(os.path.join(d, "influxd.log"), "w")
        p = subprocess.Popen([INFLUXD, "-config", cfg], stdout=log, stderr=log,
                             stdin=subprocess.DEVNULL)
        log.close()
        cls.procs.append(p)
        import ssl
        cls.ctx = ssl.create_default_context(cafile=cls.cert)
        cls.base_url = "https://%s:%d" % (HOST, cls.rx_port)
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(cls.base_url + "/ping", timeout=2,
                                            context=cls.ctx) as r:
                    if r.status < 300:
                        break
            except OSError:
                if p.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # the first user may be made without credentials; everything after needs them
        cls.query("CREATE USER sq WITH PASSWORD '%s' WITH ALL PRIVILEGES"
                  % cls.PASSWORD.replace("'", "\\'"), auth=False)
        deadline = time.monotonic() + 10
        while True:  # the new user takes a moment to count
            try:
                cls.query("CREATE DATABASE sq")
                break
            except urllib.error.HTTPError as e:
                if e.code != 401 or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    @classmethod
    def query(cls, q, db=None, auth=True):
        args = {"q": q}
        if db:
            args["db"] = db
        req = urllib.request.Request(cls.base_url + "/query",
                                     data=urllib.parse.urlencode(args).encode(), method="POST")
        if auth:  # HTTP Basic, as squall sends it
            import base64
            req.add_header("Authorization", "Basic " + base64.b64encode(
                ("sq:" + cls.PASSWORD).encode()).decode())
        with urllib.request.urlopen(req, timeout=10, context=cls.ctx) as r:
            return json.loads(r.read())

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            stop_proc(p)
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def run_to(self, password, name):
        url = "influxdb=https://sq:%s@%s:%d/sq" % (urllib.parse.quote(password, safe=""), HOST,
                                                   self.rx_port)
        env = dict(os.environ, SSL_CERT_FILE=self.cert)  # OpenSSL's default trust, this CA
        p = subprocess.run([sqtest.squall_path(), self.base + "/fast", "-q", "-r", "100", "-c",
                            "2", "-t", "1", "-d", "2s", "--name", name, "--out", url,
                            "--json", "-"], capture_output=True, text=True, timeout=60, env=env)
        self.assertNotIn(password, p.stdout + p.stderr)
        self.assertNotIn(urllib.parse.quote(password, safe=""), p.stdout + p.stderr)
        return p, json.loads(p.stdout)

    def test_points_arrive_with_credentials_over_https(self):
        name = "tls-%d" % os.getpid()
        p, doc = self.run_to(self.PASSWORD, name)
        self.assertEqual(p.returncode, 0, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        b = doc["push"]["influxdb"]
        self.assertGreater(b["points"], 0, b)
        self.assertEqual((b["sent"], b["failed"], b["dropped"]), (b["points"], 0, 0), b)
        self.assertEqual(b["url"], "https://%s:%d/sq" % (HOST, self.rx_port))
        res = self.query('SELECT sum("count") FROM squall_http_reqs WHERE "run" = \'%s\''
                         % name, db="sq")
        self.assertEqual(res["results"][0]["series"][0]["values"][0][1],
                         doc["requests"]["completed"])

    def test_wrong_password_fails_the_push_not_the_run(self):
        p, doc = self.run_to("wrong", "bad-%d" % os.getpid())
        self.assertEqual(p.returncode, 0, p.stderr)
        b = doc["push"]["influxdb"]
        self.assertEqual((b["sent"], b["failed"]), (0, b["points"]), b)
        self.assertIn("401", b["last_error"])
        self.assertGreater(doc["requests"]["completed"], 0)


class TokenHeader(TargetCase):
    """SQUALL_INFLUXDB_TOKEN and SQUALL_PROMETHEUS_RW_TOKEN become each output's Authorization
    header (InfluxDB 2.x's "Token T", a bearer token for remote write), over the URL's own
    user:password; seen by a receiver in this process that records every POST's headers."""

    def test_tokens_from_the_environment(self):
        import http.server
        import threading
        seen = []

        class Rec(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                seen.append((self.path, self.headers.get("Authorization")))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        srv = http.server.ThreadingHTTPServer((HOST, 0), Rec)
        th = threading.Thread(target=srv.serve_forever, daemon=True)
        th.start()
        try:
            port = srv.server_address[1]
            env = dict(os.environ, SQUALL_INFLUXDB_TOKEN="tok-i",
                       SQUALL_PROMETHEUS_RW_TOKEN="tok-p")
            outs = ["--out", "influxdb=http://u:pw@%s:%d/sq" % (HOST, port),
                    "--out", "prometheus-rw=http://%s:%d/api/v1/write" % (HOST, port)]
            p = subprocess.run([sqtest.squall_path(), self.base + "/fast", "-q", "-n", "50", "-c",
                                "1", "-t", "1", *outs, "--json", "-"], capture_output=True,
                               text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            srv.shutdown()
            srv.server_close()
        self.assertNotIn("tok-", p.stdout + p.stderr)
        auth = {path.split("?")[0]: a for path, a in seen}
        self.assertEqual(auth["/write"], "Token tok-i")
        self.assertEqual(auth["/api/v1/write"], "Bearer tok-p")


@unittest.skipUnless(os.path.exists(PROMETHEUS) and shutil.which("openssl"),
                     "prometheus or openssl not installed (scripts/deps.sh test)")
class PromAuthTls(TargetCase):
    """--out prometheus-rw=https://user:password@... against a real Prometheus serving HTTPS with
    basic auth (its --web.config.file): the series arrive, read back through its API with the
    same credentials."""

    PASSWORD = "rw-p@ss"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="sq-push-prom-")
        cls.rx_proc = None
        try:
            cls._start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _start(cls):
        import base64
        import ssl
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                import crypt  # bcrypt through libcrypt, for Prometheus's basic_auth_users
            except ImportError:  # gone from Python 3.13
                raise unittest.SkipTest("no crypt module to hash the basic-auth password")
        d = cls.dir
        cls.cert, key = os.path.join(d, "c.pem"), os.path.join(d, "k.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cls.cert,
                        "-days", "1", "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        web = os.path.join(d, "web.yml")
        with open(web, "w") as f:
            f.write("tls_server_config:\n  cert_file: %s\n  key_file: %s\n"
                    "basic_auth_users:\n  sq: '%s'\n"
                    % (cls.cert, key,
                       crypt.crypt(cls.PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=2 ** 4))))
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1h\n")
        cls.rx_port = free_port()
        log = open(os.path.join(d, "prometheus.log"), "w")
        cls.rx_proc = subprocess.Popen([
            PROMETHEUS, "--web.enable-remote-write-receiver", "--web.config.file=" + web,
            "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
            "--web.listen-address=%s:%d" % (HOST, cls.rx_port), "--config.file=" + cfg],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        cls.ctx = ssl.create_default_context(cafile=cls.cert)
        cls.auth = "Basic " + base64.b64encode(("sq:" + cls.PASSWORD).encode()).decode()
        cls.base_url = "https://%s:%d" % (HOST, cls.rx_port)
        deadline = time.monotonic() + 60
        while True:
            try:
                cls.get("/-/ready")
                break
            except OSError:
                if cls.rx_proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    @classmethod
    def get(cls, path):
        req = urllib.request.Request(cls.base_url + path, headers={"Authorization": cls.auth})
        with urllib.request.urlopen(req, timeout=10, context=cls.ctx) as r:
            return r.read()

    @classmethod
    def tearDownClass(cls):
        if cls.rx_proc:
            stop_proc(cls.rx_proc)
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def test_series_arrive_with_credentials_over_https(self):
        name = "prom-tls-%d" % os.getpid()
        url = "prometheus-rw=https://sq:%s@%s:%d/api/v1/write" % (
            urllib.parse.quote(self.PASSWORD, safe=""), HOST, self.rx_port)
        env = dict(os.environ, SSL_CERT_FILE=self.cert)
        p = subprocess.run([sqtest.squall_path(), self.base + "/fast", "-q", "-r", "100", "-c",
                            "2", "-t", "1", "-d", "2s", "--name", name, "--out", url,
                            "--json", "-"], capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("p@ss", p.stdout + p.stderr)
        self.assertNotIn("p%40ss", p.stdout + p.stderr)
        doc = json.loads(p.stdout)
        b = doc["push"]["prometheus-rw"]
        self.assertEqual((b["sent"], b["failed"], b["dropped"]), (b["points"], 0, 0), b)
        q = urllib.parse.urlencode({"query": 'squall_run_completed_total{run="%s"}' % name})
        res = json.loads(self.get("/api/v1/query?" + q))["data"]["result"]
        self.assertEqual(int(float(res[0]["value"][1])), doc["requests"]["completed"])

if __name__ == "__main__":
    sqtest.main()
