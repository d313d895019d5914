"""Every refused flag of every face: one line on stderr naming the flag and the value, exit 2.

Each case runs `$SQUALL ARGS...` and checks the exact stderr (one line) and the exit code, with
nothing on stdout. The URL and the plan's target point at 127.0.0.1:1, where nothing listens: every
case here is refused before any connection is tried, and `squall target` cases before it listens.
"""

import os
import subprocess
import tempfile
import unittest

import sqtest

U = "http://127.0.0.1:1/"
S = "https://127.0.0.1:1/"


def quick(msg):
    return f"squall: {msg} (see squall --help)"


def run_msg(msg):
    return f"squall run: {msg} (see squall run --help)"


def target(msg):
    return f"squall target: {msg} (see squall target --help)"


def report(msg):
    return f"squall report: {msg} (see squall report --help)"


DURATION = "is not a duration (e.g. 500ms, 10s, 2m)"
TOKEN = "a token like GET or POST: letters, digits and !#$%&'*+-.^_`|~"

# (arguments, the one line expected on stderr)
QUICK = [
    # load shape
    ([U, "-c", "abc"], quick("-c: 'abc' is not a connection count (1..1000000)")),
    ([U, "--connections", "0"], quick("--connections: '0' is not a connection count (1..1000000)")),
    ([U, "--connections=2000000"],
     quick("--connections: '2000000' is not a connection count (1..1000000)")),
    ([U, "-c"], quick("-c needs a value")),
    ([U, "-d", "10parsecs"], quick(f"-d: '10parsecs' {DURATION}")),
    ([U, "--duration", "0"], quick(f"--duration: '0' {DURATION}")),
    ([U, "-d", ""], quick(f"-d: '' {DURATION}")),
    ([U, "-n", "0"], quick("-n: '0' is not a request count (1 or more)")),
    ([U, "--requests", "many"], quick("--requests: 'many' is not a request count (1 or more)")),
    ([U, "-r", "abc"], quick("-r: 'abc' is not a rate (requests per second, 0..100000000)")),
    ([U, "--rate", "-1"], quick("--rate: '-1' is not a rate (requests per second, 0..100000000)")),
    ([U, "-r", "1e9"], quick("-r: '1e9' is not a rate (requests per second, 0..100000000)")),
    ([U, "-r", "nan"], quick("-r: 'nan' is not a rate (requests per second, 0..100000000)")),
    ([U, "-r", "0"],
     quick("-r: '0': the rate must be positive (with --stages it may start at 0)")),
    ([U, "-r", "10", "--max-in-flight", "0"],
     quick("--max-in-flight: '0' is not a count (1..100000000)")),
    ([U, "-c", "8", "-r", "10", "--max-in-flight", "4"],
     quick("--max-in-flight: '4' must be at least -c (8)")),
    ([U, "--max-in-flight", "5"], quick("--max-in-flight applies to the open loop (-r)")),
    ([U, "--stages", ""], quick("--stages: '': at least one stage is needed")),
    ([U, "--stages", "x"], quick("--stages: 'x': expected DURATION:TARGET[,DURATION:TARGET...] "
                                 "e.g. 10s:100,30s:100")),
    ([U, "--stages", "1s:5,"], quick("--stages: '1s:5,': a trailing comma")),
    ([U, "--stages", "10s:1.5"],
     quick("--stages: '10s:1.5': each needs a duration and a whole number of VUs")),
    ([U, "--stages", "0s:5"], quick("--stages: '0s:5': the stages add up to no time")),
    ([U, "--stages", "1s:1", "-d", "1s"], quick("--stages sets the run's length; drop -d")),
    ([U, "-n", "5", "--stages", "1s:1"], quick("-n cannot be combined with --stages")),
    ([U, "-n", "5", "-r", "10"], quick("-n cannot be combined with -r")),
    ([U, "--pacing", "x"], quick(f"--pacing: 'x' {DURATION}")),
    ([U, "-r", "10", "--pacing", "1s"], quick("--pacing applies to the closed loop, not with -r")),
    ([U, "--graceful-stop", "-1s"], quick(f"--graceful-stop: '-1s' {DURATION}")),
    ([U, "-t", "0"], quick("-t: '0' is not a thread count (1..1024)")),
    ([U, "--threads", "2000"], quick("--threads: '2000' is not a thread count (1..1024)")),
    # the request
    ([U, "-m", ""], quick(f"-m: '' is not a method ({TOKEN})")),
    ([U, "-m", "GE T"], quick(f"-m: 'GE T' is not a method ({TOKEN})")),
    ([U, "--method", "GET\r\n"], quick(f"--method: 'GET\\r\\n' is not a method ({TOKEN})")),
    ([U, "-H", "X: a\r\nY: b"],
     quick("-H: 'X: a\\r\\nY: b' is not a header: CR and LF are not allowed (one header per -H)")),
    ([U, "-H", "no colon"], quick("-H: 'no colon' is not a header: expected 'Name: value'")),
    ([U, "--header", ": v"], quick("--header: ': v' is not a header: the name before ':' is empty")),
    ([U, "-H", "X a: b"], quick("-H: 'X a: b' is not a header: the name cannot contain spaces")),
    ([U, "-H", "X: \x01"], quick("-H: 'X: \\x01' is not a header: expected 'Name: value', the "
                                "name a token and the value printable")),
    ([U, "-b", "@"], quick("-b: '@' names no file (-b @FILE)")),
    ([U, "-b", "@/nonexistent/body.json"],
     quick("-b: '@/nonexistent/body.json': cannot read /nonexistent/body.json: "
           "No such file or directory")),
    ([U, "--timeout", "0"], quick(f"--timeout: '0' {DURATION}")),
    ([U, "--connect-timeout", "soon"], quick(f"--connect-timeout: 'soon' {DURATION}")),
    # outputs
    ([U, "--json", ""], quick("--json: '' is not a file name")),
    ([U, "--json", "/nonexistent/dir/r.json"],
     quick("--json: cannot write '/nonexistent/dir/r.json': No such file or directory")),
    ([U, "--html", "/nonexistent/dir/r.html"],
     quick("--html: cannot write '/nonexistent/dir/r.html': No such file or directory")),
    ([U, "--out", "xml=foo"], quick("--out: 'xml=foo' is not an output (csv=, hdr=, ndjson=FILE, prometheus-rw= or influxdb=URL)")),
    ([U, "--out", "csv="], quick("--out: 'csv=' is not an output (csv=, hdr=, ndjson=FILE, prometheus-rw= or influxdb=URL)")),
    ([U, "--out", "csv=/nonexistent/dir/s.csv"],
     quick("--out csv: cannot write '/nonexistent/dir/s.csv': No such file or directory")),
    ([U, "--sample", "0"], quick("--sample: '0' is not a fraction in (0, 1]")),
    ([U, "--sample", "0.5"], quick("--sample applies to --out ndjson=FILE")),
    # HTTP/2
    ([U, "--http2", "--streams", "0"], quick("--streams: '0' is not a stream count (1..1000)")),
    ([U, "--streams", "2"], quick("--streams applies to --http2 and --http3")),
    ([U, "--http2", "-c", "600000", "--streams", "2"],
     quick("-c x --streams: at most 1000000 VUs")),
    ([U, "--http2=yes"], quick("--http2 takes no value")),
    # DNS and TLS (cli/netopts.c)
    ([U, "--resolve", "nope"], quick("--resolve: 'nope' is not HOST:PORT:ADDR[,ADDR...]")),
    ([U, "--resolve", "h:0:127.0.0.1"], quick("--resolve: 'h:0:127.0.0.1': the port must be 1-65535")),
    ([U, "--resolve", "h:80:example.com"],
     quick("--resolve: 'h:80:example.com': addresses must be numeric IPv4 or [IPv6], "
           "comma-separated")),
    ([U, "--connect-to", "x"], quick("--connect-to: 'x' is not HOST:PORT:HOST2:PORT2")),
    ([U, "--connect-to", "a:0:b:1"], quick("--connect-to: 'a:0:b:1': a port must be 1-65535 (or empty)")),
    ([U, "--source-addrs", "127.0.0.9-127.0.0.2"], quick("--source-addrs: '127.0.0.9-127.0.0.2' is a range that ends before it starts")),
    ([U, "--source-addrs", "10.0.0.0/8"], quick("--source-addrs: more than 4096 addresses")),
    ([U, "--connect-rate", "0"], quick("--connect-rate: '0' is not a rate (connections per second, above 0)")),
    ([U, "--dns-ttl", "0"], quick(f"--dns-ttl: '0' {DURATION}")),
    ([U, "--tls-min", "1.1"], quick("--tls-min: '1.1' is not a TLS version (1.2 or 1.3)")),
    ([U, "--tls-max", "x"], quick("--tls-max: 'x' is not a TLS version (1.2 or 1.3)")),
    ([U, "--tls-min", "1.3", "--tls-max", "1.2"], quick("--tls-min 1.3 is above --tls-max 1.2")),
    ([U, "--key", "k.pem"], quick("--key needs --cert")),
    ([S, "--cacert", "/nonexistent/ca.pem"],
     quick("--cacert: '/nonexistent/ca.pem': No such file or directory")),
    ([S, "--cert", "/nonexistent/c.pem"],
     quick("--cert: '/nonexistent/c.pem': No such file or directory")),
    ([U, "--insecure=1"], quick("--insecure takes no value")),
    # flags and arguments
    ([U, "--frobnicate"], quick("unknown flag '--frobnicate'")),
    ([U, "-qZ"], quick("unknown flag '-Z'")),
    ([U, "--co", "5"], quick("'--co' is ambiguous: --connections, --connect-timeout, --connect-to, --connect-rate, --control")),
    ([U, "--cpus", "1-x"], quick("--cpus: '1-x' is not a CPU list like 0-3 or 0,2-5 (numbers "
                                 "and ranges, comma-separated)")),
    ([U, "--cpus", ""], quick("--cpus: '' is not a CPU list like 0-3 or 0,2-5 (numbers and "
                              "ranges, comma-separated)")),
    ([U, "--cpus", "3-1"], quick("--cpus: '3-1': the range 3-1 runs backwards")),
    ([U, "--cpus", "0,1024"], quick("--cpus: '0,1024': CPU 1024 is past the last one (1023)")),
    ([U, "--timeout"], quick("--timeout needs a value")),
    ([U, "extra"], quick("one URL only; unexpected 'extra' (several: --urls FILE)")),
    (["-c", "4"], quick("no URL given")),
    (["ftp://127.0.0.1/"],
     quick("bad URL 'ftp://127.0.0.1/': unsupported URL scheme \"ftp\" (use http://, https://, "
           "ws://, wss://, nats://, tls:// (NATS over TLS), mqtt://, mqtts://, mqtt+ws:// or "
           "mqtt+wss:// (MQTT over WebSocket))")),
    ([U.replace("http", "amqp")],
     quick("bad URL '%s': unsupported URL scheme \"amqp\" (use http://, https://, ws://, "
           "wss://, nats://, tls:// (NATS over TLS), mqtt://, mqtts://, mqtt+ws:// or "
           "mqtt+wss:// (MQTT over WebSocket))" % U.replace("http", "amqp"))),
    (["127.0.0.1:8080"],
     quick("bad URL '127.0.0.1:8080': no scheme (did you mean http://127.0.0.1:8080?)")),
    # a space is named as one wherever it lands (after the port it read "port must be 1..65535")
    (["http://127.0.0.1:1 a/b"],
     quick("bad URL 'http://127.0.0.1:1 a/b': a URL may not contain a space (character 19): "
           "write it as %20")),
    (["http://127.0.0.1:1/a b"],
     quick("bad URL 'http://127.0.0.1:1/a b': a URL may not contain a space (character 21): "
           "write it as %20")),
]

