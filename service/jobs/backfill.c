/* backfill: SCAN each primary for entity hashes, a batch per step, and index each entity's
 * owners, admins, members and directory entries (backfill.h). */
#include "jobs/backfill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <uv.h>

#include "core/app.h"
#include "core/buf.h"
#include "core/ids.h"
#include "core/isotime.h"
#include "core/log.h"
#include "core/metrics.h"
#include "crypto/hex.h"
#include "jobs/indexes.h"
#include "redis/cluster.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

#define LEASE_MS       10000
#define RETRY_MS       1000
#define READY_POLL_MS  5
#define CURSOR_DONE    "done"
#define NODE_NAME_SIZE 300

enum backfill_state { BF_IDLE = 0, BF_BUSY, BF_DONE, BF_STOPPED };

typedef struct backfill {
    app *a;
    uv_timer_t timer;
    int state;
    char token[17]; /* this instance's lease value */
    int node;       /* the node being scanned (cluster: its index; else 0) */
    char node_name[NODE_NAME_SIZE];
    char cursor[32]; /* the SCAN cursor the step starts from */
    char next[32];   /* the one SCAN answered */
    size_t pending;  /* the step's commands and scripts unanswered, + 1 while it sends */
    size_t reads;    /* its entity reads unanswered, + 1 while it sends */
    bool failed, running;
    bool cursor_known; /* bf.cursor is the node's stored cursor: the next step needs no GET */
    uint64_t lease_at; /* when the lease was last taken or renewed (loop ms) */
    uint64_t step_started;
    uint64_t entities, steps; /* indexed by this process */
} backfill;

static backfill bf;

static void schedule(uint64_t ms);

static void on_metrics(buf *out, void *ctx)
{
    (void)ctx;
    metrics_counter(out, "entityd_find_backfill_entities_total",
                    "Entities of earlier releases this process indexed for finding (backfill)",
                    bf.entities);
    metrics_counter(out, "entityd_find_backfill_steps_total",
                    "Backfill steps (one SCAN batch each) this process completed", bf.steps);
    metrics_gauge(out, "entityd_find_backfill_running",
                  "1 while this process holds the backfill lease and works", bf.running ? 1 : 0);
    metrics_gauge(out, "entityd_find_backfill_done",
                  "1 once the backfill is known complete for the deployment",
                  bf.state == BF_DONE ? 1 : 0);
}

static void log_progress(const char *what)
{
    buf *l = log_begin(LOG_INFO, what);
    if (l) {
        log_str(l, "node", bf.node_name);
        log_str(l, "cursor", bf.cursor);
        log_int(l, "entities", (int64_t)bf.entities);
        log_int(l, "steps", (int64_t)bf.steps);
        log_end(l);
    }
}

/* Sends one command where the step's SCAN goes: the node in cluster mode, else the store. */
static void send_scan(store_cb cb, int argc, const char **argv, const size_t *lens)
{
    if (store_cluster_mode(bf.a->store))
        cluster_node_control(store_cluster(bf.a->store), bf.node, cb, NULL, argc, argv, lens);
    else
        store_command(bf.a->store, cb, NULL, argc, argv, lens);
}

static void fail_step(const char *why)
{
    bf.state = BF_IDLE;
    bf.cursor_known = false;
    if (why) {
        buf *l = log_begin(LOG_WARN, "find backfill: step failed, retrying");
        if (l) {
            log_str(l, "reason", why);
            log_end(l);
        }
    }
    schedule(RETRY_MS);
}

static void on_ignored(void *data, int status, redisReply *r)
{
    (void)data, (void)status, (void)r;
}

static void cmd(store_cb cb, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    store_command(bf.a->store, cb, NULL, argc, argv, lens);
}

static bool stopped(void)
{
    return bf.state == BF_STOPPED;
}

/* Whether a callback goes on with its reply: not once the job stopped, nor when the store
 * failed (the step fails then, logged with `why` when given). */
