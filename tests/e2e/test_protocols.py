#!/usr/bin/env python3
"""End-to-end tests of response decoding, per-phase timings, DNS overrides and SSE streams in
the quick face, against `squall target` on an ephemeral loopback port. Every run is bounded by
a request count or a duration of a second or two.
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

run_json = sqtest.run_json


class Compression(sqtest.TargetCase):
    def test_each_coding_is_decoded(self):
        for coding in ("gzip", "deflate", "br", "zstd"):
            with self.subTest(coding=coding):
                p, doc, _ = run_json(self.base + "/json/5000", "-n", "200", "-c", "2",
                                     "-H", f"Accept-Encoding: {coding}", "-q")
                self.assertEqual(p.returncode, 0, p.stderr)
                b = doc["bodies"]
                self.assertEqual(doc["requests"]["completed"], 200)
                self.assertEqual(b["compressed_responses"], 200, b)
                self.assertEqual(b["decoded_bytes"], 200 * 5000, b)
                self.assertLess(b["wire_bytes"], 200 * 5000, b)
                self.assertEqual(doc["errors"]["decode"], 0)

    def test_offered_by_default_and_off_on_request(self):
        p, doc, _ = run_json(self.base + "/json/5000", "-n", "50", "-c", "1", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(doc["bodies"]["compression"])
        self.assertEqual(doc["bodies"]["compressed_responses"], 50)
        p, doc, _ = run_json(self.base + "/json/5000", "-n", "50", "-c", "1", "-q",
                             "--no-compression")
        self.assertEqual(p.returncode, 0, p.stderr)
        b = doc["bodies"]
        self.assertFalse(b["compression"])
        self.assertEqual(b["compressed_responses"], 0)
        self.assertEqual(b["decoded_bytes"], 50 * 5000)
        p, _ = sqtest.run_squall(self.base + "/json/5000", "-n", "10", "-c", "1",
                                 "--no-compression")
        self.assertIn("compression off", p.stdout)


class Phases(sqtest.TargetCase):
    def test_phases_are_plausible(self):
        p, doc, _ = run_json(self.base + "/delay/50", "-n", "20", "-c", "2", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        ph = doc["phases"]
        self.assertEqual(ph["waiting"]["count"], 20)
        # waiting (to the first byte) holds the server's 50 ms, and is part of each request's
        # latency: at most the whole, whatever a busy machine adds to both
        lat = doc["latency"]
        self.assertGreaterEqual(ph["waiting"]["p50_us"], 49_000, ph["waiting"])
        self.assertLessEqual(ph["waiting"]["p50_us"], lat["p50_us"] * 1.01, (ph["waiting"], lat))
        self.assertLessEqual(ph["waiting"]["max_us"], lat["max_us"] * 1.01, (ph["waiting"], lat))
        # 2 connections: only their first requests carry a connect time.
        self.assertEqual(ph["connecting"]["p50_us"], 0, ph["connecting"])
        # sending a small GET is one write: its median far below the 50 ms waited (a phase
        # stamped at the wrong moment would hold the wait); its slowest below the wait too
        self.assertLess(ph["sending"]["p50_us"], 5_000, ph["sending"])
        self.assertLess(ph["sending"]["max_us"], ph["waiting"]["p50_us"], ph["sending"])
        self.assertEqual(ph["connecting"]["metric"], "http_req_connecting")
        self.assertEqual(ph["tls_handshaking"]["max_us"], 0)

    def test_no_phases(self):
        p, doc, _ = run_json(self.base + "/fast", "-n", "20", "-c", "1", "-q", "--no-phases")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("phases", doc)


class Dns(sqtest.TargetCase):
    def test_resolve_override(self):
        p, doc, _ = run_json(f"http://squall.invalid:{self.port}/fast", "-n", "20", "-c", "2",
                             "-q", "--resolve", f"squall.invalid:{self.port}:127.0.0.1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 20)

    def test_connect_to_keeps_the_host_header(self):
        p, doc, _ = run_json("http://api.squall.invalid:9/echo", "-n", "5", "-c", "1", "-q",
                             "--connect-to", f"api.squall.invalid:9:127.0.0.1:{self.port}")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 5)

    def test_failed_lookup_is_a_dns_error(self):
        p, _ = sqtest.run_squall("http://squall.invalid/fast", "-n", "5")
        self.assertEqual(p.returncode, 1)
        self.assertIn("dns: cannot resolve 'squall.invalid'", p.stderr)

    def test_bad_override_is_a_usage_error(self):
        p, _ = sqtest.run_squall(self.base + "/fast", "--resolve", "nope")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--resolve", p.stderr)

    def test_ttl_resolves_again(self):
        p, doc, _ = run_json(self.base + "/fast", "-d", "1s", "-c", "1", "-q", "--dns-ttl",
                             "200ms")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreaterEqual(doc["dns"]["lookups_during_run"], 3)
        self.assertEqual(doc["errors"]["dns"], 0)


class Sse(sqtest.TargetCase):
    def test_events_are_counted(self):
        p, doc, _ = run_json(self.base + "/sse?events=5&interval=10", "-n", "12", "-c", "3",
                             "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["sse"]
        self.assertEqual(s["streams"], 12)
        self.assertEqual(s["events"], 60)
        self.assertGreaterEqual(s["first_event"]["p50_us"], 5_000)
        self.assertGreaterEqual(s["stream_duration"]["p50_us"], 45_000)

    def test_plain_runs_have_no_stream_section(self):
        p, doc, _ = run_json(self.base + "/fast", "-n", "10", "-c", "1", "-q")
        self.assertNotIn("sse", doc)


if __name__ == "__main__":
    unittest.main(verbosity=2)
