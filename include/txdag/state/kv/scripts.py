"""The server-side scripts of a KeyValueState namespace: one per protocol step, each atomic.

Every key a script touches is a key of one namespace (``txdag:kv:{ns}...``, one hash tag, so one Redis Cluster
slot). The commit script also deletes staging hashes it finds listed in ``stages``: their names are built from
the namespace's own prefix (ARGV), so they are in the same slot as the keys it was given. Errors are raised as
``TXDAG_KV_<WHAT> <namespace> <words...>`` and translated by ``txdag.luascripts`` with the table of
``txdag.state.kv.errors``; each script is declared there at the end of this module.
"""

from __future__ import annotations

from txdag.luascripts import declare
from txdag.state.kv.errors import ERRORS

# check_meta(meta, ns, key serializer, value serializer): create the namespace's record if absent; refuse an
# unknown format version, a migration in progress, or other serializers than the caller's.
_CHECK_META = """
local function check_meta(meta, ns, kser, vser)
  local m = redis.call('HMGET', meta, 'v', 'key_serializer', 'value_serializer', 'migrating')
  if not m[1] then
    redis.call('HSET', meta, 'v', '1', 'key_serializer', kser, 'value_serializer', vser)
    return
  end
  if m[1] ~= '1' then error({err = 'TXDAG_KV_VERSION ' .. ns .. ' ' .. m[1]}) end
  if m[4] then error({err = 'TXDAG_KV_MIGRATING ' .. ns .. ' ' .. m[4]}) end
  if m[2] ~= kser or m[3] ~= vser then
    error({err = 'TXDAG_KV_SERIALIZERS ' .. ns .. ' ' .. tostring(m[2]) .. ',' .. tostring(m[3]) .. ' ' .. kser
           .. ',' .. vser})
  end
end
local function in_slices(cmd, key, items)
  for first = 1, #items, 1000 do
    redis.call(cmd, key, unpack(items, first, math.min(first + 999, #items)))
  end
end
"""

OPEN_SCRIPT = _CHECK_META + """
-- KEYS[1]: meta.  ARGV: namespace, key serializer, value serializer.
-- Returns {committed txid or '', prepared txid or ''}.
check_meta(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'committed_txid', 'prepared_txid')
return {st[1] or '', st[2] or ''}
"""

PREPARE_SCRIPT = _CHECK_META + """
-- KEYS: meta, prepared, stage hash of the attempt, stages.
-- ARGV: namespace, key serializer, value serializer, txid, attempt, attempt id ('<txid>:<attempt>').
-- Returns {outcome, number}: {'prepared', keys}, {'already prepared', keys} or {'already committed', txid}.
local meta, prepared, stage, stages = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ns, txid, attempt = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[5])
check_meta(meta, ns, ARGV[2], ARGV[3])
local st = redis.call('HMGET', meta, 'committed_txid', 'prepared_txid', 'prepared_attempt')
local committed = tonumber(st[1]) or 0
if txid == committed then return {'already committed', committed} end
if txid < committed then error({err = 'TXDAG_KV_BEHIND ' .. ns .. ' ' .. txid .. ' ' .. committed}) end
local held = tonumber(st[2])
if held and held ~= txid then error({err = 'TXDAG_KV_OTHER_PREPARED ' .. ns .. ' ' .. held .. ' ' .. txid}) end
if held then
  local held_attempt = tonumber(st[3])
  if held_attempt == attempt then return {'already prepared', redis.call('HLEN', prepared)} end
  if held_attempt > attempt then
    error({err = 'TXDAG_KV_STALE ' .. ns .. ' ' .. txid .. ' ' .. attempt .. ' ' .. held_attempt})
  end
end
local seal = redis.call('HGET', stages, ARGV[6])
if not seal then error({err = 'TXDAG_KV_NOT_STAGED ' .. ns .. ' ' .. txid .. ' ' .. attempt}) end
if seal == 'open' then error({err = 'TXDAG_KV_NOT_SEALED ' .. ns .. ' ' .. txid .. ' ' .. attempt}) end
local n = redis.call('HLEN', stage)
if n ~= tonumber(seal) then
  error({err = 'TXDAG_KV_LOST ' .. ns .. ' ' .. txid .. ' ' .. attempt .. ' ' .. n .. ' ' .. seal})
end
if n > 0 then redis.call('COPY', stage, prepared, 'REPLACE') else redis.call('DEL', prepared) end
redis.call('HSET', meta, 'prepared_txid', txid, 'prepared_attempt', attempt)
return {'prepared', n}
"""

