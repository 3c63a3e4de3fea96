/* joinrule: a join rule parsed, rendered and judged (joinrule.h). */
#include "api/joinrule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 2^256 - 1, the largest balance or token id a contract can hold. */
static const char uint256_max[] =
    "115792089237316195423570985008687907853269984665640564039457584007913129639935";

static int fail(verr *e, const char *path, const char *suffix, const char *fmt, ...)
{
    snprintf(e->field, sizeof e->field, "%s%s", path, suffix);
    va_list ap;
    va_start(ap, fmt);
    char msg[sizeof e->message - sizeof e->field];
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(e->message, sizeof e->message, "%s%s %s", path, suffix, msg);
    return -1;
}

/* A decimal uint256 with no sign, no leading zero and no more than 2^256 - 1. */
static bool uint256_valid(const char *s, size_t len)
{
    if (len == 0 || len > sizeof uint256_max - 1 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return len < sizeof uint256_max - 1 || memcmp(s, uint256_max, len) <= 0;
}

typedef struct parser {
    joinrule *r;
    joinrule_chain_known chain_known;
    void *ctx;
    verr *e;
} parser;

static int read_uint256(parser *p, const json_t *leaf, const char *key, const char *path,
                        char out[JOINRULE_UINT256_SIZE])
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, ".%s", key);
    const json_t *v = json_object_get(leaf, key);
    if (!json_is_string(v))
        return fail(p->e, path, suffix, "must be a decimal string of base units.");
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (!uint256_valid(s, len))
        return fail(p->e, path, suffix,
                    "must be a decimal string from 0 to 2^256 - 1, without sign or leading "
                    "zeros.");
    memcpy(out, s, len + 1);
    return 0;
}

static int read_chain(parser *p, const json_t *leaf, const char *path, uint64_t *out)
{
    const json_t *v = json_object_get(leaf, "chainId");
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        json_integer_value(v) > 9007199254740991LL)
        return fail(p->e, path, ".chainId", "must be a chain id, an integer from 1.");
    *out = (uint64_t)json_integer_value(v);
    if (!p->chain_known || !p->chain_known(p->ctx, *out))
        return fail(p->e, path, ".chainId",
                    "names a chain this service has no RPC URL for (ETH_RPC_URLS).");
    return 0;
}

static int read_contract(parser *p, const json_t *leaf, const char *path, char out[43])
{
    const json_t *v = json_object_get(leaf, "contract");
    char field[128];
    snprintf(field, sizeof field, "%s.contract", path);
    if (!json_is_string(v))
        return fail(p->e, path, ".contract", "must be a contract address.");
    return validate_address(json_string_value(v), json_string_length(v), field, out, p->e);
}

static int read_entity(parser *p, const json_t *leaf, const char *path, char out[IDS_SIZE])
{
    const json_t *v = json_object_get(leaf, "entityID");
    if (!json_is_string(v) || !ids_valid(json_string_value(v), json_string_length(v), 'c'))
        return fail(p->e, path, ".entityID", "must be an entity id (c-<uuid>).");
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

/* Every member of obj is one of the names (NULL-ended); else a refusal naming the first that
 * is not. */
static int only_members(parser *p, const json_t *obj, const char *path, const char *kind,
                        const char *const *names)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        bool known = false;
        for (const char *const *n = names; *n && !known; n++)
            known = !strcmp(key, *n);
        if (!known) {
            char suffix[80];
            snprintf(suffix, sizeof suffix, ".%.64s", key);
            return fail(p->e, path, suffix, "is not a field of a%s %s rule.",
                        strchr("aeiou", kind[0]) ? "n" : "", kind);
        }
    }
    return 0;
}

static const char *const leaf_kinds[] = {"erc20", "erc721", "erc1155", "native", "level", "role"};

