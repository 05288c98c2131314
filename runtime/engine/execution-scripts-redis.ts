// The Lua scripts of the Redis executions store (execution-store-redis.ts, which says
// what each key and hash field holds and why a write is one script): each defined once
// per client, under a command name of its own.
import type { RedisClient } from '../../api/records/redis-client.ts';
import { EXECUTION_FIELDS as F } from './execution-keys.ts';

// KEYS: execution, index, finished, sizes, bytes, stream. ARGV: 1 record JSON without
// its input, or '' to append events only; 2 the execution's lifetime left (ms; set
// when this write creates its hash, or finishes it); 3 created ms; 4 id; 5 finished:
// its score in the finished set (when its hash expires, less a lifetime: its creation
// time, or later when it is kept longer), or '' while it runs; 6 budget; 7 expiry
// cutoff ms (now less a lifetime: scores below it have expired), or '' when this
// process trimmed the shard's expired entries lately (trimDue); 8 execution key prefix; 9 '1' to set the index keys'
// expiries again, '0' when this process did lately (refreshIndexExpiry); 10 their
// lifetime ms; 11 consumer group; 12 stream entry id to acknowledge (XACK + XDEL) or
// ''; 13 handover ms; 14 the events' channel (published on when the execution is
// watched); 15 the input JSON, or '' when the stored one stays; 16 the input's bytes
// (for the budget); 17 '1' when the record is dead-lettered, else '0'; then (seq,
// stored JSON, whole JSON or '' when the same) triples in seq order. Returns the number
// of executions dropped.
//
// Events go before the record, in the same HSET, so a terminal event is never stored
// beside a record still running (execution-store.ts, saveWithEvents). Only a finished
// record changes the budget: the expired and the first to expire are dropped then.
// Events appended to a finished execution without a record are added to its size.
// A record held for its dead-letter entry (HOLD) is in the held set, not the finished
// one: the budget's loop never sees it; it counts in the bytes, and a save of it (only
// a dead-lettered record can be held: the flag says when to look) keeps it held. A held
// record gets no events (its run is over). The held set and its bytes are named from
// the index (execution-keys.ts: <index>:held, <index>:heldbytes; same tag, same slot),
// not passed: the ordinary write does not use them, and every key passed costs each
// write (ADR 0039, amended 2026-11-28).
const WRITE = `
local key = KEYS[1]
-- Named only where used (see above).
local function held() return KEYS[2] .. ':held', KEYS[2] .. ':heldbytes' end
local state = redis.call('HMGET', key, '${F.eventCount}', '${F.eventBytes}', '${F.created}', '${F.watched}')
local watched = state[4]
-- Sharded pub/sub: a Redis Cluster sends the message to its shard only, where PUBLISH
-- goes to every node. A mark of '1' is a gateway from before (it SUBSCRIBEs).
local publish = watched == '1' and 'PUBLISH' or 'SPUBLISH'
local stored = tonumber(state[1] or '0')
local eventBytes = tonumber(state[2] or '0')
local fields = {}
local added, addedBytes = 0, 0
for i = 18, #ARGV, 3 do
  if tonumber(ARGV[i]) > stored + added then
    added = added + 1
    fields[#fields + 1] = '${F.eventPrefix}' .. (stored + added)
    fields[#fields + 1] = ARGV[i + 1]
    if ARGV[i + 2] ~= '' then
      redis.call('SET', key .. ':whole:' .. ARGV[i], ARGV[i + 2], 'PX', ARGV[13])
      if watched then redis.call(publish, ARGV[14], ARGV[i + 2]) end
    elseif watched then
      redis.call(publish, ARGV[14], ARGV[i + 1])
    end
    addedBytes = addedBytes + #ARGV[i + 1]
  end
end
local record = ARGV[1]
local created = not state[1]
if added > 0 or created then
  eventBytes = eventBytes + addedBytes
  fields[#fields + 1] = '${F.eventCount}'
  fields[#fields + 1] = stored + added
  fields[#fields + 1] = '${F.eventBytes}'
  fields[#fields + 1] = eventBytes
end
-- The first record written is indexed, once (a gateway's enqueue does both at once).
local indexed = state[3] or record == ''
if record ~= '' then
  fields[#fields + 1] = '${F.record}'
  fields[#fields + 1] = record
  if ARGV[15] ~= '' then
    fields[#fields + 1] = '${F.input}'
    fields[#fields + 1] = ARGV[15]
  end
  if not indexed then
    fields[#fields + 1] = '${F.created}'
    fields[#fields + 1] = ARGV[3]
  end
end
local dropped = 0
if #fields > 0 then redis.call('HSET', key, unpack(fields)) end
-- A hash made here, and a finished execution, get what is left of the lifetime (a
-- queued one had none: ADR 0036; a dead-lettered one gets more: ADR 0039).
if (created and #fields > 0) or (ARGV[5] ~= '' and record ~= '') then
  redis.call('PEXPIRE', key, ARGV[2])
end
if not indexed then redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[4]) end
if record == '' then
  if added > 0 and redis.call('ZSCORE', KEYS[3], ARGV[4]) then
    redis.call('HINCRBY', KEYS[4], ARGV[4], addedBytes)
    redis.call('INCRBY', KEYS[5], addedBytes)
  end
else
  local refresh = ARGV[9] ~= '0'
  if ARGV[5] ~= '' then
    local bytes = #record + tonumber(ARGV[16]) + eventBytes
    -- Only a finished execution has a size: one finishing now has none to replace.
    local old = 0
    local heldKey, heldBytes
    if ARGV[17] == '1' then heldKey, heldBytes = held() end
    if heldKey and redis.call('ZSCORE', heldKey, ARGV[4]) then
      old = tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0')
      redis.call('INCRBY', heldBytes, bytes - old)
    elseif redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4]) == 0 then
      old = tonumber(redis.call('HGET', KEYS[4], ARGV[4]) or '0')
    end
    redis.call('HSET', KEYS[4], ARGV[4], bytes)
    local total = redis.call('INCRBY', KEYS[5], bytes - old)
    -- The budget keys were empty (maybe made just now): they get their expiry at once.
    if total == bytes - old then refresh = true end
    -- Takes an execution off the budget: off its set (finished, or held with its sum
    -- sum), sizes, index.
    local function forget(id, set, sum)
      local b = tonumber(redis.call('HGET', KEYS[4], id) or '0')
      redis.call('HDEL', KEYS[4], id)
      total = redis.call('DECRBY', KEYS[5], b)
      if sum then redis.call('DECRBY', sum, b) end
      redis.call('ZREM', set, id)
      redis.call('ZREM', KEYS[2], id)
    end
    if ARGV[7] ~= '' then
      if not heldKey then heldKey, heldBytes = held() end
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7], 'LIMIT', 0, 1000)) do
        forget(id, KEYS[3])
      end
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', heldKey, '-inf', '(' .. ARGV[7], 'LIMIT', 0, 1000)) do
        forget(id, heldKey, heldBytes)
      end
    end
    local budget = tonumber(ARGV[6])
    while total > budget do
      local oldest = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
      if not oldest or oldest == ARGV[4] then break end
      redis.call('DEL', ARGV[8] .. oldest)
      forget(oldest, KEYS[3])
      dropped = dropped + 1
    end
  end
  if refresh then
    for i = 2, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[10]) end
    local heldKey, heldBytes = held()
    redis.call('PEXPIRE', heldKey, ARGV[10])
    redis.call('PEXPIRE', heldBytes, ARGV[10])
  end
end
if ARGV[12] ~= '' then
  redis.call('XACK', KEYS[6], ARGV[11], ARGV[12])
  redis.call('XDEL', KEYS[6], ARGV[12])
end
return dropped
`;

