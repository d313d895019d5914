-- stop.lua - a thread stops itself after its 100th response.

local seen = 0

function response()
   seen = seen + 1
   if seen == 100 then
      wrk.thread:stop()
   end
end
