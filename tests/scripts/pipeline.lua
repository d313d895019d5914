-- pipeline.lua - HTTP/1.1 pipelining: three GETs written back to back.
--
-- init() renders the batch once; request() hands out the same string each time,
-- so the three requests leave in one write and their answers come back in order.

local batch

function init(args)
   local parts = {}
   for _, q in ipairs({ "foo", "bar", "baz" }) do
      parts[#parts + 1] = wrk.format(nil, "/?" .. q)
   end
   batch = table.concat(parts)
end

function request()
   return batch
end
