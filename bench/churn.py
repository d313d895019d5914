#!/usr/bin/env python3
"""bench/churn.py - a new connection per request (issue 31 §1): squall against wrk in the clear,
and squall against h2load and `openssl s_time` over TLS, on `squall target -t 1`.

Plain (`-H 'Connection: close'`, c=16 by default, one client thread), per arm and round:
  served   requests the target counted for /fast in --duration seconds (wall-clock: noisy)
  cpu/req  the client's user+sys CPU (rusage) per served request, in µs (noisy on a shared box)
  segs/req TCP segments per request, both ends (nstat TcpOutSegs; only in a private network
           namespace, which the script enters by itself when it runs as root: nothing else on
           the machine then adds to the count)
and once per arm, outside the timed rounds (counts, robust to a shared machine):
  sys/req  system calls per request (strace -f -c, the difference of two run lengths)
  ins/req  user-space instructions per request (callgrind, the difference of two run lengths;
           the VM has no PMU, so the kernel's instructions cannot be counted here)

TLS (--tls; `squall target --tls`): handshakes per second (over the client's
wall time, start-up included: noisy) and client CPU per handshake for
squall (reconnects resume: TLS 1.3 tickets), h2load --h1 (one handshake per request) and
`openssl s_time` -new (full handshakes) and -reuse (resumed), one
connection at a time as s_time works. Handshakes are the target's accepted connections.
Once per arm, outside the timed rounds, for squall and h2load (unless --no-counts):
  ins/hs   user-space instructions per handshake (callgrind, the difference of -n 500 and
           -n 1,500 over the difference of the target's accepted connections), with the
           suite negotiated and, for squall, the share of handshakes resumed (its JSON result)

Arms alternate: round r starts at arm r mod the number of arms. Medians with min-max spread.
The server runs on CPU 0 and the client on CPU 1 when there are two CPUs or more.

    python3 bench/churn.py                 # plain, 3 rounds of 4 s, counts
    python3 bench/churn.py --tls           # and the TLS arms
    python3 bench/churn.py --base OLD/squall   # and another build's arm, alternated with these
    python3 bench/churn.py --tls-only --rounds 1 --duration 2   # the TLS arms alone
"""
import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SQUALL = os.environ.get("SQUALL", os.path.join(ROOT, "build", "squall"))
CLOSE = "Connection: close"


def pin(cpu):
    return ["taskset", "-c", str(cpu)] if os.cpu_count() >= 2 and shutil.which("taskset") else []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(port, tls):
    # the target serves /stats on the same port; over TLS, without verification
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/stats"
    with urllib.request.urlopen(url, timeout=10, context=ctx if tls else None) as r:
        return json.load(r)


def reset(port, tls):
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(f"{'https' if tls else 'http'}://127.0.0.1:{port}/stats/reset",
                                 method="POST", data=b"")
    urllib.request.urlopen(req, timeout=10, context=ctx if tls else None).read()


def segs():
    if not os.environ.get("CHURN_NETNS"):
        return None
    out = subprocess.run(["nstat", "-az", "TcpOutSegs"], capture_output=True, text=True).stdout
    m = re.search(r"TcpOutSegs\s+(\d+)", out)
    return int(m.group(1)) if m else None


