#!/usr/bin/env python3
"""bench/target_callgrind.py - instructions per request of `squall target`, two builds compared.

Each arm runs `squall target -t 1` under `valgrind --tool=callgrind` (with bench/ab.py's
epoll_pwait2 shim: valgrind 3.19 does not know that call), loads it with one squall client
(--client, default B's binary) for -n N1 and then -n N2 requests on /fast, and stops it with
SIGINT; the instructions per request are (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and the end
cancel. Rounds alternate the arms. Instruction counts do not move with the machine's load.

usage: bench/target_callgrind.py A_SQUALL B_SQUALL [--client SQUALL] [--h2] [--rounds 2]
                                 [--counts 20000,100000]
"""
import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402  (its shim)
from harness import free_port  # noqa: E402



def target_ir(target, client, n, h2, shim, tmp):
    """Total instructions of one target run that served n requests."""
    port = free_port()
    out = os.path.join(tmp, "callgrind.%d" % n)
    p = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, target,
                          "target", "-t", "1", "-p", str(port), "-q"],
                         env=dict(os.environ, LD_PRELOAD=shim), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        load = ["-c", "8", "--http2", "--streams", "16"] if h2 else ["-c", "64"]
        subprocess.run([client, "http://127.0.0.1:%d/fast" % port, "-n", str(n), *load, "-t",
                        "1", "-q", "--json", "/dev/null"], check=True, timeout=600)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=120)
    with open(out) as f:
        m = re.search(r"^(?:summary|totals):\s*(\d+)", f.read(), re.M)
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--client")
    ap.add_argument("--h2", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--counts", default="20000,100000")
    args = ap.parse_args()
    n1, n2 = (int(x) for x in args.counts.split(","))
    client = args.client or args.b
    tmp = tempfile.mkdtemp(prefix="squall-target-cg-")
    shim = ab.build_shim(tmp)
    per = {"A": [], "B": []}
    for r in range(args.rounds):
        order = (("A", args.a), ("B", args.b)) if r % 2 == 0 else (("B", args.b), ("A", args.a))
        for name, binary in order:
            lo = target_ir(binary, client, n1, args.h2, shim, tmp)
            hi = target_ir(binary, client, n2, args.h2, shim, tmp)
            per[name].append((hi - lo) / (n2 - n1))
            print("round %d %s: %.1f instructions/request" % (r + 1, name, per[name][-1]),
                  flush=True)
    med = {k: statistics.median(v) for k, v in per.items()}
    for k in ("A", "B"):
        print("%s [%s]: %.1f (%.1f-%.1f) instructions/request" %
              (k, args.a if k == "A" else args.b, med[k], min(per[k]), max(per[k])))
    print("B vs A: %+.2f%%" % ((med["B"] / med["A"] - 1) * 100))


if __name__ == "__main__":
    main()
