#!/usr/bin/env python3
"""End-to-end tests of connection setup at scale: --source-addrs (connections bound round-robin
to local addresses, so one address's ephemeral ports never limit a run) and --connect-rate
(connections opened at most N per second), against `squall target` on an ephemeral loopback
port. 127.0.0.0/8 is all local on Linux, so 127.0.0.2..127.0.0.5 need no set-up.

The connections are counted where the target sees them: `ss` lists the target's established
sockets on its port with each peer's address. A closed-loop run against /delay/2000 holds every
connection open with a request in flight while the test counts. Bounded loads only (-c 40, a
few seconds, loopback).
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

run_json = sqtest.run_json
run_squall = sqtest.run_squall


def validate(doc):
    """The document follows docs/result.schema.json (Debian's python3-jsonschema)."""
    import jsonschema
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "result.schema.json")) as f:
        jsonschema.validate(doc, json.load(f))


def peers(port):
    """The target's established connections on port: {peer address: count}."""
    out = subprocess.run(["ss", "-tnH", "state", "established", f"( sport = :{port} )"],
                         capture_output=True, text=True, timeout=10).stdout
    counts = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        peer = f[-1].rsplit(":", 1)[0]  # Recv-Q Send-Q Local Peer (state filtered: no column)
        counts[peer] = counts.get(peer, 0) + 1
    return counts


class SourceAddrs(sqtest.TargetCase):

    def hold(self, *args, want=40, secs="4s"):
        """Starts a closed-loop run that holds `want` connections against /delay/2000; returns
        (Popen, the target's peers once all `want` are established, or the last count seen)."""
        proc = subprocess.Popen([sqtest.squall_path(), self.base + "/delay/2000", "-c", str(want),
                                 "-d", secs, "-t", "2", "--json", "-", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = {}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            seen = peers(self.port)
            if sum(seen.values()) >= want:
                break
            time.sleep(0.05)
        return proc, seen

    def finish(self, proc):
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        return json.loads(out)

    def test_four_source_addresses_carry_ten_connections_each(self):
        proc, seen = self.hold("--source-addrs", "127.0.0.2-127.0.0.5")
        doc = self.finish(proc)
        self.assertEqual(seen, {"127.0.0.2": 10, "127.0.0.3": 10, "127.0.0.4": 10,
                                "127.0.0.5": 10})
        self.assertEqual(doc["config"]["source_addrs"],
                         ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"])
        self.assertFalse(doc["config"]["source_addrs_auto"])
        self.assertEqual(doc["errors"]["connect"], 0)
        self.assert_accounting(doc)
        validate(doc)

    def test_list_forms(self):
        # a CIDR block is every address in it; single addresses and ranges mix
        proc, seen = self.hold("--source-addrs", "127.0.0.8/31,127.0.0.20", want=6, secs="3s")
        doc = self.finish(proc)
        self.assertEqual(seen, {"127.0.0.8": 2, "127.0.0.9": 2, "127.0.0.20": 2})
        self.assertEqual(doc["config"]["source_addrs"], ["127.0.0.8", "127.0.0.9", "127.0.0.20"])

    def test_no_source_addrs_below_one_address_worth(self):
        # 40 connections: the kernel picks the address (127.0.0.1), the document lists none
        p, doc, _ = run_json(self.base + "/fast", "-n", "40", "-c", "4")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("source_addrs", doc["config"])
        self.assertNotIn("connect_rate_per_s", doc["config"])

    def test_plan_run_takes_the_flags(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "plan.yaml")
            with open(plan, "w") as f:
                f.write(textwrap.dedent(f"""\
                    target: {self.base}
                    scenarios:
                      s:
                        executor: shared-iterations
                        vus: 4
                        iterations: 20
                        flow:
                          - request: {{ url: /fast }}
                    """))
            p, doc, _ = run_json("run", plan, "--source-addrs", "127.0.0.2,127.0.0.3",
                                 "--connect-rate", "1000")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["config"]["source_addrs"], ["127.0.0.2", "127.0.0.3"])
        self.assertEqual(doc["config"]["connect_rate_per_s"], 1000)
        self.assertEqual(doc["requests"]["completed"], 20)

    def plan_file(self, d, extra):
        path = os.path.join(d, "plan.yaml")
        with open(path, "w") as f:
            f.write(f"target: {self.base}\n{extra}" + textwrap.dedent("""\
                scenarios:
                  s:
                    executor: shared-iterations
                    vus: 4
                    iterations: 20
                    flow:
                      - request: { url: /fast }
                """))
        return path

    def test_plan_keys(self):
        # the plan's source_addrs and connect_rate; the flags win over them
        with tempfile.TemporaryDirectory() as d:
            plan = self.plan_file(d, "source_addrs: 127.0.0.6-127.0.0.7\nconnect_rate: 500\n")
            p, doc, _ = run_json("run", plan)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["config"]["source_addrs"], ["127.0.0.6", "127.0.0.7"])
            self.assertEqual(doc["config"]["connect_rate_per_s"], 500)
            p, doc, _ = run_json("run", plan, "--source-addrs", "127.0.0.9", "--connect-rate", "900")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["config"]["source_addrs"], ["127.0.0.9"])
            self.assertEqual(doc["config"]["connect_rate_per_s"], 900)

    def test_plan_keys_refused_where_written(self):
        with tempfile.TemporaryDirectory() as d:
            for extra, want in (
                    ("source_addrs: 127.0.0.x\n", "plan.yaml:2:15: source_addrs: '127.0.0.x' is not"),
                    ("source_addrs: 192.0.2.7\n",
                     "plan.yaml:2:15: source_addrs: 192.0.2.7 is not an address of this host"),
                    ("connect_rate: 0\n", "plan.yaml:2:15: connect_rate: expected connections per second")):
                plan = self.plan_file(d, extra)
                p, _ = run_squall("run", plan)
                self.assertEqual(p.returncode, 2, (extra, p.stderr))
                self.assertIn(want, p.stderr)
            # validate reads the list too (and binds nothing)
            plan = self.plan_file(d, "source_addrs: 127.0.0.x\n")
            p, _ = run_squall("validate", plan)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("plan.yaml:2:15: source_addrs: '127.0.0.x' is not", p.stderr)

    def test_bad_lists_name_the_flag(self):
        for bad in ("127.0.0.x", "127.0.0.5-127.0.0.2", "127.0.0.0/33", "127.0.0.1,,127.0.0.2",
                    "::1-::2", "10.0.0.0/8"):
            p, _ = run_squall(self.base + "/fast", "-n", "1", "--source-addrs", bad)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertIn("--source-addrs", p.stderr)

    def test_an_address_not_on_this_host_is_refused_at_start(self):
        # 192.0.2.0/24 is TEST-NET-1: never an address of this host. Nothing is sent.
        self.reset()
        p, _ = run_squall(self.base + "/fast", "-n", "1", "--source-addrs", "192.0.2.7")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--source-addrs: 192.0.2.7 is not an address of this host", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)


