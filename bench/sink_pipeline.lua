-- sink_pipeline.lua - stamped POSTs pipelined into `squall sink --http` by squall's own
-- HTTP/1.1 client: wrk's pipeline.lua with a stamp in every request.
--
--   squall wrk -s bench/sink_pipeline.lua -t 1 -c 4 -d 3s http://127.0.0.1:PORT/e -- 64
--
-- request() returns a batch of DEPTH POSTs (the script's argument, 64 by default), which
-- squall writes with one send and whose answers it reads in order, timing each. Every POST
-- carries its own stamp (docs/internals/proto.md): sq1.<run>.<seq>.<ns>, one stream per
-- thread (a run id of this run with the thread's number in its low 12 bits), sequence numbers
-- 0, 1, 2 ... and the batch's CLOCK_REALTIME read through LuaJIT's ffi. So the sink can count
-- it exactly: delivered = the requests squall sent, nothing lost.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } sq_sink_pipeline_ts;
int clock_gettime(int clk, sq_sink_pipeline_ts *ts);
]]

local B32 = "0123456789abcdefghjkmnpqrstvwxyz" -- Crockford, lowercase
local B36 = "0123456789abcdefghijklmnopqrstuvwxyz"

local function enc(v, base, alphabet)
   v = ffi.cast("uint64_t", v)
   if v == 0 then
      return "0"
   end
   local out = {}
   while v > 0 do
      local d = tonumber(v % base)
      out[#out + 1] = alphabet:sub(d + 1, d + 1)
      v = v / base
   end
   return string.reverse(table.concat(out))
end

local ts = ffi.new("sq_sink_pipeline_ts")
local function now_ns()
   ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME
   return ffi.cast("int64_t", ts.tv_sec) * 1000000000LL + ts.tv_nsec
end

-- the main state: one run id for the run, a thread number for each thread
local threads = 0
local run = tonumber(now_ns() / 1000000LL) -- ms since the epoch: under 2^53, distinct per run
function setup(thread)
   thread:set("run_id", run)
   thread:set("thread_no", threads)
   threads = threads + 1
end

local depth, seq, head, path_host

function init(args)
   depth = tonumber(args[1] or "64")
   seq = 0
   -- run id: the run's number with this thread's in the low 12 bits
   local id = ffi.cast("uint64_t", run_id) * 4096 + thread_no
   head = "sq1." .. enc(id, 32, B32) .. "."
   path_host = wrk.path
end

function request()
   local ns = "." .. enc(now_ns(), 36, B36)
   local parts = {}
   for i = 1, depth do
      local body = '{"t":"' .. head .. enc(seq, 36, B36) .. ns .. '"}'
      parts[i] = wrk.format("POST", path_host, nil, body)
      seq = seq + 1
   end
   return table.concat(parts)
end
