/* entityd-joinread: join rules' chain reads (rpc/joinread.h) from the command line, for tests
 * and operators checking a chain's setup. Takes the service's settings from the environment
 * (ETH_RPC_URLS, ETH_RPC_URL with AUTH_CHAIN_ID, MULTICALL3_ADDRESS, JOIN_RPC_MAX_PER_SECOND,
 * ETH_RPC_TIMEOUT_MS, ETH_RPC_MAX_INFLIGHT) and reads requests from stdin, one JSON line each:
 *   {"id":any,"rule":<a rule as POST …/join-rules takes it>,"addresses":["0x…",…],
 *    "background":false}
 * Each is started as it arrives (so reads overlap, as a service's do) and answered by one line:
 *   {"id","status":"ok"|"unavailable"|"capped","retryAfter","blocks":{"<chainId>":n},
 *    "values":[[{"truth":"true"|"false"|"error","have"}… per leaf]… per address],"ms"}
 * or {"id","error":"…"} for a request it refuses. Ends at the end of stdin once every read has
 * been answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <uv.h>

#include "api/joinrule.h"
#include "core/config.h"
#include "core/log.h"
#include "crypto/address.h"
#include "rpc/joinread.h"

#define MAX_LINE (1u << 20)

typedef struct tool {
    uv_loop_t *loop;
    joinread *j;
    uv_pipe_t in;
    char *line;
    size_t len;
    int pending;
    bool eof;
} tool;

typedef struct read_req {
    tool *t;
    json_t *id;
    uint64_t started;
} read_req;

static void print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
    json_decref(v);
}

static void refuse(json_t *id, const char *why)
{
    print_json(json_pack("{s:O?,s:s}", "id", id, "error", why));
}

static void finish_if_done(tool *t)
{
    if (t->eof && t->pending == 0)
        joinread_close(t->j);
}

/* The rule's leaves as joinread takes them (api/joinrule.h's tree, rpc's plain list). */
static void rule_leaves(const joinrule *r, joinread_rule *out)
{
    memset(out, 0, sizeof *out);
    out->leaves = r->leaves;
    for (int i = 0; i < r->leaves; i++) {
        const jr_node *n = &r->node[r->leaf_node[i]];
        joinread_leaf *l = &out->leaf[i];
        l->kind = n->kind == JR_ERC20     ? JOINREAD_LEAF_ERC20
                  : n->kind == JR_ERC721  ? JOINREAD_LEAF_ERC721
                  : n->kind == JR_ERC1155 ? JOINREAD_LEAF_ERC1155
                  : n->kind == JR_NATIVE  ? JOINREAD_LEAF_NATIVE
                                          : JOINREAD_LEAF_OTHER;
        l->chain = n->chain;
        memcpy(l->contract, n->contract, sizeof l->contract);
        memcpy(l->token, n->token, sizeof l->token);
        memcpy(l->min, n->min, sizeof l->min);
    }
}

static const char *const truths[] = {"false", "true", "error"};
static const char *const statuses[] = {"ok", "unavailable", "capped"};

static void on_answer(void *data, const joinread_answer *a)
{
    read_req *q = data;
    tool *t = q->t;
    json_t *blocks = json_object(), *values = json_array();
    for (int c = 0; c < a->nchains; c++) {
        char key[24];
        snprintf(key, sizeof key, "%llu", (unsigned long long)a->chain[c]);
        json_object_set_new(blocks, key, json_integer((json_int_t)a->block[c]));
    }
    for (size_t i = 0; i < a->naddrs; i++) {
        json_t *row = json_array();
        for (int l = 0; l < a->nleaves; l++) {
            const joinread_value *v = &a->v[i * (size_t)a->nleaves + (size_t)l];
            json_array_append_new(
                row, json_pack("{s:s,s:s}", "truth", truths[v->truth], "have", v->have));
        }
        json_array_append_new(values, row);
    }
    print_json(json_pack("{s:O?,s:s,s:I,s:o,s:o,s:I}", "id", q->id, "status", statuses[a->status],
                         "retryAfter", (json_int_t)a->retry_after, "blocks", blocks, "values",
                         values, "ms", (json_int_t)(uv_now(t->loop) - q->started)));
    json_decref(q->id);
    free(q);
    t->pending--;
    finish_if_done(t);
}