static bool answered(int status, const redisReply *r, const char *why)
{
    if (stopped())
        return false;
    if (status != STORE_OK || !r) {
        fail_step(why);
        return false;
    }
    return true;
}

/* ---- a step's end ---- */

static void scan_node(void);

static void on_cursor_saved(void *data, int status, redisReply *r)
{
    (void)data;
    if (stopped())
        return;
    if (status != STORE_OK || !r || r->type == REDIS_REPLY_ERROR) {
        fail_step("saving the cursor");
        return;
    }
    bf.steps++;
    memcpy(bf.cursor, bf.next, sizeof bf.cursor);
    bf.cursor_known = true;
    if (bf.steps % 50 == 0 || !strcmp(bf.next, "0"))
        log_progress(strcmp(bf.next, "0") ? "find backfill: progress" : "find backfill: node done");
    if (!strcmp(bf.next, "0")) { /* the node is done: on to the next at once */
        bf.cursor_known = false;
        bf.node++;
        scan_node();
        return;
    }
    bf.state = BF_IDLE;
    /* A pause of four times the step's time: the backfill works a fifth of the time at most,
     * so that the requests keep most of Redis and of the machine (at twice, 100,000 entities
     * took Redis 22% of a core and serving fell to 0.71x on 2 CPUs, bench/RESULTS.md). */
    uint64_t took = uv_now(bf.a->loop) - bf.step_started;
    schedule(took > 0 ? 4 * took : 1);
}

static void step_done(void)
{
    if (--bf.pending)
        return;
    if (bf.failed) {
        fail_step("an index write");
        return;
    }
    char key[sizeof KEYS_BACKFILL_CURSOR + NODE_NAME_SIZE];
    snprintf(key, sizeof key, "%s%s", KEYS_BACKFILL_CURSOR, bf.node_name);
    const char *argv[] = {"SET", key, strcmp(bf.next, "0") ? bf.next : CURSOR_DONE};
    cmd(on_cursor_saved, 3, argv);
}

static void on_indexed(void *data, int status, redisReply *r)
{
    (void)data;
    if (stopped())
        return;
    if (status != STORE_OK || !r || r->type == REDIS_REPLY_ERROR)
        bf.failed = true;
    step_done();
}

static int64_t entry_ms(const char *s, size_t len)
{
    int64_t ms = 0;
    if (len < 16)
        return 0;
    for (int i = 0; i < 16; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        ms = ms * 10 + (s[i] - '0');
    }
    return ms;
}

/* The step's wallet adds, sent BACKFILL_WALLETS_PER_CALL at a time (one in cluster mode): a
 * script of a few hundred wallets holds Redis up for about a millisecond. */
#define BACKFILL_WALLETS_PER_CALL 256
static indexes_wallet batch[BACKFILL_WALLETS_PER_CALL];
static char batch_ids[BACKFILL_WALLETS_PER_CALL][IDS_SIZE];
static char batch_since[BACKFILL_WALLETS_PER_CALL][BUF_INT_SIZE];
static size_t nbatch;

static void flush_wallets(void)
{
    if (!nbatch)
        return;
    bf.pending++;
    if (indexes_send_wallets(bf.a->store, batch, nbatch, on_indexed, NULL) != 0) {
        bf.failed = true;
        bf.pending--;
    }
    nbatch = 0;
}

static void add_wallet(const char *id, const char *addr, size_t alen, const char *roles,
                       int64_t since)
{
    if (alen != 42)
        return;
    char a[43];
    memcpy(a, addr, 42);
    a[42] = '\0';
    indexes_wallet *w = &batch[nbatch];
    keys_wallet(&w->k, a);
    snprintf(batch_ids[nbatch], IDS_SIZE, "%s", id);
    batch_since[nbatch][0] = '\0';
    if (since > 0)
        buf_format_int(batch_since[nbatch], since);
    w->id = batch_ids[nbatch];
    w->roles = roles; /* static strings */
    w->since = batch_since[nbatch];
    nbatch++;
    size_t per = store_cluster_mode(bf.a->store) ? 1 : BACKFILL_WALLETS_PER_CALL;
    if (nbatch >= per)
        flush_wallets();
}

