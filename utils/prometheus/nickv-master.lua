#!lua flags=no-writes
-- nickv-master.lua -- an SKV master's "Nic-KV" INFO fields, for Prometheus'
-- redis_exporter (--script), which exports only the INFO fields it knows.
--
-- Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
--
-- The exporter runs it with EVAL on every scrape and exports each pair it
-- returns as redis_script_values{key="<name>"} <value>; one value that is
-- not a number fails the whole scrape (redis_up 0), so only numbers are
-- returned. The numeric fields of INFO nickv keep their names; one word
-- becomes a number under a name of its own (NIC-KV.md, "Monitoring"):
--
--   nickv_daemon_healthy   1: nickv_daemon is healthy; 0: lagging or none
--
-- Read only (flags=no-writes): it runs while the master refuses writes
-- for want of replicas (min-slaves). A master with nickv-lease yes that
-- holds no lease runs no script at all: the scrape then fails with its
-- MASTERDOWN error, which is how the lease's loss shows (the exporter's
-- redis_exporter_last_scrape_error{err="MASTERDOWN ..."}).

local out = {}
local info = redis.call('INFO', 'nickv')
for name, value in string.gmatch(info, '([%w_]+):([^\r\n]*)') do
    if string.match(value, '^%-?%d+$') then
        out[#out + 1] = name
        out[#out + 1] = value
    elseif name == 'nickv_daemon' then
        out[#out + 1] = 'nickv_daemon_healthy'
        out[#out + 1] = value == 'healthy' and '1' or '0'
    end
end
return out
