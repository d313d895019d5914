"""No result lost to a fault (issue 25, section 5): what squall does when what it stands on gives
way under a run.

- A distributed run whose NATS server is killed (SIGKILL, by its PID: a real outage, every
  connection ends) for 2 s and started again on the same port: the controller and the agents
  reconnect, the agents resend the seconds NATS missed, and the document is complete (exit 0,
  every request the target served counted once, every agent's every second arrived live). Killed
  for longer than --nats-outage: the document is still written, with what arrived, marked
  incomplete with the reason (exit 1).
- The daemon's store on a file system that fills up under a running run (a 1 MiB tmpfs in a
  private mount namespace, filled by the test): the run ends `failed` with the write error, in
  the API at once and in the store once it can take the write; stop and delete agree with it.
- `squall runs list` on a store on a read-only mount (a read-only bind mount in a private mount
  namespace) lists it.

The mounts are made inside `unshare -m` (we run as root): nothing on the host's mount table
changes, and the namespace goes with its last process. Where no private mount namespace can
be made (a chroot whose root is no mount point), the two store classes are skipped and say why.
Every process is started here and stopped by its PID; traffic stays on 127.0.0.1.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import sec  # noqa: F401  (puts tests/e2e on the path)
import sqtest
free_port = sqtest.free_port
wait_port = sqtest.wait_port
stop = sqtest.stop_proc
Agent = sqtest.Agent

import jsonschema  # Debian's python3-jsonschema

HOST = "127.0.0.1"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
with open(os.path.join(ROOT, "docs", "result.schema.json")) as f:
    SCHEMA = json.load(f)


class Nats:
    """A nats-server on a fixed loopback port, killed and started again on the same port."""

    def __init__(self, port):
        self.port = port
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["nats-server", "-a", HOST, "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, self.proc)

    def kill(self):
        """A real outage: the process dies (SIGKILL, by its PID), every connection ends."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close(self):
        if self.proc:
            stop(self.proc)