// DISCARD (ADR 0041): instead of WRITE's finishing write of a succeeded execution whose
// workflow discards the records of succeeded executions. KEYS: execution, index,
// finished, sizes, bytes, stream. ARGV: 1 id; 2 consumer group; 3 stream entry id to
// acknowledge (XACK + XDEL) or ''; 4 '1' when a finished record of it was written before
// (its callback's delivery ended since), whose share of the budget goes too, else '0';
// 5 handover ms; 6 the events' channel; 7 '' or the tombstone: '<lifetime ms>:<finished
// ms>' (one argument: a discard without one costs nothing more); then (seq, whole JSON)
// pairs in seq order: the run's events not written yet. Returns 1 when the execution was
// watched, else 0.
//
// Nobody watching (the mark `w` unset): the hash goes, with the whole copies of its cut
// events (`:whole:<seq>`, named from its event count: one DEL). Watched: a gateway waits
// for its end, so its new events are stored and published as WRITE does them (whole: the
// hash lives only the handover time now), the record, input and creation time go, and
// the hash expires after the handover time: the gateway reads the end, nobody the record.
// Either way the index entry goes (it is listed no more).
//
// One that came with an Idempotency-Key (ARGV 7: the key's window, from its job, and when
// it finished) leaves its tombstone, `<execution>:tombstone` (same tag, same slot),
// watched or not: {"status":"succeeded","at":<finished ms>}, expiring after that window,
// so that the key's retry resuming its id is not run again (ADR 0041, amended 2026-11-28
// (night)). The window counts from the discard, later than the key's own start: the
// tombstone outlives the key whatever the clocks say, by the run's own time at most. An
// argument, not a mark on the hash: reading one more (absent) field of the hash cost
// every discard a scan of it (about 1k instructions, ~1 %).
const DISCARD = `
local key = KEYS[1]
local state = redis.call('HMGET', key, '${F.eventCount}', '${F.watched}')
local stored = tonumber(state[1] or '0')
local watched = state[2]
if ARGV[7] ~= '' then
  local ms, at = string.match(ARGV[7], '^(%d+):(%d+)$')
  redis.call('SET', key .. ':tombstone', '{"status":"succeeded","at":' .. at .. '}', 'PX', ms)
end
if watched then
  local publish = watched == '1' and 'PUBLISH' or 'SPUBLISH'
  local fields = {}
  local added = 0
  for i = 8, #ARGV, 2 do
    if tonumber(ARGV[i]) > stored + added then
      added = added + 1
      fields[#fields + 1] = '${F.eventPrefix}' .. (stored + added)
      fields[#fields + 1] = ARGV[i + 1]
      redis.call(publish, ARGV[6], ARGV[i + 1])
    end
  end
  if added > 0 then
    fields[#fields + 1] = '${F.eventCount}'
    fields[#fields + 1] = stored + added
    redis.call('HSET', key, unpack(fields))
  end
  redis.call('HDEL', key, '${F.record}', '${F.input}', '${F.created}')
  redis.call('PEXPIRE', key, ARGV[5])
else
  local keys = { key }
  for seq = 1, stored do
    keys[#keys + 1] = key .. ':whole:' .. seq
    if #keys == 1000 then
      redis.call('DEL', unpack(keys))
      keys = {}
    end
  end
  if #keys > 0 then redis.call('DEL', unpack(keys)) end
end
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[4] == '1' then
  local size = redis.call('HGET', KEYS[4], ARGV[1])
  if size then
    redis.call('HDEL', KEYS[4], ARGV[1])
    redis.call('DECRBY', KEYS[5], size)
    redis.call('ZREM', KEYS[3], ARGV[1])
  end
end
if ARGV[3] ~= '' then
  redis.call('XACK', KEYS[6], ARGV[2], ARGV[3])
  redis.call('XDEL', KEYS[6], ARGV[3])
end
return watched and 1 or 0
`;