static int parse_leaf(parser *p, jr_node *n, const char *kind, const json_t *leaf)
{
    char path[sizeof n->path + 16];
    snprintf(path, sizeof path, "%s.%s", n->path, kind);
    if (!json_is_object(leaf))
        return fail(p->e, path, "", "must be an object.");
    if (p->r->leaves >= JOINRULE_MAX_LEAVES)
        return fail(p->e, n->path, "", "is past the %d leaves a rule may hold.",
                    JOINRULE_MAX_LEAVES);
    static const char *const token_fields[] = {"chainId", "contract", "min", NULL};
    static const char *const nft_fields[] = {"chainId", "contract", "tokenId", NULL};
    static const char *const multi_fields[] = {"chainId", "contract", "tokenId", "min", NULL};
    static const char *const native_fields[] = {"chainId", "min", NULL};
    static const char *const level_fields[] = {"entityID", "lvID", NULL};
    static const char *const role_fields[] = {"entityID", "role", NULL};
    int rc = 0;
    if (!strcmp(kind, "erc20")) {
        n->kind = JR_ERC20;
        rc = only_members(p, leaf, path, kind, token_fields) ||
             read_chain(p, leaf, path, &n->chain) || read_contract(p, leaf, path, n->contract) ||
             read_uint256(p, leaf, "min", path, n->min);
    } else if (!strcmp(kind, "erc721")) {
        n->kind = JR_ERC721;
        rc = only_members(p, leaf, path, kind, nft_fields) ||
             read_chain(p, leaf, path, &n->chain) || read_contract(p, leaf, path, n->contract) ||
             (json_object_get(leaf, "tokenId") && read_uint256(p, leaf, "tokenId", path, n->token));
    } else if (!strcmp(kind, "erc1155")) {
        n->kind = JR_ERC1155;
        rc = only_members(p, leaf, path, kind, multi_fields) ||
             read_chain(p, leaf, path, &n->chain) || read_contract(p, leaf, path, n->contract) ||
             read_uint256(p, leaf, "tokenId", path, n->token) ||
             read_uint256(p, leaf, "min", path, n->min);
    } else if (!strcmp(kind, "native")) {
        n->kind = JR_NATIVE;
        rc = only_members(p, leaf, path, kind, native_fields) ||
             read_chain(p, leaf, path, &n->chain) || read_uint256(p, leaf, "min", path, n->min);
    } else if (!strcmp(kind, "level")) {
        n->kind = JR_LEVEL;
        const json_t *lv = json_object_get(leaf, "lvID");
        rc = only_members(p, leaf, path, kind, level_fields) ||
             read_entity(p, leaf, path, n->entity);
        if (!rc && (!json_is_string(lv) ||
                    !ids_valid_level(json_string_value(lv), json_string_length(lv))))
            rc = fail(p->e, path, ".lvID", "must be a level id ([A-Za-z0-9_-]{1,64}).");
        if (!rc)
            memcpy(n->level, json_string_value(lv), json_string_length(lv) + 1);
    } else {
        n->kind = JR_ROLE;
        const json_t *role = json_object_get(leaf, "role");
        const char *r = json_is_string(role) ? json_string_value(role) : "";
        rc =
            only_members(p, leaf, path, kind, role_fields) || read_entity(p, leaf, path, n->entity);
        if (!rc && strcmp(r, "owner") && strcmp(r, "admin") && strcmp(r, "member"))
            rc = fail(p->e, path, ".role", "must be \"owner\", \"admin\" or \"member\".");
        n->role = !strcmp(r, "owner")   ? JR_ROLE_OWNER
                  : !strcmp(r, "admin") ? JR_ROLE_ADMIN
                                        : JR_ROLE_MEMBER;
    }
    if (rc)
        return -1;
    n->leaf = p->r->leaves;
    p->r->leaf_node[p->r->leaves++] = (int)(n - p->r->node);
    return 0;
}

static int parse_node(parser *p, int at, const json_t *v, int depth);

