/* config: the one configuration table; defaults, environment, flags and --help all walk it. */
#include "core/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/version.h"
#include "core/workers.h"

enum opt_type { OPT_INT, OPT_STR, OPT_BOOL };

typedef struct opt {
    const char *env; /* environment variable; the flag is its lowercase, dashed twin */
    enum opt_type type;
    size_t offset;
    const char *def;
    int64_t min, max; /* for OPT_INT */
    const char *help;
} opt;

#define OFF(f) offsetof(config, f)

static const opt opts[] = {
    {"PORT", OPT_INT, OFF(port), "8080", 0, 65535, "TCP port to listen on (0 picks a free one)"},
    {"HOST", OPT_STR, OFF(host), "0.0.0.0", 0, 0, "address to listen on"},
    {"REDIS_URL", OPT_STR, OFF(redis_url), "redis://127.0.0.1:6379/0", 0, 0,
     "redis://[:password@]host[:port][/db]"},
    {"REDIS_TIMEOUT_MS", OPT_INT, OFF(redis_timeout_ms), "2000", 1, 600000,
     "per-request Redis deadline; past it the request gets 504"},
    {"AUTH_SECRET", OPT_STR, OFF(auth_secret), "", 0, 0,
     "secret the sign-in nonce derives from (required unless --dev)"},
    {"AUTH_DOMAIN", OPT_STR, OFF(auth_domain), "entityd.local", 0, 0,
     "domain named in the sign-in message"},
    {"AUTH_EPOCH_SECONDS", OPT_INT, OFF(auth_epoch_seconds), "86400", 1, 315360000,
     "length of one sign-in epoch"},
    {"PLATFORM_ADMINS", OPT_STR, OFF(platform_admins), "", 0, 0,
     "comma-separated addresses acting as owners everywhere"},
    {"ENTITY_CREATION", OPT_STR, OFF(entity_creation), "open", 0, 0,
     "open (any signed caller) or platform (platform admins only)"},
    {"MAX_BODY_BYTES", OPT_INT, OFF(max_body_bytes), "1048576", 0, 1073741824,
     "largest request body accepted (413 beyond)"},
    {"LOG_LEVEL", OPT_STR, OFF(log_level), "info", 0, 0, "debug, info, warn or error"},
    {"MAX_CONNECTIONS", OPT_INT, OFF(max_connections), "16384", 1, 1000000,
     "open connections beyond which new ones get 503 and are closed"},
    {"HEADER_TIMEOUT_MS", OPT_INT, OFF(header_timeout_ms), "10000", 1, 3600000,
     "a request's header block must arrive within this"},
    {"IDLE_TIMEOUT_MS", OPT_INT, OFF(idle_timeout_ms), "60000", 1, 3600000,
     "a keep-alive connection is closed this long after its last answer was fully written, "
     "unless a request began"},
    {"WRITE_TIMEOUT_MS", OPT_INT, OFF(write_timeout_ms), "30000", 1, 3600000,
     "queued answers must reach the client within this, else the connection is closed"},
    {"WRITE_BUFFER_BYTES", OPT_INT, OFF(write_buffer_bytes), "262144", 4096, 1073741824,
     "answers queued per connection beyond which its pipelined requests wait"},
    {"SHUTDOWN_TIMEOUT_MS", OPT_INT, OFF(shutdown_timeout_ms), "10000", 0, 3600000,
     "on SIGTERM, how long the drain may last: requests in flight, and those arriving on open "
     "connections, are answered (Connection: close) until then"},
    {"SHUTDOWN_IDLE_GRACE_MS", OPT_INT, OFF(shutdown_idle_grace_ms), "1000", 0, 3600000,
     "on SIGTERM, how long a connection idle since before the signal stays open for a request "
     "already on its way; then it is reset"},
    {"STARTUP_WAIT_MS", OPT_INT, OFF(startup_wait_ms), "2000", 0, 600000,
     "at start, the port opens once Redis is ready, or after this long without it (then 503 "
     "while Redis is down)"},
    {"SIG_CACHE_SIZE", OPT_INT, OFF(sig_cache_size), "65536", 0, 16777216,
     "verified signatures kept in memory (0 disables the cache)"},
    {"PAGE_CACHE_SIZE", OPT_INT, OFF(page_cache_size), "256", 0, 65536,
     "users pages kept in memory, each up to 64 KiB (0 disables the cache)"},
    {"READ_CACHE_MB", OPT_INT, OFF(read_cache_mb), "32", 0, 65536,
     "memory for Redis read answers kept until Redis invalidates them (0 disables)"},
    {"FIND_CACHE_MB", OPT_INT, OFF(find_cache_mb), "8", 0, 65536,
     "memory for rendered find pages (a wallet's entities, the directory), each kept until a "
     "key it read changes; needs the read cache (0 disables)"},
    {"REDIS_MAX_PENDING", OPT_INT, OFF(redis_max_pending), "4096", 1, 1000000,
     "Redis commands in flight beyond which requests get 503 at once"},
    {"LOG_BUFFER_BYTES", OPT_INT, OFF(log_buffer_bytes), "1048576", 4096, 1073741824,
     "log lines held while stdout is slow; lines beyond are dropped and counted"},
    {"EVENTS_MAX", OPT_INT, OFF(events_max), "100000", 100, 100000000,
     "events kept per entity (older ones are trimmed, approximately)"},
    {"EVENTS_MAX_BYTES", OPT_INT, OFF(events_max_bytes), "67108864", 4096, 1099511627776,
     "bytes of events kept per entity (the oldest are trimmed, approximately: within 1/16)"},
    {"SKILLTREE_MAX_BYTES", OPT_INT, OFF(skilltree_max_bytes), "4194304", 1024, 1073741824,
     "bytes of an entity's skill tree (skills and levels as JSON); a write growing it past "
     "this is 409"},
    {"RATE_WRITES_PER_MINUTE", OPT_INT, OFF(rate_writes_per_minute), "120", 0, 1000000000,
     "signed writes per address per minute, shared by all instances (0 turns it off)"},
    {"RATE_LEASE_MS", OPT_INT, OFF(rate_lease_ms), "250", 0, 10000,
     "how long a process may hold write-budget units taken ahead from Redis (0: none taken ahead)"},
    {"RATE_LEASE_ADDRESSES", OPT_INT, OFF(rate_lease_addresses), "4096", 1, 1000000,
     "addresses a process keeps a write-budget lease for at once; others charge per write"},
    {"ENTITY_CREATE_PER_DAY", OPT_INT, OFF(entity_create_per_day), "20", 0, 1000000,
     "entities one address may create per day, shared by all instances (0 turns it off)"},
    {"CORS_ORIGINS", OPT_STR, OFF(cors_origins), "", 0, 0,
     "comma-separated browser origins allowed to call, or * (empty: no CORS headers)"},
    {"MAX_MEMBERS_PER_ENTITY", OPT_INT, OFF(max_members_per_entity), "1000000", 1, 1000000000,
     "members one entity may hold; a force-add past it gets 409"},
    {"MAX_ADMINS_PER_ENTITY", OPT_INT, OFF(max_admins_per_entity), "1000", 1, 1000000,
     "admins one entity may hold; an add past it gets 409"},
    {"MAX_SKILLS_PER_ENTITY", OPT_INT, OFF(max_skills_per_entity), "1000", 1, 1000000,
     "skills one entity may hold; an add past it gets 409"},
    {"MAX_LEVELS_PER_ENTITY", OPT_INT, OFF(max_levels_per_entity), "1000", 1, 1000000,
     "levels one entity may hold; creating one past it gets 409"},
    {"CONTRIBUTIONS_PER_MEMBER_PER_MINUTE", OPT_INT, OFF(contributions_per_member_per_minute),
     "600", 0, 1000000000,
     "contributions one member of an entity may receive per minute; past it 429 (0: no limit)"},
    {"WORKERS", OPT_STR, OFF(workers), "1", 0, 0,
     "processes serving the port, each with its own loop (auto: one per CPU)"},
    {"REDIS_CLUSTER_NODES", OPT_STR, OFF(redis_cluster_nodes), "", 0, 0,
     "host:port[,host:port...] seeds of a Redis Cluster; when set, cluster mode (REDIS_URL "
     "unused)"},
    {"REDIS_SENTINELS", OPT_STR, OFF(redis_sentinels), "", 0, 0,
     "host:port[,host:port...] Redis Sentinels; when set, sentinel mode (REDIS_URL unused)"},
    {"REDIS_SENTINEL_MASTER", OPT_STR, OFF(redis_sentinel_master), "", 0, 0,
     "the master name the sentinels monitor (sentinel mode)"},
    {"REDIS_USERNAME", OPT_STR, OFF(redis_username), "", 0, 0,
     "ACL user for every cluster node or the sentinels' primary"},
    {"REDIS_PASSWORD", OPT_STR, OFF(redis_password), "", 0, 0,
     "password for every cluster node or the sentinels' primary"},
    {"ATTESTATION_KEY_FILE", OPT_STR, OFF(attestation_key_file), "", 0, 0,
     "file holding the secp256k1 key that signs level attestations (64 hex digits, mode 0600 "
     "or 0400); none: attestations are off (--dev: a fixed, public key)"},
    {"ATTESTATION_CHAIN_ID", OPT_INT, OFF(attestation_chain_id), "1", 1, 9007199254740991,
     "chain id of the attestations' EIP-712 domain"},
    {"ATTESTATION_EAS_ADDRESS", OPT_STR, OFF(attestation_eas_address),
     "0xA1207F3BBa224E2c9c3c6D5aF63D0eb1582Ce587", 0, 0,
     "the EAS contract of the attestations' EIP-712 domain"},
    {"ATTESTATION_EAS_VERSION", OPT_STR, OFF(attestation_eas_version), "0.26", 0, 0,
     "that EAS contract's version (its EIP-712 domain version)"},
    {"ATTESTATION_CACHE_SIZE", OPT_INT, OFF(attestation_cache_size), "16384", 0, 16777216,
     "signed attestations kept in memory (0 disables the cache)"},
    {"ERASE_STEP_KEYS", OPT_INT, OFF(erase_step_keys), "125", 10, 100000,
     "keys one step of a deleted entity's erasure scans (SCAN COUNT; on Redis Cluster, "
     "unlinks from its slot's list); bounds each step's time"},
    {"ERASE_PAUSE_MS", OPT_INT, OFF(erase_pause_ms), "20", 0, 60000,
     "pause after a step of an erasure that unlinked keys, leaving Redis to the requests"},
    {"ERASE_POLL_MS", OPT_INT, OFF(erase_poll_ms), "1000", 10, 3600000,
     "how often each instance looks for deleted entities to erase"},
    {"ERASE_LEASE_MS", OPT_INT, OFF(erase_lease_ms), "10000", 100, 3600000,
     "an erasure's lease: after a crash, another instance takes over once it has run out"},
    {"SWEEP_STEP_ENTRIES", OPT_INT, OFF(sweep_step_entries), "128", 1, 1000,
     "removed members' board entries one step of the sweeper takes off, with their "
     "tombstones; bounds each step's time"},
    {"SWEEP_PAUSE_MS", OPT_INT, OFF(sweep_pause_ms), "2", 0, 60000,
     "least pause between two sweeper steps; the pause is at least 3 times the last step's "
     "round trip, so the sweeper backs off when Redis is busy"},
    {"SWEEP_POLL_MS", OPT_INT, OFF(sweep_poll_ms), "1000", 10, 3600000,
     "how often each instance looks for removed members whose board entries wait for the "
     "sweeper"},
    {"BOARD_REBUILD_LEASE_MS", OPT_INT, OFF(board_rebuild_lease_ms), "10000", 50, 3600000,
     "a board rebuild's lease (after a move in a skill tree): after a crash, another instance "
     "takes the rebuild over once it has run out"},
    {"BOARD_REBUILD_STEP_ENTRIES", OPT_INT, OFF(board_rebuild_step_entries), "32", 4, 100000,
     "board entries one step of a board rebuild may set (2 per board a member is rebuilt on): "
     "bounds each step's time in Redis"},
    {"BOARD_REBUILD_PAUSE_FACTOR", OPT_INT, OFF(board_rebuild_pause_factor), "15", 0, 1000,
     "the pause after a rebuild's step is this many times the step's own time in Redis: the "
     "rebuild takes about 1 / (1 + this) of Redis's time, so reads beside it keep their pace"},
    {"JOIN_RECHECK_SECONDS", OPT_INT, OFF(join_recheck_seconds), "3600", 1, 31536000,
     "every member who joined by an entity's join rule is checked again this often"},
    {"JOIN_GRACE_SECONDS", OPT_INT, OFF(join_grace_seconds), "86400", 0, 31536000,
     "a rules member failing its checks since t is removed at the first failing check at or "
     "after t + this"},
    {"JOIN_POLL_MS", OPT_INT, OFF(join_poll_ms), "60000", 10, 31536000000LL,
     "the re-check of rules members looks at the registry of entities at least this often "
     "(and at most once a period), its first look this long after start"},
    {"JOIN_LEASE_MS", OPT_INT, OFF(join_lease_ms), "10000", 1000, 3600000,
     "an entity's re-check lease, renewed at each batch: it must cover one batch's evaluation "
     "(ETH_RPC_TIMEOUT_MS and the wait for the RPC cap); a dead instance's entities go on to "
     "another once it runs out"},
    {"JOIN_CHECK_CACHE_MS", OPT_INT, OFF(join_check_cache_ms), "5000", 0, 3600000,
     "a join rule check's answer is kept this long per (entity, address) in the process (0: "
     "not kept)"},
    {"SWEEP_PAUSED", OPT_BOOL, OFF(sweep_paused), "false", 0, 0,
     "hold the sweeper off (tests, maintenance): removed members' entries stay tombstoned, and "
     "every read stays exact"},
    {"DEV", OPT_BOOL, OFF(dev), "false", 0, 0,
     "development mode: a fixed AUTH_SECRET when none is set, and a fixed, public attestation "
     "key without ATTESTATION_KEY_FILE (never in production)"},
    {"AUTH_URI", OPT_STR, OFF(auth_uri), "", 0, 0,
     "URI line of the SIWE sign-in message (none: https://AUTH_DOMAIN)"},
    {"AUTH_CHAIN_ID", OPT_INT, OFF(auth_chain_id), "1", 1, INT64_MAX,
     "Chain ID line of the SIWE sign-in message"},
    {"ETH_RPC_URL", OPT_STR, OFF(eth_rpc_url), "", 0, 0,
     "Ethereum JSON-RPC endpoint (http or https) checking contract-wallet signatures "
     "(EIP-1271); none: such signatures are refused"},
    {"ETH_RPC_TIMEOUT_MS", OPT_INT, OFF(eth_rpc_timeout_ms), "2000", 1, 600000,
     "deadline of one EIP-1271 check; past it that sign-in gets 503"},
    {"ETH_RPC_MAX_INFLIGHT", OPT_INT, OFF(eth_rpc_max_inflight), "64", 1, 100000,
     "EIP-1271 checks in flight at once; beyond it a new contract signature gets 503"},
    {"ETH_RPC_CODE_TTL_SECONDS", OPT_INT, OFF(eth_rpc_code_ttl_seconds), "3600", 1, 604800,
     "how long an address's code (eth_getCode: a contract or none) is remembered; an address "
     "without code is refused with no eth_call"},
    {"ETH_RPC_MAX_PER_SECOND", OPT_INT, OFF(eth_rpc_max_per_second), "50", 1, 1000000,
     "EIP-1271 checks per second of addresses not known to hold code (each one eth_getCode); "
     "past it such a sign-in gets 503 with Retry-After, known contracts are still checked"},
    {"ETH_RPC_URLS", OPT_STR, OFF(eth_rpc_urls), "", 0, 0,
     "chainId=url[,chainId=url...]: the JSON-RPC endpoints join rules read (ETH_RPC_URL counts "
     "as AUTH_CHAIN_ID's; naming that chain with another URL refuses to start)"},
    {"MULTICALL3_ADDRESS", OPT_STR, OFF(multicall3_address),
     "0xcA11bde05977b3631167028862bE2a173976CA11", 0, 0,
     "the Multicall3 contract (aggregate3, getEthBalance, getBlockNumber) join rules' reads "
     "are batched through, on every chain"},
    {"JOIN_RPC_MAX_PER_SECOND", OPT_INT, OFF(join_rpc_max_per_second), "20", 1, 1000000,
     "join rules' RPC calls per second, per chain and instance (apart from sign-in's); past it a "
     "check or join gets 503 with Retry-After, the re-check waits"},
    {"SESSION_TTL_SECONDS", OPT_INT, OFF(session_ttl_seconds), "604800", 60, 31536000,
     "life of a session made from a challenge (POST /api/auth/session with a nonce)"},
    {"SESSION_CONTRACT_TTL_SECONDS", OPT_INT, OFF(session_contract_ttl_seconds), "86400", 1,
     31536000, "longest life of a contract wallet's (EIP-1271) session"},
    {"SESSIONS_PER_ADDRESS", OPT_INT, OFF(sessions_per_address), "50", 1, 10000,
     "live sessions per address; a new one past it ends the oldest"},
    {"SESSION_COOKIE_SAMESITE", OPT_STR, OFF(session_cookie_samesite), "Lax", 0, 0,
     "SameSite of the session cookie: Lax, Strict or None"},
    {"CHALLENGES_PER_SECOND", OPT_INT, OFF(challenges_per_second), "100", 1, 1000000,
     "sign-in challenges one process makes per second (a burst of as many); past it 429: "
     "bounds what strangers can store, 10 minutes each"},
    {"WEBHOOK_ALLOW_HTTP", OPT_BOOL, OFF(webhook_allow_http), "false", 0, 0,
     "webhook endpoints may be http:// URLs too (https only otherwise)"},
    {"WEBHOOK_ALLOW_PRIVATE", OPT_BOOL, OFF(webhook_allow_private), "false", 0, 0,
     "webhook endpoints may reach loopback, private and other non-public addresses (tests, "
     "private networks only)"},
    {"WEBHOOK_TIMEOUT_MS", OPT_INT, OFF(webhook_timeout_ms), "5000", 100, 60000,
     "a delivery attempt's deadline: a 2xx within it is success"},
    {"WEBHOOK_INFLIGHT", OPT_INT, OFF(webhook_inflight), "1", 1, 256,
     "deliveries in flight per endpoint (each one started in event order)"},
    {"WEBHOOK_RETRY_SCHEDULE", OPT_STR, OFF(webhook_retry_schedule), "5s,5m,30m,2h,5h,10h,10h", 0,
     0,
     "waits before each retry of a failed delivery (s, m or h; +-20% jitter); past the last "
     "the delivery is failed"},
    {"WEBHOOK_DISABLE_AFTER_SECONDS", OPT_INT, OFF(webhook_disable_after_seconds), "432000", 1,
     31536000, "an endpoint failing with no success this long is disabled"},
    {"WEBHOOK_LEASE_MS", OPT_INT, OFF(webhook_lease_ms), "10000", 500, 600000,
     "how long an instance holds an endpoint's deliveries without renewing: another takes "
     "over a dead one's after it"},
    {"WEBHOOK_POLL_MS", OPT_INT, OFF(webhook_poll_ms), "1000", 10, 60000,
     "how often an instance looks for endpoints to lease and retries that are due"},
    {"WEBHOOK_LOG_MAX", OPT_INT, OFF(webhook_log_max), "10000", 10, 1000000,
     "deliveries kept in an endpoint's log (and at most 7 days)"},
    {"STREAM_HEARTBEAT_SECONDS", OPT_INT, OFF(stream_heartbeat_seconds), "15", 1, 3600,
     "a comment line on an event stream this often"},
    {"STREAM_BUFFER_BYTES", OPT_INT, OFF(stream_buffer_bytes), "1048576", 1024, 1073741824,
     "an event stream whose client is further behind than this is closed (it resumes with "
     "Last-Event-ID)"},
    {"STREAM_SEND_THREADS", OPT_INT, OFF(stream_send_threads), "-1", -1, 16,
     "threads that share the sends of one event to many streams with the loop (it waits for "
     "them); -1: one fewer than the cores, at most 3; 0: the loop alone"},
    {"MAX_STREAMS", OPT_INT, OFF(max_streams), "10000", 0, 1000000,
     "open event streams per instance; past it 503"},
    {"STREAMS_PER_CALLER", OPT_INT, OFF(streams_per_caller), "10", 1, 100000,
     "open event streams per caller and instance; past it 429"},
    {"FIND_REPAIR_GRACE_MS", OPT_INT, OFF(find_repair_grace_ms), "60000", 100, 86400000,
     "a wallet or directory index entry added this recently is never dropped by a read's repair"},
    {"FIND_BACKFILL_BATCH", OPT_INT, OFF(find_backfill_batch), "500", 1, 100000,
     "entities one step of the index backfill (of data from earlier releases) indexes"},
};