// The hold (HeldRecords, dead-letters.ts): the records of listed dead-letter entries,
// kept in the shard's held set (scored as in the finished set) and held-bytes sum
// instead of its finished set, so the budget's loop in WRITE never drops them; they
// still count in the shard's bytes.
//
// Each hold is numbered in the record's hash (field h): minus the number from the hold
// until the add that made it has written its entry (LISTED), the number after. The
// hold's bound names no record whose number is negative: an add in flight would list
// its entry after the entries named were taken out, and its record must still be there.
// A record is dropped (LISTED) only under the number it was named with: held again
// since, an add is listing its entry again. Old records (no h) count as number 0.
//
// HOLD. KEYS: execution, finished, held, sizes, held bytes. ARGV: id, the hold's bound
// (bytes), the index keys' lifetime (ms), execution key prefix. Moves a finished
// dead-lettered record from the finished set to the held one (idempotent) and numbers
// the hold. Returns { 0 } when there is no such record, else { 1, this hold's number,
// then the id and hold number of each held record beyond the bound, oldest first, never
// this one nor one being listed }.
const HOLD = `
local id = ARGV[1]
local record = redis.call('HGET', KEYS[1], '${F.record}')
if not record or not string.find(record, '"deadLetteredAt":', 1, true) then return { 0 } end
if not redis.call('ZSCORE', KEYS[3], id) then
  local score = redis.call('ZSCORE', KEYS[2], id)
  if not score then return { 0 } end
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZADD', KEYS[3], score, id)
  redis.call('INCRBY', KEYS[5], tonumber(redis.call('HGET', KEYS[4], id) or '0'))
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  redis.call('PEXPIRE', KEYS[5], ARGV[3])
end
local hold = math.abs(tonumber(redis.call('HGET', KEYS[1], '${F.hold}') or '0')) + 1
redis.call('HSET', KEYS[1], '${F.hold}', -hold)
local out = { 1, hold }
local total = tonumber(redis.call('GET', KEYS[5]) or '0')
local bound = tonumber(ARGV[2])
local from = 0
while total > bound do
  local batch = redis.call('ZRANGE', KEYS[3], from, from + 99)
  if #batch == 0 then break end
  for _, other in ipairs(batch) do
    if total <= bound then break end
    if other ~= id then
      local number = tonumber(redis.call('HGET', ARGV[4] .. other, '${F.hold}') or '0')
      if number >= 0 then
        total = total - tonumber(redis.call('HGET', KEYS[4], other) or '0')
        out[#out + 1] = other
        out[#out + 1] = number
      end
    end
  end
  from = from + 100
end
return out
`;

