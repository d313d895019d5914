-- setup.lua - hand data to the threads and read it back after the run.
--
-- setup() gives each thread a number (thread:set) and keeps its thread object;
-- each thread counts its requests and responses in globals; done() reads them
-- back with thread:get and prints one line per thread.

local threads = {}

function setup(thread)
   threads[#threads + 1] = thread
   thread:set("id", #threads)
end

function init(args)
   requests = 0
   responses = 0
   print(string.format("thread %d created", id))
end

function request()
   requests = requests + 1
   return wrk.request()
end

function response(status, headers, body)
   responses = responses + 1
end

function done(summary, latency, reqs)
   for _, t in ipairs(threads) do
      print(string.format("thread %d made %d requests and got %d responses",
                          t:get("id"), t:get("requests"), t:get("responses")))
   end
end