#define NOPTS (sizeof opts / sizeof opts[0])

static void flag_name(const opt *o, char *out, size_t len)
{
    size_t i = 0;
    for (const char *p = o->env; *p && i + 1 < len; p++)
        out[i++] = *p == '_' ? '-' : (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
    out[i] = '\0';
}

static int set_value(config *cfg, const opt *o, const char *v, char *err, size_t err_len)
{
    void *field = (char *)cfg + o->offset;
    switch (o->type) {
    case OPT_INT: {
        char *end;
        errno = 0;
        long long n = strtoll(v, &end, 10);
        if (errno || end == v || *end != '\0' || n < o->min || n > o->max) {
            snprintf(err, err_len, "%s must be an integer from %lld to %lld, not \"%s\"", o->env,
                     (long long)o->min, (long long)o->max, v);
            return -1;
        }
        *(int64_t *)field = n;
        return 0;
    }
    case OPT_STR: {
        char *s = strdup(v);
        if (!s) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        free(*(char **)field);
        *(char **)field = s;
        return 0;
    }
    case OPT_BOOL:
        if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) {
            *(bool *)field = true;
        } else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no") || !*v) {
            *(bool *)field = false;
        } else {
            snprintf(err, err_len, "%s must be true or false, not \"%s\"", o->env, v);
            return -1;
        }
        return 0;
    }
    return -1;
}

