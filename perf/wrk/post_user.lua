-- post_user.lua: POST /users with a unique body per request: the email is
-- "bench-<run tag>-<counter>@example.com", the run tag 12 hex digits from
-- /dev/urandom (every wrk run, warm-up included, is a new process and
-- the emails of earlier runs are in the table), the counter per thread.
-- Every request creates a user (201): the table grows during the run.
local tag, count = "", 0

init = function(args)
  local f = assert(io.open("/dev/urandom", "rb"), "post_user.lua: /dev/urandom")
  tag = f:read(6):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  f:close()
end

request = function()
  count = count + 1
  local body = string.format('{"name":"Bench User %d","email":"bench-%s-%d@example.com"}', count, tag, count)
  return wrk.format("POST", "/users", { ["Content-Type"] = "application/json" }, body)
end

done = require("report").done
