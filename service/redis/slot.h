/* slot: the Redis Cluster hash slot of a key (CRC16-CCITT/XMODEM of its hash tag, mod 16384). */
#ifndef ENTITYD_SLOT_H
#define ENTITYD_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define SLOT_COUNT 16384

/* CRC16 as Redis Cluster computes it: polynomial 0x1021, initial value 0, no reflection. */
uint16_t slot_crc16(const char *p, size_t len);
/* The slot of a key: of the part between the first '{' and the next '}' when that part is not
 * empty (the hash tag), else of the whole key. */
int slot_of(const char *key, size_t len);

/* What an error reply asks of a cluster client. */
enum slot_error {
    SLOT_ERR_OTHER = 0, /* an answer like any other */
    SLOT_ERR_MOVED,     /* "MOVED <slot> <host>:<port>": the slot lives there now */
    SLOT_ERR_ASK,       /* "ASK <slot> <host>:<port>": this key, once, there (migration) */
    SLOT_ERR_TRYAGAIN,  /* keys of a multi-key command are split by a migration */
    SLOT_ERR_DOWN,      /* "CLUSTERDOWN ...": the cluster cannot serve the slot now */
};

/* Classifies an error reply's text; for MOVED and ASK also reads the slot and the address
 * (host NUL-terminated, at most host_size - 1 bytes). A malformed MOVED or ASK is OTHER. */
int slot_parse_error(const char *str, size_t len, int *slot, char *host, size_t host_size,
                     int *port);

#endif
