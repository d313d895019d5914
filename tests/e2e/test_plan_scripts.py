#!/usr/bin/env python3
"""Plans with code: `script:` with per-step before/after hooks, and `auth.oauth2` tokens that
expire and are refreshed while the run goes, against `squall target` (its /oauth/token issues
tokens of a lifetime the test picks, and can refuse chosen token requests; its /items accepts
them only until they expire, and counts every 401).

The OAuth2 run is 20 s against 3 s tokens (the issue's case); with the rest the file takes about
35 s.
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SECRET = "sq-secret-7f3a9c41"
HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "hooks.lua")
SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                      "result.schema.json")


def validate(doc):
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    with open(SCHEMA) as f:
        jsonschema.validate(doc, json.load(f))


class ScriptPlans(sqtest.TargetCase):
    target_args = ("-t", "1", "--oauth-client", "squall-client:" + SECRET)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def plan(self, body, name="plan.yaml"):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(f"target: {self.base}\n" + textwrap.dedent(body).lstrip())
        return path

    def run_plan(self, path, timeout=60, env_secret=SECRET, args=()):
        out = os.path.join(self.tmp.name, "out.json")
        env = dict(os.environ, SECRET=env_secret)
        import subprocess

        p = subprocess.run([sqtest.squall_path(), "run", path, "--json", out, *args],
                           capture_output=True, text=True, timeout=timeout, env=env)
        text = ""
        if os.path.exists(out):
            with open(out) as f:
                text = f.read()
        return p, (json.loads(text) if text.strip() else None), text

    def oauth_block(self, url, lead="1s", extra=""):
        return f"""
            auth:
              oauth2:
                token_url: {url}
                client_id: squall-client
                client_secret: "{{{{$env.SECRET}}}}"
                scope: items:read
                refresh_lead: {lead}
                min_refresh_interval: 500ms
                retry_backoff: 200ms
                retry_backoff_max: 2s
            {extra}"""

    # ---- OAuth2 ----

    def test_tokens_refreshed_before_they_expire(self):
        path = self.plan(self.oauth_block("/oauth/token?ttl=3") + """
            scenarios:
              api:
                executor: constant-vus
                vus: 2
                duration: 20s
                pacing: 20ms
                flow:
                  - name: items
                    request:
                      url: /items
                      headers: { Authorization: "Bearer {{$oauth.token}}" }
                    check: { status: 200 }
            """)
        p, doc, text = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.stats()
        self.assertGreater(st["auth"]["items_ok"], 1000, st)
        self.assertEqual(st["auth"]["items_unauthorized"], 0, st)
        self.assertEqual(st["oauth"]["expired"], 0, st)
        o = doc["oauth"]
        self.assertGreaterEqual(o["refreshes"], 6, o)
        self.assertEqual(o["failures"], 0, o)
        # tokens squall received; the server may have issued one more: a refresh the run's end
        # cut short (sent, its answer not awaited once the run stopped)
        self.assertIn(st["oauth"]["tokens"] - o["tokens"], (0, 1), (o, st))
        validate(doc)
        self.assertEqual(doc["checks"][0]["failed"], 0)
        self.assertRegex(p.stdout, r"OAuth2 +\d+ tokens · \d+ refreshes · 0 refresh failures")
        # the secret went to the token endpoint (it accepts only this client), and nowhere else
        for where, s in (("stdout", p.stdout), ("stderr", p.stderr), ("json", text)):
            self.assertNotIn(SECRET, s, where)
        import subprocess

        v = subprocess.run([sqtest.squall_path(), "validate", path], capture_output=True, text=True,
                           timeout=30, env=dict(os.environ, SECRET=SECRET))
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertIn("client_id squall-client (as HTTP Basic; the secret is set, not shown)",
                      v.stdout)
        self.assertNotIn(SECRET, v.stdout + v.stderr)

    def test_refresh_failures_counted_old_token_kept(self):
        # token requests 2 and 3 (the first refresh and its first retry) are answered 503; the
        # lead time (1.5 s of a 3 s token) covers the retries, so no request goes out unauthorized
        path = self.plan(self.oauth_block("/oauth/token?ttl=3&fail=2&fail_after=1", lead="1.5s") + """
            scenarios:
              api:
                executor: constant-vus
                vus: 2
                duration: 4s
                pacing: 20ms
                flow:
                  - request:
                      url: /items
                      headers: { Authorization: "Bearer {{$oauth.token}}" }
            """)
        p, doc, text = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.stats()
        self.assertEqual(st["oauth"]["refused"], 2, st)
        self.assertEqual(st["auth"]["items_unauthorized"], 0, st)
        self.assertGreater(st["auth"]["items_ok"], 100, st)
        o = doc["oauth"]
        self.assertEqual(o["failures"], 2, o)
        self.assertGreaterEqual(o["refreshes"], 1, o)
        self.assertIn("HTTP 503", o["last_error"])
        validate(doc)
        self.assertIn("2 refresh failures (latest: HTTP 503 from the token endpoint)", p.stdout)
        for s in (p.stdout, p.stderr, text):
            self.assertNotIn(SECRET, s)

    def test_no_token_no_load(self):
        path = self.plan(self.oauth_block("/oauth/token") + """
            scenarios:
              api:
                executor: shared-iterations
                iterations: 10
                flow:
                  - request: { url: /items, headers: { Authorization: "Bearer {{$oauth.token}}" } }
            """)
        p, doc, _ = self.run_plan(path, env_secret="not-" + SECRET)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("auth.oauth2: no token from", p.stderr)
        self.assertIn("HTTP 401", p.stderr)
        self.assertNotIn("not-" + SECRET, p.stderr + p.stdout)
        self.assertEqual(self.stats()["endpoints"]["items"], 0)

    def test_oauth_token_needs_auth(self):
        path = self.plan("""
            scenarios:
              api:
                executor: shared-iterations
                iterations: 1
                flow:
                  - request: { url: /items, headers: { Authorization: "Bearer {{$oauth.token}}" } }
            """)
        p, _, _ = self.run_plan(path)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("'$oauth.token' needs an OAuth2 token source", p.stderr)
        self.assertRegex(p.stderr, r"plan\.yaml:\d+:\d+: ")

    # ---- hooks ----

    def test_hooks_compute_set_read_and_skip(self):
        path = self.plan(f"""
            script: {HOOKS}
            scenarios:
              shop:
                executor: shared-iterations
                vus: 3
                iterations: 60
                locals: [user, token]
                flow:
                  - name: echo
                    before: login_before
                    request: {{ method: POST, url: /echo }}
                    check: {{ body_contains: 'iteration' }}
                  - name: login
                    before: skip_if_token
                    after: login_after
                    request: {{ method: POST, url: /login }}
                  - name: items
                    request:
                      url: "/items?user={{{{user}}}}"
                      headers: {{ Authorization: "Bearer {{{{token}}}}" }}
                    check: {{ status: 200 }}
            """)
        p, doc, _ = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        st = self.stats()
        # one login per VU: once the after hook kept a token, the before hook skips the step
        self.assertEqual(st["endpoints"]["login"], 3, st)
        self.assertEqual(st["auth"]["items_ok"], 60, st)
        self.assertEqual(st["auth"]["items_unauthorized"], 0, st)
        self.assertEqual(st["endpoints"]["echo"], 60, st)
        self.assertEqual(doc["script"]["skipped_steps"], 57)
        validate(doc)
        # hooks: 60 echo before + 60 login before + 3 login after
        self.assertEqual(doc["script"]["calls"]["hooks"], 123)
        checks = {c["check"]: c for c in doc["checks"]}
        self.assertTrue(all(c["failed"] == 0 for c in checks.values()), checks)

    def test_hook_body_reaches_the_server(self):
        script = os.path.join(self.tmp.name, "body.lua")
        with open(script, "w") as f:
            f.write('function body(ctx)\n'
                    '  ctx.body = "vu=" .. ctx.vu .. "&it=" .. ctx.iteration .. "&x=" .. (ctx:get("x") or "none")\n'
                    '  ctx:set("x", "seen")\n'
                    'end\n'
                    'function check(ctx)\n'
                    '  if not ctx.body:find("vu=1&it=", 1, true) then error("body not echoed: " .. ctx.body) end\n'
                    'end\n')
        path = self.plan(f"""
            script: body.lua
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 1
                iterations: 2
                locals: [x]
                flow:
                  - request: {{ method: GET, url: /echo }}
                    before: body
                    after: check
                    check: {{ body_contains: 'vu=1&it=1&x=seen' }}
            """)
        p, doc, _ = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        # iteration 0 sent x=none (and set x), iteration 1 sent x=seen: the check passed once
        self.assertEqual((doc["checks"][0]["passed"], doc["checks"][0]["failed"]), (1, 1))

    REQUEST_HOOKS = textwrap.dedent("""\
        -- a before hook that rewrites the whole request; the after hook checks what /echo saw
        function change(ctx)
          ctx.method = "PUT"
          ctx.url = "/echo?via=hook&it=" .. ctx.iteration
          ctx:set_header("X-Hook", "yes")
          ctx:set_header("x-plan", "replaced")     -- replaces the plan's X-Plan (any case)
          ctx:set_header("X-Hook", "yes-again")    -- a later call replaces an earlier one
          ctx.body = "hook-body"
          if ctx.method ~= "PUT" or ctx.url ~= "/echo?via=hook&it=" .. ctx.iteration then
            error("ctx.method / ctx.url do not read back")
          end
        end
        function verify(ctx)
          local b = ctx.body:lower()
          local function has(s)
            if not b:find(s:lower(), 1, true) then error("no " .. s .. " in " .. ctx.body) end
          end
          has('"method":"PUT"')
          has('"path":"/echo?via=hook&it=' .. ctx.iteration .. '"')
          has('["x-hook","yes-again"]')
          has('["x-plan","replaced"]')
          has('"body":"hook-body"')
          if b:find("plan-value", 1, true) or b:find('"yes"', 1, true) then
            error("a replaced header was sent: " .. ctx.body)
          end
        end
        -- an absolute URL on the target's origin, and a method that changes the framing
        function absolute(ctx) ctx.url = ctx:get("origin") .. "/echo?abs=1" end
        function head(ctx) ctx.method = "HEAD" end
        -- redirects the step follows start from the hook's request (a 307 keeps all of it)
        function redirected(ctx)
          ctx.method = "PUT"
          ctx.url = "/redirect/2?status=307&to=/echo"
          ctx:set_header("X-Hook", "hop")
          ctx.body = "kept"
        end
        """)

    def test_hook_changes_method_url_headers_body(self):
        with open(os.path.join(self.tmp.name, "req.lua"), "w") as f:
            f.write(self.REQUEST_HOOKS)
        for args in ((), ("--http2",)):
            with self.subTest(args=args):
                self.reset()
                path = self.plan(f"""
                    script: req.lua
                    vars: {{ origin: "{self.base}" }}
                    scenarios:
                      s:
                        executor: per-vu-iterations
                        vus: 2
                        iterations: 3
                        flow:
                          - name: changed
                            before: change
                            after: verify
                            request:
                              method: GET
                              url: /fast
                              headers: {{ X-Plan: plan-value }}
                            check: {{ status: 200 }}
                          - name: absolute
                            before: absolute
                            request: {{ url: /fast }}
                            check: {{ body_contains: '"path":"/echo?abs=1"' }}
                          - name: head
                            before: head
                            request: {{ url: /echo }}
                            check: {{ status: 200 }}
                          - name: redirected
                            before: redirected
                            request: {{ url: /fast, redirects: 5 }}
                            check: {{ body_contains: ['"method":"PUT"', '"hop"]', '"4"]],"body":"kept"'] }}
                    """)
                p, doc, _ = self.run_plan(path, args=args)
                self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
                st = self.stats()
                # nothing went where the plan said: every request went where the hooks did
                self.assertEqual(st["endpoints"].get("fast", 0), 0, st)
                self.assertEqual(st["endpoints"]["echo"], 24, st)
                self.assertEqual(doc["requests"]["failed"], 0, doc["errors"])
                checks = {c["check"]: c for c in doc["checks"]}
                self.assertTrue(all(c["failed"] == 0 and c["passed"] == 6
                                    for c in checks.values()), checks)
                self.assertEqual(doc["script"]["calls"]["hooks"], 30)

    def test_hook_request_changes_refused(self):
        cases = {
            "ctx.method = 'GE T'": "ctx.method: 'GE T' is not an HTTP method",
            "ctx.method = 'GET\\r\\nX: y'": "is not an HTTP method",
            "ctx:set_header('X-A', 'v\\r\\nX-Injected: 1')":
                "ctx:set_header('X-A'): the value has a control character (byte 13",
            "ctx:set_header('X-A', 'v\\0')": "the value has a control character (byte 0",
            "ctx:set_header('X A', 'v')": "'X A' is not a header name",
            "ctx:set_header('Host', 'evil.example')": "Host is set by squall, not by a hook",
            "ctx:set_header('content-length', '1')": "content-length is set by squall",
            "ctx.url = 'http://evil.example/x'": "another origin than the target's",
            "ctx.url = 'https://127.0.0.1:%d/x'" % self.port: "another origin than the target's",
            "ctx.url = '/a\\r\\nX: y'": "has a space or a control character",
        }
        for line, want in cases.items():
            with self.subTest(line=line):
                self.reset()
                with open(os.path.join(self.tmp.name, "bad.lua"), "w") as f:
                    f.write("function bad(ctx)\n  " + line + "\nend\n")
                path = self.plan("""
                    script: bad.lua
                    scenarios:
                      s:
                        executor: shared-iterations
                        iterations: 3
                        flow:
                          - request: { url: /echo }
                            before: bad
                    """)
                p, doc, _ = self.run_plan(path)
                # refused in the hook, before anything is sent: the run stops with the reason
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(want, p.stderr)
                self.assertIn("bad.lua:2", doc["script"]["error"])
                self.assertEqual(doc["requests"]["sent"], 0)
                self.assertEqual(self.stats()["endpoints"].get("echo", 0), 0)

    def test_hook_errors(self):
        bad = os.path.join(self.tmp.name, "bad.lua")
        with open(bad, "w") as f:
            f.write("function boom(ctx)\n  local t = nil\n  return t.field\nend\n")
        body = """
            scenarios:
              s:
                executor: shared-iterations
                iterations: 5
                flow:
                  - request: { url: /fast }
                    before: %s
            """
        # a runtime error in a hook fails the run with its traceback
        p, doc, _ = self.run_plan(self.plan("script: bad.lua\n" + textwrap.dedent(body % "boom")))
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("bad.lua:3: attempt to index local 't' (a nil value)", p.stderr)
        self.assertIn("stack traceback", p.stderr)
        self.assertIn("bad.lua:3", doc["script"]["error"])
        # a hook that is not a function of the script: the plan is refused before any load
        p, _, _ = self.run_plan(self.plan("script: bad.lua\n" + textwrap.dedent(body % "bom")))
        self.assertEqual(p.returncode, 2, p.stderr)
        v, _ = sqtest.run_squall("validate", os.path.join(self.tmp.name, "plan.yaml"))
        self.assertEqual(v.returncode, 2, v.stderr)
        self.assertIn("'bom' is not a function of", v.stderr)
        self.assertRegex(p.stderr, r"plan\.yaml:\d+:\d+: scenarios\.s\.flow\[0\]\.before: 'bom' is "
                                   r"not a function of .*bad\.lua")
        # a hook without a script
        p, _, _ = self.run_plan(self.plan(body % "boom"))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("the plan has no script", p.stderr)
        # a script that does not load
        with open(bad, "w") as f:
            f.write("function boom(ctx)\n  return (\nend\n")
        p, _, _ = self.run_plan(self.plan("script: bad.lua\n" + textwrap.dedent(body % "boom")))
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"bad\.lua:3: ")
        self.assertEqual(self.stats()["endpoints"]["fast"], 0)

    def test_steps_without_hooks_stay_static(self):
        script = os.path.join(self.tmp.name, "noop.lua")
        with open(script, "w") as f:
            f.write("function noop(ctx) end\n")
        path = self.plan("""
            script: noop.lua
            scenarios:
              s:
                executor: shared-iterations
                iterations: 50
                flow:
                  - request: { url: /fast }
                  - request: { url: /ok }
            """)
        p, doc, _ = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["rendered_requests"], 0)  # sent as the static request
        self.assertEqual(doc["script"]["calls"]["hooks"], 0)
        self.assertEqual(self.stats()["endpoints"]["fast"], 50)


if __name__ == "__main__":
    unittest.main(verbosity=2)
