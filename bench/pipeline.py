#!/usr/bin/env python3
"""bench/pipeline.py - event pipeline figures (issue 15): JetStream PubAcks, MQTT QoS 1 round
trips, and the counting sink's HTTP intake.

Benches (each a few seconds, every load bounded by -n or -d; servers started here, stopped by PID):
  js        `squall nats://.../bench.js.x --jetstream -n COUNT --window W` for W in 1, 16, 256
            against nats-server -js (a memory stream on bench.js.>): msgs/s and PubAck latency
            p50 / p99; the stream's own message count must grow by exactly what squall counted.
  mqtt-rt   `squall mqtt://.../bench/rt --qos 1 --round-trip -n COUNT --window W` for W in 1
            (sequential) and 64 through mosquitto: round trips/s, p50 / p99.
            Beside it, bench/nats_js_libnats.c (cnats: js_Publish for 1, js_PublishAsync with
            MaxPending = W otherwise) publishes the same count, held against the stream too.
  sink      `squall sink --http 127.0.0.1:PORT -t 1` on CPU 0, fed by a plan POSTing
            '{"t":"{{$stamp}}"}' from 64 VUs for 3 s (`squall run -t 1` on CPU 1, HTTP/1.1
            keep-alive): the sink's delivered events/s; its count must equal the load's
            completed requests exactly, with nothing lost or unstamped. The same plan over h2c
            (--http2 --streams 16), and the quick face's static body over HTTP/1.1 (-c 64) and
            h2c (-c 4 --streams 64). Arms alternate within each round.
  sink-pipe The same sink fed exact counts of stamped POSTs by bench/sink_feed.c (a pipelining
            HTTP/1.1 feeder on CPU 1): 64 connections with one request in flight each, and 4
            connections writing 16, 64 or 256 pipelined requests per send(); and squall's own
            client pipelining them (`squall wrk -s bench/sink_pipeline.lua -t 1 -c 4 -d 3s`,
            64 stamped POSTs per request() batch). Delivered must equal sent, nothing lost,
            duplicated or unstamped. The arms' order rotates per round.

nats-server / mosquitto / the sink on CPU 0, squall's load on CPU 1 (taskset). Rounds alternate
the arms; the table gives the median and the range.

Usage: bench/pipeline.py [--build build] [--rounds 3] [--benches js,mqtt-rt,sink]
"""
import argparse
import json
import os
import shutil
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


