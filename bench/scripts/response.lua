-- response.lua - bench/wrk_scripts.py: response() defined (so headers and body are captured and
-- handed over), counting statuses and body bytes.

local statuses, bytes = {}, 0

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   bytes = bytes + #body
end
