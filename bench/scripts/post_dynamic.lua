-- post_dynamic.lua - bench/wrk_scripts.py: a new form POST built by request() every time
-- (wrk's post.lua body, rendered per request like counter.lua).

local n = 0
local headers = { ["Content-Type"] = "application/x-www-form-urlencoded" }

function request()
   n = n + 1
   return wrk.format("POST", "/fast", headers, "foo=bar&baz=quux&n=" .. n)
end
