-- init_done.lua - bench/wrk_scripts.py: only init() and done(): the request is static.

function init(args)
   wrk.headers["X-Bench"] = "1"
end

function done(summary, latency, requests)
   io.stderr:write(string.format("done: %d requests\n", summary.requests))
end
