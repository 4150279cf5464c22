-- wrk script: single adds over delayq's HTTP/JSON API, keep-alive, one
-- request in flight per connection (SPEC §6, §12). Used by bench/server.sh:
--   wrk -t1 -c50 -d10s -s bench/http_add.lua http://127.0.0.1:PORT/v1/jobs
-- Every job goes to topic "wrk", due at once, with a 100-byte body. wrk
-- reports answers other than 2xx/3xx as "Non-2xx or 3xx responses".
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"topic":"wrk","delay_ms":0,"ttr_ms":60000,"body":"' .. string.rep("x", 100) .. '"}'
