-- wrk script for the ingress benchmark: every request POSTs one structured CloudEvent with an id
-- of its own (run prefix, wrk thread, counter), so that no request is a duplicate.
-- Usage: wrk -t1 -c32 -d10s -s ingress.lua http://127.0.0.1:PORT -- RUN_PREFIX

local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end

function init(args)
  prefix = (args[1] or "run") .. "-" .. tostring(tid) .. "-"
  counter = 0
  payload = string.rep("x", 100)
  headers = { ["Content-Type"] = "application/cloudevents+json" }
end

function request()
  counter = counter + 1
  local body = '{"specversion":"1.0","id":"' .. prefix .. counter
    .. '","source":"/bench","type":"com.example.bench","time":"2024-05-01T10:00:00Z"'
    .. ',"datacontenttype":"application/json","data":{"n":' .. counter .. ',"payload":"' .. payload .. '"}}'
  return wrk.format("POST", "/events", headers, body)
end
