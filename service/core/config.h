/* config: the one configuration table, read from environment variables and flags. */
#ifndef ENTITYD_CONFIG_H
#define ENTITYD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct config {
    int64_t port;
    char *host;
    char *redis_url;
    int64_t redis_timeout_ms;
    char *auth_secret;
    char *auth_domain;
    int64_t auth_epoch_seconds;
    char *platform_admins;
    char *entity_creation;
    int64_t max_body_bytes;
    char *log_level;
    int64_t max_connections;
    int64_t header_timeout_ms;
    int64_t idle_timeout_ms;
    int64_t write_timeout_ms;
    int64_t write_buffer_bytes;
    int64_t shutdown_timeout_ms;
    int64_t shutdown_idle_grace_ms;
    int64_t startup_wait_ms;
    int64_t sig_cache_size;
    int64_t page_cache_size;
    int64_t read_cache_mb;
    int64_t find_cache_mb;
    int64_t redis_max_pending;
    int64_t log_buffer_bytes;
    int64_t events_max;
    int64_t events_max_bytes;       /* an entity's events, in bytes (lua/_prelude.lua, emit) */
    int64_t skilltree_max_bytes;    /* an entity's stored skill tree, in bytes */
    int64_t rate_writes_per_minute; /* 0: no write budget */
    int64_t entity_create_per_day;  /* 0: no creation quota */
    int64_t rate_lease_ms;          /* 0: every write charges Redis for its own unit */
    int64_t rate_lease_addresses;   /* addresses with a lease at once, per process */
    char *cors_origins;             /* "": no CORS headers at all */
    /* What one entity may hold (checked inside its write scripts) */
    int64_t max_members_per_entity;
    int64_t max_admins_per_entity;
    int64_t max_skills_per_entity;
    int64_t max_levels_per_entity;
    int64_t contributions_per_member_per_minute; /* 0: no limit */
    char *workers; /* WORKERS as given: "auto" or a count (workers_parse) */
    char *redis_cluster_nodes;
    char *redis_username;
    char *redis_password;
    char *redis_sentinels;
    char *redis_sentinel_master;
    /* Level attestations (CONTRACT §10); the key file "": off, unless dev */
    char *attestation_key_file;
    int64_t attestation_chain_id;
    char *attestation_eas_address;
    char *attestation_eas_version;
    int64_t attestation_cache_size;
    /* The background erasure of deleted entities (jobs/erasure.h) */
    int64_t erase_step_keys;
    int64_t erase_pause_ms;
    int64_t erase_poll_ms;
    int64_t erase_lease_ms;
    /* The sweeper of removed members' board entries (jobs/sweeper.h) */
    int64_t sweep_step_entries;
    int64_t sweep_pause_ms;
    int64_t sweep_poll_ms;
    bool sweep_paused;
    int64_t join_recheck_seconds, join_grace_seconds, join_check_cache_ms, join_poll_ms;
    int64_t join_lease_ms; /* an entity's re-check lease, renewed at each batch */
    int64_t board_rebuild_lease_ms;
    int64_t board_rebuild_step_entries; /* entries one rebuild step sets */
    int64_t board_rebuild_pause_factor; /* its pause, in round trips */
    int64_t find_repair_grace_ms;       /* index entries added more recently are never dropped */
    int64_t find_backfill_batch;        /* entities one backfill step indexes */
    bool dev;
    char *auth_uri; /* "": https:// + auth_domain */
    int64_t auth_chain_id;
    char *eth_rpc_url; /* "": contract-wallet signatures are refused */
    int64_t eth_rpc_timeout_ms;
    int64_t eth_rpc_max_inflight;
    int64_t eth_rpc_code_ttl_seconds;
    int64_t eth_rpc_max_per_second;
    /* Join rules' chains (CONTRACT section 16) */
    char *eth_rpc_urls;       /* "chainId=url[,chainId=url…]" (config_rpc_urls) */
    char *multicall3_address; /* "0x" and 40 hex digits */
    int64_t join_rpc_max_per_second;
    /* Sessions (CONTRACT section 13) */
    int64_t session_ttl_seconds;          /* a challenge session's life */
    int64_t session_contract_ttl_seconds; /* a contract wallet's session's longest life */
    int64_t sessions_per_address;         /* live sessions per address; a new one ends the oldest */
    char *session_cookie_samesite;        /* Lax, Strict or None */
    int64_t challenges_per_second;        /* challenges one process makes per second */
    /* Push (CONTRACT section 14): webhooks and event streams */
    bool webhook_allow_http;               /* http:// endpoint URLs too */
    bool webhook_allow_private;            /* no address guard (tests, private networks) */
    int64_t webhook_timeout_ms;            /* one delivery attempt's deadline */
    int64_t webhook_inflight;              /* deliveries in flight per endpoint */
    char *webhook_retry_schedule;          /* "5s,5m,…" (config_schedule_parse) */
    int64_t webhook_disable_after_seconds; /* failing with no success this long: disabled */
    int64_t webhook_lease_ms;              /* an endpoint's delivery lease */
    int64_t webhook_poll_ms;               /* looking for endpoints to lease and work due */
    int64_t webhook_log_max;               /* deliveries kept per endpoint */
    int64_t stream_heartbeat_seconds;      /* a ":" comment on an idle stream */
    int64_t stream_buffer_bytes;           /* a stream further behind is closed */
    int64_t stream_send_threads;           /* threads sharing a fan-out's sends; -1 auto */
    int64_t max_streams;                   /* open streams per instance */
    int64_t streams_per_caller;            /* open streams per caller, per instance */
} config;

enum config_result {
    CONFIG_OK = 0,
    CONFIG_EXIT_OK,  /* --help or --version printed: exit 0 */
    CONFIG_EINVALID, /* a value or flag is wrong: message in err */
};

/* Fills `cfg` from defaults, then the environment, then argv (flags win). On CONFIG_EINVALID a
 * sentence is written to err. Strings in cfg are owned by cfg: release with config_free(). */
int config_load(config *cfg, int argc, char **argv, char *err, size_t err_len);
void config_free(config *cfg);
/* Writes the --help text, generated from the table. */
void config_print_help(FILE *out);
/* WEBHOOK_RETRY_SCHEDULE's durations ("5s,5m,30m,2h,5h,10h,10h": a number and s, m or h each)
 * as milliseconds into ms[max]; returns their count, or -1 when the text is not that (or holds
 * more than max, or none). */
#define CONFIG_SCHEDULE_MAX 32
int config_schedule_parse(const char *text, int64_t *ms, int max);
/* The chains join rules read (CONTRACT section 16): ETH_RPC_URLS's entries, and ETH_RPC_URL as
 * the URL of AUTH_CHAIN_ID. Each url points into cfg's strings (len bytes, not NUL-terminated
 * where it is a list's entry). */
#define CONFIG_RPC_URLS_MAX 8
typedef struct config_rpc_url {
    uint64_t chain;
    const char *url;
    size_t len;
} config_rpc_url;
/* Fills out with the chains of cfg; returns their count, or -1 with a sentence in err (a
 * malformed list, a chain named twice, ETH_RPC_URLS naming AUTH_CHAIN_ID with a URL other than
 * ETH_RPC_URL's, more than CONFIG_RPC_URLS_MAX chains). Never echoes a URL: it may hold
 * credentials. */
int config_rpc_urls(const config *cfg, config_rpc_url out[CONFIG_RPC_URLS_MAX], char *err,
                    size_t err_len);
/* The environment variable of the i-th setting, NULL past the last: what a test harness unsets
 * to start from the defaults whatever its caller's environment holds. */
const char *config_env_name(size_t i);

#endif
