/* store_int: what store.c (the connection and its units) and store_read.c (reads through the
 * read cache) share. Internal to those two files. */
#ifndef ENTITYD_STORE_INT_H
#define ENTITYD_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "redis/command.h"
#include "redis/store.h"

struct app;

/* store_command and store_exec with SEND_* flags (send.h); true when cb has already run. */
bool store_send_command(store *st, int flags, store_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens);
bool store_send_exec(store *st, int flags, store_cb cb, void *data, int ncmds,
                     const store_cmd *cmds);
/* The store's own connection is ready (always true in cluster mode, where the cluster sends). */
bool store_link_ready(const store *st);
struct app *store_app(const store *st);

#endif
