-- bad/request_error.lua - request() fails at run time on line 7 (an arithmetic
-- on nil); the error must come back with its traceback, not end the process.

calls = 0

local function next_path()
   return "/" .. (missing + calls)
end

function request()
   calls = calls + 1
   return wrk.format(nil, next_path())
end
