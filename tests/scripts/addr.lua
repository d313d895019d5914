-- addr.lua - each thread connects to one address of the target, picked at
-- random among those that accept a connection (wrk.lookup, wrk.connect,
-- thread.addr).

local usable

function setup(thread)
   if usable == nil then
      usable = {}
      for _, a in ipairs(wrk.lookup(wrk.host, wrk.port or "http")) do
         if wrk.connect(a) then
            usable[#usable + 1] = a
         end
      end
   end
   thread.addr = usable[math.random(#usable)]
end

function init(args)
   print(string.format("thread addr: %s", tostring(wrk.thread.addr)))
end