def timed(cmd, timeout):
    """Runs cmd; returns its rusage user+sys seconds (it and the children it waited for) and its
    wall seconds."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > timeout:
            p.kill()
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.02)
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # squall exits 1 on a failed check
        sys.exit(f"{cmd[0]} failed: {err[-400:]}")
    return ru.ru_utime + ru.ru_stime, time.monotonic() - t0


BASE = None  # --base: another squall build, an arm of its own ("base")


def plain_cmd(arm, url, conns, dur=None, n=None):
    if arm in ("squall", "base"):
        x = ["-n", str(n)] if n else ["-d", f"{dur}s"]
        return [SQUALL if arm == "squall" else BASE, url, "-c", str(conns), "-t", "1", "-H", CLOSE,
                *x]
    return ["wrk", "-t1", f"-c{conns}", f"-d{dur or 1}s", "-H", CLOSE, url]


def served(port, tls, what="fast"):
    st = stats(port, tls)
    return st["endpoints"][what] if what else st["connections"]


def counted(arm, url, port, conns, tool, lengths):
    """Per-request count by the difference of two run lengths (startup cancels out)."""
    pts = []
    for ln in lengths:
        reset(port, False)
        n = ln if arm != "wrk" else None
        dur = None if arm != "wrk" else ln
        base = plain_cmd(arm, url, conns, dur=dur, n=n)
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            if tool == "strace":
                cmd = ["strace", "-f", "-c", "-o", out, *base]
            else:
                cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *base]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if tool == "strace":
                with open(out) as f:
                    tot = [ln_ for ln_ in f.read().splitlines() if ln_.rstrip().endswith("total")]
                count = int(tot[-1].split()[3])
            else:
                count = int(re.search(r"Collected : (\d+)", p.stderr).group(1))
        pts.append((served(port, False), count))
    (n1, c1), (n2, c2) = pts
    return (c2 - c1) / (n2 - n1)


def med(v):
    return statistics.median(v), min(v), max(v)


def fmt(v, prec=1):
    m, lo, hi = med(v)
    return f"{m:,.{prec}f} ({lo:,.{prec}f}–{hi:,.{prec}f})"


def plain(args, port):
    url = f"http://127.0.0.1:{port}/fast"
    arms = ["squall", "wrk"] + (["base"] if BASE else [])
    res = {a: {"served": [], "cpu": [], "segs": []} for a in arms}
    for r in range(args.rounds):
        for k in range(len(arms)):
            arm = arms[(r + k) % len(arms)]
            reset(port, False)
            s0 = segs()
            cpu, _ = timed(pin(1) + plain_cmd(arm, url, args.conns, dur=args.duration),
                           args.duration + 30)
            s1 = segs()
            n = served(port, False)
            res[arm]["served"].append(n)
            res[arm]["cpu"].append(cpu * 1e6 / n)
            if s0 is not None:
                res[arm]["segs"].append((s1 - s0) / n)
            print(f"round {r + 1} {arm}: {n} served, {cpu * 1e6 / n:.1f} µs CPU/req", flush=True)
    counts = {}
    if not args.no_counts:
        for arm in arms:
            sl = (2000, 6000) if arm != "wrk" else (1, 3)
            cl = (1000, 3000) if arm != "wrk" else (1, 3)
            counts[arm] = (counted(arm, url, port, args.conns, "strace", sl),
                           counted(arm, url, port, args.conns, "callgrind", cl))
    print(f"\n### Churn, plain HTTP: /fast, `{CLOSE}`, c={args.conns}, {args.duration} s, "
          f"{args.rounds} rounds (median, min–max)\n")
    print("| client | served | CPU µs/req | segments/req | syscalls/req | user instr/req |")
    print("|---|---:|---:|---:|---:|---:|")
    for arm in arms:
        c = counts.get(arm)
        print(f"| {arm} | {fmt(res[arm]['served'], 0)} | {fmt(res[arm]['cpu'])} | "
              f"{fmt(res[arm]['segs'], 2) if res[arm]['segs'] else 'n/a'} | "
              f"{f'{c[0]:.2f}' if c else '-'} | {f'{c[1]:,.0f}' if c else '-'} |")
    rs = [a / b for a, b in zip(res["squall"]["served"], res["wrk"]["served"])]
    rc = [a / b for a, b in zip(res["squall"]["cpu"], res["wrk"]["cpu"])]
    print(f"\nsquall/wrk per round: served {', '.join(f'{x:.2f}' for x in rs)}; "
          f"CPU per request {', '.join(f'{x:.2f}' for x in rc)}")
    if BASE:
        rs = [a / b for a, b in zip(res["squall"]["served"], res["base"]["served"])]
        rc = [a / b for a, b in zip(res["squall"]["cpu"], res["base"]["cpu"])]
        print(f"squall/base per round: served {', '.join(f'{x:.2f}' for x in rs)}; "
              f"CPU per request {', '.join(f'{x:.2f}' for x in rc)}")


def tls(args, port):
    url = f"https://127.0.0.1:{port}/fast"
    arms = {
        "squall (resumed)": [SQUALL, url, "-k", "-c", str(args.conns), "-t", "1", "-H", CLOSE,
                             "-d", f"{args.duration}s"],
        "h2load --h1": ["h2load", "--h1", "-c", str(args.conns), "-t", "1", "-n",
                        str(args.tls_requests), "-H", CLOSE, url],
        "s_time -new": ["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new", "-www",
                        "/fast", "-time", str(args.duration)],
        "s_time -reuse": ["openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-reuse",
                          "-www", "/fast", "-time", str(args.duration)],
    }
    names = [a for a in arms if shutil.which(arms[a][0])]
    res = {a: {"hs": [], "cpu": []} for a in names}
    for r in range(args.rounds):
        for k in range(len(names)):
            arm = names[(r + k) % len(names)]
            reset(port, True)
            cpu, wall = timed(pin(1) + arms[arm], args.duration + 60)
            n = served(port, True, what=None) - 1  # the reset's own connection
            res[arm]["hs"].append(n / wall)
            res[arm]["cpu"].append(cpu * 1e6 / max(n, 1))
            print(f"round {r + 1} {arm}: {n} connections, {cpu * 1e6 / max(n, 1):.1f} µs "
                  f"CPU/handshake", flush=True)
    counts = {} if args.no_counts else tls_counts(args, port, url)
    print(f"\n### Churn over TLS: /fast, `{CLOSE}`, c={args.conns} (s_time: one at a time), "
          f"{args.duration} s, {args.rounds} rounds (median, min–max)\n")
    print("| client | handshakes/s | client CPU µs/handshake | user instr/handshake | suite |")
    print("|---|---:|---:|---:|---|")
    for arm in names:
        c = counts.get(arm)
        print(f"| {arm} | {fmt(res[arm]['hs'], 0)} | {fmt(res[arm]['cpu'])} | "
              f"{f'{c[0]:,.0f}' if c else '-'} | {c[1] if c else '-'} |")
    if "squall (resumed)" in counts:
        print(f"\nsquall's callgrind runs: {counts['squall (resumed)'][2]}")


def tls_counts(args, port, url):
    """User-space instructions per handshake (callgrind, the difference of two run lengths over
    the difference of the target's accepted connections): {arm: (instr, suite, note)}."""
    out = {}
    for arm in ("squall (resumed)", "h2load --h1"):
        if arm.startswith("h2load") and not shutil.which("h2load"):
            continue
        pts = []
        for n in (500, 1500):
            with tempfile.TemporaryDirectory() as d:
                res = os.path.join(d, "res.json")
                if arm.startswith("squall"):
                    base = [SQUALL, url, "-k", "-c", str(args.conns), "-t", "1", "-H", CLOSE,
                            "-n", str(n), "--json", res]
                else:
                    base = ["h2load", "--h1", "-c", str(args.conns), "-t", "1", "-n", str(n),
                            "-H", CLOSE, url]
                reset(port, True)
                p = subprocess.run(["valgrind", "--tool=callgrind",
                                    f"--callgrind-out-file={os.path.join(d, 'cg')}", *base],
                                   capture_output=True, text=True, timeout=600)
                count = int(re.search(r"Collected : (\d+)", p.stderr).group(1))
                hs = served(port, True, what=None) - 1  # the reset's own connection
                if arm.startswith("squall"):
                    with open(res) as f:
                        t = json.load(f)["tls"]
                    suite = t["cipher"]
                    note = f"{t['resumed']:,} of {t['handshakes']:,} handshakes resumed (-n {n})"
                else:
                    m = re.search(r"Cipher: (\S+)", p.stdout)
                    suite, note = (m.group(1) if m else "?"), ""
            pts.append((hs, count))
        (n1, c1), (n2, c2) = pts
        out[arm] = ((c2 - c1) / (n2 - n1), suite, note)
        print(f"{arm}: {out[arm][0]:,.0f} user instructions per handshake ({suite})", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--tls", action="store_true", help="also the TLS arms")
    ap.add_argument("--tls-only", action="store_true", help="only the TLS arms")
    ap.add_argument("--tls-requests", type=int, default=5000, help="h2load's -n (default 5000)")
    ap.add_argument("--no-counts", action="store_true", help="skip strace and callgrind")
    ap.add_argument("--no-netns", action="store_true", help="stay in this network namespace")
    ap.add_argument("--base", metavar="SQUALL",
                    help="another squall build as a third plain arm, alternated with the others "
                         "(before/after in one run)")
    args = ap.parse_args()
    global BASE
    BASE = args.base and os.path.abspath(args.base)
    if (not os.environ.get("CHURN_NETNS") and not args.no_netns and os.geteuid() == 0
            and shutil.which("unshare") and shutil.which("nstat")):
        env = dict(os.environ, CHURN_NETNS="1")
        sh = f"ip link set lo up && exec {sys.executable} {' '.join(map(repr, sys.argv))}"
        os.execvpe("unshare", ["unshare", "-n", "sh", "-c", sh], env)
    tools = ([] if args.tls_only else ["wrk"]) + ([] if args.no_counts else ["strace", "valgrind"])
    for tool in tools:
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    print(f"squall {SQUALL}; private network namespace: {bool(os.environ.get('CHURN_NETNS'))}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    for want_tls in ([] if args.tls_only else [False]) + ([True] if args.tls or args.tls_only
                                                             else []):
        port = free_port()
        cmd = pin(0) + [SQUALL, "target", "-t", "1", "-p", str(port), "-q"]
        srv = subprocess.Popen(cmd + (["--tls"] if want_tls else []),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    stats(port, want_tls)
                    break
                except OSError:
                    time.sleep(0.1)
            (tls if want_tls else plain)(args, port)
        finally:
            srv.terminate()
            srv.wait(timeout=10)


if __name__ == "__main__":
    main()
