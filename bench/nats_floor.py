#!/usr/bin/env python3
"""bench/nats_floor.py - NATS core publish on loopback: the floor, squall's codec, cnats.

Arms (each publishes COUNT messages of SIZE bytes to one subject, no subscriber, then PING/PONG):
  python          the floor: a few lines of Python sending 1,000 PUBs per send()
  python-window   the same with squall's flow control: a PING behind each 1,000 PUBs, at most
                  --window / 1,000 PINGs out (the next send waits for the oldest one's PONG)
  squall          bench/nats_pub.c: proto/nats.h's sq_nats_encode_pub per message, 1,000 per send
  squall-static   the same with the control line rendered once and copied (--static)
  libnats         bench/nats_libnats.c: cnats natsConnection_Publish + Flush (default options)
  libnats-1m      the same with a 1 MiB write buffer (natsOptions_SetIOBufSize)
  squall-cli      the load path itself: `squall nats://HOST:PORT/bench.floor -n COUNT --payload
                  <SIZE bytes> --window W` (engine/natsdrv.c; each message complete at the PONG
                  behind its batch), timed by its own result document
  squall-cli-2c   the same VUs on two connections: `-c 2 --window W/2`

nats-server is pinned to CPU 0 and each publisher to CPU 1 (taskset). Rounds run every arm, the
order rotated each round so drift lands on all of them; the table gives the median and the
range. Each run's count is held against the server's own: /varz in_msgs must grow by exactly
what the arm sent. CPU is the publisher's user + system time (wait4), and the server's (from
/proc/PID/stat) over the same run. "Server sleeps" counts nats-server's voluntary context switches
(all its threads, /proc/PID/task/*/status) per 1M messages: how often it found its socket empty.
The table's ratio is each arm's rate over the first arm's in the same round.

Usage: bench/nats_floor.py [--build build] [--rounds 5] [--count 4000000] [--sizes 16,64]
                           [--arms python,squall,squall-static,libnats,libnats-1m]
       bench/nats_floor.py --publish PORT COUNT SIZE [WINDOW]   (the Python floor publisher itself)
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

HOST = "127.0.0.1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def publish(port, count, size, window=0):
    """The floor: INFO, CONNECT, then 1,000 PUBs per sendall, then PING/PONG. With a window, each
    1,000 PUBs go with a PING and at most window / 1,000 of them are out: the next waits for the
    oldest one's PONG (squall's flow control, without its VUs)."""
    s = socket.create_connection((HOST, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = s.makefile("rb")
    f.readline()  # INFO
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    if f.readline() != b"PONG\r\n":
        sys.exit("no PONG after CONNECT")
    chunk = b"PUB bench.floor %d\r\n%s\r\n" % (size, b"x" * size) * 1000
    t0 = time.monotonic()
    if window:
        chunk += b"PING\r\n"
        out, most = 0, max(1, window // 1000)

        def pong():
            while True:  # the server's own PING (its RTT probe) is answered on the way
                line = f.readline()
                if line == b"PONG\r\n":
                    return
                if line == b"PING\r\n":
                    s.sendall(b"PONG\r\n")
                elif not line.startswith(b"INFO"):
                    sys.exit("unexpected %r" % line)
        for _ in range(count // 1000):
            if out == most:
                pong()
                out -= 1
            s.sendall(chunk)
            out += 1
        for _ in range(out):
            pong()
    else:
        for _ in range(count // 1000):
            s.sendall(chunk)
        s.sendall(b"PING\r\n")
        while f.readline() != b"PONG\r\n":
            pass
    print(json.dumps({"sent": count // 1000 * 1000, "seconds": time.monotonic() - t0}))


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def varz(mon):
    with urllib.request.urlopen("http://%s:%d/varz" % (HOST, mon), timeout=5) as r:
        return json.loads(r.read())


def proc_cpu(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_sleeps(pid):
    """Voluntary context switches of all of a process's threads: how often nats-server found
    nothing to do and slept (a count, steadier on a busy machine than its CPU share)."""
    n = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, t)) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        n += int(line.split()[1])
        except OSError:  # a thread that ended meanwhile
            pass
    return n


def run_arm(cmd):
    """Runs cmd pinned to CPU 1; returns (its JSON, publisher CPU seconds)."""
    p = subprocess.Popen(["taskset", "-c", "1", *cmd], stdout=subprocess.PIPE)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d" % (cmd, p.returncode))
    doc = json.loads(out)
    if "schema" in doc:  # squall's result document: what it sent, in how long
        doc = {"sent": doc["requests"]["completed"], "seconds": doc["duration_s"]}
    return doc, ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--publish", nargs="+", type=int, metavar="PORT COUNT SIZE [WINDOW]")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=4000000)
    ap.add_argument("--sizes", default="16,64")
    ap.add_argument("--arms", default="python,squall,squall-static,libnats,libnats-1m")
    ap.add_argument("--window", type=int, default=4000, help="squall-cli and python-window: --window")
    a = ap.parse_args()
    if a.publish:
        if len(a.publish) not in (3, 4):
            ap.error("--publish PORT COUNT SIZE [WINDOW]")
        publish(*a.publish)
        return
    bench = os.path.join(a.build, "bench")
    arms = {
        "python": lambda port, n, size: [sys.executable, os.path.abspath(__file__), "--publish",
                                         str(port), str(n), str(size)],
        "python-window": lambda port, n, size: [sys.executable, os.path.abspath(__file__),
                                                "--publish", str(port), str(n), str(size),
                                                str(a.window)],
        "squall": lambda port, n, size: [os.path.join(bench, "nats_pub"), str(port), str(n),
                                         str(size)],
        "squall-static": lambda port, n, size: [os.path.join(bench, "nats_pub"), str(port),
                                                str(n), str(size), "--static"],
        "libnats": lambda port, n, size: [os.path.join(bench, "nats_libnats"), str(port), str(n),
                                          str(size)],
        "libnats-1m": lambda port, n, size: [os.path.join(bench, "nats_libnats"), str(port),
                                             str(n), str(size), "--iobuf", str(1 << 20)],
        "squall-cli": lambda port, n, size: [os.path.join(a.build, "squall"),
                                             "nats://%s:%d/bench.floor" % (HOST, port), "-n",
                                             str(n), "--payload", "x" * size, "--window",
                                             str(a.window), "-t", "1", "-q", "--json", "-"],
        "squall-cli-2c": lambda port, n, size: [os.path.join(a.build, "squall"),
                                                "nats://%s:%d/bench.floor" % (HOST, port), "-n",
                                                str(n), "--payload", "x" * size, "-c", "2",
                                                "--window", str(a.window // 2), "-t", "1", "-q",
                                                "--json", "-"],
    }
    names = [x for x in a.arms.split(",") if x]
    for n in names:
        exe = arms[n](0, 0, 0)[0]
        if not os.path.exists(exe):
            sys.exit("nats_floor: %s needs %s (cmake --build %s)" % (n, exe, a.build))
    if not shutil.which("nats-server"):
        sys.exit("nats_floor: nats-server not installed (scripts/deps.sh)")
    port, mon = free_port(), free_port()
    server = subprocess.Popen(["taskset", "-c", "0", "nats-server", "-a", HOST, "-p", str(port),
                               "-m", str(mon)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                varz(mon)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("nats_floor: nats-server did not start")
                time.sleep(0.05)
        model = "unknown CPU"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
        print("# machine: %s, %d CPUs, Linux %s; nats-server %s on CPU 0, publishers on CPU 1"
              % (model, os.cpu_count(), os.uname().release, varz(mon).get("version")))
        print("# %d rounds, order rotated per round, %d messages per run" % (a.rounds, a.count))
        res = {}
        for size in [int(x) for x in a.sizes.split(",")]:
            for r in range(a.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for n in order:
                    before = varz(mon)["in_msgs"]
                    scpu0, sleeps0 = proc_cpu(server.pid), proc_sleeps(server.pid)
                    out, cpu = run_arm(arms[n](port, a.count, size))
                    scpu = proc_cpu(server.pid) - scpu0
                    sleeps = (proc_sleeps(server.pid) - sleeps0) / out["sent"] * 1e6
                    got = varz(mon)["in_msgs"] - before
                    rate = out["sent"] / out["seconds"]
                    res.setdefault((n, size), []).append(
                        (rate, cpu / out["sent"] * 1e6, scpu / out["seconds"], got == out["sent"],
                         sleeps, r))
                    print("  round %d %-13s %3d B: %10.0f msg/s  client CPU %.2f s/M msgs  "
                          "server CPU %3.0f%%  server sleeps %5.0f/M msgs  varz %s"
                          % (r + 1, n, size, rate, cpu / out["sent"] * 1e6,
                             100 * scpu / out["seconds"], sleeps,
                             "exact" if got == out["sent"] else "%d != %d" % (got, out["sent"])),
                          flush=True)
        print()
        print("| arm | payload | msg/s median | min .. max | x first arm, per round: median (min .. max) "
              "| client CPU s per 1M msgs | server CPU | server sleeps per 1M msgs | /varz in_msgs |")
        print("|---|---|---|---|---|---|---|---|---|")
        for (n, size), v in res.items():
            rates = [x[0] for x in v]
            # the ratio to the first arm of the same round: drift and other jobs hit both
            first = {x[5]: x[0] for x in res[(names[0], size)]}
            ratio = [x[0] / first[x[5]] for x in v]
            print("| %s | %d B | %.2f M | %.2f .. %.2f M | %.2fx (%.2f .. %.2f) | %.2f | %.0f%% | %.0f | %s |"
                  % (n, size, statistics.median(rates) / 1e6, min(rates) / 1e6,
                     max(rates) / 1e6, statistics.median(ratio), min(ratio), max(ratio),
                     statistics.median(x[1] for x in v),
                     100 * statistics.median(x[2] for x in v),
                     statistics.median(x[4] for x in v),
                     "exact in %d/%d" % (sum(x[3] for x in v), len(v))))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
