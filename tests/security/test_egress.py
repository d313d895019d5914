#!/usr/bin/env python3
"""Security: one egress policy, checked before any packet (net/egress.h; issue 25, item 3).

Each bypass the issue found, tried again: an MCP plan whose subscribe step or whose sink: broker
is off loopback, an MCP plan whose sink listens on every interface, a daemon with allow_hosts
["127.0.0.1"] given connect-to / resolve overrides to another address, a POST /runs whose
auth.oauth2.token_url is off the allowlist (refused with no connect while the submission is
checked; an allowed one is not fetched before the caps either), and the daemon's script:
refusal, which must not tell whether a file exists.

Every scenario runs inside a network namespace of its own with only `lo` (`unshare -n`; then
`ip link set lo up`), so nothing can leave the machine whatever the build does: this file
re-executes itself there (`--inside SCENARIO`), starts squall (the daemon, `squall mcp`, a
target) under `strace -f -e trace=connect,bind`, talks to it, and prints what it saw as one JSON
line. The test then asserts that no connect() or bind() named an address off loopback, and that
the refusal names the rule. Every address here is numeric: no DNS lookup is made.

On a build without the policy each test fails: the traces show the connects to 10.1.2.3 and the
bind to 0.0.0.0, the token URL is fetched during the check, and the script's answers differ.
About 5 s (20 s on a build that lets the runs go).
"""

import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import sec  # noqa: F401  (puts tests/e2e on the path)
import sqtest

HERE = os.path.abspath(__file__)
OFF = "10.1.2.3"  # a private address (RFC 1918): off loopback, unreachable in the namespace
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "py", "version": "1"}}}
MCP_RULE = "MCP runs may only reach loopback"


def call(i, name, args):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": name, "arguments": args}}


def plan(target, flow, extra=""):
    return ("target: %s\n%sscenarios:\n  a:\n    executor: constant-vus\n    vus: 1\n"
            "    duration: 1s\n    flow:\n%s" % (target, extra, flow))


REQUEST = "      - request: { method: POST, url: /, body: '{{$stamp}}' }\n"

# ---------------------------------------------------------------------------------------------
# Inside the namespace


def traced(trace, cmd, calls="connect,bind", **kw):
    return subprocess.Popen(["strace", "-f", "-qq", "-o", trace, "-e", "trace=" + calls] + cmd,
                            **kw)


def serve(trace, *args, calls="connect,bind"):
    """`squall serve` under strace; returns (proc, port)."""
    data = tempfile.mkdtemp(prefix="squall-egress-")
    log = open(os.path.join(data, "serve.log"), "w")
    p = traced(trace, [sqtest.squall_path(), "serve", "--listen", "127.0.0.1:0", "--data",
                       os.path.join(data, "store"), *args], calls=calls,
               stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL)
    line = p.stdout.readline().decode()
    m = re.match(r"^squall serve listening on http://127\.0\.0\.1:(\d+)/$", line.strip())
    if not m:
        raise RuntimeError("squall serve: %r" % line)
    p.data = data
    return p, int(m.group(1))


LOGS = []  # what squall wrote on stderr: the test looks for sanitizer reports in it


def end(p):
    """SIGTERM to the traced program itself (strace, signalled, would detach and leave it
    running), then strace ends with it."""
    with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
        kids = [int(x) for x in f.read().split()]
    for k in kids:
        os.kill(k, signal.SIGTERM)
    p.wait(timeout=30)
    if getattr(p, "data", None):
        with open(os.path.join(p.data, "serve.log"), errors="replace") as f:
            LOGS.append(f.read())
        shutil.rmtree(p.data, ignore_errors=True)


def post(port, path, body, headers=None):
    st, h, payload = sqtest.http(port, "POST", path, body=json.dumps(body),
                                 headers=dict({"Content-Type": "application/json"},
                                              **(headers or {})), timeout=60)
    doc = json.loads(payload) if payload else None
    return st, h, doc


