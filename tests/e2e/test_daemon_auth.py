#!/usr/bin/env python3
"""`squall serve` and its token (docs/daemon.md, Security): a non-loopback address without a
token refuses to start (exit 2, saying why); a bad token file is refused; with a token every
request needs `Authorization: Bearer` (401 without it or with a wrong one, nothing else in the
answer), the dashboard answers 401 with the page that asks for it; the token never appears in
an answer or in the log; listening on every address works with a token.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from openapi_check import OpenAPI  # noqa: E402
from test_daemon import Client, quick, sse  # noqa: E402

TOKEN = "t0ken-" + "a1b2c3d4e5f60718" * 2


class TestStartRefusals(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="squall-auth-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def serve(self, *args):
        return subprocess.run([sqtest.squall_path(), "serve", "--data",
                               os.path.join(self.tmp, "d"), *args],
                              capture_output=True, text=True, timeout=30)

    def test_non_loopback_needs_token(self):
        for addr in ("0.0.0.0:0", "[::]:0", "192.0.2.1:0"):
            p = self.serve("--listen", addr)
            self.assertEqual(p.returncode, 2, (addr, p.stderr))
            self.assertIn("needs --token-file", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(self.tmp, "d")), "no store was made")

    def test_bad_token_files(self):
        short = os.path.join(self.tmp, "short")
        with open(short, "w") as f:
            f.write("abc\n")
        p = self.serve("--token-file", short)
        self.assertEqual(p.returncode, 2)
        self.assertIn("at least 16", p.stderr)
        p = self.serve("--token-file", os.path.join(self.tmp, "missing"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot read the token file", p.stderr)
        spaced = os.path.join(self.tmp, "spaced")
        with open(spaced, "w") as f:
            f.write("abcdefgh ijklmnopqrstu\n")
        p = self.serve("--token-file", spaced)
        self.assertEqual(p.returncode, 2)
        self.assertIn("printable ASCII", p.stderr)

    def test_bad_flags(self):
        for args, word in ((("--listen", "nope"), "--listen"), (("--keep", "x"), "--keep"),
                           (("--max-vus", "0"), "--max-vus"), (("--cors-origin", "x"), "--cors-origin"),
                           (("--frob",), "--frob")):
            p = self.serve(*args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(word, p.stderr)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)


class TestToken(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.oapi = OpenAPI()
        cls.tmp = tempfile.mkdtemp(prefix="squall-auth-")
        cls.tokfile = os.path.join(cls.tmp, "token")
        with open(cls.tokfile, "w") as f:
            f.write("  %s  \n" % TOKEN)
        cls.target, cls.tport = sqtest.start_target("-t", "1")
        # every address, with a token; reached over loopback
        cls.proc, cls.port = sqtest.start_serve("--listen", "0.0.0.0:0", "--token-file",
                                                cls.tokfile, "--data",
                                                os.path.join(cls.tmp, "d"), "--access-log")
        cls.anon = Client(cls.port, cls.oapi)
        cls.auth = Client(cls.port, cls.oapi, token=TOKEN)
        cls.bad = Client(cls.port, cls.oapi, token=TOKEN[:-1] + "x")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)
        sqtest.stop(cls.target)
        os.unlink(cls.proc.log_path)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_401_without_or_with_a_wrong_token(self):
        seen = []
        for path in ("/health", "/runs", "/runs/1", "/config", "/metrics", "/compare?a=1&b=2"):
            for c in (self.anon, self.bad):
                st, h, body = c.call("GET", path, raw=True)
                self.assertEqual(st, 401, path)
                self.assertEqual(h["www-authenticate"], 'Bearer realm="squall"')
                self.assertIn(b"bearer token is required", body)
                seen.append(body)
        st, h, _ = self.anon.call("POST", "/runs", {"quick": quick(self.tport)}, raw=True)
        self.assertEqual(st, 401)
        st, h, _ = self.anon.call("PUT", "/config", {"max_vus": 1}, raw=True)
        self.assertEqual(st, 401)
        st, cfg = self.auth.get("/config")
        self.assertEqual(cfg["max_vus"]["value"], 10000)  # the refused PUT changed nothing
        st, h, _ = self.anon.call("GET", "/runs/1/live", raw=True)
        self.assertEqual(st, 401)
        # other schemes and shapes
        for hv in ("Basic " + TOKEN, "Bearer", "Bearer " + TOKEN + "x", "bearer  " + TOKEN + " x"):
            st, _, _ = self.anon.call("GET", "/health", headers={"Authorization": hv}, raw=True)
            self.assertEqual(st, 401, hv)
        st, _, _ = self.anon.call("GET", "/health", headers={"Authorization": "bearer " + TOKEN},
                                  raw=True)
        self.assertEqual(st, 200)  # the scheme is case-insensitive (RFC 9110 11.1)
        for b in seen:
            self.assertNotIn(TOKEN.encode(), b)

    def test_dashboard_asks_for_the_token(self):
        st, h, page = self.anon.call("GET", "/", raw=True)
        self.assertEqual(st, 401)
        self.assertIn("text/html", h["content-type"])
        self.assertIn(b'id="token-modal"', page)
        self.assertNotIn(TOKEN.encode(), page)
        st, h, page2 = self.auth.call("GET", "/", raw=True)
        self.assertEqual(st, 200)
        self.assertEqual(page, page2)

    def test_with_the_token_everything_works(self):
        st, hh = self.auth.get("/health")
        self.assertEqual(st, 200)
        rid = self.auth.start(quick(self.tport, duration="2s"))
        ev = sse(self.port, rid, token=TOKEN)
        self.assertEqual(ev[-1][0], "end")
        run = self.auth.wait(rid)
        self.assertEqual(run["status"], "finished")
        st, cfg = self.auth.get("/config")
        self.assertEqual(cfg["auth"]["value"], "bearer")
        self.assertEqual(cfg["listen"]["value"].split(":")[0], "0.0.0.0")
        # a Host that is not loopback is fine with a token (the token authenticates)
        st, _ = self.auth.get("/health", headers={"Host": "squall.example:1"})
        self.assertEqual(st, 200)
        # the token is nowhere in what was said or logged
        for path in ("/health", "/config", "/runs", "/runs/%d" % rid, "/metrics"):
            st, h, body = self.auth.call("GET", path, raw=True)
            self.assertNotIn(TOKEN.encode(), body, path)
            self.assertNotIn(TOKEN, " ".join(h.values()), path)
        time.sleep(0.2)
        with open(self.proc.log_path) as f:
            log = f.read()
        self.assertIn("GET /health 401", log)
        self.assertIn("GET /health 200", log)
        self.assertNotIn(TOKEN, log)
        self.assertNotIn(TOKEN[:16], log)


if __name__ == "__main__":
    sqtest.main()