RUN = [
    (["run", "-t", "0", "PLAN"], run_msg("-t: '0' is not a thread count (1..1024)")),
    (["run", "--threads", "x", "PLAN"], run_msg("--threads: 'x' is not a thread count (1..1024)")),
    (["run", "--timeout", "0", "PLAN"], run_msg(f"--timeout: '0' {DURATION}")),
    (["run", "--connect-timeout", "x", "PLAN"], run_msg(f"--connect-timeout: 'x' {DURATION}")),
    (["run", "--json", "", "PLAN"], run_msg("--json: '' is not a file name")),
    (["run", "--json", "/nonexistent/dir/r.json", "PLAN"],
     run_msg("--json: cannot write '/nonexistent/dir/r.json': No such file or directory")),
    (["run", "--html", "/nonexistent/dir/r.html", "PLAN"],
     run_msg("--html: cannot write '/nonexistent/dir/r.html': No such file or directory")),
    (["run", "--resolve", "x", "PLAN"], run_msg("--resolve: 'x' is not HOST:PORT:ADDR[,ADDR...]")),
    (["run", "--tls-min", "1.0", "PLAN"], run_msg("--tls-min: '1.0' is not a TLS version (1.2 or 1.3)")),
    (["run", "--no-phases=1", "PLAN"], run_msg("--no-phases takes no value")),
    (["run", "--bogus", "PLAN"], run_msg("unknown flag '--bogus'")),
    (["run", "-x", "PLAN"], run_msg("unknown flag '-x'")),
    (["run", "PLAN", "--json"], run_msg("--json needs a value")),
    (["run"], run_msg("no plan file given")),
    (["run", "PLAN", "extra"], run_msg("one plan file only; unexpected 'extra'")),
    (["run", "DIR"], "squall: DIR: cannot read the plan: it is a directory"),
    (["validate"], "squall validate: no plan file given (see squall validate --help)"),
    (["validate", "--bogus"], "squall validate: unknown flag '--bogus' (see squall validate --help)"),
    (["validate", "DIR"], "squall: DIR: cannot read the plan: it is a directory"),
]

