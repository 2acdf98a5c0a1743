-- post_user.lua: POST /users with a unique body per request: the email is
-- "bench-<run tag>-<counter>@example.com", the run tag 12 hex digits from
-- /dev/urandom (every wrk run, warm-up included, is a new process and
-- the emails of earlier runs are in the table), the counter per thread.
-- Every request creates a user (201): the table grows during the run.
--
-- With an argument N (wrk ... -- N), one request in N asks instead for
-- "conflict-<run tag>@example.com": the first of them creates it, every
-- later one answers 409 (perf/db_cost.sh --case post-conflict).
local tag, count, every = "", 0, 0

init = function(args)
  every = tonumber(args[1]) or 0
  local f = assert(io.open("/dev/urandom", "rb"), "post_user.lua: /dev/urandom")
  tag = f:read(6):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  f:close()
end

request = function()
  count = count + 1
  local email = string.format("bench-%s-%d@example.com", tag, count)
  if every > 0 and count % every == 0 then
    email = string.format("conflict-%s@example.com", tag)
  end
  local body = string.format('{"name":"Bench User %d","email":"%s"}', count, email)
  return wrk.format("POST", "/users", { ["Content-Type"] = "application/json" }, body)
end

done = require("report").done
