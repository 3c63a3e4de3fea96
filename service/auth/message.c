/* auth message: the sign-in messages of the accepted epochs (CONTRACT section 2) and their
 * SIWE (EIP-4361) forms, kept on the current epoch. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/auth_int.h"
#include "crypto/signin.h"

static int64_t now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec;
}

static int set_message(auth *au, epoch_msg *m, int64_t epoch)
{
    size_t cap = strlen(au->app->cfg.auth_domain) + SIGNIN_MESSAGE_EXTRA;
    char *text = realloc(m->text, cap);
    if (!text)
        return -1;
    m->text = text;
    m->len = signin_message(au->app->cfg.auth_domain, au->secret, au->secret_len,
                            au->app->cfg.auth_epoch_seconds, epoch, text, cap);
    m->epoch = epoch;
    sig_personal_hash(text, m->len, m->hash);
    size_t scap = siwe_message_cap(&au->siwe);
    char *tail = realloc(m->siwe_tail, scap);
    if (!tail)
        return -1;
    m->siwe_tail = tail;
    m->siwe_tail_len = siwe_tail(&au->siwe, epoch, tail, scap);
    return m->len && m->siwe_tail_len ? 0 : -1;
}

int auth_refresh(auth *au)
{
    int64_t e = signin_epoch(now_seconds(), au->app->cfg.auth_epoch_seconds);
    if (au->msgs[0].text && au->msgs[0].epoch == e)
        return 0;
    for (int i = 0; i < EPOCHS; i++)
        if (set_message(au, &au->msgs[i], e - i) != 0)
            return -1;
    return 0;
}

void auth_current_message(auth *au, auth_message *out)
{
    auth_refresh(au);
    int64_t es = au->app->cfg.auth_epoch_seconds;
    out->text = au->msgs[0].text;
    out->len = au->msgs[0].len;
    out->epoch = au->msgs[0].epoch;
    out->issued_at_ms = out->epoch * es * 1000;
    out->renew_after_ms = (out->epoch + 1) * es * 1000;
    out->expires_at_ms = (out->epoch + 2) * es * 1000;
}

size_t auth_siwe_message_cap(const auth *au)
{
    return siwe_message_cap(&au->siwe);
}

uint8_t *auth_siwe_hint(auth *au, const uint8_t addr[20])
{
    uint32_t h;
    memcpy(&h, addr, sizeof h);
    return au->siwe_hints[h & (SIWE_HINTS - 1)];
}

int auth_siwe_message(auth *au, const uint8_t addr[20], char *text, size_t cap, auth_message *out)
{
    memcpy(auth_siwe_hint(au, addr), addr, 20);
    auth_current_message(au, out);
    out->len = siwe_message(&au->siwe, addr, out->epoch, text, cap);
    out->text = text;
    return out->len ? 0 : -1;
}

int64_t auth_signature_expiry(const auth *au, int64_t epoch)
{
    return (epoch + 2) * au->app->cfg.auth_epoch_seconds;
}
