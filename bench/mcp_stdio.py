#!/usr/bin/env python3
"""bench/mcp_stdio.py SQUALL - `squall mcp` over stdin/stdout: how fast a notifications/cancelled
stops a run (the time from the cancellation to the answer of the ping sent after it, 7 runs of a
60 s run_load_test at 200/s, cancelled at their first progress notification), and the round trips
of resources/list, resources/read (a run, the plan reference) and prompts/get investigate_run
(300 sequential requests each, two passes). Loopback only; the target is started through the
start_target tool and stops with the server. docs/benchmarks.md has the figures."""
import json
import statistics
import subprocess
import sys
import time


def main():
    sq = sys.argv[1] if len(sys.argv) > 1 else 'build/squall'
    p = subprocess.Popen([sq, 'mcp'], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def send(o):
        p.stdin.write(json.dumps(o) + '\n')
        p.stdin.flush()

    def recv():
        return json.loads(p.stdout.readline())

    send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}})
    recv()
    send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
          "params": {"name": "start_target", "arguments": {}}})
    port = recv()["result"]["structuredContent"]["port"]
    url = f"http://127.0.0.1:{port}/fast"

    lat = []
    for i in range(7):
        rid = 100 + i
        send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
            "name": "run_load_test", "_meta": {"progressToken": rid}, "arguments": {"quick": {
                "url": url, "connections": 2, "duration": "60s", "threads": 1, "rate": 200}}}})
        m = recv()
        assert m.get("method") == "notifications/progress", m
        t0 = time.monotonic()
        send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
        send({"jsonrpc": "2.0", "id": f"p{i}", "method": "ping"})
        while True:
            m = recv()
            assert m.get("id") != rid, "the cancelled request was answered"
            if m.get("id") == f"p{i}":
                break
        lat.append((time.monotonic() - t0) * 1000)
    lat.sort()
    print("cancel -> next answer: median %.1f ms, min %.1f, max %.1f (n=%d)"
          % (statistics.median(lat), lat[0], lat[-1], len(lat)))

    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "run_load_test", "arguments": {"quick": {
            "url": url, "connections": 2, "duration": "2s", "threads": 1}}}})
    rid = recv()["result"]["structuredContent"]["run_id"]
    cases = [("resources/list", {}),
             ("resources/read", {"uri": f"squall://runs/{rid}"}),
             ("resources/read", {"uri": "squall://docs/plans.md"}),
             ("prompts/get", {"name": "investigate_run", "arguments": {"run_id": str(rid)}})]
    for passno in (1, 2):
        for meth, params in cases:
            t, size = [], 0
            for i in range(300):
                t0 = time.perf_counter()
                send({"jsonrpc": "2.0", "id": i + 10, "method": meth, "params": params})
                line = p.stdout.readline()
                t.append((time.perf_counter() - t0) * 1e6)
                size = len(line)
            t.sort()
            what = params.get("uri", params.get("name", ""))
            print(f"pass {passno} {meth} {what}: {size} bytes, p50 {t[150]:.0f} us, "
                  f"p90 {t[270]:.0f} us, p99 {t[297]:.0f} us")
    p.stdin.close()
    p.wait()


if __name__ == '__main__':
    main()
