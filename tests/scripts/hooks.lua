-- hooks.lua - plan step hooks (squall only): a plan names these functions in a
-- step's before: or after:.

-- before the login step: pick the user name and compute the request body
function login_before(ctx)
   ctx:set("user", "user" .. ctx.vu)
   ctx.body = string.format('{"user":"%s","iteration":%d}', ctx:get("user"), ctx.iteration)
end

-- after the login step: keep the token (a header, else the JSON body's "token")
function login_after(ctx)
   if ctx.status ~= 200 then
      return
   end
   local token = ctx.headers["X-Token"]
   if token == nil and ctx.body ~= nil then
      token = ctx.body:match('"token":"([^"]+)"')
   end
   ctx:set("token", token)
end

-- before a step that is needed only while there is no token yet
function skip_if_token(ctx)
   if ctx:get("token") ~= nil then
      ctx:skip()
   end
end
