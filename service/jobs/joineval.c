/* joineval: a join rule's value for many addresses (joineval.h). One evaluation is one
 * allocation (its state, the values and the verdicts), freed after its callback; it waits for
 * one Redis read per entity its level and role leaves name and one chain read (rpc/joinread.h:
 * one batch per chain), and answers from a zero timer, so never inside joineval_start. */
#include "jobs/joineval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/isotime.h"
#include "crypto/hex.h"
#include "redis/keys.h"
#include "redis/lua_scripts.h"
#include "redis/store.h"

/* The entities the level and role leaves name: at most one per leaf. */
typedef struct ev_entity {
    struct joineval *ev;
    char id[IDS_SIZE];
    int nlevels;
    const char *level[JOINEVAL_MAX_LEAVES]; /* distinct level ids, into the rule's leaves */
    bool roles;
} ev_entity;

typedef struct joineval {
    uv_timer_t done; /* first: the handle's close frees the whole evaluation */
    joineval_rule r;
    void *tree;
    char (*addrs)[43];
    size_t n;
    joineval_value *v;
    int *verdict;
    int pending;   /* reads not answered yet */
    bool starting; /* inside joineval_start: an answer now must wait for the timer */
    joineval_cb cb;
    void *data;
    joineval_answer a;
    int nentities;
    ev_entity entity[JOINEVAL_MAX_LEAVES];
} joineval;

static const char *const role_names[] = {"owner", "admin", "member"};

static void ev_free(uv_handle_t *h)
{
    joineval *ev = (joineval *)h;
    free(ev->tree);
    free(ev->addrs);
    free(ev->v);
    free(ev->verdict);
    free(ev);
}

static void ev_answer(uv_timer_t *t)
{
    joineval *ev = (joineval *)t;
    int nl = ev->r.leaves;
    int values[JOINEVAL_MAX_LEAVES];
    for (size_t a = 0; a < ev->n; a++) {
        for (int i = 0; i < nl; i++)
            values[i] = ev->v[a * (size_t)nl + (size_t)i].truth;
        ev->verdict[a] = ev->r.judge(ev->tree, values);
    }
    ev->a.naddrs = ev->n;
    ev->a.nleaves = nl;
    ev->a.verdict = ev->verdict;
    ev->a.v = ev->v;
    ev->cb(ev->data, &ev->a);
    uv_close((uv_handle_t *)&ev->done, ev_free);
}

static void ev_settle(joineval *ev)
{
    if (--ev->pending == 0 && !ev->starting)
        uv_timer_start(&ev->done, ev_answer, 0, 0);
}

static void set_error(joineval *ev, int leaf, const char *why)
{
    for (size_t a = 0; a < ev->n; a++) {
        joineval_value *x = &ev->v[a * (size_t)ev->r.leaves + (size_t)leaf];
        x->truth = JOINEVAL_ERROR;
        x->have[0] = '\0';
        x->error = why;
    }
}

static void set_false(joineval *ev, int leaf)
{
    for (size_t a = 0; a < ev->n; a++) {
        joineval_value *x = &ev->v[a * (size_t)ev->r.leaves + (size_t)leaf];
        x->truth = JOINEVAL_FALSE;
        x->have[0] = '\0';
        x->error = NULL;
    }
}

static int role_rank(const redisReply *e)
{
    if (e->type != REDIS_REPLY_STRING)
        return 3;
    for (int i = 0; i < 3; i++)
        if (e->len == strlen(role_names[i]) && memcmp(e->str, role_names[i], e->len) == 0)
            return i;
    return 3;
}

static int level_index(const ev_entity *en, const char *level)
{
    for (int i = 0; i < en->nlevels; i++)
        if (strcmp(en->level[i], level) == 0)
            return i;
    return -1;
}

/* join_facts.lua's answer: {0} (unreadable or gone), or {1, roles per address, reachedAt per
 * address and level}. */
static void on_facts(void *data, int status, redisReply *r)
{
    ev_entity *en = data;
    joineval *ev = en->ev;
    size_t n = ev->n, nroles = en->roles ? n : 0;
    size_t want = 1 + nroles + n * (size_t)en->nlevels;
    bool ok = status == STORE_OK && r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
              r->element[0]->type == REDIS_REPLY_INTEGER;
    bool readable = ok && r->element[0]->integer == 1;
    if (readable && r->elements != want)
        ok = false;
    for (int i = 0; i < ev->r.leaves; i++) {
        const joineval_local *l = &ev->r.local[i];
        if (l->kind == JOINEVAL_LOCAL_NONE || strcmp(l->entity, en->id) != 0)
            continue;
        if (!ok) {
            set_error(ev, i, "Redis did not answer the read of this leaf's entity.");
            continue;
        }
        if (!readable) {
            set_false(ev, i);
            continue;
        }
        int li = l->kind == JOINEVAL_LOCAL_LEVEL ? level_index(en, l->level) : -1;
        for (size_t a = 0; a < n; a++) {
            joineval_value *x = &ev->v[a * (size_t)ev->r.leaves + (size_t)i];
            x->error = NULL;
            x->have[0] = '\0';
            if (l->kind == JOINEVAL_LOCAL_ROLE) {
                int rank = role_rank(r->element[1 + a]);
                x->truth = rank <= l->role ? JOINEVAL_TRUE : JOINEVAL_FALSE;
                if (rank < 3)
                    snprintf(x->have, sizeof x->have, "%s", role_names[rank]);
                continue;
            }
            const redisReply *e = r->element[1 + nroles + a * (size_t)en->nlevels + (size_t)li];
            int64_t ms = 0;
            bool reached = e->type == REDIS_REPLY_STRING && e->len > 0 && e->len < 19;
            for (size_t k = 0; reached && k < e->len; k++) {
                reached = e->str[k] >= '0' && e->str[k] <= '9';
                ms = ms * 10 + (e->str[k] - '0');
            }
            x->truth = reached ? JOINEVAL_TRUE : JOINEVAL_FALSE;
            if (reached)
                isotime_format(ms, x->have);
        }
    }
    ev_settle(ev);
}