/* Once every entity of the step is read, the last wallets go out. */
static void read_done(void)
{
    if (--bf.reads == 0)
        flush_wallets();
}

static bool in_set(const redisReply *set, const char *s, size_t len)
{
    for (size_t i = 0; set->type == REDIS_REPLY_ARRAY && i < set->elements; i++)
        if (set->element[i]->len == len && !memcmp(set->element[i]->str, s, len))
            return true;
    return false;
}

/* {HMGET id createdAt name, SMEMBERS owners, SMEMBERS admins, HGETALL members} of one entity */
static void on_entity(void *data, int status, redisReply *r)
{
    (void)data;
    if (stopped())
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 4) {
        bf.failed = true;
        read_done();
        step_done();
        return;
    }
    const redisReply *h = r->element[0], *owners = r->element[1], *admins = r->element[2],
                     *members = r->element[3];
    if (h->type != REDIS_REPLY_ARRAY || h->elements != 3 ||
        h->element[0]->type != REDIS_REPLY_STRING || h->element[0]->len >= IDS_SIZE) {
        read_done();
        step_done(); /* gone since the SCAN, or not an entity */
        return;
    }
    char id[IDS_SIZE];
    memcpy(id, h->element[0]->str, h->element[0]->len);
    id[h->element[0]->len] = '\0';
    int64_t created = 0;
    if (h->element[1]->type == REDIS_REPLY_STRING)
        isotime_parse(h->element[1]->str, h->element[1]->len, &created);
    /* owners and admins since the creation (the best the stored data tells), members since
     * their addedAt; a wallet in several roles keeps the earliest (find_wallet_add.lua) */
    for (size_t i = 0; owners->type == REDIS_REPLY_ARRAY && i < owners->elements; i++) {
        const redisReply *w = owners->element[i];
        add_wallet(id, w->str, w->len, in_set(admins, w->str, w->len) ? "oa" : "o", created);
    }
    for (size_t i = 0; admins->type == REDIS_REPLY_ARRAY && i < admins->elements; i++) {
        const redisReply *w = admins->element[i];
        if (!in_set(owners, w->str, w->len))
            add_wallet(id, w->str, w->len, "a", created);
    }
    for (size_t i = 0; members->type == REDIS_REPLY_ARRAY && i + 1 < members->elements; i += 2) {
        const redisReply *w = members->element[i], *e = members->element[i + 1];
        add_wallet(id, w->str, w->len, "m", entry_ms(e->str, e->len));
    }
    char folded[INDEXES_NAME_MAX], cr[BUF_INT_SIZE] = "";
    size_t flen = 0;
    if (h->element[2]->type == REDIS_REPLY_STRING)
        flen = indexes_fold(h->element[2]->str, h->element[2]->len, folded);
    if (created > 0)
        buf_format_int(cr, created);
    const char *argv[] = {KEYS_DIR_META, KEYS_DIR_CREATED, KEYS_DIR_NAMES, id, cr, folded};
    size_t lens[] = {strlen(KEYS_DIR_META),
                     strlen(KEYS_DIR_CREATED),
                     strlen(KEYS_DIR_NAMES),
                     strlen(id),
                     strlen(cr),
                     flen};
    bf.pending++;
    store_script(bf.a->store, LUA_FIND_DIR_ADD, on_indexed, NULL, 3, 6, argv, lens);
    bf.entities++;
    read_done();
    step_done();
}

/* ---- a step ---- */

