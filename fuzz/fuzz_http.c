/* fuzz_http: arbitrary byte streams through one connection: HTTP parsing (llhttp and the
 * service's callbacks and limits), pipelining, routing, query decoding, media-type and sign-in
 * checks, and every handler's input validation, with Redis closed (503).
 *
 * Input: byte 0 picks how the rest is cut into reads (bits 0-1) and whether the client then
 * shuts its side down (bit 2); the rest is what the client sends, delivered with
 * conn_received in pieces, as reads from a socket would be. Every response the
 * connection writes is parsed back and checked (inproc.c); the connection must be freed after it
 * closes, and LeakSanitizer checks that nothing else is left. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inproc.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* A small body limit, so that fuzz inputs reach 413 through both Content-Length and the
     * running total of a chunked body. */
    inproc_init("2048");
    return 0;
}

static uint32_t next_rand(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* How the input is cut into reads: byte 0 picks a mode (whole, tiny pieces, medium, mixed) and
 * seeds the sizes. Tiny pieces only for short inputs, where they cost little. */
static size_t next_chunk(uint32_t *s, int mode, size_t left)
{
    uint32_t r = next_rand(s);
    size_t n;
    switch (mode) {
    case 0:
        n = left;
        break;
    case 1:
        n = 1 + (r >> 3) % 8;
        break;
    case 2:
        n = 1 + (r >> 3) % 256;
        break;
    default:
        n = (r & 7) == 0 ? 1 + (r >> 3) % 16 : (r & 7) < 4 ? 1 + (r >> 3) % 1024 : left;
    }
    return n < left ? n : left;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t seed = 0x9e3779b9u ^ ((uint32_t)data[0] * 2654435761u);
    if (!seed)
        seed = 1;
    int mode = data[0] & 3;
    bool half_close = (data[0] & 4) != 0;
    data++;
    size--;
    if (mode == 1 && size > 2048)
        mode = 2;
    http_conn *c = inproc_conn_open();
    size_t off = 0;
    for (int guard = 0; off < size && guard < 100000; guard++) {
        if (!inproc_conn_alive(c))
            break;
        if (!inproc_conn_wants_input(c)) {
            if (c->base.owed) { /* a signature check on the threadpool: wait for it */
                uv_run(inproc_app()->loop, UV_RUN_ONCE);
                inproc_pump();
                continue;
            }
            if (c->base.write_active || c->base.out.len) {
                inproc_pump();
                continue;
            }
            break; /* closing: the server reads nothing more */
        }
        size_t n = next_chunk(&seed, mode, size - off);
        conn_received(&c->base, (const char *)data + off, n);
        off += n;
        /* The loop runs when there is something for it: a write to complete, an answer owed. */
        if (c->base.write_active || c->base.owed || c->base.state != CONN_OPEN)
            inproc_pump();
    }
    if (half_close && inproc_conn_alive(c))
        inproc_half_close(c);
    inproc_conn_finish(c, NULL);
    return 0;
}