COMMIT_SCRIPT = _CHECK_META + """
-- KEYS: meta, committed, prepared, stages, undo.
-- ARGV: namespace, key serializer, value serializer, txid, the prefix of the namespace's staging hashes.
-- Returns {'committed', puts, deletes} or {'already committed', committed txid}.
-- The values the txid overwrites go to undo (tagged like a write: '=' value, '-' absent), so that a re-run of
-- the txid's processing can still read the state as of the txid before it (read_as_of).
local meta, committed, prepared, stages, undo = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local ns, txid = ARGV[1], tonumber(ARGV[4])
check_meta(meta, ns, ARGV[2], ARGV[3])
local st = redis.call('HMGET', meta, 'committed_txid', 'prepared_txid')
local done = tonumber(st[1]) or 0
if txid <= done then return {'already committed', done} end
if tonumber(st[2]) ~= txid then
  error({err = 'TXDAG_KV_NOT_PREPARED ' .. ns .. ' ' .. txid .. ' ' .. (st[2] or 'none')})
end
redis.call('DEL', undo)
local cursor, nput, ndel = '0', 0, 0
repeat
  local reply = redis.call('HSCAN', prepared, cursor, 'COUNT', 1000)
  cursor = reply[1]
  local puts, dels, page, fields = {}, {}, reply[2], {}
  for i = 1, #page, 2 do fields[#fields + 1] = page[i] end
  if #fields > 0 then
    local old, before = redis.call('HMGET', committed, unpack(fields)), {}
    for j, f in ipairs(fields) do
      if redis.call('HEXISTS', undo, f) == 0 then  -- HSCAN may return a field twice: keep the first image
        before[#before + 1] = f; before[#before + 1] = old[j] and ('=' .. old[j]) or '-'
      end
    end
    in_slices('HSET', undo, before)
  end
  for i = 1, #page, 2 do
    if page[i + 1] == '-' then
      dels[#dels + 1] = page[i]
    else
      puts[#puts + 1] = page[i]; puts[#puts + 1] = string.sub(page[i + 1], 2)
    end
  end
  in_slices('HSET', committed, puts)
  in_slices('HDEL', committed, dels)
  nput, ndel = nput + #puts / 2, ndel + #dels
until cursor == '0'
redis.call('DEL', prepared)
redis.call('HSET', meta, 'committed_txid', txid, 'undo_txid', txid)
redis.call('HDEL', meta, 'prepared_txid', 'prepared_attempt')
for _, id in ipairs(redis.call('HKEYS', stages)) do   -- staging of txid or older can never be prepared again
  local t = tonumber(string.match(id, '^(%d+):'))
  if t and t <= txid then
    redis.call('DEL', ARGV[5] .. id)
    redis.call('HDEL', stages, id)
  end
end
return {'committed', nput, ndel}
"""

ROLLBACK_SCRIPT = """
-- KEYS: meta, prepared.  ARGV: namespace, the txid to roll back ('' for whichever is prepared).
-- Returns {'rolled back', txid}, {'nothing prepared', 0} or {'other txid prepared', txid} (left alone).
local st = redis.call('HMGET', KEYS[1], 'v', 'prepared_txid')
if st[1] and st[1] ~= '1' then error({err = 'TXDAG_KV_VERSION ' .. ARGV[1] .. ' ' .. st[1]}) end
local held = tonumber(st[2])
if not held then return {'nothing prepared', 0} end
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= held then return {'other txid prepared', held} end
redis.call('DEL', KEYS[2])
redis.call('HDEL', KEYS[1], 'prepared_txid', 'prepared_attempt')
return {'rolled back', held}
"""

MIGRATE_BEGIN_SCRIPT = """
-- KEYS[1]: meta.  ARGV: namespace, target '<key serializer>,<value serializer>', and for a namespace without a
-- record (written before txdag kept one) the serializers that wrote it: source key, source value ('' if none).
-- Returns {'started' | 'resumed' | 'nothing to do', '<source key>,<source value>'}.
local ns, target = ARGV[1], ARGV[2]
local m = redis.call('HMGET', KEYS[1], 'v', 'key_serializer', 'value_serializer', 'migrating', 'prepared_txid')
if not m[1] then
  if ARGV[3] == '' then error({err = 'TXDAG_KV_NOMETA ' .. ns}) end
  redis.call('HSET', KEYS[1], 'v', '1', 'key_serializer', ARGV[3], 'value_serializer', ARGV[4])
  m = {'1', ARGV[3], ARGV[4], false, false}
end
if m[1] ~= '1' then error({err = 'TXDAG_KV_VERSION ' .. ns .. ' ' .. m[1]}) end
local source = m[2] .. ',' .. m[3]
if m[4] then
  if m[4] ~= target then error({err = 'TXDAG_KV_MIGRATING ' .. ns .. ' ' .. m[4]}) end
  return {'resumed', source}
end
if m[5] then error({err = 'TXDAG_KV_PREPARED ' .. ns .. ' ' .. m[5]}) end
if source == target then return {'nothing to do', source} end
redis.call('HSET', KEYS[1], 'migrating', target, 'moved', 0)
return {'started', source}
"""

