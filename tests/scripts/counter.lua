-- counter.lua - a new request every time: the path is /0, /1, /2, ... and an
-- X-Counter header carries the same number.
--
-- Each thread runs its own Lua state, so each thread counts from 0 on its own.

counter = 0

function request()
   local n = counter
   counter = n + 1
   wrk.headers["X-Counter"] = n
   return wrk.format(nil, "/" .. n)
end
