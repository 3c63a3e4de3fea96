/* router: path normalization, matching with {param} segments, 404 versus 405, the real table. */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <llhttp.h>

#include "resources/handlers.h"
#include "api/router.h"
#include "resources/routes.h"

/* Normalizes a copy of `in` and checks the result and the returned length. */
static void check_normalize(const char *in, const char *want)
{
    char path[256];
    size_t len = strlen(in);

    assert_true(len < sizeof path);
    memcpy(path, in, len + 1);
    size_t got = router_normalize(path, len);
    assert_string_equal(path, want);
    assert_int_equal(got, strlen(want));
}

static void test_normalize_keeps_clean_paths(void **state)
{
    check_normalize("/", "/");
    check_normalize("/healthz", "/healthz");
    check_normalize("/api/entities/c-1/users", "/api/entities/c-1/users");
    check_normalize("", "");
}

static void test_normalize_collapses_slashes(void **state)
{
    check_normalize("/api//skills", "/api/skills");
    check_normalize("//api", "/api");
    check_normalize("/a///b////c", "/a/b/c");
    check_normalize("//", "/");
    check_normalize("////", "/");
}

static void test_normalize_drops_trailing_slash(void **state)
{
    check_normalize("/api/skills/", "/api/skills");
    check_normalize("/api/skills//", "/api/skills");
    check_normalize("/a//b///", "/a/b");
    check_normalize("/api//auth/message/", "/api/auth/message");
}

static void test_normalize_reads_only_len_bytes(void **state)
{
    char path[] = "/a//b/XYZ";

    /* Only "/a//b/" is the path; the rest of the buffer must not leak into it. */
    size_t got = router_normalize(path, 6);
    assert_int_equal(got, 4);
    assert_string_equal(path, "/a/b");
}

static void h_list(request *req) {}
static void h_create(request *req) {}
static void h_get(request *req) {}
static void h_delete(request *req) {}
static void h_part(request *req) {}
static void h_part_update(request *req) {}
static void h_fixed(request *req) {}

static const route g_table[] = {
    {HTTP_GET, "/things", h_list, AUTH_NONE, 0},
    {HTTP_POST, "/things", h_create, AUTH_REQUIRED, 0},
    {HTTP_GET, "/things/{id}", h_get, AUTH_OPTIONAL, 0},
    {HTTP_DELETE, "/things/{id}", h_delete, AUTH_REQUIRED, 0},
    {HTTP_GET, "/things/{id}/parts/{part}", h_part, AUTH_REQUIRED, 0},
    {HTTP_POST, "/things/{id}/parts/{part}/update", h_part_update, AUTH_RECOVER, 0},
    {HTTP_GET, "/fixed/{x}", h_fixed, AUTH_NONE, 0},
    {HTTP_GET, "/fixed/one", h_fixed, AUTH_NONE, 0},
    {HTTP_POST, "/fixed/one", h_fixed, AUTH_NONE, 0},
};
#define G_N (sizeof g_table / sizeof g_table[0])

typedef struct match {
    int rc;
    const route *r;
    slice params[REQ_MAX_PATH_PARAMS];
    size_t nparams;
    char allow[64];
} match;

static int do_match(const route *table, size_t n, int method, const char *path, match *m)
{
    memset(m, 0, sizeof *m);
    memset(m->allow, 'Z', sizeof m->allow); /* must be overwritten, not trusted to be empty */
    m->nparams = 99;
    m->rc = router_match(table, n, method, path, strlen(path), &m->r, m->params, &m->nparams,
                         m->allow, sizeof m->allow);
    return m->rc;
}

static void assert_param(const slice *p, const char *want)
{
    assert_int_equal(p->len, strlen(want));
    assert_memory_equal(p->s, want, p->len);
}