// LISTED. KEYS: execution (the one held), index, held, sizes, bytes, held bytes. ARGV:
// its hold's number, execution key prefix, expiry cutoff ms (now less a lifetime), then
// the (id, number) pairs that hold named beyond the bound, whose entries are out of the
// list. Its entry is listed: the hold's number turns positive (unless held again since).
// Drops the records named that are still held under the number they were named with
// (hash, index entry, size). One past its time (scored below the cutoff) has expired, not
// gone for room: taken off the budget as WRITE's trim does (its hash expires on its own),
// whatever its number, and not returned. Returns the ids dropped.
const LISTED = `
local hold = tonumber(ARGV[1])
if tonumber(redis.call('HGET', KEYS[1], '${F.hold}') or '0') == -hold then
  redis.call('HSET', KEYS[1], '${F.hold}', hold)
end
local cutoff = tonumber(ARGV[3])
local dropped = {}
for i = 4, #ARGV, 2 do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[3], id)
  local expired = score and tonumber(score) < cutoff
  if expired
    or (score and tonumber(redis.call('HGET', ARGV[2] .. id, '${F.hold}') or '0') == tonumber(ARGV[i + 1])) then
    local b = tonumber(redis.call('HGET', KEYS[4], id) or '0')
    if not expired then
      redis.call('DEL', ARGV[2] .. id)
      dropped[#dropped + 1] = id
    end
    redis.call('ZREM', KEYS[3], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[4], id)
    redis.call('DECRBY', KEYS[5], b)
    redis.call('DECRBY', KEYS[6], b)
  end
end
return dropped
`;

// RELEASE. KEYS: finished, held, sizes, held bytes. ARGV: the index keys' lifetime
// (ms), execution key prefix, then (id, number) pairs: the number of the hold the entry
// that left was last written under, or '' (written by a process from before the numbers).
// Held records back in the finished set, with their scores, if that entry was the last
// added: the record's hold has that number, said listed or not (its add wrote the entry
// that left, and its LISTED has yet to come). A later one (an add in flight, or one that
// listed the entry again since) keeps it held. Without a number: not one being listed.
const RELEASE = `
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  local score = redis.call('ZSCORE', KEYS[2], id)
  local left = false
  if score then
    local hold = tonumber(redis.call('HGET', ARGV[2] .. id, '${F.hold}') or '0')
    if ARGV[i + 1] == '' then left = hold >= 0 else left = math.abs(hold) == tonumber(ARGV[i + 1]) end
  end
  if left then
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZADD', KEYS[1], score, id)
    redis.call('DECRBY', KEYS[4], tonumber(redis.call('HGET', KEYS[3], id) or '0'))
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 0
`;

// KEYS: a shard's stream. ARGV: consumer group, consumer, count, execution key prefix.
// New jobs for the consumer (XREADGROUP, not blocking), each with its execution's record,
// input and event count: { entry id, fields, record or false, input or false, count }
// per job. The keys read are built from the job's id; they carry the stream's hash tag
// (execution-keys.ts), so they are in its slot on a Redis Cluster.
const TAKE = `
local read = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT', ARGV[3], 'STREAMS', KEYS[1], '>')
local out = {}
if not read then return out end
for _, entry in ipairs(read[1][2]) do
  local fields = entry[2]
  local record, input, count = false, false, 0
  for i = 1, #fields - 1, 2 do
    if fields[i] == 'job' then
      -- Jobs are written with the id first: read it without decoding the JSON (a
      -- tenth of the take's cost); any other job is decoded.
      local id = string.match(fields[i + 1], '^{"id":"([^"\\\\]+)"')
      if not id then
        local ok, job = pcall(cjson.decode, fields[i + 1])
        if ok and type(job) == 'table' and type(job.id) == 'string' then id = job.id end
      end
      if id then
        local state = redis.call('HMGET', ARGV[4] .. id, '${F.record}', '${F.input}', '${F.eventCount}')
        record, input, count = state[1], state[2], tonumber(state[3] or '0')
      end
    end
  end
  out[#out + 1] = { entry[1], fields, record, input, count }
end
return out
`;