static bool is_address(const char *s)
{
    if (strlen(s) != 42 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
        return false;
    for (int i = 2; i < 42; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i]))
            return false;
    return true;
}

static bool is_http_url(const char *s, size_t len)
{
    return (len > 7 && !strncasecmp(s, "http://", 7)) ||
           (len > 8 && !strncasecmp(s, "https://", 8));
}

/* Adds (chain, url) to out[*n]: a chain named twice is refused even with the same URL, as one
 * of the two is most likely a typo for another chain. */
static int rpc_urls_add(config_rpc_url *out, int *n, uint64_t chain, const char *url, size_t len,
                        char *err, size_t err_len)
{
    for (int i = 0; i < *n; i++)
        if (out[i].chain == chain) {
            snprintf(err, err_len, "ETH_RPC_URLS names chain %llu twice",
                     (unsigned long long)chain);
            return -1;
        }
    if (*n == CONFIG_RPC_URLS_MAX) {
        snprintf(err, err_len, "ETH_RPC_URLS and ETH_RPC_URL name more than %d chains",
                 CONFIG_RPC_URLS_MAX);
        return -1;
    }
    out[(*n)++] = (config_rpc_url){.chain = chain, .url = url, .len = len};
    return 0;
}

int config_rpc_urls(const config *cfg, config_rpc_url out[CONFIG_RPC_URLS_MAX], char *err,
                    size_t err_len)
{
    int n = 0;
    const char *p = cfg->eth_rpc_urls ? cfg->eth_rpc_urls : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t item = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', item);
        char *num_end;
        errno = 0;
        unsigned long long chain = strtoull(p, &num_end, 10);
        if (!eq || num_end != eq || p[0] < '0' || p[0] > '9' || errno || chain == 0 ||
            chain > INT64_MAX || !is_http_url(eq + 1, item - (size_t)(eq + 1 - p))) {
            /* The entry may hold credentials: say which one, never what it holds. */
            snprintf(err, err_len,
                     "ETH_RPC_URLS entry %d must be chainId=url (a chain ID from 1, an http:// "
                     "or https:// URL; entries separated by commas)",
                     n + 1);
            return -1;
        }
        if (rpc_urls_add(out, &n, chain, eq + 1, item - (size_t)(eq + 1 - p), err, err_len) < 0)
            return -1;
        p += item;
        if (*p == ',' && !*++p) {
            snprintf(err, err_len, "ETH_RPC_URLS must not end with a comma");
            return -1;
        }
    }
    const char *auth = cfg->eth_rpc_url ? cfg->eth_rpc_url : "";
    if (!*auth)
        return n;
    uint64_t auth_chain = (uint64_t)cfg->auth_chain_id;
    for (int i = 0; i < n; i++)
        if (out[i].chain == auth_chain) {
            if (out[i].len != strlen(auth) || memcmp(out[i].url, auth, out[i].len) != 0) {
                snprintf(err, err_len,
                         "ETH_RPC_URL and ETH_RPC_URLS name chain %llu (AUTH_CHAIN_ID) with "
                         "different URLs",
                         (unsigned long long)auth_chain);
                return -1;
            }
            return n;
        }
    if (rpc_urls_add(out, &n, auth_chain, auth, strlen(auth), err, err_len) < 0)
        return -1;
    return n;
}

