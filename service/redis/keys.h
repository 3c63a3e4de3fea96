/* keys: every Redis key shape entityd uses; nothing else builds key names.
 *
 * Reads are the hot path, so every resource is also stored as the exact JSON the API returns,
 * kept in step by the write scripts: a read copies bytes, with no decoding or encoding.
 *
 * Per entity, all under the hash tag {c-<uuid>} so one script's keys share a Cluster slot:
 *   ent:{c-…}                 hash    the entity's fields (names as in the API; booleans "1"/"0",
 *                                     contracts a JSON array, times ISO, __v an integer),
 *                                     "json": the Entity as the API returns it, and
 *                                     "membersVersion": a random token force_add.lua and
 *                                     members_remove.lua renew with every change of the member
 *                                     list (pagecache.h),
 *                                     "aliasClaim": the token of the claim behind its alias,
 *                                     "nested": "1" when some skill has a parent, "0" or
 *                                     absent for a flat list (written with "skilltree"),
 *                                     "skilltree" and "progtpl": the skill tree as skill and
 *                                     level reads return it, and flat for progression
 *                                     (lua/_prelude.lua, progtpl_build), written with every
 *                                     change of a skill or a level ("skilltree" at most
 *                                     SKILLTREE_MAX_BYTES, unless lowered since),
 *                                     "eventBytes": the bytes of every event ever written
 *                                     (only grows; lua/_prelude.lua, events_budget)
 *   ent:{c-…}:owners          set     owner addresses (lowercase)
 *   ent:{c-…}:admins          set     admin addresses
 *   ent:{c-…}:members         hash    address -> its member entry, "<addedAt ms, 16 digits>:
 *                                     <address>:<addedBy>:<chain>[:rules]" (":rules": joined by
 *                                     the join rule, join_add.lua, with addedBy itself and chain
 *                                     ""; none: added by force-add; the users list's "via")
 *                                     (the one exception to stored
 *                                     JSON: a page of 100 copies half the bytes this way, and
 *                                     entityd renders it; the first storage format's entries,
 *                                     "<addedAt>:<address>:<member JSON>", are still read)
 *   ent:{c-…}:members:order   zset    all scores 0; the same member entries, so lexicographic
 *                                     order is (addedAt, address); a page is ZRANGEBYLEX from
 *                                     "[<cursor>;", the cursor being an entry's first 59 bytes:
 *                                     O(log N + page)
 *   ent:{c-…}:skills          hash    skill id -> Skill JSON, ending with "parentId" (null for
 *                                     a root) and "depth" (0…8); an earlier release's has
 *                                     neither and is a root at depth 0 (lua/_prelude.lua,
 *                                     skills_preorder; resources/skills.c reads such a tree)
 *   ent:{c-…}:skills:order    zset    Skill JSONs scored createdAt ms * 1000 + position in batch
 *                                     (the entity's skillSeq since): creation order, the
 *                                     order of siblings in op 5's parents-first walk
 *   ent:{c-…}:skills:names    hash    normalized name (trimmed, ASCII lowercase) -> skill id
 *   Join rules (CONTRACT section 16):
 *   ent:{c-…}:join            hash    rule (the rule as joinrule_render writes it), updatedAt
 *                                     (ISO), updatedBy (the author's address), ver (bumped at
 *                                     each set: join_add.lua adds only under the ver judged by).
 *                                     join_rule_set.lua writes it, join_rule_delete.lua unlinks
 *                                     it with the two below
 *   ent:{c-…}:join:due        zset    rules members (address) -> ms their next re-check is due
 *                                     (at a join: now + JOIN_RECHECK_SECONDS)
 *   ent:{c-…}:join:failing    hash    address -> ms of its first failing check since its last
 *                                     pass. Any removal of a member (members_remove.lua), and a
 *                                     force-add making it manual (force_add.lua), takes it off
 *                                     both (_prelude.lua, join_forget); an erasure unlinks all
 *                                     three with the entity's other keys
 *   ent:{c-…}:join:lease      string  the token of the instance re-checking the entity's rules
 *                                     members, PX 10000 on Redis's clock, renewed at each batch
 *                                     (join_take.lua, join_verdicts.lua; jobs/joinsweep.h):
 *                                     another instance takes over once a dead one's ran out
 *   ent:{c-…}:levels          hash    level id -> Level JSON
 *   ent:{c-…}:levels:order    zset    Level JSONs scored by XP; a Level JSON begins with its id,
 *                                     so ties sort by id
 *   Member progression (CONTRACT §5); built inside the scripts from the entity key, so in its slot:
 *   ent:{c-…}:contribs        hash    contribution id ("k-<uuidv4>") -> Contribution JSON as the
 *                                     API returns it (updated in place on revoke)
 *   ent:{c-…}:contribs:of:<address>
 *                             zset    all scores 0; "<createdAt ms, 16 digits>:<contribution id>":
 *                                     newest first is ZREVRANGEBYLEX, the cursor the last entry
 *   ent:{c-…}:prog:<address>  hash    "xp" -> integer; "s:<skill id>" -> integer score (the
 *                                     member's own, in that skill alone); "t:<skill id>" ->
 *                                     integer total, what the skill's board lists the member
 *                                     at, written once a skill below it (CONTRACT section 15)
 *                                     gave the member a score: absent, the board lists the own
 *                                     score, so a flat entity has none (_prelude.lua,
 *                                     board_value; awards, revocations and board rebuilds keep
 *                                     it and the board entry together; a removed member's is
 *                                     set again from its own scores when it is added back);
 *                                     "r:<lvID>" -> reachedAt (ms since epoch), never deleted
 *                                     ("r:<lvID>:<generation>" for a level id deleted before:
 *                                     levels:gen). Kept when the member is removed; the scores
 *                                     of a deleted skill stay, never read again. The scores are
 *                                     the member's own: progress and level judgement roll them
 *                                     up the template's current tree into totals each time
 *                                     (_prelude.lua tpl_totals, resources/progress_totals.c)
 *   ent:{c-…}:levels:gen      hash    level id -> how many times a level of that id was deleted
 *                                     (level_delete.lua): the generation naming the reachedAt
 *                                     fields of the level now under that id (_prelude.lua,
 *                                     progtpl_build)
 *   ent:{c-…}:lb:xp           zset    all scores 0; "<9999999999999999 - value, 16 digits>:
 *                                     <address>", only values > 0: ZRANGEBYLEX is highest first,
 *                                     ties by address; the competition rank of value v is
 *                                     1 + ZLEXCOUNT(lb, "-", "(<16 digits of v's entry>:")
 *                                     A removed member's entries stay until the sweeper takes
 *                                     them off: on this board tombstoned meanwhile (lb:xp:gone),
 *                                     every count subtracts those; a force-add lists it again
 *                                     with the values it has then
 *   ent:{c-…}:lb:s:<skill id> zset    the same board for one skill's totals (the own score
 *                                     plus the totals of its children: the prog hash's
 *                                     "t:<skill id>", else "s:<skill id>"); UNLINKed when the
 *                                     skill is deleted. A removed member's entries here wait for
 *                                     the sweeper untombstoned (lb:unswept): reads skip entries
 *                                     whose address is no member, and a walk's ranks come from
 *                                     its cursor (resources/leaderboard.c)
 *   ent:{c-…}:lb:xp:gone      zset    the XP board's tombstones: the entries of removed members
 *                                     the sweeper has not taken off yet, each also on the board
 *                                     (same strings, score 0), each its member's entry at the
 *                                     value its progress holds now (a revocation while removed
 *                                     takes the old entry and its tombstone off: _prelude.lua
 *                                     prog_add), so a force-add finds them from the prog hash.
 *                                     Reads count board minus gone over a range and skip gone
 *                                     entries from pages (members_remove.lua adds,
 *                                     sweep_step.lua and force_add.lua remove)
 *   ent:{c-…}:lb:s:<skill id>:gone
 *                             zset    the same for a skill board, written by earlier versions'
 *                                     removals only (an instance of one may still write it during
 *                                     a rolling upgrade); read, swept and UNLINKed with its
 *                                     skill's board as the XP board's
 *   ent:{c-…}:lb:unswept      set     removed members whose skill board entries the sweeper has
 *                                     not taken off yet (a removal adds those with progress; a
 *                                     sweep step takes each one's entries off, read from its prog
 *                                     hash, then the member; one that is a member again only
 *                                     leaves): a skill board read checks its page's addresses
 *                                     against the members hash while this is not empty
 *   ent:{c-…}:lb:tombstoned   set     the boards ('xp' or skill ids) whose gone zset may hold
 *                                     tombstones: a removal adds those it tombstoned on (in
 *                                     the same script), a sweep step drops those it found
 *                                     empty, so a step reads only boards with work
 *                                     (sweep_step.lua)
 *   ent:{c-…}:sweep           zset    written by earlier versions only (removals before the
 *                                     tombstones followed the progress; an instance of one may
 *                                     still write it during a rolling upgrade): all scores 0,
 *                                     one record per removed member, "<address> <by>=<16
 *                                     digits> …" (by: xp or a skill id), the entries tombstoned
 *                                     then, found by address as the lex range "[<address> " to
 *                                     "(<address>!"; force_add.lua takes a re-added member's
 *                                     tombstones back by it. Unlinked by the sweeper once no
 *                                     tombstone of the entity is left (jobs/sweeper.h)
 *   ent:{c-…}:lb:rebuild:boards
 *                             set     skill ids whose boards are being rebuilt after a move or
 *                                     a deletion in the skill tree changed their members' totals
 *                                     (_prelude.lua, board_rebuild_start): their reads answer
 *                                     "rebuilding":true (resources/leaderboard.c). The entity
 *                                     hash's "lbRebuild" ("1") says the same to the writes, in
 *                                     the read they make of its progtpl anyway
 *   ent:{c-…}:lb:rebuild      hash    the rebuild's progress: cursor (the members hash's HSCAN
 *                                     cursor, "0" again at each move), lease (the instance token
 *                                     of its last step), leaseUntil (Redis ms); sweep_step.lua
 *                                     takes steps, the last unlinks both keys
 *   ent:{c-…}:lb:rebuild:boards
 *                             set     skill ids whose boards are being rebuilt after a move or
 *                                     a deletion in the skill tree changed their members' totals
 *                                     (_prelude.lua, board_rebuild_start): their reads answer
 *                                     "rebuilding":true (resources/leaderboard.c). The entity
 *                                     hash's "lbRebuild" ("1") says the same to the writes, in
 *                                     the read they make of its progtpl anyway. The handler of
 *                                     the move lists the entity in the sweeps set after the
 *                                     answer (not ahead: no write before the gate), and any read
 *                                     of such a board lists it again (a crash in between)
 *   ent:{c-…}:lb:rebuild      hash    the rebuild's progress: cursor (the members hash's HSCAN
 *                                     cursor, "0" again at each move), lease (the instance token
 *                                     of its last step), leaseUntil (Redis ms); sweep_step.lua
 *                                     takes the steps, the last unlinks both keys
 *   ent:{c-…}:idem:<key>      string  "<request digest, 40 hex>\n<answer JSON>", EX 86400
 *   ent:{c-…}:events          stream  fields type, at (ISO ms), actor (address or ""), data (a
 *                                     JSON object as text); MAXLEN ~ EVENTS_MAX, and its
 *                                     MEMORY USAGE about EVENTS_MAX_BYTES (oldest trimmed)
 *   ent:{c-…}:awards:<address>
 *                             string  contributions the member received in the current minute
 *                                     (CONTRIBUTIONS_PER_MEMBER_PER_MINUTE), PEXPIRE 60 s from
 *                                     the first; written by contrib_award.lua
 *   ent:{c-…}:probe           never     never written: every write script asks EXISTS of it
 *                                     first, which errors only while the slot moves between
 *                                     cluster nodes (lua/_prelude.lua, moving_guard)
 *   ent:{c-…}:erasure         hash    the erasure record (tombstone) of a deleted entity: the
 *                                     entity hash renamed by entity_delete.lua (so its alias
 *                                     and claim token stay), plus deletedAt, deletedAtMs,
 *                                     deletedBy, deletedRedisMs (Redis TIME), the erasure's
 *                                     progress (erased; listSkip on a cluster; sharedPass, the
 *                                     erase:scan pass that last unlinked its keys, or joinMs for a
 *                                     record older than deletedRedisMs; cursor, pass, passErased,
 *                                     scanCount of a release before) and its lease
 * (leaseOwner, leaseUntil ms); erase_step.lua deletes it last
 *
 * Across entities (the one exception to the shared tag):
 *   alias:{<alias>}           string  "<entity id> <claimed at, s> <claim token>": the entity
 *                                     holding the community URL alias. Uniqueness needs no
 *                                     cross-slot transaction: a claim is SET-if-free in the
 *                                     alias's own slot (alias_claim.lua) made BEFORE the entity
 *                                     write, which stores the claim's token in the entity hash's
 *                                     "aliasClaim". A write Redis refused releases its claim, and
 *                                     a write that moves the alias away releases the old one,
 *                                     each naming the exact claim by its token
 *                                     (alias_release.lua). A write whose outcome is unknown
 *                                     (timeout, lost connection) keeps its claim: a claim is
 *                                     "stale" when it is older than the grace period and its
 *                                     holder's record names another alias, or at once when its
 *                                     holder is being erased (its erasure record exists), and
 *                                     the next claimant takes it over with a compare-and-set on
 *                                     the stored value.

 * Finding entities (CONTRACT §9): indexes in other slots than the entities they name, so no
 * entity script writes them. Entries are added BEFORE the entity write is sent and dropped
 * AFTER the entity shows they no longer hold; every read checks its page against the entities
 * themselves (docs/DECISIONS.md, "Indexes across slots"). Written by find_*.lua alone.
 *   wallet:{<address>}:meta   hash    entity id -> "<since ms, 16 digits> <touched ms>[ <mark>]":
 *                                     since, when the wallet first took a role in it; touched,
 *                                     the last add (a drop within the grace period skips it);
 *                                     mark, that add's request (find_wallet_undo.lua)
 *   wallet:{<address>}:any    zset    all scores 0; "<since, 16 digits>:<entity id>", every
 *                                     entity the wallet may hold a role in: ZREVRANGEBYLEX is
 *                                     newest first, the cursor the last entry
 *   wallet:{<address>}:owner, :admin, :member
 *                             zset    the same entries, per role
 *   dir:{entities}:meta       hash    entity id -> the last add's time (ms)
 *   dir:{entities}:created    zset    all scores 0; "<createdAt ms, 16 digits>:<entity id>"
 *   dir:{entities}:names      zset    all scores 0; "<name trimmed, ASCII lowercase>\x01<id>":
 *                                     a name prefix is one ZRANGEBYLEX, ordered by folded name,
 *                                     then id (\x01 sorts before every byte a name may hold)
 *   find:backfill:lease       string  the instance running the backfill (SET NX PX)
 *   find:backfill:cursor:<host:port>
 *                             string  the SCAN cursor reached on that node ("0" before the start)
 *   find:backfill:done        string  "1" once every node is scanned: the backfill never reruns
 *
 * Erasures (DELETE of an entity; jobs/erasure.h), in a slot of its own:
 *   erasures                  zset    all scores 0; one entry per delete request,
 *                                     "<entity id>:<ms of the request>:<random token>": every
 *                                     erasure not yet finished, for any instance to find. Added
 *                                     BEFORE the entity's delete script runs; a request that
 *                                     Redis refused removes its own entry (only its own: a
 *                                     concurrent delete that succeeded has another); an entry
 *                                     whose record never appears ages out after a grace period;
 *                                     the erasure's end removes every entry of the entity (by
 *                                     lex range) AFTER erase_step.lua deleted the record. So no
 *                                     crash between the two slots can leave an erasure nobody
 *                                     finds.
 *   erase:scan                hash    a single Redis only (never on a cluster): the one SCAN
 *                                     that serves every erasure of the node (cursor, pass,
 *                                     passStart: Redis TIME ms of the pass's start, doneStart and
 *                                     donePass: those of the last pass completed, scanCount);
 *                                     erase_step.lua alone writes it
 *   erase:ids                 set     a single Redis only: the ids of the entities being
 *                                     erased, which the shared scan unlinks the keys of.
 *                                     entity_delete.lua adds the id with the record,
 *                                     erase_step.lua (an erasure's first step, for a record of a
 *                                     release before) too; the step deleting a record removes it
 *
 * Sweeps (removed members' board entries; jobs/sweeper.h), in a slot of its own:
 *   sweeps                    zset    entity id scored by the ms of its last listing: every
 *                                     entity that may hold tombstones. A removal lists its
 *                                     entity (ZADD GT) BEFORE its script runs (a process skips
 *                                     that within half the grace period of its own last
 *                                     listing); the sweeper drops an entry only once the
 *                                     entity's tombstones are all gone and the entry is older than
 *                                     the grace period, and only if its score is still the one
 *                                     it read (sweep_forget.lua). So no crash between the two
 *                                     slots can leave tombstones nobody finds.
 *
 * The re-check of rules members (CONTRACT section 16; jobs/joinsweep.h):
 *   joins                     zset    entity id -> its earliest join:due ms, in a slot of its
 *                                     own: a join lists it (ZADD LT, after its script), the
 *                                     re-check sets it after each batch (its earliest due, or a
 *                                     period on when none is due: dropping it would race a join)
 *                                     and drops it once the entity or its rule is gone, unless
 *                                     a join lowered the score since (joins_forget.lua)
 *
 * Sign-in:
 *   auth:revoked:<r||s hex>   string  "1", expiring when the signature would have (EXAT)
 *   auth:revoked:<address>:<epoch>  the same for every sign-in a contract wallet (EIP-1271)
 *                             accepted over the messages of <epoch> (lowercase 0x address,
 *                             decimal epoch): a Safe ignores bytes past its owners'
 *                             signatures, so no form of the bytes could name them all
 *
 * Entity API keys (CONTRACT section 13), in the entity's slot:
 *   ent:{c-…}:apikeys         hash    <id> -> "<scope>:<creator>:<createdAtMs>:<key hash>:<name>"
 *                                     (scope award or admin; creator the owner's lowercase
 *                                     address; name last, as it may hold ':'), u:<id> ->
 *                                     lastUsedAt ms (to the minute); <id> is the key hash's first
 *                                     24 digits (auth/token.h). At most 20 <id> fields.
 *
 * Webhooks (CONTRACT section 14); an entity's endpoints and their deliveries in its slot:
 *   ent:{c-…}:webhooks        hash    <wid> ("wh-<uuidv4>") -> the endpoint JSON as GET returns
 *                                     it (no secret), "enabled" as it stands;
 *                                     sec:<wid> -> "<secret>" or "<secret> <previous secret>
 *                                     <previous's end, ms>" (whsec_… texts: the previous one signs
 *                                     beside the new until then). At most 10 endpoints
 *   ent:{c-…}:wh:<wid>        hash    one endpoint's delivery state: cursor (the last event id
 *                                     whose delivery was made; absent: the endpoint's creation),
 *                                     cursorN (the cursor's ordinal among the events ever added,
 *                                     XINFO entries-added; known once it caught up: a trim past
 *                                     it is a gap, lua/wh_take.lua),
 *                                     lease (the holding instance's token), leaseUntil (ms),
 *                                     pausedUntil (ms, from a Retry-After), failingSince (ms of
 *                                     the first failure since the last success), bytes (the
 *                                     log's, counted in the entity's byte budget)
 *   ent:{c-…}:wh:<wid>:log    hash    delivery id ("<entity id>:<event id>", the webhook-id) ->
 *                                     the delivery JSON as the API returns it; events trimmed
 *                                     before they were taken: "<entity id>:<cursor>:trimmed"
 *   ent:{c-…}:wh:<wid>:order  zset    delivery ids scored by the ms each was made: newest first
 *                                     is ZREVRANGE; trimmed to WEBHOOK_LOG_MAX and 7 days
 *   ent:{c-…}:wh:<wid>:due    zset    pending delivery ids scored by the ms the next attempt is
 *                                     due; an attempt in flight is due at its deadline plus the
 *                                     lease, so one a dead instance started is tried again
 * Platform endpoints (POST /api/webhooks), in their own slot:
 *   webhooks:{platform}       hash    the same fields as an entity's webhooks hash; per entity, a
 *                                     platform endpoint's deliveries use the shapes above in the
 *                                     entity's slot (ent:{c-…}:wh:<wid>…), made at its first
 *                                     event there (its cursor starts at the endpoint's creation),
 *                                     and no lease there: the platform endpoint's is below
 *   whp:{<wid>}               hash    a platform endpoint's lease (lease, leaseUntil: one
 *                                     instance delivers it for every entity), failingSince (ms
 *                                     of the first failure, any entity's, since the last
 *                                     success); PEXPIRE a week from the last lease
 *   whp:{<wid>}:recent        zset    "<entity id>:<event id>" scored by the ms each delivery was
 *                                     made: the deliveries list across entities (its rows read
 *                                     from each entity's log; trimmed as a log), written just
 *                                     after the take that made them (a crash between the two
 *                                     leaves a delivery made and logged but not listed here)
 *   whp:{<wid>}:wake          zset    entity ids (scores 0) with a delivery due now that the
 *                                     holder may not know of (a retry asked on another
 *                                     instance); the holder pops them at each pass
 * Across entities, in a slot of its own:
 *   webhooks                  zset    all scores 0; "<entity id>:<wid>" per endpoint
 *                                     ("platform:<wid>" for a platform endpoint): where instances
 *                                     find endpoints to lease. Added BEFORE the endpoint is
 *                                     written, removed AFTER it is deleted (or its entity is);
 *                                     an entry whose endpoint does not exist is dropped once
 *                                     older than a grace period
 *
 * Sessions (CONTRACT section 13), every key of one address in its slot:
 *   auth:sess:{<address>}     hash    <id> -> "<expiresAtMs>:<createdAtMs>:<kind>:<token hash>:
 *                                     <revocation id or ->" (kind: c a challenge's, e an epoch
 *                                     signature's, w a contract wallet's), u:<id> -> lastUsedAt
 *                                     (ms, to the minute), a:<id> -> User-Agent (200 at most);
 *                                     <id> is the token hash's first 24 digits (auth/token.h).
 *                                     Expired entries are dropped by the scripts that add and
 *                                     list; PEXPIREAT at the latest expiry, so an address with
 *                                     no live session holds no key
 *   auth:chal:{<address>}:<nonce>  string "<issuedAtMs>", PX 10 minutes: a challenge not yet
 *                                     used; the session that uses it deletes it
 *
 * Per-address limits (CONTRACT section 7), one key per caller in its own slot, touched by
 * rate_limit.lua alone (never in a transaction with another key):
 *   limit:{<address>}         string  "<writes>:<creations>": each limit's theoretical arrival
 *                                     time (GCRA; microseconds since the epoch, Redis's clock;
 *                                     0 unused); PX until the fuller of the two has refilled,
 *                                     so an idle address holds no key */
