#!/usr/bin/env python3
"""bench/pipeline_figures.py - issue 27 section 5's figures in one sitting (docs/benchmarks.md,
"Pub/sub figures against the floors and cnats").

Starts nats-server (JetStream, a temporary store) and mosquitto (a temporary config, $SYS every
second) on free loopback ports, broker on CPU 0 and every client on CPU 1 (taskset), and runs:

  nats-pub   bench/nats_floor.py (its own nats-server, same pinning): the Python floor, the same
             with squall's PING window, squall's nats:// load on one connection and on two, cnats
  mqtt-pub   QoS 0 publish: bench/mqtt_pub_floor.c (bare socket) vs squall mqtt:// --qos 0; the
             count held against mosquitto's $SYS/broker/publish/messages/received delta
  fanout     cnats publishes COUNT core messages; N subscribers on N connections count them:
             squall --subscribers N --subscribe-only vs bench/nats_sub_libnats.c
  js         a fresh memory stream per run; one pull consumer (batch 100, every message acked)
             by squall --subscribe-only --stream vs nats_sub_libnats pull, while cnats
             publishes COUNT core messages onto the stream's subject
  idle       10,000 idle MQTT connections, unpaced: connect rate (CONNACKs / setup_s), client
             peak RSS (GNU time %M) and mosquitto's (--watch), with the c=1 base

Arms alternate within a round, the order rotated each round; the tables give the median and
min .. max over the rounds. Consumers are timed from their own start to their last message
(the publisher starts as soon as the server shows their subscriptions, polled every 10 ms), so
both arms' spans hold the same connect-and-subscribe time. CPU is the client process's user +
system (wait4).

Usage: bench/pipeline_figures.py [--build build] [--rounds 3] [--quick]
                                 [--only nats-pub,mqtt-pub,fanout,js,idle] [--conns 10000]
"""
import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HOST = "127.0.0.1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def http_json(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def run(cmd, cpu="1", stdin=None):
    """Runs cmd pinned to cpu; returns (stdout, its user+system CPU seconds, wall seconds)."""
    t0 = time.monotonic()
    p = subprocess.Popen(["taskset", "-c", cpu, *cmd], stdout=subprocess.PIPE)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s exited %d" % (" ".join(cmd), os.waitstatus_to_exitcode(status)))
    return out, ru.ru_utime + ru.ru_stime, time.monotonic() - t0


def finish(p):
    """Waits for a Popen started by start(); returns (stdout, CPU seconds)."""
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d" % (" ".join(p.args), p.returncode))
    return out, ru.ru_utime + ru.ru_stime


def start(cmd, cpu="1"):
    return subprocess.Popen(["taskset", "-c", cpu, *cmd], stdout=subprocess.PIPE)


def wait_until(pred, what, limit=10.0):
    deadline = time.monotonic() + limit
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out waiting for " + what)
        time.sleep(0.01)


def med(v):
    return statistics.median(v), min(v), max(v)


def fmt_rate(v):
    m, lo, hi = med(v)
    if m >= 1e6:
        return "%.2f M | %.2f .. %.2f M" % (m / 1e6, lo / 1e6, hi / 1e6)
    return "%.0f k | %.0f .. %.0f k" % (m / 1e3, lo / 1e3, hi / 1e3)