class ConnectRate(sqtest.TargetCase):

    def test_connects_are_paced(self):
        # 40 connections at 20/s: the last may open no earlier than ~1.9 s after the first (each
        # of 2 workers: 10/s, 20 connections). A busy machine only makes it slower, so the
        # assertions are lower bounds: a count seen while the pool opens, and the setup time.
        proc = subprocess.Popen([sqtest.squall_path(), self.base + "/fast", "-c", "40", "-d", "1s",
                                 "-t", "2", "--connect-rate", "20", "--json", "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            n = sum(peers(self.port).values())
            if n > 0:
                first = n  # the pool has begun to open: far from all of it
                break
            time.sleep(0.02)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        doc = json.loads(out)
        self.assertIsNotNone(first)
        self.assertLess(first, 20)
        self.assertGreaterEqual(doc["setup_s"], 1.5)
        self.assertEqual(doc["config"]["connect_rate_per_s"], 20)
        self.assertEqual(doc["errors"]["connect"], 0)
        self.assertEqual(doc["connections"]["opened"], 40)
        validate(doc)

    def test_bad_rate_names_the_flag(self):
        for bad in ("0", "-3", "x", "1e12"):
            p, _ = run_squall(self.base + "/fast", "-n", "1", "--connect-rate", bad)
            self.assertEqual(p.returncode, 2, (bad, p.stderr))
            self.assertIn("--connect-rate", p.stderr)


if __name__ == "__main__":
    sqtest.main()
