-- report.lua - after the run, print latency percentiles as CSV lines
-- ("percentile%,microseconds").

function done(summary, latency, requests)
   io.write("------------------------------\n")
   for _, p in ipairs({ 50, 90, 99, 99.999 }) do
      io.write(string.format("%g%%,%d\n", p, latency:percentile(p)))
   end
end