static void on_scan(void *data, int status, redisReply *r)
{
    (void)data;
    if (stopped())
        return;
    if (status != STORE_OK || !r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof bf.next ||
        r->element[1]->type != REDIS_REPLY_ARRAY) {
        fail_step("SCAN");
        return;
    }
    memcpy(bf.next, r->element[0]->str, r->element[0]->len);
    bf.next[r->element[0]->len] = '\0';
    bf.pending = 1;
    bf.reads = 1;
    nbatch = 0;
    bf.failed = false;
    const redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
        const redisReply *k = keys->element[i];
        /* "ent:{c-<uuid>}" */
        if (k->type != REDIS_REPLY_STRING || k->len < 7 || k->str[k->len - 1] != '}' ||
            !ids_valid(k->str + 5, k->len - 6, 'c'))
            continue;
        char id[IDS_SIZE];
        memcpy(id, k->str + 5, k->len - 6);
        id[k->len - 6] = '\0';
        entity_keys ek;
        keys_entity(&ek, id);
        const char *hm[] = {"HMGET", ek.entity, "id", "createdAt", "name"};
        size_t hl[] = {5, ek.entity_len, 2, 9, 4};
        const char *so[] = {"SMEMBERS", ek.owners}, *sa[] = {"SMEMBERS", ek.admins},
                   *hg[] = {"HGETALL", ek.members};
        size_t sol[] = {8, ek.owners_len}, sal[] = {8, ek.admins_len}, hgl[] = {7, ek.members_len};
        store_cmd cmds[] = {{5, hm, hl}, {2, so, sol}, {2, sa, sal}, {2, hg, hgl}};
        bf.pending++;
        bf.reads++;
        store_exec(bf.a->store, on_entity, NULL, 4, cmds);
    }
    read_done();
    step_done();
}

/* SCAN COUNT counts keys looked at, not matches: an entity has about five keys (its hash,
 * owners, members, their order, perhaps an alias), so a step looks at five per entity. */
static void send_step_scan(void)
{
    char count[BUF_INT_SIZE];
    buf_format_int(count, bf.a->cfg.find_backfill_batch * 5);
    const char *argv[] = {"SCAN", bf.cursor, "MATCH", "ent:{c-*}", "COUNT", count, "TYPE", "hash"};
    size_t lens[8];
    for (int i = 0; i < 8; i++)
        lens[i] = strlen(argv[i]);
    send_scan(on_scan, 8, argv, lens);
}

static void on_node_cursor(void *data, int status, redisReply *r)
{
    (void)data;
    if (!answered(status, r, "reading the cursor"))
        return;
    if (r->type == REDIS_REPLY_STRING && !strcmp(r->str, CURSOR_DONE)) {
        bf.node++;
        scan_node();
        return;
    }
    snprintf(bf.cursor, sizeof bf.cursor, "%s",
             r->type == REDIS_REPLY_STRING && r->len < sizeof bf.cursor ? r->str : "0");
    if (bf.steps == 0)
        log_progress(strcmp(bf.cursor, "0") ? "find backfill: resuming"
                                            : "find backfill: scanning");
    send_step_scan();
}

static void on_done_set(void *data, int status, redisReply *r)
{
    (void)data, (void)r;
    if (stopped())
        return;
    if (status != STORE_OK) {
        fail_step("setting the done flag");
        return;
    }
    bf.state = BF_DONE;
    bf.running = false;
    log_progress("find backfill: done");
    const char *argv[] = {"DEL", KEYS_BACKFILL_LEASE};
    cmd(on_ignored, 2, argv);
}

/* The next node with slots whose cursor is not done, from bf.node on. */
static void scan_node(void)
{
    int count = 1;
    bool owns[CLUSTER_MAX_NODES] = {true};
    cluster *cl = store_cluster(bf.a->store);
    if (cl) {
        if (!cluster_owners(cl, owns)) {
            fail_step("the slot map is incomplete");
            return;
        }
        count = cluster_node_count(cl);
    }
    while (bf.node < count && !owns[bf.node])
        bf.node++;
    if (bf.node >= count) {
        const char *argv[] = {"SET", KEYS_BACKFILL_DONE, "1"};
        cmd(on_done_set, 3, argv);
        return;
    }
    if (cl)
        snprintf(bf.node_name, sizeof bf.node_name, "%s:%d", cluster_node_host(cl, bf.node),
                 cluster_node_port(cl, bf.node));
    else
        snprintf(bf.node_name, sizeof bf.node_name, "primary");
    char key[sizeof KEYS_BACKFILL_CURSOR + NODE_NAME_SIZE];
    snprintf(key, sizeof key, "%s%s", KEYS_BACKFILL_CURSOR, bf.node_name);
    const char *argv[] = {"GET", key};
    cmd(on_node_cursor, 2, argv);
}