// KEYS: executions of one shard (one slot). Their records and inputs, one after the
// other (false where there is none).
const RECORDS = `
local out = {}
for _, key in ipairs(KEYS) do
  local state = redis.call('HMGET', key, '${F.record}', '${F.input}')
  out[#out + 1] = state[1]
  out[#out + 1] = state[2]
end
return out
`;

// KEYS: an execution. ARGV: position; what to do first (see execution-store-redis.ts):
// '0' nothing, '1' mark it watched, 'w' mark it watched if it is there, 'e' only look
// whether it is there; the lifetime (ms) of a hash the mark creates (an execution not
// written yet). Its events after that position, in order (read in chunks: Lua's stack
// holds a few thousand values); with 'w' or 'e', false (nil) when there is no hash: an
// execution known to be written is gone (discarded, dropped by the byte budget,
// expired), and nothing is created. The mark is 's': this gateway listens with
// SSUBSCRIBE (gateways from before marked '1' and SUBSCRIBEd; WRITE publishes to either
// as marked). Only a hash the mark creates gets an expiry: one without is a queued or
// running execution, whose expiry its finishing write sets. 'w' costs what '1' does
// (EXISTS, HSETNX).
const EVENTS = `
if ARGV[2] == '1' then
  local existed = redis.call('EXISTS', KEYS[1]) == 1
  if redis.call('HSETNX', KEYS[1], '${F.watched}', 's') == 1 and not existed then
    redis.call('PEXPIRE', KEYS[1], ARGV[3])
  end
elseif ARGV[2] ~= '0' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return false end
  if ARGV[2] == 'w' then redis.call('HSETNX', KEYS[1], '${F.watched}', 's') end
end
local n = tonumber(redis.call('HGET', KEYS[1], '${F.eventCount}') or '0')
local out = {}
local from = tonumber(ARGV[1]) + 1
while from <= n do
  local fields = {}
  for p = from, math.min(n, from + 999) do fields[#fields + 1] = '${F.eventPrefix}' .. p end
  for _, json in ipairs(redis.call('HMGET', KEYS[1], unpack(fields))) do
    if json then out[#out + 1] = json end
  end
  from = from + 1000
end
return out
`;

/**
 * What the EVENTS script does before it reads: '0' nothing, '1' mark the execution
 * watched (creating its hash when it is not written yet), 'w' mark it if it is there, 'e'
 * look whether it is there; with 'w' and 'e' it answers null when it is not.
 */
export type EventsReadMode = '0' | '1' | 'w' | 'e';

/** The scripts as commands of a client (defineExecutionScripts). */
export interface ExecutionScripts {
  hookgateWriteExecution(...args: (string | number)[]): Promise<number>;
  hookgateDiscardExecution(...args: (string | number)[]): Promise<number>;
  hookgateTakeJobs(
    stream: string,
    group: string,
    consumer: string,
    count: number,
    executionPrefix: string,
  ): Promise<[string, string[], string | null, string | null, number][]>;
  hookgateReadRecords(count: number, ...keys: string[]): Promise<(string | null)[]>;
  /** null only with 'w' or 'e': no such execution. */
  hookgateReadEvents(
    execution: string,
    after: number,
    watch: EventsReadMode,
    ttlMs: number,
  ): Promise<string[] | null>;
  hookgateHoldExecution(...args: (string | number)[]): Promise<(number | string)[]>;
  hookgateReleaseExecutions(...args: (string | number)[]): Promise<number>;
  hookgateHeldListed(...args: (string | number)[]): Promise<string[]>;
}

/** Defines the scripts on `redis` (once: a client shared by several stores keeps them). */
export function defineExecutionScripts(redis: RedisClient): void {
  if ((redis as RedisClient & Partial<ExecutionScripts>).hookgateWriteExecution) return;
  redis.defineCommand('hookgateWriteExecution', { numberOfKeys: 6, lua: WRITE });
  redis.defineCommand('hookgateDiscardExecution', { numberOfKeys: 6, lua: DISCARD });
  redis.defineCommand('hookgateHoldExecution', { numberOfKeys: 5, lua: HOLD });
  redis.defineCommand('hookgateReleaseExecutions', { numberOfKeys: 4, lua: RELEASE });
  redis.defineCommand('hookgateHeldListed', { numberOfKeys: 6, lua: LISTED });
  redis.defineCommand('hookgateTakeJobs', { numberOfKeys: 1, lua: TAKE });
  // The number of keys is the call's first argument.
  redis.defineCommand('hookgateReadRecords', { lua: RECORDS });
  redis.defineCommand('hookgateReadEvents', { numberOfKeys: 1, lua: EVENTS });
}
