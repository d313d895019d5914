-- auth.lua - log in once, then send the token the server handed out.
--
-- The first requests go to /authenticate. The first 200 answer that carries an
-- X-Token header ends that: the token is kept, added to every later request as
-- X-Token, and the path becomes /resource.

token = nil
path = "/authenticate"

function request()
   return wrk.format("GET", path)
end

function response(status, headers, body)
   if token ~= nil or status ~= 200 then
      return
   end
   token = headers["X-Token"]
   path = "/resource"
   wrk.headers["X-Token"] = token
end
