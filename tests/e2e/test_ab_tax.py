#!/usr/bin/env python3
"""End-to-end test of `squall ab` on two builds of a server that differ by a 5% CPU tax
(tax_server.py), each started and stopped by squall around its runs (--server-a, --server-b)
and watched. The verdict must be resolved in the right direction, or say honestly that this
machine's noise does not allow one; never resolved the wrong way. About 30 s.
"""
import os
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402
import test_instruments as ti  # noqa: E402  (as a module: its test classes stay there)

PY, TAX, free_port = ti.PY, ti.TAX, ti.free_port


class Tax(unittest.TestCase):
    ab = ti.AB.ab
    cmp = staticmethod(ti.AB.cmp)

    def test_a_5_percent_cpu_tax(self):
        """Two builds of a server, the second 5% more CPU per request, each started and stopped
        by squall around its runs: resolved in the right direction, or honestly not resolvable
        at this noise; never resolved the wrong way."""
        port = free_port()
        url = f"http://{sqtest.HOST}:{port}/"
        doc = self.ab("--arm", f"base={url} -c 1 -t 1", "--arm", f"taxed={url} -c 1 -t 1",
                      "--server-a", f"{PY} {TAX} --port {port}",
                      "--server-b", f"{PY} {TAX} --port {port} --tax 0.05",
                      "--rounds", "8", "--duration", "1s", "--cooldown", "0",
                      "--metric", "server-cpu", timeout=180)
        srv = self.cmp(doc, "taxed", "server_cpu_us")
        self.assertGreaterEqual(srv["n"], 6)  # the servers were watched in (nearly) every round
        if srv["verdict"] == "resolved":
            self.assertGreater(srv["ci_lo_pct"], 0, srv)  # costlier, not cheaper
        else:
            self.assertIn(srv["verdict"], ("includes_zero", "within_noise"))
            self.assertTrue(doc["verdicts"][0].startswith("not resolvable"), doc["verdicts"])
        rps = self.cmp(doc, "taxed", "rps")
        if rps["verdict"] == "resolved":
            self.assertLess(rps["ci_hi_pct"], 0, rps)
        print("\n    5% tax:", doc["verdicts"][0], "| req/s:", rps["sentence"])
        # the port is free: every server was stopped
        with self.assertRaises(OSError):
            socket.create_connection((sqtest.HOST, port), timeout=1).close()


if __name__ == "__main__":
    sqtest.main()
