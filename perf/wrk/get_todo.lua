-- get_todo.lua: GET /todos/{id}, cycling over the ids of a file (one a line)
-- that the todo scenario wrote from the server's own GET /todos before the
-- run: ids are the server's (coring with 2 threads does not number them
-- 1, 2, 3...), and every request names a todo that exists. The file is the
-- script argument:  wrk ... -s get_todo.lua http://127.0.0.1:P/todos/ -- FILE
local ids = {}
local i = 0

init = function(args)
  local f = assert(io.open(args[1] or "ids.txt", "r"), "get_todo.lua: ids file")
  for line in f:lines() do
    if line:match("^%d+$") then ids[#ids + 1] = line end
  end
  f:close()
  assert(#ids > 0, "get_todo.lua: no ids")
  -- Each connection's thread starts at a different place in the list.
  i = math.random(#ids) - 1
end

request = function()
  i = i % #ids + 1
  return wrk.format("GET", "/todos/" .. ids[i])
end

done = require("report").done