class Servers:
    """nats-server -js and mosquitto on CPU 0, stopped by PID."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.nats, self.nmon, self.mqtt = free_port(), free_port(), free_port()
        self.procs = []
        self.ns = self._start(["nats-server", "-a", HOST, "-p", str(self.nats), "-m",
                               str(self.nmon), "-js", "-sd", os.path.join(tmp, "js")])
        wait_until(lambda: self._up(lambda: http_json(self.mon("/varz"))), "nats-server")
        conf = os.path.join(tmp, "mosquitto.conf")
        with open(conf, "w") as f:
            f.write("listener %d %s\nallow_anonymous true\npersistence false\nlog_dest none\n"
                    "sys_interval 1\nmax_connections -1\n" % (self.mqtt, HOST))
        self.mq = self._start(["mosquitto", "-c", conf])
        wait_until(lambda: self._up(lambda: socket.create_connection((HOST, self.mqtt)).close()),
                   "mosquitto")

    def _start(self, cmd):
        p = subprocess.Popen(["taskset", "-c", "0", *cmd], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    @staticmethod
    def _up(f):
        try:
            f()
            return True
        except OSError:
            return False

    def mon(self, path):
        return "http://%s:%d%s" % (HOST, self.nmon, path)

    def mqtt_published(self):
        """mosquitto's $SYS/broker/publish/messages/received once settled: $SYS is published
        every second (sys_interval 1), so a read may be one taken mid-run; two reads 1.1 s apart
        that agree are after the last update."""
        def read():
            out = subprocess.run(["mosquitto_sub", "-h", HOST, "-p", str(self.mqtt), "-t",
                                  "$SYS/broker/publish/messages/received", "-C", "1", "-W", "3"],
                                 capture_output=True, text=True).stdout.strip()
            return int(out or 0)
        time.sleep(1.1)
        v = read()
        for _ in range(10):
            time.sleep(1.1)
            w = read()
            if w == v:
                break
            v = w
        return v

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def squall_doc(out):
    return json.loads(out)


def bench_mqtt_pub(a, srv, rounds, count, size):
    arms = {
        "floor": lambda: [os.path.join(a.bench, "mqtt_pub_floor"), str(srv.mqtt), str(count),
                          str(size), "bench/floor"],
        "squall": lambda: [a.squall, "mqtt://%s:%d/bench/floor" % (HOST, srv.mqtt), "-n",
                           str(count), "--qos", "0", "--payload", "x" * size, "-t", "1", "-q",
                           "--json", "-"],
    }
    res = {n: [] for n in arms}
    names = list(arms)
    seen = srv.mqtt_published()
    for r in range(rounds):
        for n in names[r % 2:] + names[:r % 2]:
            out, cpu, _ = run(arms[n]())
            doc = json.loads(out)
            if "schema" in doc:
                doc = {"sent": doc["requests"]["completed"], "seconds": doc["duration_s"]}
            now = srv.mqtt_published()
            got, seen = now - seen, now
            rate = doc["sent"] / doc["seconds"]
            res[n].append((rate, cpu / doc["sent"] * 1e6, got == doc["sent"]))
            print("  mqtt-pub round %d %-6s %10.0f msg/s  client CPU %.2f s/M  $SYS %s"
                  % (r + 1, n, rate, cpu / doc["sent"] * 1e6,
                     "exact" if got == doc["sent"] else "%d != %d" % (got, doc["sent"])),
                  flush=True)
    print("\n### MQTT QoS 0 publish, %d messages of %d B, one connection\n" % (count, size))
    print("| arm | msg/s median | min .. max | client CPU s per 1M msgs | $SYS publish count |")
    print("|---|---|---|---|---|")
    for n, v in res.items():
        print("| %s | %s | %.2f | exact in %d/%d |" % (
            n, fmt_rate([x[0] for x in v]), statistics.median(x[1] for x in v),
            sum(x[2] for x in v), len(v)))
    f, s = (statistics.median(x[0] for x in res[k]) for k in ("floor", "squall"))
    print("\nsquall / floor = %.2f (goal >= 0.90)\n" % (s / f))


def consume_run(a, srv, arm, kind, subs, count, size, dur, stream=None):
    """One consumer run: consumer (squall or cnats) started, the publisher once it subscribed.
    Returns (received, seconds, consumer CPU s, publisher's sent)."""
    subj = "fan.bench" if kind == "fanout" else "js.bench"
    if kind == "js":
        run([os.path.join(a.bench, "nats_sub_libnats"), str(srv.nats), "mkstream", stream, subj])
        base = 0

        def ready():
            return http_json(srv.mon("/jsz"))["consumers"] >= subs
    else:
        base = http_json(srv.mon("/subsz"))["num_subscriptions"]

        def ready():
            return http_json(srv.mon("/subsz"))["num_subscriptions"] >= base + subs
    if arm == "squall":
        cmd = [a.squall, "nats://%s:%d/%s" % (HOST, srv.nats, subj), "--subscribers", str(subs),
               "--subscribe-only", "-d", "%ds" % dur, "-q", "--json", "-"]
        if kind == "js":
            cmd += ["--stream", stream, "--batch", "100"]
    else:
        per = count
        cmd = [os.path.join(a.bench, "nats_sub_libnats"), str(srv.nats)]
        cmd += (["pull", stream, subj, str(subs), str(per), "100"] if kind == "js"
                else ["core", subj, str(subs), str(per)])
    c = start(cmd)
    try:
        wait_until(ready, "%s %s subscriptions" % (arm, kind))
    except RuntimeError:
        c.kill()
        c.wait()
        raise
    pout, _, _ = run([os.path.join(a.bench, "nats_libnats"), str(srv.nats), str(count),
                      str(size), "--subject", subj])
    sent = json.loads(pout)["sent"]
    out, cpu = finish(c)
    doc = json.loads(out)
    if "schema" in doc:
        s = doc["subscribers"]
        spans = [p["messages"] / p["msgs_per_s"] for p in s["per_subscriber"] if p["msgs_per_s"]]
        doc = {"received": s["received"], "seconds": max(spans) if spans else float("nan")}
    if kind == "js":
        run([os.path.join(a.bench, "nats_sub_libnats"), str(srv.nats), "rmstream", stream])
    return doc["received"], doc["seconds"], cpu, sent


def bench_consume(a, srv, kind, rounds, subs, count, size, dur):
    res = {"squall": [], "cnats": []}
    names = list(res)
    for r in range(rounds):
        for n in names[r % 2:] + names[:r % 2]:
            got, secs, cpu, sent = consume_run(a, srv, n, kind, subs, count, size, dur,
                                               "BENCH%d%s" % (r, n))
            want = sent * subs
            rate = got / secs
            res[n].append((rate, cpu / max(got, 1) * 1e6, got == want))
            print("  %s round %d %-6s received %d of %d  %10.0f msg/s  consumer CPU %.2f s/M"
                  % (kind, r + 1, n, got, want, rate, cpu / max(got, 1) * 1e6), flush=True)
    if kind == "fanout":
        print("\n### NATS fan-out: cnats publishes %d x %d B, %d subscribers (one connection "
              "each) count them\n" % (count, size, subs))
    else:
        print("\n### JetStream pull consume: cnats publishes %d x %d B onto a memory stream, "
              "%d pull consumer(s), batch 100, every message acked\n" % (count, size, subs))
    print("| consumer | msg/s received median | min .. max | consumer CPU s per 1M msgs | "
          "all received |")
    print("|---|---|---|---|---|")
    for n, v in res.items():
        print("| %s | %s | %.2f | %d/%d runs |" % (
            n if n == "cnats" else "squall `--subscribe-only`", fmt_rate([x[0] for x in v]),
            statistics.median(x[1] for x in v), sum(x[2] for x in v), len(v)))
    print()


def bench_idle(a, srv, conns, dur):
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)  # raised in main(), before the brokers
    if soft < conns + 200:
        print("  idle: RLIMIT_NOFILE %d (ulimit -n) < %d: lowered to %d connections"
              % (soft, conns + 200, soft - 200))
        conns = soft - 200
    rows = []
    for c in (1, conns):
        tf = os.path.join(a.tmp, "time%d" % c)
        cmd = ["/usr/bin/time", "-f", "%M", "-o", tf, a.squall,
               "mqtt://%s:%d/t" % (HOST, srv.mqtt), "--idle", "-c", str(c), "-d", "%ds" % dur,
               "--watch", str(srv.mq.pid), "-q", "--json", "-"]
        out, _, _ = run(cmd)
        doc = json.loads(out)
        with open(tf) as f:
            rss_kib = int(f.read().split()[-1])
        mc = doc["mqtt"]["connect"]
        rows.append((c, rss_kib, doc["server"]["rss_peak_bytes"] if doc.get("server") else None,
                     mc["connacks"], mc["refused"], doc["setup_s"], mc["p50_us"], mc["p99_us"],
                     doc["client"]["cpu_user_s"] + doc["client"]["cpu_sys_s"]))
        print("  idle c=%d: %d CONNACKs, setup %.2f s, client %d KiB" % (
            c, mc["connacks"], doc["setup_s"], rss_kib), flush=True)
    (_, r1, s1, *_), (c, rn, sn, acks, refused, setup, p50, p99, cpu) = rows
    print("\n### %d idle MQTT connections, unpaced (mosquitto on CPU 0, squall on CPU 1)\n"
          % c)
    print("| CONNACKs | refused | connect rate | CONNECT to CONNACK p50 / p99 | squall peak RSS "
          "(c=1 → c=%d) | per connection | mosquitto peak RSS (c=1 → c=%d) | per connection | "
          "squall CPU |" % (c, c))
    print("|---|---|---|---|---|---|---|---|---|")
    print("| %d | %d | %.0f /s | %.0f µs / %.0f µs | %d → %d KiB | %.2f KB | %s | %s | %.2f s |" % (
        acks, refused, acks / setup if setup else float("nan"), p50, p99, r1, rn,
        (rn - r1) * 1024 / (c - 1) / 1000,
        "%.2f → %.2f MB" % (s1 / 1e6, sn / 1e6) if s1 and sn else "n/a",
        "%.2f KB" % ((sn - s1) / (c - 1) / 1000) if s1 and sn else "n/a", cpu))
    print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny counts, 1 round: a check")
    ap.add_argument("--only", default="nats-pub,mqtt-pub,fanout,js,idle")
    ap.add_argument("--conns", type=int, help="idle: connections (10000; --quick 200)")
    a = ap.parse_args()
    a.squall = os.path.join(a.build, "squall")
    a.bench = os.path.join(a.build, "bench")
    only = set(a.only.split(","))
    if a.quick:
        rounds, pub_n, fan_n, js_n, conns, dur, idle_d = 1, 20000, 5000, 2000, 200, 3, 1
    else:
        rounds, pub_n, fan_n, js_n, conns, dur, idle_d = a.rounds, 2000000, 500000, 200000, \
            10000, 15, 5
    if a.conns:
        conns = a.conns
    need = [a.squall] + [os.path.join(a.bench, x) for x in
                         ("mqtt_pub_floor", "nats_libnats", "nats_sub_libnats", "nats_pub")]
    for x in need:
        if not os.path.exists(x):
            sys.exit("pipeline_figures: %s missing (scripts/deps.sh bench; cmake --build %s)"
                     % (x, a.build))
    for x in ("nats-server", "mosquitto", "mosquitto_sub", "taskset"):
        if not shutil.which(x):
            sys.exit("pipeline_figures: %s not installed (scripts/deps.sh)" % x)
    t_start = time.monotonic()
    # ulimit -n 20000 (or the hard limit) for the brokers and clients: 10,000 sockets on each side
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 20000 if hard == resource.RLIM_INFINITY else min(hard, 20000)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    ver = subprocess.run(["nats-server", "--version"], capture_output=True, text=True).stdout
    print("# %s, %d CPUs, Linux %s; %s; mosquitto on CPU 0 with nats-server, clients on CPU 1"
          % (model, os.cpu_count(), os.uname().release, ver.strip()))
    print("# %d round(s), arms alternated, order rotated per round%s" % (
        rounds, " (--quick: counts too small for figures)" if a.quick else ""), flush=True)
    if "nats-pub" in only:
        print("\n### NATS core publish (bench/nats_floor.py)\n", flush=True)
        subprocess.run([sys.executable, os.path.join(ROOT, "bench", "nats_floor.py"), "--build",
                        a.build, "--rounds", str(rounds), "--count", str(pub_n * 2), "--sizes",
                        "16", "--arms", "python,python-window,squall-cli,squall-cli-2c,libnats"],
                       check=True)
    with tempfile.TemporaryDirectory(prefix="squall-figures-") as tmp:
        a.tmp = tmp
        srv = Servers(tmp)
        try:
            if "mqtt-pub" in only:
                bench_mqtt_pub(a, srv, rounds, pub_n, 16)
            if "fanout" in only:
                bench_consume(a, srv, "fanout", rounds, 4, fan_n, 16, dur)
            if "js" in only:
                bench_consume(a, srv, "js", rounds, 1, js_n, 16, dur)
            if "idle" in only:
                bench_idle(a, srv, conns, idle_d)
        finally:
            srv.stop()
    print("# wall time %.0f s" % (time.monotonic() - t_start))


if __name__ == "__main__":
    main()