MIGRATE_MOVE_SCRIPT = """
-- KEYS: meta, the hash being converted, its converted half.  ARGV: namespace, target, then groups of four:
-- old field, old value (as read), new field, new value.  A field moves only if it still holds the value read,
-- and leaves the old hash in the same step: a rerun, or a duplicate from HSCAN, never converts it twice.
-- The caller sends no two groups with the same new field.  Returns {moved, skipped}.
local meta, src, dst, ns = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
if redis.call('HGET', meta, 'migrating') ~= ARGV[2] then error({err = 'TXDAG_KV_NOT_MIGRATING ' .. ns}) end
local todo, skipped = {}, 0
for i = 3, #ARGV, 4 do  -- every check before any write: an error leaves the chunk untouched
  if redis.call('HGET', src, ARGV[i]) == ARGV[i + 1] then
    if redis.call('HGET', dst, ARGV[i + 2]) then error({err = 'TXDAG_KV_COLLISION ' .. ns .. ' ' .. (i - 3) / 4}) end
    todo[#todo + 1] = i
  else
    skipped = skipped + 1
  end
end
for _, i in ipairs(todo) do
  redis.call('HSET', dst, ARGV[i + 2], ARGV[i + 3])
  redis.call('HDEL', src, ARGV[i])
end
local moved = #todo
redis.call('HINCRBY', meta, 'moved', moved)
return {moved, skipped}
"""

MIGRATE_FINISH_SCRIPT = """
-- KEYS: meta, stages, then pairs (hash, its converted half).  ARGV: namespace, target, the attempt ids whose
-- staging was converted.  Swaps every converted half in and records the new serializers, in one step.
local meta, stages, ns, target = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('HGET', meta, 'migrating') ~= target then error({err = 'TXDAG_KV_NOT_MIGRATING ' .. ns}) end
if redis.call('HLEN', stages) ~= #ARGV - 2 then error({err = 'TXDAG_KV_NEW_STAGING ' .. ns}) end
for i = 3, #ARGV do
  if not redis.call('HGET', stages, ARGV[i]) then error({err = 'TXDAG_KV_NEW_STAGING ' .. ns}) end
end
for i = 3, #KEYS, 2 do
  if redis.call('HLEN', KEYS[i]) > 0 then error({err = 'TXDAG_KV_UNFINISHED ' .. ns}) end
end
local swapped = 0
for i = 3, #KEYS, 2 do
  if redis.call('EXISTS', KEYS[i + 1]) == 1 then
    redis.call('RENAME', KEYS[i + 1], KEYS[i])
    swapped = swapped + 1
  end
end
local k, v = string.match(target, '^([^,]+),([^,]+)$')
redis.call('HSET', meta, 'key_serializer', k, 'value_serializer', v)
redis.call('HDEL', meta, 'migrating', 'moved', 'undo_txid')
redis.call('DEL', string.sub(meta, 1, -6) .. ':undo')  -- old-format images of the last txid: dropped
return swapped
"""

OPEN = declare("kv.open", OPEN_SCRIPT, ERRORS)
PREPARE = declare("kv.prepare", PREPARE_SCRIPT, ERRORS)
COMMIT = declare("kv.commit", COMMIT_SCRIPT, ERRORS)
ROLLBACK = declare("kv.rollback", ROLLBACK_SCRIPT, ERRORS)
MIGRATE_BEGIN = declare("kv.migrate_begin", MIGRATE_BEGIN_SCRIPT, ERRORS)
MIGRATE_MOVE = declare("kv.migrate_move", MIGRATE_MOVE_SCRIPT, ERRORS)
MIGRATE_FINISH = declare("kv.migrate_finish", MIGRATE_FINISH_SCRIPT, ERRORS)