static int validate(const config *cfg, char *err, size_t err_len)
{
    if (strcmp(cfg->entity_creation, "open") && strcmp(cfg->entity_creation, "platform")) {
        snprintf(err, err_len, "ENTITY_CREATION must be open or platform");
        return -1;
    }
    if (strcmp(cfg->log_level, "debug") && strcmp(cfg->log_level, "info") &&
        strcmp(cfg->log_level, "warn") && strcmp(cfg->log_level, "error")) {
        snprintf(err, err_len, "LOG_LEVEL must be debug, info, warn or error");
        return -1;
    }
    if (workers_parse(cfg->workers) < 0) {
        snprintf(err, err_len, "WORKERS must be auto or an integer from 1 to %d", WORKERS_MAX);
        return -1;
    }
    if (*cfg->eth_rpc_url && strncasecmp(cfg->eth_rpc_url, "http://", 7) != 0 &&
        strncasecmp(cfg->eth_rpc_url, "https://", 8) != 0) {
        /* The URL may hold credentials: never echo it. */
        snprintf(err, err_len, "ETH_RPC_URL must start with http:// or https://");
        return -1;
    }
    config_rpc_url urls[CONFIG_RPC_URLS_MAX];
    if (config_rpc_urls(cfg, urls, err, err_len) < 0)
        return -1;
    if (!is_address(cfg->multicall3_address)) {
        snprintf(err, err_len, "MULTICALL3_ADDRESS must be 0x and 40 hex digits");
        return -1;
    }
    if (strcmp(cfg->session_cookie_samesite, "Lax") != 0 &&
        strcmp(cfg->session_cookie_samesite, "Strict") != 0 &&
        strcmp(cfg->session_cookie_samesite, "None") != 0) {
        snprintf(err, err_len, "SESSION_COOKIE_SAMESITE must be Lax, Strict or None");
        return -1;
    }
    int64_t schedule[CONFIG_SCHEDULE_MAX];
    if (config_schedule_parse(cfg->webhook_retry_schedule, schedule, CONFIG_SCHEDULE_MAX) < 0) {
        snprintf(err, err_len,
                 "WEBHOOK_RETRY_SCHEDULE must be 1 to %d durations like 5s,5m,2h (comma-separated)",
                 CONFIG_SCHEDULE_MAX);
        return -1;
    }
    if (!*cfg->auth_secret && !cfg->dev) {
        snprintf(err, err_len, "AUTH_SECRET is required (or run with --dev for development)");
        return -1;
    }
    return 0;
}

