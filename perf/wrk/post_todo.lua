-- post_todo.lua: POST /todos with a fixed JSON body (the same for every
-- server). Each request creates a todo, so the list grows during the run.
wrk.method = "POST"
wrk.body = '{"title":"write the benchmark report","completed":false}'
wrk.headers["Content-Type"] = "application/json"

done = require("report").done
