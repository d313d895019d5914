"""A recording HTTP/1.1 peer for the wrk compatibility tests (tests/e2e/test_wrk.py).

    python3 wrk_peer.py          prints "wrk_peer listening on PORT", serves until SIGTERM

Every request that reaches it is kept: its connection, method, target, header fields in order,
body, arrival time and whether the next request had already arrived with it (a pipelined
batch). GET /__log returns them as JSON and forgets them; those control requests are not kept.
Answers: 200 "ok" to everything, with X-Token on /authenticate (what wrk's auth.lua waits for).
Request bodies are framed by Content-Length only (wrk's scripts send nothing else).
"""

import json
import signal
import socket
import sys
import threading
import time

TOKEN = "tok-5c1e"

lock = threading.Lock()
log = []
next_conn = [0]


def answer(path):
    extra = b"X-Token: " + TOKEN.encode() + b"\r\n" if path == "/authenticate" else b""
    return b"HTTP/1.1 200 OK\r\n" + extra + b"Content-Length: 2\r\n\r\nok"


def serve(sock, conn_id):
    buf = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return
            buf += chunk
            out = []
            while True:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buf[:end].decode("latin-1")
                lines = head.split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                fields = []
                length = 0
                for ln in lines[1:]:
                    k, v = ln.split(":", 1)
                    fields.append([k, v.strip()])
                    if k.lower() == "content-length":
                        length = int(v.strip())
                if len(buf) < end + 4 + length:
                    break
                body = buf[end + 4 : end + 4 + length]
                buf = buf[end + 4 + length :]
                if target == "/__log":
                    with lock:
                        data = json.dumps(log).encode()
                        log.clear()
                    out.append(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               b"Content-Length: %d\r\n\r\n" % len(data) + data)
                    continue
                rec = {"conn": conn_id, "method": method, "path": target, "headers": fields,
                       "body": body.decode("latin-1"), "t": time.monotonic(),
                       "with_next": len(buf) > 0}
                with lock:
                    log.append(rec)
                out.append(answer(target))
            if out:
                sock.sendall(b"".join(out))
    except (ConnectionError, OSError):
        return
    finally:
        sock.close()


def main():
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(128)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("wrk_peer listening on %d" % ls.getsockname()[1], flush=True)
    while True:
        s, _ = ls.accept()
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with lock:
            next_conn[0] += 1
            cid = next_conn[0]
        threading.Thread(target=serve, args=(s, cid), daemon=True).start()


if __name__ == "__main__":
    main()