/* One read of an entity's facts, in its own slot (keys.h). Returns -1 when out of memory. */
static int send_facts(store *st, ev_entity *en)
{
    joineval *ev = en->ev;
    size_t argc = 5 + 4 + (size_t)en->nlevels + ev->n;
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    if (!argv || !lens) {
        free(argv);
        free(lens);
        return -1;
    }
    entity_keys k;
    keys_entity(&k, en->id);
    char gen[KEYS_ENTITY_SIZE + 16], nlv[8];
    int glen = snprintf(gen, sizeof gen, "%s:levels:gen", k.entity);
    snprintf(nlv, sizeof nlv, "%d", en->nlevels);
    size_t at = 0;
    const char *head[] = {k.entity,
                          k.owners,
                          k.admins,
                          k.members,
                          gen,
                          ev->r.author,
                          ev->r.author_platform ? "1" : "0",
                          en->roles ? "1" : "0",
                          nlv};
    size_t hlens[] = {k.entity_len,
                      k.owners_len,
                      k.admins_len,
                      k.members_len,
                      (size_t)glen,
                      strlen(ev->r.author),
                      1,
                      1,
                      strlen(nlv)};
    for (size_t i = 0; i < sizeof head / sizeof head[0]; i++) {
        argv[at] = head[i];
        lens[at++] = hlens[i];
    }
    for (int i = 0; i < en->nlevels; i++) {
        argv[at] = en->level[i];
        lens[at++] = strlen(en->level[i]);
    }
    for (size_t a = 0; a < ev->n; a++) {
        argv[at] = ev->addrs[a];
        lens[at++] = 42;
    }
    /* hiredis copies the arguments before this returns */
    store_script_read(st, 0, LUA_JOIN_FACTS, on_facts, en, 5, (int)argc, argv, lens);
    free(argv);
    free(lens);
    return 0;
}

/* Groups the level and role leaves by the entity they name. */
static void ev_entities(joineval *ev)
{
    for (int i = 0; i < ev->r.leaves; i++) {
        const joineval_local *l = &ev->r.local[i];
        if (l->kind == JOINEVAL_LOCAL_NONE)
            continue;
        ev_entity *en = NULL;
        for (int e = 0; e < ev->nentities && !en; e++)
            if (strcmp(ev->entity[e].id, l->entity) == 0)
                en = &ev->entity[e];
        if (!en) {
            en = &ev->entity[ev->nentities++];
            en->ev = ev;
            memcpy(en->id, l->entity, IDS_SIZE);
        }
        if (l->kind == JOINEVAL_LOCAL_ROLE)
            en->roles = true;
        else if (level_index(en, l->level) < 0)
            en->level[en->nlevels++] = l->level;
    }
}

static const char *chain_error(int status)
{
    if (status == JOINREAD_CAPPED)
        return "The chain's rate cap (JOIN_RPC_MAX_PER_SECOND) is spent; try again.";
    if (status == JOINREAD_UNAVAILABLE)
        return "The chain did not answer.";
    return "The chain's call for this leaf failed.";
}

/* joinread's answer: the token and native leaves' values, the blocks. */
static void on_chain(void *data, const joinread_answer *a)
{
    joineval *ev = data;
    int nl = ev->r.leaves;
    ev->a.status = a->status == JOINREAD_OK       ? JOINEVAL_OK
                   : a->status == JOINREAD_CAPPED ? JOINEVAL_CAPPED
                                                  : JOINEVAL_UNAVAILABLE;
    ev->a.retry_after = a->retry_after;
    ev->a.nchains = a->nchains < JOINREAD_MAX_CHAINS ? a->nchains : JOINREAD_MAX_CHAINS;
    for (int c = 0; c < ev->a.nchains; c++) {
        ev->a.chain[c] = a->chain[c];
        ev->a.block[c] = a->block[c];
    }
    bool answered = a->naddrs == ev->n && a->nleaves == nl && a->v;
    for (int i = 0; i < nl; i++) {
        if (ev->r.chain.leaf[i].kind == JOINREAD_LEAF_OTHER)
            continue;
        if (!answered) {
            set_error(ev, i, chain_error(JOINREAD_UNAVAILABLE));
            continue;
        }
        for (size_t k = 0; k < ev->n; k++) {
            const joinread_value *v = &a->v[k * (size_t)nl + (size_t)i];
            joineval_value *x = &ev->v[k * (size_t)nl + (size_t)i];
            x->truth = v->truth == JOINREAD_TRUE    ? JOINEVAL_TRUE
                       : v->truth == JOINREAD_FALSE ? JOINEVAL_FALSE
                                                    : JOINEVAL_ERROR;
            snprintf(x->have, sizeof x->have, "%s", x->truth == JOINEVAL_ERROR ? "" : v->have);
            x->error = x->truth == JOINEVAL_ERROR ? chain_error(a->status) : NULL;
        }
    }
    ev_settle(ev);
}