#ifndef ENTITYD_KEYS_H
#define ENTITYD_KEYS_H

#include <stddef.h>

/* "auth:revoked:" + 128 hex + NUL */
#define KEYS_REVOKED_SIZE (13 + 128 + 1)
#define KEYS_ENTITY_SIZE  80
#define KEYS_ALIAS_SIZE   80

typedef struct entity_keys {
    char entity[KEYS_ENTITY_SIZE], owners[KEYS_ENTITY_SIZE], admins[KEYS_ENTITY_SIZE],
        members[KEYS_ENTITY_SIZE], order[KEYS_ENTITY_SIZE], skills[KEYS_ENTITY_SIZE],
        skill_order[KEYS_ENTITY_SIZE], skill_names[KEYS_ENTITY_SIZE], levels[KEYS_ENTITY_SIZE],
        level_order[KEYS_ENTITY_SIZE], contribs[KEYS_ENTITY_SIZE], events[KEYS_ENTITY_SIZE];
    size_t entity_len, owners_len, admins_len, members_len, order_len, skills_len, skill_order_len,
        skill_names_len, levels_len, level_order_len, contribs_len, events_len;
} entity_keys;

/* Writes the revocation key of a signature's r||s id; returns its length. */
size_t keys_revoked(char out[KEYS_REVOKED_SIZE], const char *revocation_id);
/* "limit:{" + a lowercase address (42) + "}" + NUL */
#define KEYS_LIMIT_SIZE (7 + 42 + 1 + 1)
/* The per-address limit key of a lowercase "0x…" address; returns its length. */
size_t keys_limit(char out[KEYS_LIMIT_SIZE], const char *address);
/* The API keys hash of a validated entity id ("ent:{c-…}:apikeys"); returns its length. */
size_t keys_apikeys(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* An entity's event log, "ent:{<entity id>}:events" (as keys_entity's); returns its length. */
size_t keys_events(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* An entity's webhook endpoints, "ent:{<entity id>}:webhooks"; returns its length. */
size_t keys_webhooks(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* One endpoint's delivery keys, "ent:{<entity id>}:wh:<wid>" + suffix ("", ":log", ":order",
 * ":due"), for a validated entity id and endpoint id; returns its length (0: too long). */
#define KEYS_WEBHOOK_SIZE 128
size_t keys_webhook(char out[KEYS_WEBHOOK_SIZE], const char *entity_id, const char *wid,
                    const char *suffix);
/* A platform endpoint's keys, "whp:{<wid>}" + suffix ("", ":recent", ":wake"); its length
 * (0: too long). */
size_t keys_webhook_platform(char out[KEYS_WEBHOOK_SIZE], const char *wid, const char *suffix);
#define KEYS_WEBHOOKS_ALL      "webhooks"
#define KEYS_WEBHOOKS_PLATFORM "webhooks:{platform}"
/* "auth:sess:{" + a lowercase address (42) + "}" + NUL */
#define KEYS_SESSIONS_SIZE (11 + 42 + 1 + 1)
/* The sessions hash of a lowercase "0x…" address; returns its length. */
size_t keys_sessions(char out[KEYS_SESSIONS_SIZE], const char *address);
/* "auth:chal:{" + address + "}:" + a nonce of at most 32 characters + NUL */
#define KEYS_CHALLENGE_SIZE (11 + 42 + 2 + 32 + 1)
/* The challenge key of a lowercase address and a nonce (at most 32 alphanumerics). */
size_t keys_challenge(char out[KEYS_CHALLENGE_SIZE], const char *address, const char *nonce);
/* Fills every key of the entity `id` (a validated "c-<uuid>"). */
void keys_entity(entity_keys *k, const char *id);
/* The four of them a role check reads (the finds' checks of ~21 entities a page). */
typedef struct entity_role_keys {
    char entity[KEYS_ENTITY_SIZE], owners[KEYS_ENTITY_SIZE], admins[KEYS_ENTITY_SIZE],
        members[KEYS_ENTITY_SIZE];
    size_t entity_len, owners_len, admins_len, members_len;
} entity_role_keys;
void keys_entity_roles(entity_role_keys *k, const char *id);
/* An award's idempotency key: "ent:{<entity id>}:idem:" + a validated key ([A-Za-z0-9_-]{1,64});
 * returns its length. */
#define KEYS_IDEM_SIZE 128
size_t keys_idem(char out[KEYS_IDEM_SIZE], const char *entity_id, const char *key);
/* A member's progression hash, "ent:{<entity id>}:prog:<address>", for a validated lowercase
 * address; returns its length. The scripts build the same name (lua/_prelude.lua, prog_key). */
#define KEYS_PROG_SIZE 128
size_t keys_prog(char out[KEYS_PROG_SIZE], const char *entity_id, const char *address);
/* A leaderboard, "ent:{<entity id>}:lb:xp" or "…:lb:s:<skill id>", for by "xp" or a validated
 * skill id; returns its length (lua/_prelude.lua, lb_key). */
#define KEYS_BOARD_SIZE 128
size_t keys_board(char out[KEYS_BOARD_SIZE], const char *entity_id, const char *by);
/* A board's tombstones, the board's key + ":gone" (lua/_prelude.lua, gone_key); its length. */
size_t keys_board_gone(char out[KEYS_BOARD_SIZE], const char *entity_id, const char *by);
/* The removed members whose skill board entries wait for the sweeper, "ent:{<entity
 * id>}:lb:unswept" (lua/_prelude.lua, unswept_key); its length. */
size_t keys_unswept(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* The skills whose boards are being rebuilt, "ent:{<entity id>}:lb:rebuild:boards"
 * (lua/_prelude.lua, board_rebuild_start); its length. */
size_t keys_board_rebuild(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* The skills whose boards are being rebuilt, "ent:{<entity id>}:lb:rebuild:boards"
 * (lua/_prelude.lua, board_rebuild_start); its length. */
size_t keys_board_rebuild(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* The erasure record of an entity, "ent:{<entity id>}:erasure"; returns its length. */
size_t keys_erasure(char out[KEYS_ENTITY_SIZE], const char *entity_id);
/* The set of erasures not yet finished (one key, its own slot). */
#define KEYS_ERASURES "erasures"
/* A single Redis's shared erasure scan and the ids of the entities it erases (never on a
 * cluster). */
#define KEYS_ERASE_SCAN "erase:scan"
#define KEYS_ERASE_IDS  "erase:ids"
/* An entity's join rule keys, "ent:{<entity id>}:join" + suffix ("", ":due", ":failing");
 * returns its length. */
size_t keys_join(char out[KEYS_ENTITY_SIZE], const char *entity_id, const char *suffix);
/* The entities with rules members to re-check (one key, its own slot). */
#define KEYS_JOINS "joins"
/* The entities whose removed members wait for the sweeper (one key, its own slot). */
#define KEYS_SWEEPS "sweeps"
/* The alias index key of a validated alias; returns its length. */
size_t keys_alias(char out[KEYS_ALIAS_SIZE], const char *alias);

/* A wallet's index keys (find_wallet_*.lua), for a lowercase "0x…" address: meta, any, owner,
 * admin, member, in the order those scripts take them. */
#define KEYS_WALLET_SIZE 64
#define KEYS_WALLET_N    5
typedef struct wallet_keys {
    char key[KEYS_WALLET_N][KEYS_WALLET_SIZE];
    size_t len[KEYS_WALLET_N];
} wallet_keys;
void keys_wallet(wallet_keys *k, const char *address);
/* The directory's keys (find_dir_*.lua): meta, created, names. */
#define KEYS_DIR_META        "dir:{entities}:meta"
#define KEYS_DIR_CREATED     "dir:{entities}:created"
#define KEYS_DIR_NAMES       "dir:{entities}:names"
#define KEYS_BACKFILL_LEASE  "find:backfill:lease"
#define KEYS_BACKFILL_DONE   "find:backfill:done"
#define KEYS_BACKFILL_CURSOR "find:backfill:cursor:"

#endif
