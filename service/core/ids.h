/* ids: entity and skill ids ("c-" / "s-" + lowercase UUIDv4) and client-chosen level ids. */
#ifndef ENTITYD_IDS_H
#define ENTITYD_IDS_H

#include <stdbool.h>
#include <stddef.h>

/* "c-" + 36 + NUL */
#define IDS_SIZE 39

/* Writes prefix ("c-" or "s-") + a fresh random lowercase UUIDv4. Returns 0 or -1. */
int ids_new(char out[IDS_SIZE], char prefix);
/* True for prefix + "-" + a lowercase UUIDv4 of exactly 36 characters. */
bool ids_valid(const char *s, size_t len, char prefix);
/* True for a level id: [A-Za-z0-9_-]{1,64}. */
bool ids_valid_level(const char *s, size_t len);

#endif