/* The token and native leaves, read by jr in one batch per chain; without a reader, or when it
 * refuses the read, they err. Returns -1 when out of memory. */
static int chain_start(joineval *ev, joinread *jr, bool background)
{
    if (!joinread_has_chain_leaves(&ev->r.chain))
        return 0;
    if (!jr) {
        for (int i = 0; i < ev->r.leaves; i++)
            if (ev->r.chain.leaf[i].kind != JOINREAD_LEAF_OTHER)
                set_error(ev, i, "No chain is configured in this process.");
        return 0;
    }
    uint8_t(*bytes)[20] = malloc(ev->n * sizeof *bytes);
    if (!bytes)
        return -1;
    for (size_t a = 0; a < ev->n; a++)
        if (hex_decode(ev->addrs[a] + 2, 40, bytes[a], 20) != 0)
            memset(bytes[a], 0, 20); /* validated by the callers: never */
    ev->pending++;
    int rc = joinread_start(jr, &ev->r.chain, (const uint8_t(*)[20])bytes, ev->n, background,
                            on_chain, ev);
    free(bytes); /* joinread_start copies the addresses */
    if (rc != 0) {
        /* a chain whose URL went since the rule was set, or the reader's queue full: the
         * chain leaves err, and the rule is judged on the others */
        ev->pending--;
        ev->a.status = JOINEVAL_UNAVAILABLE;
        ev->a.retry_after = 1;
        for (int i = 0; i < ev->r.leaves; i++)
            if (ev->r.chain.leaf[i].kind != JOINREAD_LEAF_OTHER)
                set_error(ev, i,
                          "The chain reader refused the read (no URL for this chain, or "
                          "too many reads waiting).");
    }
    return 0;
}

int joineval_start(uv_loop_t *loop, struct store *st, joinread *jr, const joineval_rule *r,
                   const char (*addrs)[43], size_t n, bool background, joineval_cb cb, void *data)
{
    if (n < 1 || n > JOINEVAL_MAX_ADDRS || r->leaves < 1 || r->leaves > JOINEVAL_MAX_LEAVES ||
        !r->judge || !r->tree || !r->tree_size)
        return -1;
    joineval *ev = calloc(1, sizeof *ev);
    if (!ev)
        return -1;
    ev->r = *r;
    ev->tree = malloc(r->tree_size);
    ev->addrs = malloc(n * sizeof *ev->addrs);
    ev->v = calloc(n * (size_t)r->leaves, sizeof *ev->v);
    ev->verdict = calloc(n, sizeof *ev->verdict);
    if (!ev->tree || !ev->addrs || !ev->v || !ev->verdict) {
        ev_free((uv_handle_t *)ev);
        return -1;
    }
    memcpy(ev->tree, r->tree, r->tree_size);
    memcpy(ev->addrs, addrs, n * sizeof *ev->addrs);
    ev->r.tree = ev->tree;
    ev->n = n;
    ev->cb = cb;
    ev->data = data;
    for (int i = 0; i < r->leaves; i++)
        set_error(ev, i, "This leaf was not read.");
    ev->starting = true;
    ev->pending = 1; /* the start itself, so that no answer comes before it ends */
    /* first: out of memory there leaves nothing sent */
    if (chain_start(ev, jr, background) != 0) {
        ev_free((uv_handle_t *)ev);
        return -1;
    }
    uv_timer_init(loop, &ev->done);
    ev_entities(ev);
    for (int e = 0; e < ev->nentities; e++) {
        ev->pending++;
        if (send_facts(st, &ev->entity[e]) != 0)
            on_facts(&ev->entity[e], STORE_UNAVAILABLE, NULL);
    }
    ev->starting = false;
    ev_settle(ev);
    return 0;
}

const char *joineval_need(const joineval_rule *r, int leaf)
{
    const joineval_local *l = &r->local[leaf];
    if (l->kind == JOINEVAL_LOCAL_LEVEL)
        return l->level;
    if (l->kind == JOINEVAL_LOCAL_ROLE)
        return role_names[l->role];
    const joinread_leaf *c = &r->chain.leaf[leaf];
    return c->kind == JOINREAD_LEAF_ERC721 ? "1" : c->min;
}
