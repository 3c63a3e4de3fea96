/* keyfile: reading and checking a private key file (mode, form, validity on the curve). */
#include "crypto/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/hex.h"

/* Larger than any key with generous whitespace: a bigger file is not a key file. */
#define KEYFILE_MAX 512

void keyfile_wipe(void *p, size_t n)
{
    explicit_bzero(p, n);
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int keyfile_parse(const secp256k1_context *ctx, const char *text, size_t len, uint8_t key[32],
                  char *err, size_t err_len)
{
    while (len && is_space(text[0]))
        text++, len--;
    while (len && is_space(text[len - 1]))
        len--;
    if (len >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))
        text += 2, len -= 2;
    uint8_t k[32];
    if (len != 64 || hex_decode(text, len, k, 32) != 0) {
        snprintf(err, err_len, "must hold 64 hex digits (0x optional), not %zu characters%s", len,
                 len == 64 ? " with a non-hex one" : "");
        return -1;
    }
    if (!secp256k1_ec_seckey_verify(ctx, k)) {
        keyfile_wipe(k, sizeof k);
        snprintf(err, err_len,
                 "does not hold a valid secp256k1 private key (zero or not below "
                 "the curve order)");
        return -1;
    }
    memcpy(key, k, 32);
    keyfile_wipe(k, sizeof k);
    return 0;
}

int keyfile_load(const secp256k1_context *ctx, const char *path, uint8_t key[32], char *err,
                 size_t err_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, err_len, "ATTESTATION_KEY_FILE %s cannot be opened: %s", path,
                 strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "ATTESTATION_KEY_FILE %s is not a regular file", path);
        close(fd);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, err_len,
                 "ATTESTATION_KEY_FILE %s has mode %04o: a private key must not be readable (or "
                 "writable) by group or others (chmod 600 or 400)",
                 path, (unsigned)(st.st_mode & 07777));
        close(fd);
        return -1;
    }
    char text[KEYFILE_MAX + 1];
    size_t len = 0;
    ssize_t n;
    while (len <= KEYFILE_MAX && (n = read(fd, text + len, KEYFILE_MAX + 1 - len)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, err_len, "ATTESTATION_KEY_FILE %s cannot be read: %s", path,
                     strerror(errno));
            close(fd);
            keyfile_wipe(text, sizeof text);
            return -1;
        }
        len += (size_t)n;
    }
    close(fd);
    char why[160];
    int rc = len > KEYFILE_MAX ? -1 : keyfile_parse(ctx, text, len, key, why, sizeof why);
    if (len > KEYFILE_MAX)
        snprintf(why, sizeof why, "must hold 64 hex digits (0x optional), not over %d bytes",
                 KEYFILE_MAX);
    keyfile_wipe(text, sizeof text);
    if (rc != 0)
        snprintf(err, err_len, "ATTESTATION_KEY_FILE %s %s", path, why);
    return rc;
}