def wait_run(port, rid):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st, _, doc = sqtest.http(port, "GET", "/runs/%d" % rid)
        run = json.loads(doc)
        if run["status"] in ("finished", "stopped", "failed"):
            return run
        time.sleep(0.1)
    raise RuntimeError("run %d did not end" % rid)


def mcp_session(port):
    acc = {"Accept": "application/json, text/event-stream"}
    st, h, _ = post(port, "/mcp", INIT, acc)
    assert st == 200, st
    hs = dict(acc, **{"Mcp-Session-Id": h["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"})
    post(port, "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, hs)
    return hs


def tool_text(answer):
    """The text of a tools/call answer and whether it is an error."""
    r = answer.get("result") or {}
    return r.get("content", [{}])[0].get("text", json.dumps(answer)), bool(r.get("isError"))


def s_mcp_subscribe(trace):
    """`squall mcp` over stdio: a plan with a subscribe step to a broker off loopback."""
    p = plan("http://127.0.0.1:9",
             "      - subscribe: { url: 'nats://%s:4222/x', timeout: 1s }\n" % OFF)
    text = "".join(json.dumps(m) + "\n" for m in (INIT, call(1, "run_load_test", {"plan": p})))
    proc = traced(trace, [sqtest.squall_path(), "mcp"], stdin=subprocess.PIPE,
                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(text, timeout=60)
    LOGS.append(err)
    answers = {r.get("id"): r for r in map(json.loads, out.splitlines())}
    return {"answers": [tool_text(answers[1])]}


def s_mcp_new_paths(trace):
    """`squall mcp` over stdio: the paths that reach out added in issues 26, 27 and 30, each to
    a host off loopback: an HTTP/3 plan (QUIC over UDP), a plan's subscribers: section, a batch,
    setup: and a push receiver given as --out. Traced for UDP sends too."""
    plans = (
        plan("https://%s:8443" % OFF, "      - request: { url: / }\n",).replace(
            "executor:", "protocol: h3\n    executor:", 1),
        plan("http://127.0.0.1:9", "      - request: { url: / }\n",
             "subscribers:\n  url: nats://%s:4222/x\n  count: 2\n" % OFF),
        plan("http://127.0.0.1:9",
             "      - batch:\n          - request: { url: 'http://%s:80/a' }\n"
             "          - request: { url: /b }\n" % OFF),
        plan("http://127.0.0.1:9", "      - request: { url: / }\n",
             "setup:\n  flow:\n    - request: { url: 'http://%s:80/login' }\n" % OFF),
    )
    msgs = [INIT] + [call(i + 1, "run_load_test", {"plan": p}) for i, p in enumerate(plans)]
    text = "".join(json.dumps(m) + "\n" for m in msgs)
    proc = traced(trace, [sqtest.squall_path(), "mcp"], calls="connect,bind,sendto,sendmsg,sendmmsg",
                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(text, timeout=120)
    LOGS.append(err)
    answers = {r.get("id"): r for r in map(json.loads, out.splitlines())}
    return {"answers": [tool_text(answers[i + 1]) for i in range(len(plans))]}


def s_mcp_sink(trace):
    """POST /mcp of a daemon: sink: sections with a NATS and an MQTT broker off loopback, and an
    HTTP source on every interface; the same HTTP source sent to POST /runs."""
    tgt = subprocess.Popen([sqtest.squall_path(), "target", "--port", "0", "-t", "1"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    tport = int(tgt.stdout.readline().decode().strip().rsplit(":", 1)[1])
    proc, port = serve(trace)
    out = []
    try:
        hs = mcp_session(port)
        base = "http://127.0.0.1:%d" % tport
        sinks = ("sink:\n  nats: nats://%s:4222/x\n  settle: 100ms\n" % OFF,
                 "sink:\n  mqtt: mqtt://%s:1883/t\n  settle: 100ms\n" % OFF,
                 "sink:\n  http: 0.0.0.0:19999\n  settle: 100ms\n")
        for i, s in enumerate(sinks):
            st, _, doc = post(port, "/mcp", call(i + 1, "run_load_test",
                                                 {"plan": plan(base, REQUEST, s)}), hs)
            out.append(tool_text(doc))
        st, _, doc = post(port, "/runs", {"plan": plan(base, REQUEST, sinks[2])})
        out.append((doc.get("error") or json.dumps(doc), st))
        if st == 201:
            wait_run(port, doc["id"])
        # a sink on loopback is fine (and shows the trace sees binds)
        ok = "sink:\n  http: 127.0.0.1:0\n  settle: 100ms\n"
        st, _, doc = post(port, "/mcp", call(9, "run_load_test", {"plan": plan(base, REQUEST, ok)}),
                          hs)
        out.append(tool_text(doc))
    finally:
        end(proc)
        sqtest.stop(tgt)
    return {"answers": out}


def s_daemon_overrides(trace):
    """allow_hosts ["127.0.0.1"]: quick runs whose connect-to / resolve lead elsewhere, and one
    that stays on the allowed address."""
    tgt = subprocess.Popen([sqtest.squall_path(), "target", "--port", "0", "-t", "1"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    tport = int(tgt.stdout.readline().decode().strip().rsplit(":", 1)[1])
    proc, port = serve(trace, "--allow-host", "127.0.0.1")
    out = []
    try:
        url = "http://127.0.0.1:%d/fast" % tport
        for extra in ({"connect-to": "127.0.0.1:%d:%s:80" % (tport, OFF)},
                      {"connect-to": ":%d::%d" % (tport, tport), "resolve":
                       "127.0.0.1:%d:127.0.0.1,%s" % (tport, OFF)},
                      {"resolve": "127.0.0.1:%d:[::ffff:%s]" % (tport, OFF)}):
            q = dict({"url": url, "duration": "1s", "connections": 2, "threads": 1}, **extra)
            st, _, doc = post(port, "/runs", {"quick": q})
            out.append((doc.get("error") or json.dumps(doc), st))
            if st == 201:
                wait_run(port, doc["id"])
        st, _, doc = post(port, "/runs", {"quick": {"url": url, "requests": 50,
                                                    "connections": 2, "threads": 1}})
        run = wait_run(port, doc["id"]) if st == 201 else {}
        out.append((run.get("status"), st))
    finally:
        end(proc)
        sqtest.stop(tgt)
    return {"answers": out, "tport": tport}


def s_daemon_proxy(trace):
    """allow_hosts ["127.0.0.1"]: a proxy is no way around the policy. A run to a forbidden host
    through a loopback proxy, a run to a loopback target through a forbidden proxy, and a Unix
    socket (never, under a policy); then an allowed run through a loopback "proxy" (a listener
    that counts the connections it gets: the run is let through and goes there)."""
    lst = Listener()
    proc, port = serve(trace, "--allow-host", "127.0.0.1")
    out = []
    try:
        for q in ({"url": "http://%s/fast" % OFF, "proxy": "http://127.0.0.1:%d" % lst.port},
                  {"url": "http://127.0.0.1:%d/fast" % lst.port, "proxy": "http://%s:3128" % OFF},
                  {"url": "http://127.0.0.1:%d/fast" % lst.port, "unix-socket": "/run/x.sock"},
                  {"url": "http://127.0.0.1:9/fast", "proxy": "http://127.0.0.1:%d" % lst.port}):
            st, _, doc = post(port, "/runs", {"quick": dict(q, requests=1, connections=1,
                                                              threads=1, timeout="1s")})
            out.append((doc.get("error") or json.dumps(doc), st))
            if st == 201:
                wait_run(port, doc["id"])
    finally:
        end(proc)
        lst.s.close()
    return {"answers": out, "lport": lst.port, "accepted": lst.accepted}


class Listener:
    """A TCP listener on loopback that counts the connections it accepts and closes them."""

    def __init__(self):
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.port = self.s.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self.loop, daemon=True).start()

    def loop(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            self.accepted += 1
            c.close()


def s_oauth(trace):
    """POST /runs with auth.oauth2.token_url off the allowlist, then an allowed token URL on a
    plan over a cap: neither may be connected to while the submission is checked. Then the
    control: an allowed token URL (squall target's /oauth/token) on a plan within the caps gets
    its token when the run starts, and the run uses it."""
    lst = Listener()
    tgt = subprocess.Popen([sqtest.squall_path(), "target", "--port", "0", "-t", "1",
                            "--oauth-client", "c:s3cret"],
                           stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    tport = int(tgt.stdout.readline().decode().strip().rsplit(":", 1)[1])
    proc, port = serve(trace, "--allow-host", "127.0.0.1", "--max-vus", "5")
    out = []
    try:
        def auth(url):
            return ("auth:\n  oauth2:\n    token_url: %s\n    client_id: c\n"
                    "    client_secret: s3cret\n" % url)
        flow = "      - request: { url: / }\n"
        st, _, doc = post(port, "/runs", {"plan": plan("http://127.0.0.1:9", flow,
                                                       auth("http://%s/token" % OFF))})
        out.append((doc.get("error") or json.dumps(doc), st))
        over = plan("http://127.0.0.1:9", flow,
                    auth("http://127.0.0.1:%d/token" % lst.port)).replace("vus: 1", "vus: 10")
        st, _, doc = post(port, "/runs", {"plan": over})
        out.append((doc.get("error") or json.dumps(doc), st))
        items = ("      - request: { url: /items, headers: { Authorization: "
                 "'Bearer {{$oauth.token}}' } }\n        check: { status: 200 }\n")
        good = plan("http://127.0.0.1:%d" % tport, items, auth("/oauth/token"))
        st, _, doc = post(port, "/runs", {"plan": good})
        run = wait_run(port, doc["id"]) if st == 201 else {}
        out.append((run.get("status"), st))
        _, _, stats = sqtest.http(tport, "GET", "/stats")
        stats = json.loads(stats)
    finally:
        end(proc)
        sqtest.stop(tgt)
    return {"answers": out, "accepted": lst.accepted, "target": stats}


def s_script(trace):
    """The daemon's answer to a plan whose script: exists and to one whose script: does not,
    on /validate and POST /runs; and MCP's validate_plan. The trace also lists file calls."""
    proc, port = serve(trace, "--allow-host", "127.0.0.1", calls="connect,bind,%file")
    out = []
    paths = ("/etc/hostname", "/nonexistent/squall-egress.lua")
    try:
        for path in paths:
            p = plan("http://127.0.0.1:9", "      - request: { url: / }\n",
                     "script: %s\n" % path)
            for route in ("/validate", "/runs"):
                st, _, doc = post(port, route, {"plan": p})
                out.append((route, st, doc.get("error")))
    finally:
        end(proc)
    mtrace = trace + ".mcp"
    msgs = [INIT] + [call(i + 1, "validate_plan", {"plan": plan(
        "http://127.0.0.1:9", "      - request: { url: / }\n", "script: %s\n" % path)})
        for i, path in enumerate(paths)]
    mp = traced(mtrace, [sqtest.squall_path(), "mcp"], calls="connect,bind,%file",
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    o, e = mp.communicate("".join(json.dumps(m) + "\n" for m in msgs), timeout=60)
    LOGS.append(e)
    answers = {r.get("id"): r for r in map(json.loads, o.splitlines())}
    out += [("mcp",) + tool_text(answers[i + 1]) for i in range(len(paths))]
    with open(mtrace) as f:
        extra = f.read()
    return {"answers": out, "paths": paths, "extra_trace": extra}


def s_h3_env_proxy(trace):
    """An HTTP/3 run with HTTPS_PROXY set to a host off loopback (squall once sent its QUIC
    datagrams to the proxy's port): the quick face and a plan, to `squall target --tls --http3`
    named sq.test (an environment proxy is never taken for a loopback name). Traced for UDP
    sends too."""
    target, port = sqtest.start_target("-t", "1", "--tls", "--http3")
    env = dict(os.environ, HTTPS_PROXY="http://%s:3128" % OFF)
    resolve = "sq.test:%d:127.0.0.1" % port
    d = tempfile.mkdtemp(prefix="squall-egress-h3-")
    path = os.path.join(d, "plan.yaml")
    with open(path, "w") as f:
        f.write(plan("https://sq.test:%d" % port, "      - request: { url: /fast }\n").replace(
            "executor:", "protocol: h3\n    executor:", 1))
    out = []
    try:
        for i, cmd in enumerate((["https://sq.test:%d/fast" % port, "--http3", "-n", "5"],
                                 ["run", path])):
            p = traced(trace + ".%d" % i, [sqtest.squall_path(), *cmd, "--resolve", resolve,
                                           "-k", "-q", "--json", "-"],
                       calls="connect,bind,sendto,sendmsg,sendmmsg", env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            so, se = p.communicate(timeout=120)
            LOGS.append(se)
            doc = json.loads(so) if so.strip() else {}
            out.append([p.returncode, doc.get("requests", {}).get("completed"), se[-600:]])
    finally:
        sqtest.stop(target)
        shutil.rmtree(d, ignore_errors=True)
    return {"answers": out}


SCENARIOS = {"mcp_subscribe": s_mcp_subscribe, "mcp_sink": s_mcp_sink,
             "daemon_overrides": s_daemon_overrides, "oauth": s_oauth, "script": s_script,
             "daemon_proxy": s_daemon_proxy, "mcp_new_paths": s_mcp_new_paths,
             "h3_env_proxy": s_h3_env_proxy}


def inside(name):
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # an ASan build's LeakSanitizer cannot stop the world under strace's ptrace: leaks are the
    # unit tests' to find (test_egress, test_mcp run these paths without strace)
    opts = os.environ.get("ASAN_OPTIONS")
    os.environ["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
    tmp = tempfile.mkdtemp(prefix="squall-egress-trace-")
    trace = os.path.join(tmp, "trace")
    res = SCENARIOS[name](trace)
    text = ""
    for f in sorted(os.listdir(tmp)):
        if f.startswith("trace") and not f.endswith(".mcp"):
            with open(os.path.join(tmp, f)) as fh:
                text += fh.read()
    shutil.rmtree(tmp, ignore_errors=True)
    res["trace"] = text
    res["logs"] = "\n".join(LOGS)
    print(json.dumps(res))


# ---------------------------------------------------------------------------------------------
# Outside: the assertions

SOCK = re.compile(r"\b(connect|bind)\(\d+, \{sa_family=AF_INET6?, "
                  r"(?:sin_port|sin6_port)=htons\((\d+)\),"
                  r".*?(?:inet_addr\(\"([^\"]+)\"\)|inet_pton\(AF_INET6, \"([^\"]+)\")")


def sockets(trace):
    """(call, address, port) of every IPv4/IPv6 connect() and bind() in an strace output."""
    return [(m.group(1), m.group(3) or m.group(4), int(m.group(2))) for m in SOCK.finditer(trace)]


def off_loopback(addr):
    a = ipaddress.ip_address(addr)
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped:
        a = a.ipv4_mapped
    return not a.is_loopback


def netns_cmd():
    if os.geteuid() == 0:
        return ["unshare", "-n"]
    return ["unshare", "-r", "-n"]


class Egress(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in ("unshare", "strace", "ip"):
            if not shutil.which(tool):
                raise unittest.SkipTest("%s is not installed" % tool)
        probe = subprocess.run(netns_cmd() + ["true"], capture_output=True)
        if probe.returncode != 0:
            raise unittest.SkipTest("no network namespace here: %s" % probe.stderr.decode())

    def run_inside(self, name):
        p = subprocess.run(netns_cmd() + [sys.executable, HERE, "--inside", name],
                           capture_output=True, text=True, timeout=240)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        res = json.loads(p.stdout.strip().splitlines()[-1])
        # an ASan/UBSan build reports here (LeakSanitizer cannot run under strace's ptrace)
        for word in ("ERROR: AddressSanitizer", "runtime error:"):
            self.assertNotIn(word, res["logs"])
        return res, sockets(res["trace"])

    def assert_no_forbidden(self, socks):
        bad = sorted(set(s for s in socks if off_loopback(s[1])))
        self.assertEqual(bad, [], "connect()/bind() off loopback")

    def test_mcp_subscribe_off_loopback(self):
        res, socks = self.run_inside("mcp_subscribe")
        self.assert_no_forbidden(socks)
        text, is_err = res["answers"][0]
        self.assertTrue(is_err, text)
        self.assertIn("cap: targets only on loopback: the broker nats://%s:4222" % OFF, text)
        self.assertIn(MCP_RULE, text)
        self.assertIn("nothing was run", text)
        self.assertEqual(socks, [], "the refused plan opened nothing")

    def test_mcp_new_paths_off_loopback(self):
        # HTTP/3 (UDP: sendto/sendmsg traced too), subscribers, a batch's request and setup's,
        # each to a host off loopback: refused by the MCP cap, nothing sent anywhere off it
        res, socks = self.run_inside("mcp_new_paths")
        self.assert_no_forbidden(socks)
        self.assertNotIn(OFF, res["trace"], "a packet was addressed off loopback")
        for i, (text, is_err) in enumerate(res["answers"]):
            self.assertTrue(is_err, (i, text[:600]))
            # subscribers: are refused whatever their broker (before this, the section was
            # silently left out of the run); a request off the plan's origin by the one-origin
            # rule; the others by the loopback cap
            self.assertIn({1: "MCP runs no subscribers", 2: "is not on the target",
                           3: "is not on the target"}.get(i, MCP_RULE),
                          text)

    def test_h3_env_proxy_not_a_destination(self):
        res, socks = self.run_inside("h3_env_proxy")
        self.assert_no_forbidden(socks)
        self.assertNotIn(OFF, res["trace"], "a packet was addressed to the proxy off loopback")
        for rc, completed, err in res["answers"]:
            self.assertEqual(rc, 0, err)
            self.assertGreater(completed, 0, err)
            self.assertIn("HTTPS_PROXY is not used", err)
        # the datagrams went to the target: UDP sends to 127.0.0.1 are in the trace
        self.assertRegex(res["trace"], r"send(?:to|msg|mmsg)\(")

    def test_mcp_sink_brokers_and_listener(self):
        res, socks = self.run_inside("mcp_sink")
        self.assert_no_forbidden(socks)
        (nats, e1), (mqtt, e2), (http, e3), (api, st), (ok, e4) = res["answers"]
        self.assertTrue(e1 and e2 and e3, [a[0][:120] for a in res["answers"]])
        self.assertIn("sink: cap: targets only on loopback: nats: '%s' connects to %s:4222; %s"
                      % (OFF, OFF, MCP_RULE), nats)
        self.assertIn("sink: cap: targets only on loopback: mqtt: '%s' connects to %s:1883; %s"
                      % (OFF, OFF, MCP_RULE), mqtt)
        self.assertIn("sink: cap: targets only on loopback: http: would listen on "
                      "0.0.0.0:19999; MCP runs may only listen on loopback", http)
        # POST /runs: the daemon's own rule for listeners
        self.assertEqual(st, 403, api)
        self.assertIn("sink: allow_hosts: http: would listen on 0.0.0.0:19999; a run of this "
                      "daemon listens only on loopback", api)
        # a sink on loopback runs (the control: the trace sees its bind)
        self.assertFalse(e4, ok)
        self.assertTrue(any(c == "bind" and a == "127.0.0.1" for c, a, _ in socks), socks)

    def test_daemon_allow_hosts_with_overrides(self):
        res, socks = self.run_inside("daemon_overrides")
        self.assert_no_forbidden(socks)
        (ct, s1), (rs, s2), (mapped, s3), (good, s4) = res["answers"]
        self.assertEqual((s1, s2, s3), (403, 403, 403), res["answers"])
        self.assertIn("allow_hosts: the target: '127.0.0.1' connects to %s:80 (after connect-to), "
                      "and %s is not in allow_hosts [127.0.0.1]" % (OFF, OFF), ct)
        self.assertIn("(from resolve), and %s is not in allow_hosts [127.0.0.1]" % OFF, rs)
        self.assertIn("and %s is not in allow_hosts [127.0.0.1]" % OFF, mapped)
        self.assertEqual((good, s4), ("finished", 201))
        # the control: the allowed run's connects are in the trace
        self.assertIn(("connect", "127.0.0.1", res["tport"]), socks)

    def test_daemon_allow_hosts_through_a_proxy(self):
        res, socks = self.run_inside("daemon_proxy")
        self.assert_no_forbidden(socks)
        (dest, s1), (proxy, s2), (unix, s3), (good, s4) = res["answers"]
        self.assertEqual((s1, s2, s3, s4), (403, 403, 403, 201), res["answers"])
        self.assertIn("allow_hosts: the target (through the proxy): '%s' connects to %s:80, and "
                      "%s is not in allow_hosts [127.0.0.1]" % (OFF, OFF, OFF), dest)
        self.assertIn("allow_hosts: the proxy: '%s' connects to %s:3128" % (OFF, OFF), proxy)
        self.assertIn("may not connect to a Unix socket", unix)
        # the control: the allowed run went to the proxy, not to its target
        self.assertIn(("connect", "127.0.0.1", res["lport"]), socks)
        self.assertNotIn(("connect", "127.0.0.1", 9), socks)
        self.assertGreater(res["accepted"], 0)

    def test_oauth_token_url_not_fetched_while_checking(self):
        res, socks = self.run_inside("oauth")
        self.assert_no_forbidden(socks)
        (off, s1), (over, s2), (good, s3) = res["answers"]
        self.assertEqual(s1, 403, off)
        self.assertIn("auth.oauth2.token_url: '%s' connects to %s:80, and %s is not in "
                      "allow_hosts [127.0.0.1]" % (OFF, OFF, OFF), off)
        self.assertEqual(s2, 400, over)
        self.assertIn("max_vus", over)
        self.assertEqual(res["accepted"], 0, "the token URL was connected to during the check")
        # the control: fetched when the run starts, and used
        self.assertEqual((good, s3), ("finished", 201))
        # one token (it lives an hour): fetched as the run started, not also while it was
        # checked (a build that fetches during the check gets two)
        self.assertEqual(res["target"]["oauth"]["tokens"], 1, res["target"])
        self.assertGreater(res["target"]["auth"]["items_ok"], 0, res["target"])
        self.assertEqual(res["target"]["auth"]["items_unauthorized"], 0, res["target"])
        self.assertNotIn("s3cret", json.dumps(res["answers"]))

    def test_script_refusal_tells_nothing_of_the_file(self):
        res, socks = self.run_inside("script")
        self.assert_no_forbidden(socks)
        a = res["answers"]
        exists, missing = a[0:2], a[2:4]
        self.assertEqual(exists, missing, "the answers differ: the file's existence leaks")
        for route, st, err in exists:
            self.assertIn("plan.yaml:2:9: script: the daemon runs no Lua from plans", err)
        self.assertEqual(exists[1][1], 400)
        (_, t1, e1), (_, t2, e2) = a[4:6]
        self.assertTrue(e1 and e2)
        self.assertEqual(t1, t2)
        self.assertIn("plan.yaml:2:9: script: MCP runs no Lua from plans", t1)
        for path in res["paths"]:  # never even looked at, by the daemon or by MCP
            self.assertNotIn('"%s"' % path, res["trace"])
            self.assertNotIn('"%s"' % path, res["extra_trace"])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inside":
        inside(sys.argv[2])
    else:
        sqtest.main()