static void test_match_static_routes(void **state)
{
    match m;

    assert_int_equal(do_match(g_table, G_N, HTTP_GET, "/things", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[0]);
    assert_int_equal(m.nparams, 0);

    assert_int_equal(do_match(g_table, G_N, HTTP_POST, "/things", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[1]);
    assert_int_equal(m.r->auth, AUTH_REQUIRED);
}

static void test_match_params_point_into_path(void **state)
{
    const char *path = "/things/abc-123";
    match m;

    assert_int_equal(do_match(g_table, G_N, HTTP_GET, path, &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[2]);
    assert_int_equal(m.nparams, 1);
    assert_ptr_equal(m.params[0].s, path + strlen("/things/"));
    assert_param(&m.params[0], "abc-123");

    assert_int_equal(do_match(g_table, G_N, HTTP_DELETE, path, &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[3]);
    assert_int_equal(m.nparams, 1);
}

static void test_match_two_params(void **state)
{
    match m;

    assert_int_equal(do_match(g_table, G_N, HTTP_GET, "/things/t1/parts/p-2", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[4]);
    assert_int_equal(m.nparams, 2);
    assert_param(&m.params[0], "t1");
    assert_param(&m.params[1], "p-2");

    assert_int_equal(do_match(g_table, G_N, HTTP_POST, "/things/t1/parts/p-2/update", &m),
                     ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[5]);
    assert_int_equal(m.nparams, 2);
    assert_param(&m.params[0], "t1");
    assert_param(&m.params[1], "p-2");
}

static void test_match_not_found(void **state)
{
    static const char *const paths[] = {
        "/",
        "",
        "/nothing",
        "/thing",              /* a prefix of a route */
        "/thingsx",            /* a route is a prefix of it */
        "/Things",             /* case matters */
        "/things/a/b",         /* one segment too many for {id} */
        "/things/a/parts",     /* one segment too few */
        "/things/a/parts/b/c", /* a static last segment that differs */
        "/things/a/parts/b/update/more",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        match m;
        assert_int_equal(do_match(g_table, G_N, HTTP_GET, paths[i], &m), ROUTER_NOT_FOUND);
        assert_string_equal(m.allow, "");
    }
}

static void test_match_method_not_allowed_lists_allow(void **state)
{
    match m;

    assert_int_equal(do_match(g_table, G_N, HTTP_PUT, "/things", &m), ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, POST");

    assert_int_equal(do_match(g_table, G_N, HTTP_PATCH, "/things/x", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, DELETE");

    assert_int_equal(do_match(g_table, G_N, HTTP_GET, "/things/x/parts/y/update", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "POST");
}

static void test_match_allow_lists_each_method_once(void **state)
{
    match m;

    /* GET matches "/fixed/{x}" and "/fixed/one": it is listed once. */
    assert_int_equal(do_match(g_table, G_N, HTTP_DELETE, "/fixed/one", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET, POST");

    assert_int_equal(do_match(g_table, G_N, HTTP_POST, "/fixed/two", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET");
}

static void test_match_first_route_wins(void **state)
{
    match m;

    /* Both GET routes match "/fixed/one": the earlier one in the table is taken. */
    assert_int_equal(do_match(g_table, G_N, HTTP_GET, "/fixed/one", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r, &g_table[6]);
    assert_int_equal(m.nparams, 1);
    assert_param(&m.params[0], "one");
}

static void test_match_uses_len_not_nul(void **state)
{
    const char *path = "/thingsXYZ";
    const route *r = NULL;
    slice params[REQ_MAX_PATH_PARAMS];
    size_t np = 99;
    char allow[64];

    assert_int_equal(
        router_match(g_table, G_N, HTTP_GET, path, 7, &r, params, &np, allow, sizeof allow),
        ROUTER_FOUND);
    assert_ptr_equal(r, &g_table[0]);
    assert_int_equal(np, 0);
}

static void test_match_allow_with_overlapping_method_names(void **state)
{
    /* "LOCK" is a substring of "UNLOCK", "PATCH" of "PROPPATCH": each is its own method and
     * must appear in Allow. */
    static const route t[] = {
        {HTTP_UNLOCK, "/res", h_list, AUTH_NONE, 0},
        {HTTP_LOCK, "/res", h_list, AUTH_NONE, 0},
        {HTTP_PROPPATCH, "/doc", h_list, AUTH_NONE, 0},
        {HTTP_PATCH, "/doc", h_list, AUTH_NONE, 0},
    };
    match m;

    assert_int_equal(do_match(t, 4, HTTP_GET, "/res", &m), ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "UNLOCK, LOCK");
    assert_int_equal(do_match(t, 4, HTTP_GET, "/doc", &m), ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "PROPPATCH, PATCH");
}

static void test_match_empty_table(void **state)
{
    match m;

    assert_int_equal(do_match(g_table, 0, HTTP_GET, "/things", &m), ROUTER_NOT_FOUND);
}

/* Normalizes `raw` and matches it against the real route table. */
static int real_match(int method, const char *raw, match *m)
{
    char path[256];
    size_t len = strlen(raw);

    assert_true(len < sizeof path);
    memcpy(path, raw, len + 1);
    len = router_normalize(path, len);
    memset(m, 0, sizeof *m);
    m->rc = router_match(router_routes, router_routes_count, method, path, len, &m->r, m->params,
                         &m->nparams, m->allow, sizeof m->allow);
    return m->rc;
}

static void test_real_healthz(void **state)
{
    match m;

    assert_int_equal(real_match(HTTP_GET, "/healthz", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, health_live);
    assert_int_equal(m.r->auth, AUTH_NONE);
    assert_int_equal(m.nparams, 0);

    assert_int_equal(real_match(HTTP_GET, "/healthz/", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, health_live);

    assert_int_equal(real_match(HTTP_GET, "/readyz", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, health_ready);
}

static void test_real_healthz_put_is_405(void **state)
{
    match m;

    assert_int_equal(real_match(HTTP_PUT, "/healthz", &m), ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "GET");
}

static void test_real_auth_routes(void **state)
{
    match m;

    assert_int_equal(real_match(HTTP_GET, "/api//auth/message/", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, auth_message_get);
    assert_int_equal(m.r->auth, AUTH_NONE);

    assert_int_equal(real_match(HTTP_POST, "/api/auth/revoke", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, auth_revoke_post);
    assert_int_equal(m.r->auth, AUTH_REQUIRED);

    assert_int_equal(real_match(HTTP_GET, "//api/auth//revoke", &m), ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "POST");
}

static void test_real_unknown_is_404(void **state)
{
    match m;

    assert_int_equal(real_match(HTTP_GET, "/nope", &m), ROUTER_NOT_FOUND);
    assert_int_equal(real_match(HTTP_GET, "/api", &m), ROUTER_NOT_FOUND);
    assert_int_equal(real_match(HTTP_GET, "/api/auth", &m), ROUTER_NOT_FOUND);
    assert_int_equal(real_match(HTTP_GET, "/HEALTHZ", &m), ROUTER_NOT_FOUND);
    assert_int_equal(real_match(HTTP_GET, "/healthzz", &m), ROUTER_NOT_FOUND);
}

/* Keeping a community: removal, leave, skill and level edits, next to the routes they share
 * a prefix with. */
static void test_real_tend_routes(void **state)
{
    match m;

    assert_int_equal(real_match(HTTP_DELETE, "/api/entities/c-1/members/0xab", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, members_delete);
    assert_int_equal(m.nparams, 2);
    assert_param(&m.params[1], "0xab");
    assert_int_equal(real_match(HTTP_POST, "/api/entities/c-1/members/remove", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, members_remove_post);
    assert_int_equal(m.r->auth, AUTH_REQUIRED);
    assert_int_equal(real_match(HTTP_GET, "/api/entities/c-1/members/remove", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "DELETE, POST");
    /* The member's reads under the same prefix are still theirs. */
    assert_int_equal(real_match(HTTP_GET, "/api/entities/c-1/members/0xab/progress", &m),
                     ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, progress_get);

    assert_int_equal(real_match(HTTP_POST, "/api/entities/c-1/leave/", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, entity_leave);
    assert_int_equal(real_match(HTTP_POST, "/api/entities/c-1/skills/s-2/update", &m),
                     ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, skill_update);
    assert_param(&m.params[1], "s-2");
    assert_int_equal(real_match(HTTP_DELETE, "/api/entities/c-1/skills/s-2", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, skill_delete);
    assert_int_equal(real_match(HTTP_DELETE, "/api/entities/c-1/levels/gold", &m), ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, level_delete);
    assert_int_equal(real_match(HTTP_POST, "/api/entities/c-1/levels/gold/update", &m),
                     ROUTER_FOUND);
    assert_ptr_equal(m.r->handler, level_update);
    assert_int_equal(real_match(HTTP_GET, "/api/entities/c-1/levels/gold", &m),
                     ROUTER_METHOD_NOT_ALLOWED);
    assert_string_equal(m.allow, "DELETE");
}

/* Fills a concrete path for a pattern: each {name} segment becomes "p<index>". */
static void concrete_path(const char *pattern, char *out, size_t len)
{
    size_t j = 0;
    int k = 0;

    for (const char *p = pattern; *p && j + 4 < len;) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            assert_non_null(close);
            j += (size_t)snprintf(out + j, len - j, "p%d", k++);
            p = close + 1;
        } else {
            out[j++] = *p++;
        }
    }
    out[j] = '\0';
}

static void test_real_table_is_consistent(void **state)
{
    assert_true(router_routes_count >= 4);
    for (size_t i = 0; i < router_routes_count; i++) {
        const route *r = &router_routes[i];
        char norm[256], path[256];
        size_t len = strlen(r->pattern);

        /* Every pattern is already in normalized form and has a handler. */
        assert_non_null(r->handler);
        assert_true(len > 0 && len < sizeof norm);
        assert_int_equal(r->pattern[0], '/');
        memcpy(norm, r->pattern, len + 1);
        assert_int_equal(router_normalize(norm, len), len);
        assert_string_equal(norm, r->pattern);
        assert_true(r->auth >= AUTH_NONE && r->auth <= AUTH_RECOVER);

        /* No earlier route shadows it: a concrete path reaches this very entry. */
        concrete_path(r->pattern, path, sizeof path);
        match m;
        if (real_match(r->method, path, &m) != ROUTER_FOUND || m.r != r)
            fail_msg("route %zu (%s %s) is not reached by %s", i,
                     llhttp_method_name((llhttp_method_t)r->method), r->pattern, path);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize_keeps_clean_paths),
        cmocka_unit_test(test_normalize_collapses_slashes),
        cmocka_unit_test(test_normalize_drops_trailing_slash),
        cmocka_unit_test(test_normalize_reads_only_len_bytes),
        cmocka_unit_test(test_match_static_routes),
        cmocka_unit_test(test_match_params_point_into_path),
        cmocka_unit_test(test_match_two_params),
        cmocka_unit_test(test_match_not_found),
        cmocka_unit_test(test_match_method_not_allowed_lists_allow),
        cmocka_unit_test(test_match_allow_lists_each_method_once),
        cmocka_unit_test(test_match_first_route_wins),
        cmocka_unit_test(test_match_uses_len_not_nul),
        cmocka_unit_test(test_match_allow_with_overlapping_method_names),
        cmocka_unit_test(test_match_empty_table),
        cmocka_unit_test(test_real_healthz),
        cmocka_unit_test(test_real_healthz_put_is_405),
        cmocka_unit_test(test_real_auth_routes),
        cmocka_unit_test(test_real_unknown_is_404),
        cmocka_unit_test(test_real_tend_routes),
        cmocka_unit_test(test_real_table_is_consistent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