/* A combinator's children: reserved side by side first, then each parsed in its place. */
static int parse_children(parser *p, int at, const json_t *list, const char *key, int depth)
{
    jr_node *n = &p->r->node[at];
    if (!json_is_array(list) || json_array_size(list) == 0)
        return fail(p->e, n->path, key, "must be a non-empty array of rules.");
    size_t count = json_array_size(list);
    if (depth >= JOINRULE_MAX_DEPTH)
        return fail(p->e, n->path, "", "nests rules deeper than %d (a leaf alone is 1).",
                    JOINRULE_MAX_DEPTH);
    if (count > JOINRULE_MAX_LEAVES || p->r->nodes + (int)count > JOINRULE_MAX_NODES)
        return fail(p->e, n->path, key, "holds more than the %d leaves a rule may have.",
                    JOINRULE_MAX_LEAVES);
    n->first = p->r->nodes;
    n->n = (int)count;
    p->r->nodes += (int)count;
    for (size_t i = 0; i < count; i++) {
        jr_node *c = &p->r->node[n->first + (int)i];
        memset(c, 0, sizeof *c);
        c->parent = at;
        snprintf(c->path, sizeof c->path, "%.60s%s[%zu]", n->path, key, i);
        if (parse_node(p, n->first + (int)i, json_array_get(list, i), depth + 1) != 0)
            return -1;
    }
    return 0;
}

static int parse_node(parser *p, int at, const json_t *v, int depth)
{
    jr_node *n = &p->r->node[at];
    n->leaf = -1;
    if (!json_is_object(v) || json_object_size(v) == 0)
        return fail(p->e, n->path, "", "must be a rule: an object such as {\"all\":[…]}.");
    const json_t *x;
    if ((x = json_object_get(v, "all")) || (x = json_object_get(v, "any"))) {
        bool all = json_object_get(v, "all") == x;
        if (json_object_size(v) != 1)
            return fail(p->e, n->path, "", "must hold \"%s\" alone.", all ? "all" : "any");
        n->kind = all ? JR_ALL : JR_ANY;
        return parse_children(p, at, x, all ? ".all" : ".any", depth);
    }
    if ((x = json_object_get(v, "atLeast"))) {
        const json_t *of = json_object_get(v, "of");
        if (json_object_size(v) != 2 || !of)
            return fail(p->e, n->path, "", "must hold \"atLeast\" and \"of\" alone.");
        n->kind = JR_AT_LEAST;
        if (parse_children(p, at, of, ".of", depth) != 0)
            return -1;
        n = &p->r->node[at];
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > n->n)
            return fail(p->e, n->path, ".atLeast", "must be an integer from 1 to %d (of's length).",
                        n->n);
        n->at_least = (int)json_integer_value(x);
        return 0;
    }
    if ((x = json_object_get(v, "not"))) {
        if (json_object_size(v) != 1)
            return fail(p->e, n->path, "", "must hold \"not\" alone.");
        if (depth >= JOINRULE_MAX_DEPTH)
            return fail(p->e, n->path, "", "nests rules deeper than %d (a leaf alone is 1).",
                        JOINRULE_MAX_DEPTH);
        if (p->r->nodes >= JOINRULE_MAX_NODES)
            return fail(p->e, n->path, "", "holds too many rules.");
        n->kind = JR_NOT;
        n->first = p->r->nodes++;
        n->n = 1;
        jr_node *c = &p->r->node[n->first];
        memset(c, 0, sizeof *c);
        c->parent = at;
        snprintf(c->path, sizeof c->path, "%.80s.not", n->path);
        return parse_node(p, n->first, x, depth + 1);
    }
    for (size_t i = 0; i < sizeof leaf_kinds / sizeof leaf_kinds[0]; i++)
        if ((x = json_object_get(v, leaf_kinds[i]))) {
            if (json_object_size(v) != 1)
                return fail(p->e, n->path, "", "must hold \"%s\" alone.", leaf_kinds[i]);
            return parse_leaf(p, n, leaf_kinds[i], x);
        }
    return fail(p->e, n->path, "",
                "must be one of all, any, atLeast/of, not, erc20, erc721, erc1155, native, "
                "level or role.");
}

