-- bad/format_args.lua - wrk.format called with a table as its method (line 5).

function request()
   local method = { "GET" }
   return wrk.format(method, "/")
end
