"""The server-side scripts of the Redis map states, declared in ``txdag.luascripts``, and the errors they raise.

Each script checks ``{ns}:meta`` first: the namespace's format version and kind must match the writer's.
"""

from __future__ import annotations

from txdag.errors import ConfigError, FormatVersionError, TxdagError, TxidOrderError
from txdag.luascripts import ErrorBuilder, declare

_CHECK_META = """
local function check_meta(meta, kind, ns)
  local v = redis.call('HGET', meta, 'v')
  if not v then
    redis.call('HSET', meta, 'v', '1', 'kind', kind)
    return
  end
  if v ~= '1' then error({err = 'TXDAG_VERSION ' .. ns .. ' ' .. v}) end
  local stored = redis.call('HGET', meta, 'kind')
  if stored ~= kind then error({err = 'TXDAG_KIND ' .. ns .. ' ' .. tostring(stored) .. ' ' .. kind}) end
end
"""

PUT_SCRIPT = (
    _CHECK_META
    + """
-- KEYS: values hash, txid hash, prev hash, meta hash of one namespace
-- ARGV[1]: kind; then groups of 4: field, value JSON, txid ('' if none), prev JSON ('' if none)
local kind = ARGV[1]
check_meta(KEYS[4], kind, KEYS[1])
for i = 2, #ARGV, 4 do
  local f = ARGV[i]
  if kind == 'transactional' and redis.call('HGET', KEYS[2], f) ~= ARGV[i + 2] then
    local cur = redis.call('HGET', KEYS[1], f)      -- the value before this txid, for txdag.state.committed
    if cur then redis.call('HSET', KEYS[3], f, cur) else redis.call('HDEL', KEYS[3], f) end
  end
  redis.call('HSET', KEYS[1], f, ARGV[i + 1])
  if kind ~= 'non_transactional' then redis.call('HSET', KEYS[2], f, ARGV[i + 2]) end
  if kind == 'opaque' then
    if ARGV[i + 3] == '' then redis.call('HDEL', KEYS[3], f) else redis.call('HSET', KEYS[3], f, ARGV[i + 3]) end
  end
end
return #ARGV / 4
"""
)

READ_SCRIPT = """
-- One page of a map state read at one instant: each field's value, txid and prev together (a commit applies a txid
-- in several calls, so three separate reads could pair a value with another txid's prev).
-- KEYS: values, txid, prev, meta of one namespace
-- ARGV[1]: 'scan' then ARGV[2] cursor, ARGV[3] count; or 'get' then the fields
-- Returns {next cursor ('0': done; '' for get), meta version, meta kind, fields, values, txids, prevs}.
local cursor, fields = '', {}
if ARGV[1] == 'scan' then
  local page = redis.call('HSCAN', KEYS[1], ARGV[2], 'COUNT', tonumber(ARGV[3]))
  cursor = page[1]
  for i = 1, #page[2], 2 do fields[#fields + 1] = page[2][i] end
else
  for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
end
local meta = redis.call('HMGET', KEYS[4], 'v', 'kind')
if #fields == 0 then return {cursor, meta[1], meta[2], {}, {}, {}, {}} end
return {cursor, meta[1], meta[2], fields, redis.call('HMGET', KEYS[1], unpack(fields)),
        redis.call('HMGET', KEYS[2], unpack(fields)), redis.call('HMGET', KEYS[3], unpack(fields))}
"""

_APPLY_FUNCTIONS = """
local function add(h, f, d, ns)
  local r = redis.pcall('HINCRBY', h, f, d)
  if type(r) == 'table' and r.err then r = redis.pcall('HINCRBYFLOAT', h, f, d) end
  if type(r) == 'table' and r.err then error({err = 'TXDAG_NOTNUM ' .. ns .. ' ' .. f .. ' ' .. d}) end
end

-- Applies one slice of a state's fields: the txids (and for opaque state the values and prevs) are read with
-- one HMGET each, the new txids and prevs written with one HSET each; only the increments go key by key.
local function apply_slice(kind, vals, txids, prevs, fields, deltas)
  local ts, curs = redis.call('HMGET', txids, unpack(fields)), redis.call('HMGET', vals, unpack(fields))
  local prs
  if kind == 'opaque' then prs = redis.call('HMGET', prevs, unpack(fields)) end
  local new_txids, new_prevs, no_prevs, applied, skipped = {}, {}, {}, 0, 0
  for j, f in ipairs(fields) do
    local t = tonumber(ts[j])
    if t and t > txid then error({err = 'TXDAG_BACKWARDS ' .. vals .. ' ' .. t .. ' ' .. txid .. ' ' .. f}) end
    if kind == 'transactional' and t == txid then
      skipped = skipped + 1
    else
      if kind == 'opaque' and t == txid then      -- a replay: start again from the value before txid
        if prs[j] then redis.call('HSET', vals, f, prs[j]) else redis.call('HDEL', vals, f) end
      else                                        -- a new txid: the current value becomes prev (a reader of the
                                                  -- last committed txid reads it: txdag.state.committed)
        if curs[j] then
          new_prevs[#new_prevs + 1] = f; new_prevs[#new_prevs + 1] = curs[j]
        else
          no_prevs[#no_prevs + 1] = f
        end
      end
      add(vals, fields[j], deltas[j], vals)
      new_txids[#new_txids + 1] = f; new_txids[#new_txids + 1] = txid
      applied = applied + 1
    end
  end
  if #new_txids > 0 then redis.call('HSET', txids, unpack(new_txids)) end
  if #new_prevs > 0 then redis.call('HSET', prevs, unpack(new_prevs)) end
  if #no_prevs > 0 then redis.call('HDEL', prevs, unpack(no_prevs)) end
  return applied, skipped
end


-- Applies n (field, delta) pairs laid out flat in list from index at, a slice at a time (keeps unpack() under
-- Lua's C stack limit). Returns applied, skipped.
local function apply_pairs(kind, vals, txids, prevs, list, at, n)
  local applied, skipped = 0, 0
  for first = 0, n - 1, 1000 do
    local fields, deltas = {}, {}
    for i = first, math.min(first + 1000, n) - 1 do
      fields[#fields + 1] = list[at + 2 * i]; deltas[#deltas + 1] = list[at + 1 + 2 * i]
    end
    if kind == 'non_transactional' then
      for j = 1, #fields do add(vals, fields[j], deltas[j], vals) end
      applied = applied + #fields
    else
      local ap, sk = apply_slice(kind, vals, txids, prevs, fields, deltas)
      applied, skipped = applied + ap, skipped + sk
    end
  end
  return applied, skipped
end
"""