int joinrule_parse(const json_t *rule, joinrule_chain_known chain_known, void *ctx, joinrule *out,
                   verr *e)
{
    memset(&out->node[0], 0, sizeof out->node[0]);
    out->nodes = 1;
    out->leaves = 0;
    out->node[0].parent = -1;
    snprintf(out->node[0].path, sizeof out->node[0].path, "rule");
    parser p = {out, chain_known, ctx, e};
    return parse_node(&p, 0, rule, 1);
}

/* ---- rendering ---- */

static json_t *render_node(const joinrule *r, int at)
{
    const jr_node *n = &r->node[at];
    static const char *const roles[] = {"owner", "admin", "member"};
    json_t *leaf = NULL;
    const char *key = NULL;
    switch (n->kind) {
    case JR_ALL:
    case JR_ANY:
    case JR_AT_LEAST: {
        json_t *list = json_array();
        for (int i = 0; i < n->n; i++)
            json_array_append_new(list, render_node(r, n->first + i));
        if (n->kind == JR_AT_LEAST)
            return json_pack("{s:i,s:o}", "atLeast", (json_int_t)n->at_least, "of", list);
        return json_pack("{s:o}", n->kind == JR_ALL ? "all" : "any", list);
    }
    case JR_NOT:
        return json_pack("{s:o}", "not", render_node(r, n->first));
    case JR_ERC20:
        key = "erc20";
        leaf = json_pack("{s:I,s:s,s:s}", "chainId", (json_int_t)n->chain, "contract", n->contract,
                         "min", n->min);
        break;
    case JR_ERC721:
        key = "erc721";
        leaf = json_pack("{s:I,s:s}", "chainId", (json_int_t)n->chain, "contract", n->contract);
        if (leaf && n->token[0])
            json_object_set_new(leaf, "tokenId", json_string(n->token));
        break;
    case JR_ERC1155:
        key = "erc1155";
        leaf = json_pack("{s:I,s:s,s:s,s:s}", "chainId", (json_int_t)n->chain, "contract",
                         n->contract, "tokenId", n->token, "min", n->min);
        break;
    case JR_NATIVE:
        key = "native";
        leaf = json_pack("{s:I,s:s}", "chainId", (json_int_t)n->chain, "min", n->min);
        break;
    case JR_LEVEL:
        key = "level";
        leaf = json_pack("{s:s,s:s}", "entityID", n->entity, "lvID", n->level);
        break;
    case JR_ROLE:
        key = "role";
        leaf = json_pack("{s:s,s:s}", "entityID", n->entity, "role", roles[n->role]);
        break;
    }
    return leaf ? json_pack("{s:o}", key, leaf) : NULL;
}

char *joinrule_render(const joinrule *r)
{
    json_t *v = render_node(r, 0);
    if (!v)
        return NULL;
    char *out = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(v);
    return out;
}

/* ---- judging ---- */

jr_truth joinrule_judge(const joinrule *r, const jr_truth *values)
{
    jr_truth v[JOINRULE_MAX_NODES];
    /* children sit after their parents: from the last node back, each is judged after them */
    for (int at = r->nodes - 1; at >= 0; at--) {
        const jr_node *n = &r->node[at];
        if (n->leaf >= 0) {
            v[at] = values[n->leaf];
            continue;
        }
        int t = 0, f = 0, err = 0;
        for (int i = 0; i < n->n; i++) {
            jr_truth c = v[n->first + i];
            t += c == JR_TRUE;
            f += c == JR_FALSE;
            err += c == JR_ERROR;
        }
        switch (n->kind) {
        case JR_ALL:
            v[at] = f ? JR_FALSE : err ? JR_ERROR : JR_TRUE;
            break;
        case JR_ANY:
            v[at] = t ? JR_TRUE : err ? JR_ERROR : JR_FALSE;
            break;
        case JR_AT_LEAST:
            v[at] = t >= n->at_least ? JR_TRUE : t + err < n->at_least ? JR_FALSE : JR_ERROR;
            break;
        case JR_NOT:
            v[at] = t ? JR_FALSE : f ? JR_TRUE : JR_ERROR;
            break;
        default:
            v[at] = JR_ERROR; /* a leaf always has its number */
        }
    }
    return v[0];
}