class Controller:
    """A controller run whose stderr lines are read as they come."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([sqtest.squall_path(), *args, "--json", "-"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, text=True)
        self.lines = []
        self.out = ""
        self.t_err = threading.Thread(target=self._err, daemon=True)
        self.t_out = threading.Thread(target=self._out, daemon=True)
        self.t_err.start()
        self.t_out.start()

    def _err(self):
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def _out(self):
        self.out = self.proc.stdout.read()

    def wait_line(self, text, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for t, line in self.lines:
                if text in line:
                    return t, line
            time.sleep(0.005)
        raise AssertionError("no line with %r; got %r" % (text, self.lines))

    def finish(self, timeout=90):
        rc = self.proc.wait(timeout=timeout)
        self.t_err.join()
        self.t_out.join()
        doc = json.loads(self.out) if self.out.strip() else None
        return rc, doc, "\n".join(l for _, l in self.lines)


@unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed (scripts/deps.sh)")
class NatsOutage(unittest.TestCase):
    """The broker of a distributed run dies and comes back (or does not) mid-run."""

    def setUp(self):
        self.nats = Nats(free_port())
        self.url = "nats://%s:%d" % (HOST, self.nats.port)
        self.target, self.tport = sqtest.start_target("-t", "1")
        self.agents = []

    def tearDown(self):
        for a in self.agents:
            log = a.stop()
            self.assertNotIn("Sanitizer", log)
            self.assertNotIn("runtime error", log)
        sqtest.stop(self.target)
        self.nats.close()

    def start_run(self, prefix, *extra):
        self.agents = [Agent(self.url, n, prefix) for n in ("f1", "f2")]
        sqtest.http(self.tport, "POST", "/stats/reset")
        ctl = Controller("http://%s:%d/fast" % (HOST, self.tport), "-r", "400", "-d", "6s",
                         "-c", "8", "-t", "1", "--max-in-flight", "400", "--agents", "2",
                         "--nats", self.url, "--subject-prefix", prefix, *extra)
        t, line = ctl.wait_line("agents start in")
        start = t + float(line.split("start in ")[1].split(" ms")[0]) / 1000
        return ctl, start

    def test_short_outage_is_ridden_out(self):
        # what is in flight at the deadline finishes (a busy machine left 8 of 2,381 out
        # without it: sent, served and counted in flight, not completed)
        ctl, start = self.start_run("fault-short", "--graceful-stop", "5s")
        time.sleep(max(0, start + 2.0 - time.monotonic()))
        self.nats.kill()
        killed = time.monotonic()
        time.sleep(2.0)
        self.nats.start()  # the same port
        print("outage: %.2f s" % (time.monotonic() - killed))
        rc, doc, err = ctl.finish()
        self.assertNotIn("Sanitizer", err)
        self.assertEqual(rc, 0, err)
        self.assertIsNotNone(doc, err)
        jsonschema.validate(doc, SCHEMA)
        c = doc["cluster"]
        self.assertIsNone(c["incomplete"], err)
        self.assertEqual(c["lost"], 0, err)
        self.assertGreaterEqual(c["controller"]["nats_outages"], 1, c["controller"])
        self.assertGreater(c["controller"]["nats_down_s"], 1.0, c["controller"])
        r = doc["requests"]
        served = sqtest.json_get(self.tport, "/stats")["arrivals"]["count"]
        # the identity: every request the target served is counted once, and all completed
        self.assertEqual(r["sent"], served, r)
        self.assertEqual(r["completed"], served, r)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(r["arrivals"], r["sent"] + r["dropped"], r)
        self.assertEqual(sum(s["requests"] for s in doc["series"]), r["sent"])
        for a in c["agents"]:
            self.assertTrue(a["finished"], a)
            self.assertFalse(a["lost"], a)
            # no interval lost: every second of its series came live, the outage's ones late
            self.assertEqual(a["seconds_missing"], 0, a)
            self.assertGreaterEqual(a["seconds"], 6, a)
        self.assertEqual(sum(a["requests"]["sent"] for a in c["agents"]), r["sent"])
        self.assertIn("NATS is back", err)
        for a in self.agents:
            self.assertIsNone(a.proc.poll())  # it survived, and waits for the next run
            self.assertIn("NATS is back", a.text())
        print("short outage: %d requests, %d served, %s" % (r["completed"], served,
                                                            c["controller"]))

    def test_outage_past_the_window_writes_what_arrived(self):
        ctl, start = self.start_run("fault-long", "--nats-outage", "1500ms")
        time.sleep(max(0, start + 2.0 - time.monotonic()))
        self.nats.kill()
        killed = time.monotonic()
        rc, doc, err = ctl.finish()  # NATS stays down: the controller gives up on its own
        # down past the agents' own limit too (the window and 2 s): they give up on the run
        time.sleep(max(0, killed + 4.5 - time.monotonic()))
        self.nats.start()
        self.assertNotIn("Sanitizer", err)
        self.assertEqual(rc, 1, err)
        self.assertIsNotNone(doc, "no --json document: " + err)
        jsonschema.validate(doc, SCHEMA)
        c = doc["cluster"]
        self.assertIn("NATS was unreachable", c["incomplete"])
        self.assertIn("1.5 s outage window", c["incomplete"])
        self.assertIn("the result is incomplete", err)
        self.assertIn("Incomplete", err)  # the summary says so too
        self.assertEqual(c["lost"], 2)
        # no agent's result came: the totals are both agents' last known figures, one kind alike
        self.assertTrue(c["totals_last_known"])
        self.assertEqual(len(c["merged_agents"]), 2)
        self.assertIn("the totals are their last known figures", err)
        # what arrived: about the first 2 s of both agents, whole seconds
        r = doc["requests"]
        self.assertGreater(r["completed"], 0)
        self.assertEqual(sum(s["requests"] for s in doc["series"]), r["sent"])
        self.assertEqual(sum(a["requests"]["sent"] for a in c["agents"]), r["sent"])
        served = sqtest.json_get(self.tport, "/stats")["arrivals"]["count"]
        self.assertLess(r["sent"], served)  # the rest never reached the controller
        # the agents stop their share once the window is past, and live on
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(
                "result is dropped" in a.text() for a in self.agents):
            time.sleep(0.1)
        for a in self.agents:
            self.assertIsNone(a.proc.poll())
            self.assertIn("result is dropped", a.text())
        print("long outage: %d of %d served requests arrived; %s" % (r["sent"], served,
                                                                     c["incomplete"]))


_mount_ns = None


def need_mount_ns(test):
    """Skips test where a private mount namespace cannot be made (`unshare -m` in a chroot whose
    root is no mount point says "cannot change root filesystem propagation"): the store tests
    mount a tmpfs or a read-only bind there, never in the host's mount table."""
    global _mount_ns
    if _mount_ns is None:
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True, text=True, timeout=30)
        _mount_ns = (p.returncode == 0, p.stderr.strip())
    if not _mount_ns[0]:
        test.skipTest("no private mount namespace here (unshare -m: %s)" % _mount_ns[1])


