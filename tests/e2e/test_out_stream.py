#!/usr/bin/env python3
"""End-to-end tests: `--out csv=`, `ndjson=` and `hdr=` write into the named file while the run
goes (issue 28 §4: users `tail -f` them), while `--json` stays atomic (nothing under its name
until the run ends).

A 4 s run against `squall target` at 5 requests a second (so few that the NDJSON stream's own
buffer, a few KiB, would not fill before the end: only the flush each second shows its lines);
while it runs the test polls the named files until each holds a data
row, with the run's own end as the deadline (so a busy machine only makes it wait longer, and a
file that fills only at the end fails). After the run each file is complete: the CSV's rows and
the NDJSON's lines add up to the result's totals. Also: a symbolic link named as the file is
followed (its target written, the link kept), a run that reaches no server still leaves a
well-formed file, and a directory is refused before any load.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import TargetCase, run_squall, squall_path  # noqa: E402


def data_rows(path, kind):
    """The complete data rows the file holds now (a half-written last line is not one)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return []
    lines = text.split("\n")[:-1]  # only what ends in a newline
    if kind == "csv":
        return lines[1:] if lines and lines[0].startswith("t_s,") else []
    if kind == "hdr":
        return [x for x in lines if x and not x.startswith("#") and not x.startswith('"')]
    return lines


class OutStreamCase(TargetCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sq-out-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_rows_show_while_the_run_goes(self):
        paths = {k: os.path.join(self.dir, "s." + k) for k in ("csv", "ndjson", "hdr")}
        js = os.path.join(self.dir, "r.json")
        cmd = [squall_path(), self.base + "/fast", "-q", "-r", "5", "-c", "2", "-t", "2", "-d", "4s",
               "--json", js] + [a for k, p in paths.items() for a in ("--out", f"{k}={p}")]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = {}
        json_early = False
        try:
            while proc.poll() is None and len(seen) < len(paths):
                for k, p in paths.items():
                    if k not in seen and data_rows(p, k):
                        seen[k] = data_rows(p, k)
                if proc.poll() is None and os.path.exists(js):
                    json_early = True
                time.sleep(0.05)
            still_running = proc.poll() is None
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertEqual(proc.returncode, 0, err)
        self.assertTrue(still_running or len(seen) == len(paths), seen)
        self.assertEqual(sorted(seen), sorted(paths), "rows seen before the run ended")
        self.assertFalse(json_early, "--json must appear only once complete")
        # no hidden temporary file beside them
        self.assertEqual(sorted(os.listdir(self.dir)), ["r.json", "s.csv", "s.hdr", "s.ndjson"])

        doc = json.load(open(js))
        r = doc["requests"]
        with open(paths["csv"]) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), len(doc["series"]))
        self.assertEqual(sum(int(x["completed"]) for x in rows), r["completed"])
        self.assertEqual(sum(int(x["requests"]) for x in rows), r["sent"])
        lines = [json.loads(x) for x in open(paths["ndjson"])]
        self.assertEqual(len(lines), doc["samples"]["written"])
        self.assertEqual(doc["samples"]["lost"], 0)
        self.assertEqual(len(lines), r["completed"] + r["failed"])
        self.assertEqual(len(data_rows(paths["hdr"], "hdr")), len(doc["series"]))
        # what was seen mid-run is the start of the final file
        with open(paths["csv"]) as f:
            final = f.read().split("\n")[1:]
        self.assertEqual(final[:len(seen["csv"])], seen["csv"])

    def test_a_link_is_followed(self):
        target = os.path.join(self.dir, "real.csv")
        link = os.path.join(self.dir, "link.csv")
        with open(target, "w") as f:
            f.write("old contents\n")
        os.symlink("real.csv", link)
        p, _ = run_squall(self.base + "/fast", "-q", "-c", "1", "-n", "20", "--out", "csv=" + link)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(os.path.islink(link))
        text = open(target).read()
        self.assertTrue(text.startswith("t_s,"), text)
        self.assertNotIn("old contents", text)

    def test_no_server_and_refusals(self):
        # no port listens there: the run fails (exit 1), the file holds its header (and any row)
        path = os.path.join(self.dir, "s.csv")
        port = sqtest.free_port()
        p, _ = run_squall(f"http://127.0.0.1:{port}/", "-q", "-c", "1", "-n", "1",
                          "--connect-timeout", "1s", "--out", "csv=" + path)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(open(path).read().startswith("t_s,"))
        # a directory is refused before any load
        p, _ = run_squall(self.base + "/fast", "-q", "-n", "1", "--out", "csv=" + self.dir)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--out csv: cannot write", p.stderr)


if __name__ == "__main__":
    sqtest.main()
