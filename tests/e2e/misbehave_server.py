#!/usr/bin/python3
"""A misbehaving HTTP/1.1 server for tests/e2e/test_misbehave.py (plain python3 stdlib).

    misbehave_server.py MODE --status FILE [--tls CERT KEY]

Listens on 127.0.0.1 on a port the kernel picks and prints exactly one line on stdout:

    misbehave listening on PORT

then serves every connection on its own thread, misbehaving as MODE says (MODES below, one
misbehaviour each). It counts the requests it read (a request is read once its whole head, and
its Content-Length body if any, has arrived) and the connections it accepted, and writes them
as JSON, {"requests": N, "connections": M}, to FILE: every 20 ms while they change, after every
request in MODE "ok" (so a SIGKILL mid-run leaves an exact count), and on SIGTERM, which ends it
(exit 0) after that last write. Nothing else is ever written or read: the test ends it by PID.
"""

import os
import signal
import socket
import ssl
import struct
import sys
import threading
import time
import zlib

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
STOP = False  # a mode returns it to close the connection (gracefully) after its answer

lock = threading.RLock()  # the SIGTERM handler may run on a thread that holds it
counts = {"requests": 0, "connections": 0}
status_path = None
written = None


def write_status(force=False):
    global written
    with lock:
        snap = dict(counts)
        if snap == written and not force:
            return
        tmp = status_path + ".tmp"
        with open(tmp, "w") as f:
            f.write('{"requests": %d, "connections": %d}\n' % (snap["requests"],
                                                             snap["connections"]))
        os.replace(tmp, status_path)
        written = snap


def rst(c):
    """Closes c with a reset (SO_LINGER 0) instead of a FIN."""
    try:
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    c.close()


def gzip_bomb():
    """1 GiB of zeros, gzipped (about 1 MB): one full-flushed deflate block of 1 MiB of zeros
    repeated 1024 times (each is the same bytes, the window being reset), the final block, and
    the gzip trailer (CRC-32 of 2^30 zero bytes, ISIZE 2^30)."""
    z = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = z.compress(bytes(1 << 20)) + z.flush(zlib.Z_FULL_FLUSH)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return head + block * 1024 + z.flush() + struct.pack("<II", 0x5B64C2B0, 1 << 30)


# ---- modes: each answers one request (or does not); returns STOP to close gracefully ----


def m_ok(c, req, st):
    c.sendall(OK)


def m_rst_mid_head(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
    time.sleep(0.01)
    rst(c)
    return STOP


def m_short_body(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10)
    return STOP


def m_garbage(c, req, st):
    c.sendall(b"\x00\xff\xfeGARBAGE, NOT HTTP \x01\x02\r\n\r\n" * 8)


def m_huge_header(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1 << 20) + b"\r\nContent-Length: 2\r\n\r\nok")