STALL = "is not DUR/PERIOD (0 < DUR < PERIOD, DUR at most 1h, e.g. 500ms/2s)"
TARGET = [
    (["target", "--port", "70000"], target("--port: '70000' is not a port (0..65535; 0 picks a free one)")),
    (["target", "-p", "x"], target("--port: 'x' is not a port (0..65535; 0 picks a free one)")),
    (["target", "--port=-1"], target("--port: '-1' is not a port (0..65535; 0 picks a free one)")),
    (["target", "-p"], target("--port needs a value")),
    (["target", "--threads", "0"], target("--threads: '0' is not a thread count (1..1024)")),
    (["target", "-t5000"], target("--threads: '5000' is not a thread count (1..1024)")),
    (["target", "--host", ""], target("--host: '' is not an address (e.g. 127.0.0.1, ::1, 0.0.0.0)")),
    (["target", "--host"], target("--host needs a value")),
    (["target", "--stall", "2s/1s"], target(f"--stall: '2s/1s' {STALL}")),
    (["target", "--stall", "x"], target(f"--stall: 'x' {STALL}")),
    (["target", "--stall"], target("--stall needs a value")),
    (["target", "--cert", ""], target("--cert: '' is not a file name")),
    (["target", "--cert", "c.pem"], target("--cert needs --key")),
    (["target", "--key", "k.pem"], target("--key needs --cert")),
    (["target", "--cert", "/nonexistent/c.pem", "--key", "/nonexistent/k.pem"],
     target("--cert: '/nonexistent/c.pem': No such file or directory")),
    (["target", "--client-ca"], target("--client-ca needs a value")),
    (["target", "--client-ca", "/nonexistent/ca.pem"],
     target("--client-ca: '/nonexistent/ca.pem': No such file or directory")),
    (["target", "--cert-out", "/nonexistent/dir/c.pem"],
     target("--cert-out: '/nonexistent/dir/c.pem': cannot write: No such file or directory")),
    (["target", "--request-timeout", "x"],
     target("--request-timeout: 'x' is not a timeout (e.g. 60s, 2m; 0 turns it off)")),
    (["target", "--request-timeout"], target("--request-timeout needs a value")),
    (["target", "--min-body-rate", "-1"],
     target("--min-body-rate: '-1' is not a rate in bytes per second (0..4294967295; 0 turns it off)")),
    (["target", "--bogus"], target("unknown flag '--bogus'")),
    (["target", "extra"], target("unexpected argument 'extra'")),
]