static void handle_line(tool *t, const char *text, size_t len)
{
    json_error_t jerr;
    json_t *req = json_loadb(text, len, 0, &jerr);
    json_t *id = json_object_get(req, "id");
    json_t *list = json_object_get(req, "addresses");
    joinrule *rule = calloc(1, sizeof *rule);
    verr e = {0};
    size_t n = json_array_size(list);
    uint8_t(*addrs)[20] = n ? calloc(n, 20) : NULL;
    joinread_rule leaves;
    read_req *q = NULL;
    if (!json_is_object(req) || !rule) {
        refuse(id, "not a JSON object");
    } else if (joinrule_parse(json_object_get(req, "rule"), joinread_chain_known, t->j, rule, &e) !=
               0) {
        char why[320];
        snprintf(why, sizeof why, "%s: %s", e.field, e.message);
        refuse(id, why);
    } else if (!addrs) {
        refuse(id, "addresses: 1 to 500 addresses");
    } else {
        size_t i;
        json_t *a;
        bool ok = true;
        json_array_foreach(list, i, a)
        {
            const char *s = json_string_value(a);
            ok = ok && s && address_parse(s, strlen(s), addrs[i]) == 0;
        }
        rule_leaves(rule, &leaves);
        if (!ok) {
            refuse(id, "addresses: each 0x and 40 hex digits");
        } else if (!(q = calloc(1, sizeof *q))) {
            refuse(id, "out of memory");
        } else {
            q->t = t;
            q->id = json_incref(id);
            q->started = uv_now(t->loop);
            if (joinread_start(t->j, &leaves, (const uint8_t(*)[20])addrs, n,
                               json_is_true(json_object_get(req, "background")), on_answer,
                               q) != 0) {
                refuse(id, "refused (addresses out of range, or the waiting queue is full)");
                json_decref(q->id);
                free(q);
            } else {
                t->pending++;
            }
        }
    }
    free(addrs);
    free(rule);
    json_decref(req);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    (void)h;
    b->base = malloc(suggested);
    b->len = b->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    tool *t = s->data;
    for (ssize_t i = 0; i < nread; i++) {
        if (b->base[i] == '\n') {
            if (t->len)
                handle_line(t, t->line, t->len);
            t->len = 0;
        } else if (t->len < MAX_LINE) {
            t->line[t->len++] = b->base[i];
        }
    }
    free(b->base);
    if (nread < 0) {
        if (t->len)
            handle_line(t, t->line, t->len);
        t->len = 0;
        uv_read_stop(s);
        uv_close((uv_handle_t *)s, NULL);
        t->eof = true;
        finish_if_done(t);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: entityd-joinread < requests (one JSON line each; the settings "
                        "come from the environment, as the service's)\n");
        return 2;
    }
    /* The service's settings; --dev only spares the sign-in secret this tool never uses. */
    config cfg;
    char err[256];
    char *args[] = {argv[0], "--dev", NULL};
    if (config_load(&cfg, 2, args, err, sizeof err) != CONFIG_OK) {
        fprintf(stderr, "entityd-joinread: %s\n", err);
        return 2;
    }
    log_set_level(LOG_ERROR);
    tool t = {.loop = uv_default_loop()};
    if (!(t.line = malloc(MAX_LINE)) || joinread_new(&t.j, t.loop, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "entityd-joinread: %s\n", t.line ? err : "out of memory");
        free(t.line);
        config_free(&cfg);
        return 1;
    }
    uv_pipe_init(t.loop, &t.in, 0);
    t.in.data = &t;
    if (uv_pipe_open(&t.in, 0) != 0 || uv_read_start((uv_stream_t *)&t.in, on_alloc, on_read)) {
        fprintf(stderr, "entityd-joinread: stdin cannot be read\n");
        return 1;
    }
    uv_run(t.loop, UV_RUN_DEFAULT);
    joinread_free(t.j);
    free(t.line);
    config_free(&cfg);
    uv_loop_close(t.loop);
    return 0;
}