def serve_on_tmpfs(mnt, size):
    """`squall serve` whose store is on a tmpfs of `size` mounted at mnt in a private mount
    namespace (unshare -m: the host's mount table never sees it). unshare and sh exec into
    squall, so the Popen's PID is the daemon's; its files are reachable from outside at
    /proc/PID/root/MNT (the namespace's view). Returns (Popen, port)."""
    log = tempfile.NamedTemporaryFile(prefix="squall-serve-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs -o size=%s tmpfs "$1" && exec "$0" serve --listen 127.0.0.1:0 '
         '--data "$1/store"' % size, sqtest.squall_path(), mnt],
        stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    proc.log_path = log.name
    line = proc.stdout.readline().decode()
    m = sqtest._SERVE_RE.match(line.strip())
    if not m:
        stop(proc)
        with open(log.name) as f:
            raise RuntimeError("squall serve did not start: %r %s" % (line, f.read()))
    return proc, int(m.group(2))


def api(port, method, path, body=None):
    hdrs = {"Content-Type": "application/json"} if body is not None else {}
    st, _, data = sqtest.http(port, method, path,
                              json.dumps(body) if body is not None else None, hdrs)
    return st, (json.loads(data) if data else None)


class StoreFull(unittest.TestCase):
    """The daemon's store fills up under a running run."""

    def setUp(self):
        need_mount_ns(self)
        self.tmp = tempfile.mkdtemp(prefix="sq-full-")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)
        self.target, self.tport = sqtest.start_target("-t", "1")
        try:
            self.serve, self.port = serve_on_tmpfs(self.mnt, "2m")
        except BaseException:  # tearDown does not run after a failed setUp
            sqtest.stop(self.target)
            shutil.rmtree(self.tmp, True)
            raise
        self.root = "/proc/%d/root%s" % (self.serve.pid, self.mnt)  # the tmpfs, from here

    def tearDown(self):
        sqtest.stop(self.serve)
        sqtest.stop(self.target)
        with open(self.serve.log_path) as f:
            log = f.read()
        os.unlink(self.serve.log_path)
        self.assertNotIn("Sanitizer", log)
        shutil.rmtree(self.tmp)

    def fill(self):
        """Fills the tmpfs to the last byte: every later write of the store fails (ENOSPC)."""
        n = 0
        try:
            with open(os.path.join(self.root, "filler"), "wb") as f:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
                    n += 65536
        except OSError:
            pass
        try:  # the last partial block too
            with open(os.path.join(self.root, "filler2"), "wb") as f:
                while True:
                    f.write(b"\0" * 512)
                    f.flush()
        except OSError:
            pass
        return n

    def free(self):
        for name in ("filler", "filler2"):
            os.unlink(os.path.join(self.root, name))

    def in_ns(self, *args):
        """squall ARGS --data the store, in the daemon's mount namespace (nsenter -m): SQLite
        resolves /proc/PID/root's link, so the store is opened where the daemon sees it."""
        return subprocess.run(["nsenter", "-t", str(self.serve.pid), "-m", sqtest.squall_path(),
                               *args, "--data", os.path.join(self.mnt, "store")],
                              capture_output=True, text=True, timeout=60)

    def stored(self, run_id):
        """The run as the store file has it, read by another process (squall runs show)."""
        p = self.in_ns("runs", "show", str(run_id), "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def test_a_full_disk_fails_the_run_and_loses_no_result(self):
        sqtest.http(self.tport, "POST", "/stats/reset")
        st, r = api(self.port, "POST", "/runs",
                    {"quick": {"url": "http://%s:%d/fast" % (HOST, self.tport), "rate": 200,
                               "connections": 4, "duration": "5s"}})
        self.assertEqual(st, 201, r)
        rid = r["id"]
        deadline = time.monotonic() + 20
        while not api(self.port, "GET", "/runs/%d/series" % rid)[1].get("series"):
            self.assertLess(time.monotonic(), deadline, "no second stored")
            time.sleep(0.1)
        filled = self.fill()
        deadline = time.monotonic() + 30
        while True:
            st, run = api(self.port, "GET", "/runs/%d" % rid)
            if run["status"] != "running" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # failed, at once and with the write error; /health, stop and delete agree
        self.assertEqual(run["status"], "failed", run)
        self.assertIn("the store could not take", run["reason"])
        self.assertIn("full", run["reason"])  # SQLite's "database or disk is full"
        self.assertIsNone(api(self.port, "GET", "/health")[1]["run"])
        st, r = api(self.port, "POST", "/runs/%d/stop" % rid)
        self.assertEqual(st, 409, r)
        self.assertIn("is failed: there is nothing to stop", r["error"])
        listed = api(self.port, "GET", "/runs")[1]["runs"]
        self.assertEqual([x["status"] for x in listed if x["id"] == rid], ["failed"])
        st, r = api(self.port, "DELETE", "/runs/%d" % rid)
        self.assertEqual(st, 507, r)  # it has ended, but the store cannot take even that yet
        self.assertIn("cannot take its end", r["error"])
        # no result lost: the document, from memory, counts every request the target served
        served = sqtest.json_get(self.tport, "/stats")["arrivals"]["count"]
        doc = run["result"]
        self.assertIsNotNone(doc, "the result was lost")
        self.assertEqual(doc["requests"]["sent"], served)
        r = doc["requests"]  # every request sent reached the target (some still in flight)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(sum(x["requests"] for x in doc["series"]), served)
        self.assertGreater(r["completed"], 0)
        # the file still says running meanwhile (nothing could be written)
        self.assertEqual(self.stored(rid)["status"], "running")
        # room again: the store takes the kept end within a few seconds, result and all
        self.free()
        deadline = time.monotonic() + 15
        while self.stored(rid)["status"] == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        got = self.stored(rid)
        self.assertEqual(got["status"], "failed", got)
        self.assertEqual(got["reason"], run["reason"])
        p = self.in_ns("runs", "export", str(rid), "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["requests"]["sent"], served)
        st, r = api(self.port, "DELETE", "/runs/%d" % rid)
        self.assertEqual(st, 204, r)
        # and the daemon goes on: the next run finishes and is stored
        st, r = api(self.port, "POST", "/runs",
                    {"quick": {"url": "http://%s:%d/fast" % (HOST, self.tport), "rate": 100,
                               "connections": 2, "duration": "1s"}})
        self.assertEqual(st, 201, r)
        deadline = time.monotonic() + 20
        while api(self.port, "GET", "/runs/%d" % r["id"])[1]["status"] in ("queued", "running"):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.2)
        self.assertEqual(self.stored(r["id"])["status"], "finished")
        print("store full: filled %d KiB; %d requests kept; %s" % (filled // 1024, served,
                                                                 run["reason"]))


class ReadOnlyStore(unittest.TestCase):
    """`squall runs` on a store whose file system is mounted read-only."""

    def setUp(self):
        need_mount_ns(self)
        self.tmp = tempfile.mkdtemp(prefix="sq-ro-")
        self.data = os.path.join(self.tmp, "data")
        self.target, self.tport = sqtest.start_target("-t", "1")

    def tearDown(self):
        sqtest.stop(self.target)
        shutil.rmtree(self.tmp)

    def ro(self, *args):
        """squall ARGS with self.data bind-mounted read-only over itself, in a private mount
        namespace: squall sees a read-only file system (EROFS even for root)."""
        cmd = " ".join("'%s'" % a for a in (sqtest.squall_path(),) + args)
        return subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c",
             'mount --bind -o ro "$0" "$0" && touch "$0/probe" 2>/dev/null && '
             'echo "not read-only" >&2 && exit 9; exec ' + cmd, self.data],
            capture_output=True, text=True, timeout=60)

    def test_runs_list_on_a_read_only_mount(self):
        serve, port = sqtest.start_serve("--data", self.data)
        try:
            st, r = api(port, "POST", "/runs",
                        {"quick": {"url": "http://%s:%d/fast" % (HOST, self.tport),
                                   "rate": 50, "connections": 2, "duration": "1s"}})
            self.assertEqual(st, 201, r)
            deadline = time.monotonic() + 20
            while api(port, "GET", "/runs/%d" % r["id"])[1]["status"] in ("queued", "running"):
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.1)
            want = api(port, "GET", "/runs/%d" % r["id"])[1]["result"]["requests"]
        finally:
            sqtest.stop(serve)  # a clean close: no -wal, no -shm left beside the database
        self.assertEqual(sorted(os.listdir(self.data)), ["squall.db", "squall.db.lock"])
        p = self.ro("runs", "list", "--data", self.data, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        runs = json.loads(p.stdout)
        self.assertEqual([(x["id"], x["status"]) for x in runs], [(r["id"], "finished")])
        p = self.ro("runs", "show", str(r["id"]), "--data", self.data, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["status"], "finished")
        p = self.ro("runs", "export", str(r["id"]), "--data", self.data, "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["requests"], want)
        self.assertGreater(want["completed"], 0)
        # nothing was written there (the mount would have refused it anyway)
        self.assertEqual(sorted(os.listdir(self.data)), ["squall.db", "squall.db.lock"])


if __name__ == "__main__":
    sqtest.main()