int config_schedule_parse(const char *text, int64_t *ms, int max)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > 1000000 || n == max || *p < '0' || *p > '9')
            return -1;
        int64_t unit = *end == 's' ? 1000 : *end == 'm' ? 60000 : *end == 'h' ? 3600000 : 0;
        if (!unit)
            return -1;
        ms[n++] = (int64_t)v * unit;
        p = end + 1;
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            return -1;
    }
    return n ? n : -1;
}

void config_print_help(FILE *out)
{
    fprintf(out,
            "entityd %s: organizations, members, skills and levels for wallet-signed "
            "callers\n\nusage: entityd [--flag value | --flag=value]...\n\n"
            "Each setting is an environment variable and a flag (the flag wins):\n\n",
            ENTITYD_VERSION);
    for (size_t i = 0; i < NOPTS; i++) {
        char flag[64];
        flag_name(&opts[i], flag, sizeof flag);
        fprintf(out, "  --%-22s %-20s %s (default: %s)\n", flag, opts[i].env, opts[i].help,
                *opts[i].def ? opts[i].def : "none");
    }
    fprintf(out, "\n  --help                  this text\n  --version               print the "
                 "version\n\nUV_THREADPOOL_SIZE (libuv's own) sets the signature-check threads.\n");
}

int config_load(config *cfg, int argc, char **argv, char *err, size_t err_len)
{
    memset(cfg, 0, sizeof *cfg);
    /* --help and --version answer even when the environment holds a bad value. */
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            config_print_help(stdout);
            return CONFIG_EXIT_OK;
        }
        if (!strcmp(argv[a], "--version")) {
            printf("entityd %s\n", ENTITYD_VERSION);
            return CONFIG_EXIT_OK;
        }
    }
    for (size_t i = 0; i < NOPTS; i++)
        if (set_value(cfg, &opts[i], opts[i].def, err, err_len) != 0)
            return CONFIG_EINVALID;
    for (size_t i = 0; i < NOPTS; i++) {
        const char *v = getenv(opts[i].env);
        if (v && set_value(cfg, &opts[i], v, err, err_len) != 0)
            return CONFIG_EINVALID;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(err, err_len, "unexpected argument \"%s\" (see --help)", arg);
            return CONFIG_EINVALID;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t name_len = eq ? (size_t)(eq - name) : strlen(name);
        const opt *o = NULL;
        for (size_t i = 0; i < NOPTS && !o; i++) {
            char flag[64];
            flag_name(&opts[i], flag, sizeof flag);
            if (strlen(flag) == name_len && !strncmp(flag, name, name_len))
                o = &opts[i];
        }
        if (!o) {
            snprintf(err, err_len, "unknown flag \"%s\" (see --help)", arg);
            return CONFIG_EINVALID;
        }
        const char *v;
        if (eq)
            v = eq + 1;
        else if (o->type == OPT_BOOL)
            v = "true";
        else if (a + 1 < argc)
            v = argv[++a];
        else {
            snprintf(err, err_len, "flag \"%s\" needs a value", arg);
            return CONFIG_EINVALID;
        }
        if (set_value(cfg, o, v, err, err_len) != 0)
            return CONFIG_EINVALID;
    }
    return validate(cfg, err, err_len) == 0 ? CONFIG_OK : CONFIG_EINVALID;
}

void config_free(config *cfg)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (opts[i].type == OPT_STR) {
            char **field = (char **)((char *)cfg + opts[i].offset);
            free(*field);
            *field = NULL;
        }
}

const char *config_env_name(size_t i)
{
    return i < sizeof opts / sizeof opts[0] ? opts[i].env : NULL;
}
