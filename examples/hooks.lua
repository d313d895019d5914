-- examples/hooks.lua - the functions examples/hooks-oauth.yaml names in its steps' before: and
-- after:. Each worker thread runs its own copy of this file; ctx is the step being run.

-- before the login: pick the VU's user and compute the request body
function login_body(ctx)
   ctx:set("user", "user" .. ctx.vu)
   ctx.body = string.format('{"user":"%s","iteration":%d}', ctx:get("user"), ctx.iteration)
end

-- after the login: keep the session token from the JSON answer
function keep_token(ctx)
   if ctx.status == 200 then
      ctx:set("token", ctx.body:match('"token":"([^"]+)"'))
   end
end

-- before the login: once the VU has a token, the step is not sent
function skip_if_logged_in(ctx)
   if ctx:get("token") ~= nil then
      ctx:skip()
   end
end

-- before the echo: rewrite the request itself (squall target's /echo answers with what arrived)
function rewrite(ctx)
   ctx.method = "PUT"
   ctx.url = "/echo?user=" .. (ctx:get("user") or "none")
   ctx:set_header("X-Session", ctx:get("token") or "none")  -- replaces the plan's X-Session
   ctx.body = "rewritten by a hook"
end
