-- pipeline.lua: N GETs of the URL's path in one write (HTTP/1.1 pipelining),
-- as TechEmpower's plaintext test does. N is the script argument (default 16):
--   wrk ... -s pipeline.lua http://127.0.0.1:P/ -- 16
-- wrk counts every parsed response, so requests and req/s are responses;
-- latency is timed per batch of N.
local batch

init = function(args)
  local depth = tonumber(args[1]) or 16
  local requests = {}
  for i = 1, depth do
    requests[i] = wrk.format(nil, nil)
  end
  batch = table.concat(requests)
end

request = function()
  return batch
end

done = require("report").done
