#!/usr/bin/env python3
"""NATS and MQTT load over TLS (tls://, mqtts://) against real brokers configured for TLS and
mutual TLS, with certificates made here by the openssl CLI: a CA, a server certificate for
127.0.0.1 and localhost (subjectAltName), a client certificate, and a second CA that signed
nothing the brokers use (the wrong CA).

Peers, started and stopped here by PID on free loopback ports:
  - nats-server with tls { cert_file, key_file } (and ca_file, verify: true for mTLS) and its
    monitoring port: the server sends INFO in the clear with tls_required, squall switches the
    same socket to TLS before CONNECT; /varz in_msgs is the server's own count of what arrived,
    /connz the TLS version of each client (a distributed run's agents, by name).
  - mosquitto with two TLS listeners (cafile/certfile/keyfile; the second with
    require_certificate true): mosquitto_sub --cafile, an independent subscriber, counts what
    the broker delivered.
Every load is bounded by -n and a rate; a failing handshake is bounded by -d.
"""

import http.client as httpclient
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest

import sqtest
from sqtest import HOST

free_port = sqtest.free_port
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
MOSQUITTO_SUB = shutil.which("mosquitto_sub")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certs(d):
    """ca.pem (+ server.pem/key for 127.0.0.1 and localhost, client.pem/key) and other-ca.pem."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", *ec, "-keyout", ca + ".key", "-out", ca + ".pem", "-subj",
                "/CN=squall-bus-test-" + ca, "-days", "1", cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, cn in (("server", "localhost"), ("client", "squall-client")):
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn,
                cwd=d)
        extra = ["-extfile", "san.ext"] if name == "server" else []
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "1", *extra, cwd=d)
    # mosquitto started as root drops to its own user: let it read this throwaway directory
    os.chmod(d, 0o755)
    for f in os.listdir(d):
        os.chmod(os.path.join(d, f), 0o644)


@unittest.skipUnless(shutil.which("openssl") and os.path.exists(NATS) and
                     os.path.exists(MOSQUITTO) and MOSQUITTO_SUB,
                     "needs openssl, nats-server, mosquitto and mosquitto_sub (scripts/deps.sh)")
class BusTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = d = tempfile.mkdtemp(prefix="sq-bustls-")
        cls.procs = []
        try:
            make_certs(d)
            cls.ca, cls.other_ca = os.path.join(d, "ca.pem"), os.path.join(d, "other-ca.pem")
            cls.cert, cls.key = os.path.join(d, "client.pem"), os.path.join(d, "client.key")
            srv = (os.path.join(d, "server.pem"), os.path.join(d, "server.key"))
            # NATS: TLS, and mutual TLS (verify: true), each with its monitoring port
            cls.nats_port, cls.nats_mon = free_port(), free_port()
            cls.natsm_port, cls.natsm_mon = free_port(), free_port()
            for port, mon, verify in ((cls.nats_port, cls.nats_mon, False),
                                      (cls.natsm_port, cls.natsm_mon, True)):
                conf = os.path.join(d, "nats-%d.conf" % port)
                with open(conf, "w") as f:
                    f.write('listen: "%s:%d"\nhttp: "%s:%d"\ntls {\n  cert_file: "%s"\n'
                            '  key_file: "%s"\n  ca_file: "%s"\n  verify: %s\n  timeout: 5\n}\n'
                            % (HOST, port, HOST, mon, srv[0], srv[1], cls.ca,
                               "true" if verify else "false"))
                p = subprocess.Popen([NATS, "-c", conf], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
                cls.procs.append(p)
                sqtest.wait_port(port, p)
                sqtest.wait_port(mon, p)
            # mosquitto: a TLS listener and a mutual TLS one
            cls.mq_port, cls.mqm_port = free_port(), free_port()
            conf = os.path.join(d, "mosquitto.conf")
            with open(conf, "w") as f:
                f.write("per_listener_settings false\nallow_anonymous true\npersistence false\n"
                        "log_dest none\nmax_queued_messages 100000\n")
                for port, req in ((cls.mq_port, False), (cls.mqm_port, True)):
                    f.write("listener %d %s\ncafile %s\ncertfile %s\nkeyfile %s\n"
                            "require_certificate %s\n" % (port, HOST, cls.ca, srv[0], srv[1],
                                                          "true" if req else "false"))
            p = subprocess.Popen([MOSQUITTO, "-c", conf], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            cls.procs.append(p)
            sqtest.wait_port(cls.mq_port, p)
            sqtest.wait_port(cls.mqm_port, p)
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            sqtest.stop_proc(p)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def in_msgs(self, mon):
        c = httpclient.HTTPConnection(HOST, mon, timeout=10)
        c.request("GET", "/varz")
        doc = json.loads(c.getresponse().read())
        c.close()
        return doc["in_msgs"]

    def squall(self, *args):
        p, doc, _ = sqtest.run_json(*args, timeout=60)
        self.assertIsNotNone(doc, p.stderr)
        return p, doc

    def assert_nats_counted(self, port, mon, *tls_args, n=2000):
        before = self.in_msgs(mon)
        p, doc = self.squall("tls://%s:%d/bus.tls" % (HOST, port), "-n", str(n),
                             "--payload", "x" * 32, *tls_args)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual((r["completed"], r["failed"]), (n, 0), p.stderr)
        self.assertEqual(self.in_msgs(mon) - before, n)  # the server's own count
        self.assertGreaterEqual(doc["tls"]["handshakes"], 1)
        return doc

    # ---- NATS: INFO in the clear, then TLS on the same socket, then CONNECT ----

    def test_nats_over_tls_counts_equal_the_servers(self):
        self.assert_nats_counted(self.nats_port, self.nats_mon, "--cacert", self.ca)

    def test_nats_mutual_tls_with_a_client_certificate(self):
        self.assert_nats_counted(self.natsm_port, self.natsm_mon, "--cacert", self.ca, "--cert",
                                 self.cert, "--key", self.key, n=1000)

    def test_nats_mutual_tls_without_a_certificate_is_a_tls_error(self):
        before = self.in_msgs(self.natsm_mon)
        p, doc = self.squall("tls://%s:%d/bus.tls" % (HOST, self.natsm_port), "-d", "1s",
                             "--cacert", self.ca)
        self.assertEqual(doc["requests"]["completed"], 0)
        # TLS 1.3: the server's alert comes after the handshake, on the first read
        self.assertGreater(doc["errors"]["tls"], 0, p.stderr)
        self.assertIn("certificate", doc["tls"]["first_error"] or "", p.stderr)
        self.assertEqual(self.in_msgs(self.natsm_mon), before)

    def test_nats_insecure_skips_verification(self):
        self.assert_nats_counted(self.nats_port, self.nats_mon, "-k", n=500)

    def test_nats_wrong_ca_is_a_tls_error_with_its_message(self):
        before = self.in_msgs(self.nats_mon)
        p, doc = self.squall("tls://%s:%d/bus.tls" % (HOST, self.nats_port), "-d", "1s",
                             "--cacert", self.other_ca)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertGreater(doc["errors"]["tls"], 0, p.stderr)
        self.assertIn("certificate verify failed", json.dumps(doc), p.stderr)
        self.assertEqual(self.in_msgs(self.nats_mon), before)

    def test_nats_plain_url_on_a_tls_server_says_use_tls(self):
        p, doc = self.squall("nats://%s:%d/bus.tls" % (HOST, self.nats_port), "-d", "1s")
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertGreater(doc["errors"]["tls"], 0, p.stderr)
        self.assertIn("requires TLS: use tls://", json.dumps(doc) + p.stderr)

    def test_nats_tls_first_shakes_hands_before_info(self):
        # Debian's nats-server (2.9) predates handshake_first: this file's own server, TLS from
        # the first byte, then INFO, CONNECT, PING/PONG and PUBs counted
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(self.dir, "server.pem"),
                            os.path.join(self.dir, "server.key"))
        lsock = socket.create_server((HOST, 0))
        port = lsock.getsockname()[1]
        got = {"pubs": 0, "connect": b""}

        def serve():
            try:
                raw, _ = lsock.accept()
                raw.settimeout(20)
                with ctx.wrap_socket(raw, server_side=True) as s:
                    s.sendall(b'INFO {"server_id":"t","version":"2.10.0","proto":1,'
                              b'"max_payload":1048576,"headers":true,"tls_required":true}\r\n')
                    f = s.makefile("rb")
                    while True:
                        line = f.readline()
                        if not line:
                            return
                        if line.startswith(b"CONNECT "):
                            got["connect"] = line
                        elif line.startswith(b"PING"):
                            s.sendall(b"PONG\r\n")
                        elif line.startswith(b"PUB "):
                            f.read(int(line.split()[-1]) + 2)
                            got["pubs"] += 1
            except OSError:
                pass

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            p, doc = self.squall("tls://%s:%d/first" % (HOST, port), "--tls-first", "-n", "300",
                                 "--cacert", self.ca)
        finally:
            try:
                lsock.shutdown(socket.SHUT_RDWR)  # wakes accept() before the descriptor goes
            except OSError:
                pass
            lsock.close()
        t.join(20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 300, p.stderr)
        self.assertEqual(got["pubs"], 300)
        self.assertIn(b'"tls_required":true', got["connect"])

    # ---- distributed runs: the agents' and the controller's NATS connection over TLS ----

    def connz_tls(self, mon):
        """{client name: tls_version} of the server's connections (its monitoring port)."""
        c = httpclient.HTTPConnection(HOST, mon, timeout=10)
        c.request("GET", "/connz?limit=1000")
        doc = json.loads(c.getresponse().read())
        c.close()
        return {x.get("name", ""): x.get("tls_version", "") for x in doc.get("connections") or []}

    def distributed_run(self, port, mon, prefix, agent_args, ctl_args):
        """Two agents and a controller over tls://, against `squall target`: the merged count is
        the target's, and the server says each agent's connection runs TLS."""
        target, tport = sqtest.start_target("-t", "1")
        url = "tls://%s:%d" % (HOST, port)
        agents = []
        try:
            for name in ("tls-a1", "tls-a2"):
                agents.append(sqtest.Agent(url, name, prefix, *agent_args))
            conns = self.connz_tls(mon)
            for name in ("tls-a1", "tls-a2"):
                self.assertTrue(conns.get("squall-agent " + name, "").startswith("1."), conns)
            sqtest.http(tport, "POST", "/stats/reset")
            p, doc, _ = sqtest.run_json(
                "http://%s:%d/fast" % (HOST, tport), "-r", "200", "-d", "2s", "-c", "4", "-t",
                "1", "--agents", "2", "--nats", url, "--subject-prefix", prefix, *ctl_args,
                timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            r = doc["requests"]
            self.assertEqual(r["arrivals"], 400)
            self.assertEqual(doc["cluster"]["merged_agents"], ["tls-a1", "tls-a2"])
            st = sqtest.json_get(tport, "/stats")
            self.assertGreater(r["completed"], 0)
            self.assertEqual(st["arrivals"]["count"], r["completed"] + r["failed"], (st, r))
            self.assertEqual(r["sent"], r["completed"])
        finally:
            for a in agents:
                log = a.stop()
                self.assertNotIn("Sanitizer", log)
            sqtest.stop(target)

    def test_distributed_run_over_tls(self):
        self.distributed_run(self.nats_port, self.nats_mon, "dtls", ["--cacert", self.ca],
                             ["--nats-cacert", self.ca])

    def test_distributed_run_over_mutual_tls(self):
        self.distributed_run(self.natsm_port, self.natsm_mon, "dmtls",
                             ["--cacert", self.ca, "--cert", self.cert, "--key", self.key],
                             ["--nats-cacert", self.ca, "--nats-cert", self.cert, "--nats-key",
                              self.key])

    def test_distributed_run_rides_out_a_tls_server_restart(self):
        """The TLS server SIGKILLed mid-run and started again on its port: the agents and the
        controller redial with a new handshake, and every request the target served is counted
        once. The server wants a user and password too: the URL's, in CONNECT over TLS (and
        redacted in the agent's log)."""
        port, mon = free_port(), free_port()
        conf = os.path.join(self.dir, "nats-outage.conf")
        with open(conf, "w") as f:
            f.write('listen: "%s:%d"\nhttp: "%s:%d"\n'
                    'authorization { user: ctl, password: s3cr3t }\ntls {\n  cert_file: "%s"\n  key_file: "%s"\n'
                    '  timeout: 5\n}\n' % (HOST, port, HOST, mon,
                                           os.path.join(self.dir, "server.pem"),
                                           os.path.join(self.dir, "server.key")))

        def start_nats():
            p = subprocess.Popen([NATS, "-c", conf], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            sqtest.wait_port(port, p)
            return p

        nats = start_nats()
        target, tport = sqtest.start_target("-t", "1")
        url = "tls://ctl:s3cr3t@%s:%d" % (HOST, port)
        agents, ctl = [], None
        try:
            agents = [sqtest.Agent(url, n, "dout", "--cacert", self.ca) for n in ("o1", "o2")]
            sqtest.http(tport, "POST", "/stats/reset")
            ctl = subprocess.Popen(
                [sqtest.squall_path(), "http://%s:%d/fast" % (HOST, tport), "-r", "200", "-d",
                 "5s", "-c", "4", "-t", "1", "--agents", "2", "--nats", url, "--subject-prefix",
                 "dout", "--nats-cacert", self.ca, "--json", "-"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                text=True)
            lines = []
            reader = threading.Thread(target=lambda: lines.extend(ctl.stderr), daemon=True)
            reader.start()
            deadline = time.monotonic() + 20
            while not any("agents start in" in l for l in lines):
                self.assertLess(time.monotonic(), deadline, "".join(lines))
                time.sleep(0.02)
            time.sleep(2.0)  # into the run
            sqtest.stop_proc(nats, signal.SIGKILL)
            time.sleep(1.5)
            nats = start_nats()  # the same port, a new TLS server process
            out, _ = ctl.communicate(timeout=60)
            reader.join(10)
            err = "".join(lines)
            self.assertEqual(ctl.returncode, 0, err)
            doc = json.loads(out)
            c, r = doc["cluster"], doc["requests"]
            self.assertIsNone(c["incomplete"], err)
            self.assertGreaterEqual(c["controller"]["nats_outages"], 1, c["controller"])
            served = sqtest.json_get(tport, "/stats")["arrivals"]["count"]
            self.assertEqual((r["sent"], r["completed"]), (served, served), r)
            for a in c["agents"]:
                self.assertEqual(a["seconds_missing"], 0, a)
            conns = self.connz_tls(mon)  # back over TLS, both agents
            for name in ("o1", "o2"):
                self.assertTrue(conns.get("squall-agent " + name, "").startswith("1."), conns)
        finally:
            if ctl and ctl.poll() is None:
                sqtest.stop_proc(ctl)
            logs = [a.stop() for a in agents]
            sqtest.stop(target)
            sqtest.stop_proc(nats)
        for log in logs:
            self.assertIn("NATS is back", log)
            self.assertIn("ready on tls://ctl:[redacted]@", log)
            self.assertNotIn("s3cr3t", log)

    def run_agent(self, *args):
        return subprocess.run([sqtest.squall_path(), "agent", "--once", *args],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)

    def test_distributed_tls_refusals_say_why(self):
        url, murl = ("tls://%s:%d" % (HOST, self.nats_port),
                     "tls://%s:%d" % (HOST, self.natsm_port))
        # a certificate that does not verify: the agent and the controller stop, exit 1
        p = self.run_agent("--nats", url, "--cacert", self.other_ca)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("certificate verify failed", p.stderr)
        p, _ = sqtest.run_squall("http://%s:1/" % HOST, "-n", "1", "--agents", "1", "--nats",
                                 url, "--nats-cacert", self.other_ca)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("certificate verify failed", p.stderr)
        # mutual TLS without a client certificate: the server's alert, named
        p = self.run_agent("--nats", murl, "--cacert", self.ca)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("certificate", p.stderr)
        # nats:// on a server that requires TLS
        p = self.run_agent("--nats", "nats://%s:%d" % (HOST, self.nats_port))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("requires TLS: use tls://", p.stderr)
        # TLS flags with a plain URL, a certificate without its key: bad flags (2)
        p = self.run_agent("--nats", "nats://%s:%d" % (HOST, self.nats_port), "-k")
        self.assertEqual(p.returncode, 2, p.stderr)
        p = self.run_agent("--nats", url, "--cert", self.cert)
        self.assertEqual(p.returncode, 2, p.stderr)
        p, _ = sqtest.run_squall("http://%s:1/" % HOST, "-n", "1", "--agents", "1", "--nats",
                                 "nats://%s:%d" % (HOST, self.nats_port), "--nats-cacert",
                                 self.ca)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("tls://", p.stderr)

    def test_agent_tls_first_shakes_hands_before_info(self):
        # as test_nats_tls_first_...: this file's own server, TLS from the first byte
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(self.dir, "server.pem"),
                            os.path.join(self.dir, "server.key"))
        lsock = socket.create_server((HOST, 0))
        port = lsock.getsockname()[1]
        got = {"connect": b"", "subs": 0}

        def serve():
            try:
                raw, _ = lsock.accept()
                raw.settimeout(20)
                with ctx.wrap_socket(raw, server_side=True) as s:
                    s.sendall(b'INFO {"server_id":"t","version":"2.10.0","proto":1,'
                              b'"max_payload":1048576,"headers":true,"tls_required":true}\r\n')
                    f = s.makefile("rb")
                    while True:
                        line = f.readline()
                        if not line:
                            return
                        if line.startswith(b"CONNECT "):
                            got["connect"] = line
                        elif line.startswith(b"SUB "):
                            got["subs"] += 1
                        elif line.startswith(b"PING"):
                            s.sendall(b"PONG\r\n")
            except OSError:
                pass

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        agent = None
        try:
            agent = sqtest.Agent("tls://%s:%d" % (HOST, port), "first", "dfirst", "--tls-first",
                                 "--cacert", self.ca)
        finally:
            if agent:
                agent.stop()
            lsock.close()
        t.join(20)
        self.assertIn(b'"tls_required":true', got["connect"])
        self.assertEqual(got["subs"], 2)  # discover and its own subject

    # ---- MQTT: TLS right after the TCP connect ----

    def mqtt_counted(self, port, *tls_args, n=500, sub_args=()):
        topic = "sq/tls/%d" % port
        sub = subprocess.Popen(
            # line-buffered, so its SUBACK line shows before the load starts
            ["stdbuf", "-oL", MOSQUITTO_SUB, "-h", HOST, "-p", str(port), "--cafile", self.ca, "-t", topic,
             "-q", "1", "-C", str(n), "-W", "30", "-d", *sub_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # subscribed: its SUBACK in the debug output
                line = sub.stdout.readline()
                if not line or "SUBACK" in line:
                    break
            p, doc = self.squall("mqtts://%s:%d/%s" % (HOST, port, topic), "--qos", "1", "-n",
                                 str(n), *tls_args)
            out, _ = sub.communicate(timeout=40)
        finally:
            sqtest.stop_proc(sub)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual((r["completed"], r["failed"]), (n, 0), p.stderr)
        self.assertGreaterEqual(doc["tls"]["handshakes"], 1)
        got = [l for l in out.splitlines() if l.startswith("x" * 16)]
        self.assertEqual(len(got), n, out[-2000:])  # what the broker delivered, counted by its subscriber

    def test_mqtts_counts_equal_the_subscribers(self):
        self.mqtt_counted(self.mq_port, "--cacert", self.ca, "--payload", "x" * 16)

    def test_mqtts_mutual_tls_with_a_client_certificate(self):
        self.mqtt_counted(self.mqm_port, "--cacert", self.ca, "--cert", self.cert, "--key",
                          self.key, "--payload", "x" * 16,
                          sub_args=("--cert", self.cert, "--key", self.key))

    def test_mqtts_wrong_ca_and_no_certificate_fail_as_tls(self):
        p, doc = self.squall("mqtts://%s:%d/sq/x" % (HOST, self.mq_port), "-d", "1s",
                             "--cacert", self.other_ca)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertGreater(doc["errors"]["tls"], 0, p.stderr)
        self.assertIn("certificate verify failed", json.dumps(doc), p.stderr)
        p, doc = self.squall("mqtts://%s:%d/sq/x" % (HOST, self.mqm_port), "-d", "1s",
                             "--cacert", self.ca)
        self.assertEqual(doc["requests"]["completed"], 0)

    def test_insecure_and_tls_flags_are_refused_on_plain_bus_urls(self):
        for url in ("nats://%s:4222/a" % HOST, "mqtt://%s:1883/a" % HOST):
            p, _ = sqtest.run_squall(url, "-k", "-n", "1")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("tls://", p.stderr)
        p, _ = sqtest.run_squall("mqtts://%s:1/a" % HOST, "--tls-first", "-n", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        p, _ = sqtest.run_squall("sink", "--nats", "nats://%s:%d/a" % (HOST, self.nats_port),
                                 "--cacert", self.ca)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("broker over TLS", p.stderr)

    # ---- the sink's subscriptions over TLS ----

    def test_sink_over_nats_mutual_tls_counts_every_publish(self):
        url = "tls://%s:%d/sq.tls.orders" % (HOST, self.natsm_port)
        p, doc = self.squall(url, "-n", "1000", "--payload", '{"t":"{{$stamp}}"}', "--cacert",
                             self.ca, "--cert", self.cert, "--key", self.key, "--sink", url,
                             "--sink-settle", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["sink"]
        self.assertEqual(doc["requests"]["completed"], 1000)
        self.assertEqual((s["sent"], s["delivered"], s["lost"]), (1000, 1000, 0), p.stderr)

    def test_sink_over_mqtts_counts_every_publish(self):
        p, doc = self.squall("mqtts://%s:%d/sq/tls/o" % (HOST, self.mqm_port), "--qos", "1",
                             "-n", "500", "--window", "16", "--payload", '{"t":"{{$stamp}}"}',
                             "--cacert", self.ca, "--cert", self.cert, "--key", self.key,
                             "--sink", "mqtts://%s:%d/sq/tls/#" % (HOST, self.mqm_port),
                             "--sink-settle", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["sink"]
        self.assertEqual((s["sent"], s["delivered"], s["lost"]), (500, 500, 0), p.stderr)

    # ---- a plan's publish and subscribe steps, and its sink section, over TLS ----

    def test_plan_steps_and_sink_over_mutual_tls(self):
        nats = "tls://%s:%d/sq.plan.tls" % (HOST, self.natsm_port)
        mqtt = "mqtts://%s:%d/sq/plan/tls" % (HOST, self.mqm_port)
        path = os.path.join(self.dir, "plan-%d.yaml" % os.getpid())
        with open(path, "w") as f:
            f.write("target: http://127.0.0.1:1\n"
                    "sink:\n  nats: %s\n  settle: 1s\n"
                    "scenarios:\n  events:\n    executor: per-vu-iterations\n    vus: 2\n"
                    "    iterations: 50\n    flow:\n"
                    "      - publish: { url: \"%s\", json: { t: \"{{$stamp}}\" } }\n"
                    "      - subscribe: { url: \"%s\", timeout: 5s }\n"
                    "      - publish: { url: \"%s\", qos: 1, json: { n: 1 } }\n"
                    % (nats, nats, nats, mqtt))
        before = self.in_msgs(self.natsm_mon)
        p, doc = self.squall("run", path, "--cacert", self.ca, "--cert", self.cert, "--key",
                             self.key)
        self.assertEqual(p.returncode, 0, p.stderr)
        # the steps' own counts (the requests block counts HTTP requests: none here)
        self.assertEqual([(st["requests"], st["failed"]) for st in doc["steps"]],
                         [(100, 0)] * 3, p.stderr)
        self.assertEqual(self.in_msgs(self.natsm_mon) - before, 100)  # the NATS publishes
        s = doc["sink"]
        self.assertEqual((s["delivered"], s["lost"]), (100, 0), p.stderr)

    # ---- subscribers (--subscribers N, a plan's subscribers:) over TLS ----

    def varz(self, mon):
        c = httpclient.HTTPConnection(HOST, mon, timeout=10)
        c.request("GET", "/varz")
        doc = json.loads(c.getresponse().read())
        c.close()
        return doc["in_msgs"], doc["out_msgs"]

    def test_subscribers_over_nats_mutual_tls(self):
        # each subscriber its own TLS connection with the client certificate; each gets all
        url = "tls://%s:%d/sq.subs.tls" % (HOST, self.natsm_port)
        in0, out0 = self.varz(self.natsm_mon)
        p, doc = self.squall(url, "-n", "1000", "--cacert", self.ca, "--cert", self.cert,
                             "--key", self.key, "--subscribers", "3")
        in1, out1 = self.varz(self.natsm_mon)
        self.assertEqual(p.returncode, 0, p.stderr)
        s = doc["subscribers"]
        self.assertEqual(s["url"], "tls://%s:%d" % (HOST, self.natsm_port))
        self.assertEqual((s["subscribed"], s["published"]), (3, 1000))
        self.assertEqual([x["messages"] for x in s["per_subscriber"]], [1000] * 3)
        self.assertEqual((s["received"], s["lag"], s["reconnects"]), (3000, 0, 0))
        self.assertEqual((in1 - in0, out1 - out0), (1000, 3000))  # the server's own count

    def test_plan_subscribers_over_tls(self):
        # a plan's subscribers: on tls:// and mqtts:// take squall run's --cacert / --cert / --key
        for url, qos in (("tls://%s:%d/sq.plan.subs" % (HOST, self.natsm_port), ""),
                         ("mqtts://%s:%d/sq/plan/subs" % (HOST, self.mqm_port), ", qos: 1")):
            with self.subTest(url=url):
                path = os.path.join(self.dir, "plan-subs-%d.yaml" % os.getpid())
                with open(path, "w") as f:
                    f.write("target: http://127.0.0.1:1\n"
                            "subscribers: { url: \"%s\", count: 2%s }\n"
                            "scenarios:\n  events:\n    executor: shared-iterations\n"
                            "    vus: 2\n    iterations: 400\n    flow:\n"
                            "      - publish: { url: \"%s\"%s }\n" % (url, qos, url, qos))
                p, doc = self.squall("run", path, "--cacert", self.ca, "--cert", self.cert,
                                     "--key", self.key)
                self.assertEqual(p.returncode, 0, p.stderr)
                s = doc["subscribers"]
                self.assertEqual(s["published"], 400, p.stderr)
                self.assertEqual([x["messages"] for x in s["per_subscriber"]], [400] * 2)
                self.assertEqual((s["received"], s["lag"]), (800, 0))

    def test_sink_cli_wrong_ca_or_no_certificate_says_why(self):
        p, _ = sqtest.run_squall("sink", "--nats", "tls://%s:%d/a" % (HOST, self.nats_port),
                                 "--cacert", self.other_ca, "-d", "1s", timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("certificate verify failed", p.stderr)
        p, _ = sqtest.run_squall("sink", "--mqtt", "mqtts://%s:%d/a" % (HOST, self.mqm_port),
                                 "--cacert", self.ca, "-d", "1s", timeout=30)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("TLS with 127.0.0.1:%d" % self.mqm_port, p.stderr)


if __name__ == "__main__":
    sqtest.main()
