#!/usr/bin/env python3
"""bench/h2_frames.py - what h2load and `squall --http2` put on the wire, and when, from strace.

  python3 bench/h2_frames.py                         squall target, 8 connections x 16 streams, 1 s
  python3 bench/h2_frames.py --conns 8 --streams 16 --duration 2 --nginx

Each client runs once under `strace -f -xx -s 1048576` (its reads, writes and waits, with their
bytes), pinned to CPU 1, the server on CPU 0. The bytes each client wrote on each connection are
parsed as an HTTP/2 frame stream (after the 24-byte preface), and so are those it read. Per
client: system calls per response, bytes and HEADERS frames per write, responses (the server's
HEADERS) per read, frames by type in each direction (SETTINGS, WINDOW_UPDATE, PING, ...), and
when requests leave: how many writes come straight after a read (no wait between them) and how
many after an epoll wait. strace slows both clients alike; compare the counts and the shapes,
not the rates. Figures, not pass/fail; docs/benchmarks.md "HTTP/2 against h2load, round 2".
"""
import argparse
import collections
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402

TYPES = {0: "DATA", 1: "HEADERS", 2: "PRIORITY", 3: "RST_STREAM", 4: "SETTINGS", 5: "PUSH_PROMISE",
         6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE", 9: "CONTINUATION"}
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CALL = re.compile(r'^(\d+)\s+(read|write|sendto|recvfrom|writev|epoll_wait|epoll_pwait|'
                  r'epoll_pwait2)\((.*)\)\s+=\s+(-?\d+)')


class Stream:
    """Frames of one direction of one connection, fed in the pieces the syscalls moved."""

    def __init__(self, preface):
        self.buf = b""
        self.skip = len(PREFACE) if preface else 0
        self.frames = collections.Counter()

    def feed(self, data):
        """Returns the frame types completed by this piece."""
        if self.skip:
            n = min(self.skip, len(data))
            self.skip -= n
            data = data[n:]
        self.buf += data
        done = []
        while len(self.buf) >= 9:
            ln = int.from_bytes(self.buf[0:3], "big")
            if len(self.buf) < 9 + ln:
                break
            t = TYPES.get(self.buf[3], str(self.buf[3]))
            self.frames[t] += 1
            done.append(t)
            self.buf = self.buf[9 + ln:]
        return done


def unhex(s):
    # strace -xx: "\x00\x01..." (one string argument; writev: one per iovec)
    return bytes.fromhex("".join(re.findall(r"\\x([0-9a-f]{2})", s)))


def analyse(path):
    out = {}  # fd -> Stream, one per direction
    inn = {}
    st = collections.Counter()
    per_write_headers, per_write_bytes, per_read_headers = [], [], []
    last = {}  # pid -> the last call kind: "read", "wait", "write"
    after = collections.Counter()
    for ln in open(path, errors="replace"):
        m = CALL.match(ln)
        if not m:
            continue
        pid, call, args, rc = m.group(1), m.group(2), m.group(3), int(m.group(4))
        st[call] += 1
        if call.startswith("epoll"):
            last[pid] = "wait"
            continue
        fd = int(args.split(",", 1)[0])
        if call in ("write", "sendto", "writev"):
            if rc <= 0:
                continue
            data = unhex(args)[:rc]
            if fd not in out:
                if not data.startswith(PREFACE[:min(len(data), 24)]):
                    continue  # not an HTTP/2 connection (the /stats reads, a log)
                out[fd] = Stream(True)
            frames = out[fd].feed(data)
            per_write_headers.append(frames.count("HEADERS"))
            per_write_bytes.append(rc)
            after[last.get(pid, "start")] += 1
            last[pid] = "write"
        else:
            if rc <= 0:
                st["read_eagain_or_eof"] += 1
                last[pid] = "read"
                continue
            if fd not in out:
                continue
            data = unhex(args)[:rc]
            inn.setdefault(fd, Stream(False))
            frames = inn[fd].feed(data)
            per_read_headers.append(frames.count("HEADERS"))
            last[pid] = "read"
    sent = collections.Counter()
    for s in out.values():
        sent.update(s.frames)
    got = collections.Counter()
    for s in inn.values():
        got.update(s.frames)
    return {"calls": st, "sent": sent, "got": got, "w_headers": per_write_headers,
            "w_bytes": per_write_bytes, "r_headers": per_read_headers, "after": after}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--streams", type=int, default=16)
    ap.add_argument("--duration", type=int, default=1)
    ap.add_argument("--path", default="/fast")
    ap.add_argument("--servers", default="target", help="target, nginx or both (h2c)")
    ap.add_argument("--server-cpus", default="0")
    ap.add_argument("--client-cpus", default="1")
    ap.add_argument("--squall", default=os.path.join(harness.ROOT, "build", "squall"))
    ap.add_argument("--keep", help="keep the strace files in this folder")
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="squall-h2frames-")
    print(f"# {harness.machine_line(a)}")
    for sname in a.servers.split(","):
        srv = start(sname, a, workdir)
        try:
            url = f"http://127.0.0.1:{srv.port}{a.path}"
            clients = {
                "h2load": ["h2load", "-c", str(a.conns), "-m", str(a.streams), "-t", "1",
                           "-D", str(a.duration), url],
                "squall --http2": [a.squall, "-c", str(a.conns), "--http2", "--streams",
                                   str(a.streams), "-t", "1", "-d", f"{a.duration}s", "-q",
                                   "--no-phases", url]}
            print(f"\n## {sname}, {a.path}, {a.conns} connections x {a.streams} streams, "
                  f"{a.duration} s under strace, load average {os.getloadavg()[0]:.1f}\n")
            rows = {}
            for name, argv in clients.items():
                trace = os.path.join(a.keep or workdir, f"{sname}-{name.split()[0]}.strace")
                srv.reset()
                subprocess.run(["taskset", "-c", a.client_cpus, "strace", "-f", "-xx",
                                "-s", "1048576", "-e",
                                "trace=read,write,sendto,recvfrom,writev,epoll_wait,"
                                "epoll_pwait,epoll_pwait2", "-o", trace, *argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=a.duration * 20 + 60)
                served = srv.stats()["served"]
                rows[name] = (analyse(trace), served)
            report(rows)
        finally:
            srv.stop()
    return 0


def start(sname, a, workdir):
    if sname == "target":
        return harness.Target(a.server_cpus, a.squall)
    return NginxH2(a.server_cpus, workdir)


class NginxH2(harness.Nginx):
    """harness.Nginx with `http2` on its listen line (h2c by prior knowledge) and a second,
    HTTP/1.1 port for stub_status (served = its request count, less the status reads)."""

    def __init__(self, cpus, workdir):
        self.port = harness.free_port()
        self.status_port = harness.free_port()  # HTTP/1.1, for stub_status
        conf = os.path.join(workdir, "nginx-h2.conf")
        with open(conf, "w") as f:
            f.write(f"""worker_processes 1;
daemon off;
pid {workdir}/nginx-h2.pid;
error_log {workdir}/nginx-h2-error.log crit;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000000;
  keepalive_timeout 300s;
  client_body_temp_path {workdir}/body;
  proxy_temp_path {workdir}/proxy;
  fastcgi_temp_path {workdir}/fcgi;
  uwsgi_temp_path {workdir}/uwsgi;
  scgi_temp_path {workdir}/scgi;
  server {{
    listen 127.0.0.1:{self.port} http2;
    listen 127.0.0.1:{self.status_port};
    location = /fast {{ default_type text/plain; return 200 "hello world"; }}
    location = /nginx_status {{ stub_status; }}
  }}
}}
""")
        self.proc = subprocess.Popen(["taskset", "-c", cpus, "nginx", "-c", conf],
                                     preexec_fn=harness.raise_nofile)
        harness.wait_port(self.port)

    def count(self):
        body = harness.urllib.request.urlopen(
            f"http://127.0.0.1:{self.status_port}/nginx_status").read()
        return int(body.decode().split("\n")[2].split()[2])


def report(rows):
    print("| per response (the client's own count of HEADERS received) | " +
          " | ".join(rows) + " |")
    print("|---|" + "---|" * len(rows))

    def line(label, f):
        print(f"| {label} | " + " | ".join(f(r, s) for r, s in rows.values()) + " |")

    def resp(r):
        return max(r["got"]["HEADERS"], 1)
    line("responses seen (server counted)", lambda r, s: f"{r['got']['HEADERS']} ({s})")
    line("syscalls per response", lambda r, s: f"{sum(v for k, v in r['calls'].items() if k != 'read_eagain_or_eof') / resp(r):.3f}")
    for c in ("read", "write", "sendto", "writev", "epoll_wait", "epoll_pwait", "epoll_pwait2"):
        if any(r["calls"][c] for r, _ in rows.values()):
            line(f"  {c}", lambda r, s, c=c: f"{r['calls'][c] / resp(r):.3f}")
    line("  reads that found nothing (EAGAIN) or EOF",
         lambda r, s: f"{r['calls']['read_eagain_or_eof'] / resp(r):.3f}")
    line("HEADERS per write: mean (p50, max)",
         lambda r, s: f"{statistics.mean(r['w_headers']):.2f} ({statistics.median(r['w_headers']):.0f}, {max(r['w_headers'])})")
    line("bytes per write: mean", lambda r, s: f"{statistics.mean(r['w_bytes']):.0f}")
    line("bytes sent per request",
         lambda r, s: f"{sum(r['w_bytes']) / max(r['sent']['HEADERS'], 1):.1f}")
    line("responses (HEADERS) per non-empty read: mean (p50, max)",
         lambda r, s: f"{statistics.mean(r['r_headers']):.2f} ({statistics.median(r['r_headers']):.0f}, {max(r['r_headers'])})")
    line("writes right after a read / after a wait",
         lambda r, s: f"{r['after']['read']} / {r['after']['wait']}")
    types = sorted(set().union(*[set(r["sent"]) | set(r["got"]) for r, _ in rows.values()]))
    for t in types:
        line(f"frames {t}: sent / received",
             lambda r, s, t=t: f"{r['sent'][t]} / {r['got'][t]}")
    print()


if __name__ == "__main__":
    sys.exit(main())