REPORT = [
    (["report"], report("no result file given")),
    (["report", "--html"], report("--html needs a value")),
    (["report", "RESULT", "--html", ""], report("--html: '' is not a file name")),
    (["report", "RESULT", "--html="], report("--html: '' is not a file name")),
    (["report", "RESULT", "--bogus"], report("unknown flag '--bogus'")),
    (["report", "RESULT", "RESULT"], report("one result file only; unexpected 'RESULT'")),
    (["report", "DIR"], "squall report: DIR: is a directory"),
    (["report", "/nonexistent/r.json"], "squall report: /nonexistent/r.json: No such file or directory"),
]


class Flags(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.plan = os.path.join(d, "plan.yaml")
        with open(cls.plan, "w") as f:
            f.write("target: http://127.0.0.1:1\n"
                    "scenarios:\n"
                    "  a:\n"
                    "    executor: shared-iterations\n"
                    "    vus: 1\n"
                    "    iterations: 1\n"
                    "    flow:\n"
                    "      - request: { url: /fast }\n")
        cls.result = os.path.join(os.path.dirname(__file__), "..", "unit", "golden",
                                  "doc_quick.in.json")
        cls.dir = os.path.join(d, "adir")
        os.mkdir(cls.dir)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def subst(self, s):
        return s.replace("PLAN", self.plan).replace("RESULT", self.result).replace("DIR", self.dir)

    def check(self, cases, rc=2):
        for args, want in cases:
            args = [self.subst(a) for a in args]
            want = self.subst(want)
            with self.subTest(args=args):
                p = subprocess.run([sqtest.squall_path(), *args], capture_output=True, text=True,
                                   timeout=20, stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, rc, p.stderr)
                self.assertEqual(p.stdout, "")
                self.assertEqual(p.stderr, want + "\n")

    def test_quick_face(self):
        self.check(QUICK)

    def test_body_is_a_directory(self):
        self.check([([U, "-b", "@" + self.dir],
                     quick(f"-b: '@{self.dir}': {self.dir} is a directory, not a file")),
                    ([U, "--body", "@" + self.dir],
                     quick(f"--body: '@{self.dir}': {self.dir} is a directory, not a file"))])

    def test_unreadable_body_file(self):
        if os.geteuid() == 0:
            self.skipTest("root reads any file")
        path = os.path.join(self.tmp.name, "secret")
        with open(path, "w") as f:
            f.write("x")
        os.chmod(path, 0)
        self.check([([U, "-b", "@" + path],
                     quick(f"-b: '@{path}': cannot read {path}: Permission denied"))])

    def test_tls_file_that_is_not_pem(self):
        path = os.path.join(self.tmp.name, "not.pem")
        with open(path, "w") as f:
            f.write("hello\n")
        self.check([([S, "--cacert", path],
                     quick(f"--cacert: '{path}': no certificate or crl found")),
                    ([S, "--cert", path, "--key", path],
                     quick(f"--cert: '{path}': no start line (not a PEM file)"))])

    def test_plan_face(self):
        self.check(RUN)

    def test_target_face(self):
        self.check(TARGET)

    def test_report_face(self):
        self.check(REPORT)

    def test_report_unwritable_output_is_exit_1(self):
        # The flags are fine; the report could not be written (docs/report.md: exit 1).
        self.check([(["report", "RESULT", "--html", "/nonexistent/dir/r.html"],
                     "squall report: --html: cannot write '/nonexistent/dir/r.html': "
                     "No such file or directory")], rc=1)


if __name__ == "__main__":
    sqtest.main()