static void on_lease_owner(void *data, int status, redisReply *r)
{
    (void)data;
    if (stopped())
        return;
    if (status == STORE_OK && r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, bf.token)) {
        /* ours: hold it for another period (a lease lost here only means two instances index
         * the same entities once more, which changes nothing) */
        char px[BUF_INT_SIZE];
        buf_format_int(px, LEASE_MS);
        const char *argv[] = {"PEXPIRE", KEYS_BACKFILL_LEASE, px};
        cmd(on_ignored, 3, argv);
        bf.lease_at = uv_now(bf.a->loop);
        bf.node = 0;
        scan_node();
        return;
    }
    bf.running = false;
    bf.state = BF_IDLE;
    schedule(LEASE_MS / 3); /* another instance works: look again later */
}

static void on_lease(void *data, int status, redisReply *r)
{
    (void)data;
    if (!answered(status, r, NULL))
        return;
    if (r->type == REDIS_REPLY_STATUS) { /* OK: taken */
        if (!bf.running)
            log_progress("find backfill: lease taken");
        bf.running = true;
        bf.lease_at = uv_now(bf.a->loop);
        bf.node = 0;
        scan_node();
        return;
    }
    const char *argv[] = {"GET", KEYS_BACKFILL_LEASE};
    cmd(on_lease_owner, 2, argv);
}

static void on_done_flag(void *data, int status, redisReply *r)
{
    (void)data;
    if (!answered(status, r, NULL))
        return;
    if (r->type == REDIS_REPLY_STRING && !strcmp(r->str, "1")) {
        bf.state = BF_DONE;
        bf.running = false;
        return;
    }
    char px[BUF_INT_SIZE];
    buf_format_int(px, LEASE_MS);
    const char *argv[] = {"SET", KEYS_BACKFILL_LEASE, bf.token, "NX", "PX", px};
    cmd(on_lease, 6, argv);
}

static void on_timer(uv_timer_t *t)
{
    (void)t;
    if (bf.state != BF_IDLE)
        return;
    if (!store_ready(bf.a->store)) {
        /* a timer check only: the first step goes out as soon as the store is ready, not in
         * the middle of the first requests' reads */
        schedule(READY_POLL_MS);
        return;
    }
    bf.state = BF_BUSY;
    bf.step_started = uv_now(bf.a->loop);
    if (bf.running && bf.cursor_known && bf.step_started - bf.lease_at < LEASE_MS / 3) {
        send_step_scan(); /* the lease is ours for a while yet, the cursor known */
        return;
    }
    const char *argv[] = {"GET", KEYS_BACKFILL_DONE};
    cmd(on_done_flag, 2, argv);
}

static void schedule(uint64_t ms)
{
    if (bf.state == BF_STOPPED || bf.state == BF_DONE)
        return;
    uv_timer_start(&bf.timer, on_timer, ms, 0);
}

void backfill_start(app *a)
{
    memset(&bf, 0, sizeof bf);
    bf.a = a;
    uint8_t rnd[8] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        memcpy(rnd, &a, sizeof rnd < sizeof a ? sizeof rnd : sizeof a);
    hex_encode(rnd, sizeof rnd, bf.token);
    bf.token[16] = '\0';
    uv_timer_init(a->loop, &bf.timer);
    metrics_register(on_metrics, NULL);
    schedule(10);
}

void backfill_stop(void)
{
    if (!bf.a)
        return;
    bf.state = BF_STOPPED;
    bf.running = false;
    uv_timer_stop(&bf.timer);
    uv_close((uv_handle_t *)&bf.timer, NULL);
}