def m_many_headers(c, req, st):
    fields = b"".join(b"X-Field-%d: value %d\r\n" % (i, i) for i in range(200))
    c.sendall(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 2\r\n\r\nok")


def m_bad_chunk(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")


def m_chunk_ext(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T, X-U\r\n\r\n"
              b"5;name=value;flag\r\nhello\r\n6;q=\"a b;c\"\r\n world\r\n"
              b"0;last=1\r\nX-T: t\r\nX-U: u\r\n\r\n")


def m_slow_response(c, req, st):
    for i in range(len(OK)):  # a byte every 50 ms: 2 s for the whole answer
        c.sendall(OK[i:i + 1])
        time.sleep(0.05)


def m_never_answer(c, req, st):
    pass  # reads the next request, and the next: answers none


def m_close_nth(c, req, st):
    c.sendall(OK)
    if st["answered"] % 3 == 2:  # after every 3rd answer, without "Connection: close"
        return STOP


def m_http10(c, req, st):
    c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + b"until the close " * 64)
    return STOP


def m_interim(c, req, st):
    c.sendall(b"HTTP/1.1 100 Continue\r\n\r\n"
              b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + OK)


def m_no_content_body(c, req, st):
    if st["answered"] % 2 == 0:
        c.sendall(b"HTTP/1.1 204 No Content\r\n\r\nbody of a 204")
    else:
        c.sendall(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 13\r\n\r\nbody of a 304")


def m_head_body(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")  # even to HEAD


def m_unsolicited_same(c, req, st):
    c.sendall(b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")


def m_unsolicited_later(c, req, st):
    c.sendall(OK)
    time.sleep(0.05)  # the client is idle by now (it paces its requests)
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")


def m_two_responses(c, req, st):
    c.sendall(OK + OK)


def m_endless_body(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"4000\r\n" + b"e" * 0x4000 + b"\r\n"
    while True:  # until the client leaves (the send fails)
        c.sendall(chunk)


def m_gzip_plain(c, req, st):
    body = b"this body is not gzip at all"
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
              % (len(body), body))


BOMB = None


def m_gzip_bomb(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n"
              % len(BOMB) + BOMB)


def m_conflicting_cl(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!")


def m_status_4digit(c, req, st):
    c.sendall(b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok")


def m_no_reason(c, req, st):
    c.sendall(b"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok")


def m_lf_only(c, req, st):
    c.sendall(b"HTTP/1.1 200 OK\nContent-Length: 2\nX-A: b\n\nok")


MODES = {name[2:]: fn for name, fn in globals().items() if name.startswith("m_")}
MODES["accept_close"] = None  # closes each connection at accept, reading nothing


def read_request(c, buf):
    """Returns (head, rest) once a whole request (head and Content-Length body) is in, or
    (None, buf) at EOF."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end + 4]
            n = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    n = int(value.strip() or b"0")
            while len(buf) < end + 4 + n:
                more = c.recv(65536)
                if not more:
                    return None, buf
                buf += more
            return head, buf[end + 4 + n:]
        more = c.recv(65536)
        if not more:
            return None, buf
        buf += more


def serve(c, mode):
    fn = MODES[mode]
    st = {"answered": 0}
    buf = b""
    try:
        while True:
            head, buf = read_request(c, buf)
            if head is None:
                break
            with lock:
                counts["requests"] += 1
            if mode == "ok":
                write_status()
            if fn(c, head, st) is STOP:
                break
            st["answered"] += 1
    except (OSError, ssl.SSLError):
        pass  # the client left (reset, broken pipe, a failed handshake)
    finally:
        try:
            c.close()
        except OSError:
            pass


def main():
    global status_path, BOMB
    args = sys.argv[1:]
    if not args or args[0] not in MODES or "--status" not in args:
        sys.stderr.write("usage: misbehave_server.py MODE --status FILE [--tls CERT KEY]\n"
                         "modes: %s\n" % " ".join(sorted(MODES)))
        return 2
    mode = args[0]
    status_path = args[args.index("--status") + 1]
    ctx = None
    if "--tls" in args:
        i = args.index("--tls")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args[i + 1], args[i + 2])
        ctx.set_alpn_protocols(["http/1.1"])
    if mode == "gzip_bomb":
        BOMB = gzip_bomb()
    write_status(force=True)

    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(1024)

    def on_term(sig, frame):
        write_status(force=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)

    def flusher():
        while True:
            time.sleep(0.02)
            write_status()

    threading.Thread(target=flusher, daemon=True).start()
    sys.stdout.write("misbehave listening on %d\n" % ls.getsockname()[1])
    sys.stdout.flush()

    while True:
        c, _ = ls.accept()
        with lock:
            counts["connections"] += 1
        if mode == "accept_close":
            c.close()
            continue
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if ctx is not None:
            def tls_serve(raw=c):
                try:
                    raw.settimeout(10)
                    s = ctx.wrap_socket(raw, server_side=True)
                    s.settimeout(None)
                except (OSError, ssl.SSLError):
                    raw.close()
                    return
                serve(s, mode)

            threading.Thread(target=tls_serve, daemon=True).start()
        else:
            threading.Thread(target=serve, args=(c, mode), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
