#!lua flags=no-writes
-- nickv-master.lua -- an SKV master's "Nic-KV" INFO fields, for Prometheus'
-- redis_exporter (--script), which exports only the INFO fields it knows.
--
-- Copyright (c) 2026, the SKV authors. BSD 3-Clause licence (see LICENSE).
--
-- The exporter runs it with EVAL on every scrape and exports each pair it
-- returns as redis_script_values{key="<name>"} <value>; one value that is
-- not a number fails the whole scrape (redis_up 0), so only numbers are
-- returned. The numeric fields of INFO nickv keep their names; two words
-- become numbers under names of their own (NIC-KV.md, "Monitoring"):
--
--   nickv_daemon_healthy   1: nickv_daemon is healthy; 0: lagging or none
--   nickv_lease_held       1: nickv_lease is held; 0: expired. Absent when
--                          the master takes no lease (off) or is a replica.
--
-- Read only (flags=no-writes): it runs while the master refuses writes.

local out = {}
local info = redis.call('INFO', 'nickv')
for name, value in string.gmatch(info, '([%w_]+):([^\r\n]*)') do
    if string.match(value, '^%-?%d+$') then
        out[#out + 1] = name
        out[#out + 1] = value
    elseif name == 'nickv_daemon' then
        out[#out + 1] = 'nickv_daemon_healthy'
        out[#out + 1] = value == 'healthy' and '1' or '0'
    elseif name == 'nickv_lease' and (value == 'held' or value == 'expired') then
        out[#out + 1] = 'nickv_lease_held'
        out[#out + 1] = value == 'held' and '1' or '0'
    end
end
return out