APPLY_SCRIPT = (
    _CHECK_META
    + """
-- Adds partial results (numbers) of batch txid to one or more map states, with each state's txid rule
-- checked per key, and optionally records the commit in a marker key plus extra string keys.
-- KEYS: 4 per state (values, txid, prev, meta), then the marker key and the extra keys if any
-- ARGV[1]: txid, ARGV[2]: number of states, ARGV[4]: number of extra keys,
-- ARGV[3]: marker mode: '0' no marker, '1' check it (skip all when it is >= txid), '2' check it and write txid
--   then per state: kind, n, field_1, delta_1, ..., field_n, delta_n; then one value per extra key
-- Returns {applied, skipped}, or {-1, marker} when the marker shows this txid (or a later one) committed.
local txid = tonumber(ARGV[1])
local nstates, marker_mode, nextra = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local marker_index = 4 * nstates + 1
if marker_mode ~= '0' then
  local m = redis.call('GET', KEYS[marker_index])
  if m and tonumber(m) >= txid then return {-1, tonumber(m)} end
end

"""
    + _APPLY_FUNCTIONS
    + """
local applied, skipped, a = 0, 0, 5
for s = 0, nstates - 1 do
  local vals, txids, prevs = KEYS[4 * s + 1], KEYS[4 * s + 2], KEYS[4 * s + 3]
  local kind, n = ARGV[a], tonumber(ARGV[a + 1])
  check_meta(KEYS[4 * s + 4], kind, vals)
  local ap, sk = apply_pairs(kind, vals, txids, prevs, ARGV, a + 2, n)
  applied, skipped = applied + ap, skipped + sk
  a = a + 2 + 2 * n
end
if marker_mode == '2' then redis.call('SET', KEYS[marker_index], txid) end
local extra_base = marker_mode == '0' and marker_index - 1 or marker_index
for e = 1, nextra do redis.call('SET', KEYS[extra_base + e], ARGV[a + e - 1]) end
return {applied, skipped}
"""
)


APPLY_STAGED_SCRIPT = (
    _CHECK_META
    + """
-- Adds one page of a staging hash's numeric partials to one map state, with the state's txid rule per key: the
-- commit of txid done inside Redis, so the partials never travel through the client.
-- KEYS: values, txid, prev, meta of the state; the staging hash (sealed: nothing writes it meanwhile, so HSCAN
--   returns each field once)
-- ARGV[1]: txid, ARGV[2]: kind, ARGV[3]: HSCAN cursor, ARGV[4]: page size
-- Returns {next cursor ('0' after the last page), applied, skipped, bytes of the page's fields and values}.
local txid, kind = tonumber(ARGV[1]), ARGV[2]
local vals, txids, prevs = KEYS[1], KEYS[2], KEYS[3]
check_meta(KEYS[4], kind, vals)
"""
    + _APPLY_FUNCTIONS
    + """
local page = redis.call('HSCAN', KEYS[5], ARGV[3], 'COUNT', tonumber(ARGV[4]))
local applied, skipped = apply_pairs(kind, vals, txids, prevs, page[2], 1, #page[2] / 2)
local bytes = 0
for i = 1, #page[2] do bytes = bytes + #page[2][i] end
return {page[1], applied, skipped, bytes}
"""
)


def _backwards(ns: str, stored: str, txid: str, *field: str) -> TxdagError:
    return TxidOrderError(int(txid), int(stored), where=f"state {ns!r} field {' '.join(field)!r}")


def _kind(ns: str, stored: str, kind: str) -> TxdagError:
    return ConfigError(f"state namespace {ns!r} holds state of kind {stored}, not {kind}: two topologies share the "
                       f"namespace, or the state kind changed; give this state its own namespace")


def _version(ns: str, version: str) -> TxdagError:
    return FormatVersionError(f"state namespace {ns!r} has format version {version!r}; this txdag writes version 1: "
                              f"upgrade txdag or migrate the namespace")


def _not_a_number(ns: str, *field_and_partial: str) -> TxdagError:
    *field, partial = field_and_partial
    return TxdagError(f"state namespace {ns!r} field {' '.join(field)!r} is not a number, so partial {partial} cannot "
                      f"be added; a numeric aggregate and another value share the namespace")


ERRORS: dict[str, ErrorBuilder] = {
    "TXDAG_BACKWARDS": _backwards, "TXDAG_KIND": _kind, "TXDAG_VERSION": _version, "TXDAG_NOTNUM": _not_a_number,
}
PUT = declare("state.put", PUT_SCRIPT, ERRORS)
APPLY = declare("state.apply", APPLY_SCRIPT, ERRORS)
APPLY_STAGED = declare("state.apply_staged", APPLY_STAGED_SCRIPT, ERRORS)
READ = declare("state.read", READ_SCRIPT, ERRORS)