def wait_port(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit("server exited before listening")
        try:
            socket.create_connection((HOST, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("nothing listens on %d" % port)


def stop(proc):
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def squall_json(build, args, cpu="1"):
    cmd = ["taskset", "-c", cpu, os.path.join(build, "squall"), *args, "--json", "-", "-q"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return json.loads(p.stdout)


def nats_api(port, subject, body):
    """One request on the JetStream API over a bare socket; returns the reply's JSON."""
    s = socket.create_connection((HOST, port), timeout=10)
    f = s.makefile("rb")
    f.readline()
    s.sendall(b'CONNECT {"verbose":false}\r\nSUB _INBOX.b 1\r\nPUB %s _INBOX.b %d\r\n%s\r\n'
              % (subject.encode(), len(body), body))
    while True:
        line = f.readline()
        if line.startswith(b"MSG"):
            data = f.read(int(line.split()[-1]) + 2)[:-2]
            s.close()
            return json.loads(data)
        if line.startswith(b"PING"):
            s.sendall(b"PONG\r\n")


def summary(vals):
    return "%s (%s .. %s)" % (fmt(statistics.median(vals)), fmt(min(vals)), fmt(max(vals)))


def fmt(v):
    if v >= 1e6:
        return "%.2f M" % (v / 1e6)
    if v >= 1e4:
        return "%.1f k" % (v / 1e3)
    return "%.0f" % v


def bench_js(a, rounds):
    d = tempfile.mkdtemp(prefix="sq-bench-js-")
    port, mon = free_port(), free_port()
    srv = subprocess.Popen(["taskset", "-c", "0", "nats-server", "-a", HOST, "-p", str(port),
                            "-m", str(mon), "-js", "-sd", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    rows, lrows = {}, {}
    try:
        wait_port(port, srv)
        wait_port(mon, srv)
        r = nats_api(port, "$JS.API.STREAM.CREATE.BENCHJS",
                     b'{"name":"BENCHJS","subjects":["bench.js.>"],"storage":"memory",'
                     b'"max_msgs":1000000}')
        if "error" in r:
            sys.exit("stream: %s" % r)
        for rnd in range(rounds):
            windows = [1, 16, 256]
            windows = windows[rnd % 3:] + windows[:rnd % 3]
            for w in windows:
                n = {1: 20000, 16: 100000, 256: 200000}[w]
                before = nats_api(port, "$JS.API.STREAM.INFO.BENCHJS", b"")["state"]["messages"]
                doc = squall_json(a.build, ["nats://%s:%d/bench.js.x" % (HOST, port),
                                            "--jetstream", "-n", str(n), "--window", str(w),
                                            "--payload", "x" * 64, "-d", "60s"])
                after = nats_api(port, "$JS.API.STREAM.INFO.BENCHJS", b"")["state"]["messages"]
                done = doc["requests"]["completed"]
                if after - before != done or doc["nats"]["acks"] != done:
                    sys.exit("js w=%d: squall %d, acks %d, the stream +%d" %
                             (w, done, doc["nats"]["acks"], after - before))
                rows.setdefault(w, []).append((done / doc["duration_s"],
                                               doc["latency"]["p50_us"], doc["latency"]["p99_us"]))
                nats_api(port, "$JS.API.STREAM.PURGE.BENCHJS", b"")
                lib = os.path.join(a.build, "bench", "nats_js_libnats")
                if os.path.exists(lib):
                    p = subprocess.run(["taskset", "-c", "1", lib, str(port), str(n), "64", str(w),
                                        "bench.js.x"], capture_output=True, text=True, timeout=120)
                    if p.returncode != 0:
                        sys.exit("nats_js_libnats: %s" % p.stderr)
                    r = json.loads(p.stdout)
                    after = nats_api(port, "$JS.API.STREAM.INFO.BENCHJS", b"")["state"]["messages"]
                    if after != n or r["errors"]:
                        sys.exit("libnats w=%d: the stream holds %d of %d, %d errors" %
                                 (w, after, n, r["errors"]))
                    lrows.setdefault(w, []).append(n / r["seconds"])
                    nats_api(port, "$JS.API.STREAM.PURGE.BENCHJS", b"")
    finally:
        stop(srv)
        shutil.rmtree(d, ignore_errors=True)
    print("\n| outstanding PubAcks (--window) | squall msgs/s median (range) | ack p50 µs | ack p99 µs "
          "| cnats msgs/s (js_PublishAsync, MaxPending = window) |")
    print("|---|---|---|---|---|")
    for w in sorted(rows):
        rs = rows[w]
        print("| %d | %s | %s | %s | %s |" % (w, summary([x[0] for x in rs]),
                                              summary([x[1] for x in rs]),
                                              summary([x[2] for x in rs]),
                                              summary(lrows[w]) if w in lrows else "-"))


def bench_mqtt(a, rounds):
    d = tempfile.mkdtemp(prefix="sq-bench-mq-")
    port = free_port()
    conf = os.path.join(d, "m.conf")
    with open(conf, "w") as f:
        # set_tcp_nodelay: without it mosquitto's Nagle holds each delivery that follows a
        # PUBACK until the client's delayed ACK (~40 ms), and a sequential round trip runs at
        # ~25/s (docs/benchmarks.md); with --no-nodelay the bench measures that too
        f.write("listener %d %s\nallow_anonymous true\npersistence false\nlog_dest none\n"
                "max_queued_messages 100000\n%s" % (port, HOST,
                                                    "" if a.no_nodelay else "set_tcp_nodelay true\n"))
    srv = subprocess.Popen(["taskset", "-c", "0", "mosquitto", "-c", conf],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = {}
    try:
        wait_port(port, srv)
        for rnd in range(rounds):
            ws = [1, 16, 64]
            for w in ws[rnd % 3:] + ws[:rnd % 3]:
                n = (300 if a.no_nodelay else 5000) if w == 1 else 50000
                doc = squall_json(a.build, ["mqtt://%s:%d/bench/rt" % (HOST, port), "--qos", "1",
                                            "--round-trip", "-n", str(n), "--window", str(w),
                                            "-d", "60s"])
                done = doc["requests"]["completed"]
                if done != n or doc["mqtt"]["delivered"] != n:
                    sys.exit("mqtt w=%d: %d of %d, delivered %d" %
                             (w, done, n, doc["mqtt"]["delivered"]))
                rows.setdefault(w, []).append((done / doc["duration_s"],
                                               doc["latency"]["p50_us"], doc["latency"]["p99_us"]))
    finally:
        stop(srv)
        shutil.rmtree(d, ignore_errors=True)
    print("\n| MQTT QoS 1 round trip (--window) | round trips/s median (range) | p50 µs | p99 µs |")
    print("|---|---|---|---|")
    for w in sorted(rows):
        rs = rows[w]
        print("| %d | %s | %s | %s |" % (w, summary([x[0] for x in rs]),
                                         summary([x[1] for x in rs]), summary([x[2] for x in rs])))


SINK_PLAN = """\
target: http://127.0.0.1:%d
scenarios:
  events:
    executor: constant-vus
    vus: 64
    duration: 3s
    flow:
      - request: { method: POST, url: /e, body: '{"t":"{{$stamp}}"}' }
"""


def wait_cpu(proc):
    """Waits for proc; returns its user + system CPU seconds."""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def sink_round(a, load, exact):
    """One `squall sink --http -t 1` on CPU 0 fed by `load` (squall args, {port} filled in) on
    CPU 1; returns (events/s of the load's duration, events per CPU second of the sink). exact:
    every event has its own stamp (delivered must equal the load's completed, nothing lost);
    otherwise one stamp in every body (delivered 1, the rest duplicates)."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="sq-bench-sink-")
    out, plan = os.path.join(d, "sink.json"), os.path.join(d, "plan.yaml")
    with open(plan, "w") as f:
        f.write(SINK_PLAN % port)
    sink = subprocess.Popen(["taskset", "-c", "0", os.path.join(a.build, "squall"), "sink",
                             "--http", "%s:%d" % (HOST, port), "-t", "1", "--idle", "1s",
                             "--json", out, "-q"], stdout=subprocess.DEVNULL)
    try:
        wait_port(port, sink)
        doc = squall_json(a.build, [x.format(port=port, plan=plan) for x in load])
        c = wait_cpu(sink)
    finally:
        stop(sink)
    with open(out) as f:
        s = json.load(f)["sink"]
    shutil.rmtree(d, ignore_errors=True)
    r = doc["requests"]
    if exact:
        ev = s["delivered"]
        if ev != r["completed"] or s["unstamped"] or s["duplicates"] or s["lost"]:
            sys.exit("sink: delivered %d, load completed %d, unstamped %d, lost %d" %
                     (ev, r["completed"], s["unstamped"], s["lost"]))
    else:
        # the requests still in flight when the load stopped reached the sink too
        ev = s["delivered"] + s["duplicates"]
        if not r["completed"] <= ev <= r["sent"] or s["delivered"] != 1:
            sys.exit("sink (static): %d + %d events, load completed %d, sent %d" %
                     (s["delivered"], s["duplicates"], r["completed"], r["sent"]))
    return ev / doc["duration_s"], ev / c


SINK_ARMS = [
    ("a plan's POSTs (64 VUs, CPU 1): delivered, exact (= the load's completed; 0 lost, "
     "0 unstamped)", ["run", "{plan}", "-t", "1"], True),
    ("the same plan over h2c (--http2 --streams 16: 4 connections): delivered, exact",
     ["run", "{plan}", "-t", "1", "--http2", "--streams", "16"], True),
    # the sink's own ceiling: the quick face's static body (one stamp in every POST, so all but
    # the first arrival are duplicates; the sink parses, finds and records each alike)
    ("the same stamp in every POST (quick face, -c 64 -t 1): events recorded",
     ["http://127.0.0.1:{port}/e", "-m", "POST", "-b", '{{"t":"sq1.1.1.1"}}', "-c", "64", "-t",
      "1", "-d", "3s"], False),
    ("the same over h2c (--http2 -c 4 --streams 64): events recorded",
     ["http://127.0.0.1:{port}/e", "-m", "POST", "-b", '{{"t":"sq1.1.1.1"}}', "--http2", "-c",
      "4", "--streams", "64", "-t", "1", "-d", "3s"], False),
]


def bench_sink(a, rounds):
    res = [([], []) for _ in SINK_ARMS]
    for _ in range(rounds):
        for i, (_, load, exact) in enumerate(SINK_ARMS):
            rate, per_cpu = sink_round(a, load, exact)
            res[i][0].append(rate)
            res[i][1].append(per_cpu)
    print("\n| sink, 1 thread on CPU 0 | events/s median (range) "
          "| events per CPU second of the sink |")
    print("|---|---|---|")
    for (name, _, _), (rates, cpu) in zip(SINK_ARMS, res):
        print("| %s | %s | %s |" % (name, summary(rates), summary(cpu)))


# The sink fed by bench/sink_feed.c (a pipelining HTTP/1.1 feeder): (name, --conns, --depth,
# events). Depth 1 is one request in flight per connection, what a non-pipelining client does.
PIPE_ARMS = [
    ("64 connections, 1 request in flight each (no pipelining)", 64, 1, 60000),
    ("4 connections, 16 pipelined requests per write", 4, 16, 300000),
    ("4 connections, 64 pipelined requests per write", 4, 64, 300000),
    ("4 connections, 256 pipelined requests per write", 4, 256, 300000),
    # squall's own client: `squall wrk -s bench/sink_pipeline.lua` (wrk's pipeline.lua with a
    # stamp per request), 64 per batch for 3 s; count None: delivered must equal its sent
    ("squall wrk -s bench/sink_pipeline.lua -t 1 -c 4 -d 3s (64 per write)", 4, 64, None),
]


def pipe_round(a, conns, depth, count):
    """One `squall sink --http -t 1` on CPU 0 fed `count` stamped POSTs by bench/sink_feed on
    CPU 1; the sink must have delivered exactly `count`, nothing lost, duplicated or unstamped.
    Returns (events/s of the feed, events per CPU second of the sink over its whole life)."""
    port = free_port()
    d = tempfile.mkdtemp(prefix="sq-bench-sinkpipe-")
    out = os.path.join(d, "sink.json")
    sink = subprocess.Popen(["taskset", "-c", "0", os.path.join(a.build, "squall"), "sink",
                             "--http", "%s:%d" % (HOST, port), "-t", "1", "--idle", "1s",
                             "--json", out, "-q"], stdout=subprocess.DEVNULL)
    try:
        wait_port(port, sink)
        if count is None:
            # script arguments last (after "--"): the JSON to stdout before the URL
            p = subprocess.run(
                ["taskset", "-c", "1", os.path.join(a.build, "squall"), "wrk", "-s",
                 os.path.join(ROOT, "bench", "sink_pipeline.lua"), "-t", "1", "-c", str(conns),
                 "-d", "3s", "--json", "-", "http://%s:%d/e" % (HOST, port), "--", str(depth)],
                capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                sys.exit("squall wrk: exit %d: %s" % (p.returncode, p.stderr))
            doc = json.loads(p.stdout)
            count = doc["requests"]["sent"] # the requests still in flight at the end arrive too
            feed = {"answered": count, "seconds": doc["duration_s"]}
        else:
            feed = json.loads(subprocess.run(
                ["taskset", "-c", "1", os.path.join(a.build, "bench", "sink_feed"), str(port),
                 str(count), "--conns", str(conns), "--depth", str(depth)],
                check=True, capture_output=True, text=True, timeout=120).stdout)
        c = wait_cpu(sink)
    finally:
        stop(sink)
    with open(out) as f:
        s = json.load(f)["sink"]
    shutil.rmtree(d, ignore_errors=True)
    if (feed["answered"] != count or s["delivered"] != count or s["lost"] or s["duplicates"]
            or s["unstamped"]):
        sys.exit("sink-pipe: sent %d, answered %d, delivered %d, lost %d, dup %d, unstamped %d" %
                 (count, feed["answered"], s["delivered"], s["lost"], s["duplicates"],
                  s["unstamped"]))
    return count / feed["seconds"], count / c


def bench_sink_pipe(a, rounds):
    res = [([], [], []) for _ in PIPE_ARMS]
    for rnd in range(rounds):
        order = list(range(len(PIPE_ARMS)))
        order = order[rnd % len(order):] + order[:rnd % len(order)]
        for i in order:
            _, conns, depth, count = PIPE_ARMS[i]
            rate, per_cpu = pipe_round(a, conns, depth, count)
            res[i][0].append(rate)
            res[i][1].append(per_cpu)
            res[i][2].append(os.getloadavg()[0])
            print("# round %d: %s: %.0f events/s, %.0f per sink CPU s, load %.1f" % (
                rnd, PIPE_ARMS[i][0], rate, per_cpu, os.getloadavg()[0]), flush=True)
    print("\n| sink (-t 1, CPU 0) fed on CPU 1, exact counts "
          "| events/s median (range) | events per CPU second of the sink, median (range) "
          "| load average |")
    print("|---|---|---|---|")
    for (name, _, _, _), (rates, cpu, load) in zip(PIPE_ARMS, res):
        print("| %s | %s | %s | %.1f .. %.1f |" % (name, summary(rates), summary(cpu),
                                                   min(load), max(load)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--benches", default="js,mqtt-rt,sink")
    ap.add_argument("--no-nodelay", action="store_true", help="mosquitto without set_tcp_nodelay")
    a = ap.parse_args()
    print("# machine: %s, %d CPUs; load average %s" % (
        os.uname().release, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())))
    for b in a.benches.split(","):
        {"js": bench_js, "mqtt-rt": bench_mqtt, "sink": bench_sink,
         "sink-pipe": bench_sink_pipe}[b](a, a.rounds)
    print("# load average after: %s" % " ".join("%.1f" % x for x in os.getloadavg()))


if __name__ == "__main__":
    main()
