/* multicall: aggregate3 encoded and decoded (multicall.h). */
#include "rpc/multicall.h"

#include <string.h>

#include "crypto/hex.h"

int u256_from_decimal(const char *s, size_t len, u256 *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0 || len > 78)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        /* out = out * 10 + digit, from the low byte up; a carry out of the top byte overflows */
        unsigned carry = (unsigned)(s[i] - '0');
        for (int k = 31; k >= 0; k--) {
            unsigned v = out->b[k] * 10u + carry;
            out->b[k] = (uint8_t)v;
            carry = v >> 8;
        }
        if (carry)
            return -1;
    }
    return 0;
}

void u256_to_decimal(const u256 *v, char out[79])
{
    u256 t = *v;
    char rev[79];
    size_t n = 0;
    bool zero;
    do {
        /* t /= 10, the remainder the next digit */
        unsigned rem = 0;
        zero = true;
        for (int k = 0; k < 32; k++) {
            unsigned cur = (rem << 8) | t.b[k];
            t.b[k] = (uint8_t)(cur / 10);
            rem = cur % 10;
            zero = zero && t.b[k] == 0;
        }
        rev[n++] = (char)('0' + rem);
    } while (!zero && n < 78);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
}

int u256_cmp(const u256 *a, const u256 *b)
{
    return memcmp(a->b, b->b, 32);
}

/* ---- the calls ---- */

static void call_start(multicall_call *c, uint32_t selector)
{
    c->data[0] = (uint8_t)(selector >> 24);
    c->data[1] = (uint8_t)(selector >> 16);
    c->data[2] = (uint8_t)(selector >> 8);
    c->data[3] = (uint8_t)selector;
    c->len = 4;
}

static void call_address(multicall_call *c, const uint8_t a[20])
{
    memset(c->data + c->len, 0, 12);
    memcpy(c->data + c->len + 12, a, 20);
    c->len += 32;
}

static void call_word(multicall_call *c, const u256 *w)
{
    memcpy(c->data + c->len, w->b, 32);
    c->len += 32;
}

/* The selectors: the first four bytes of keccak256 of each signature. */
#define SEL_BALANCE_OF      0x70a08231u /* balanceOf(address) */
#define SEL_OWNER_OF        0x6352211eu /* ownerOf(uint256) */
#define SEL_BALANCE_OF_1155 0x00fdd58eu /* balanceOf(address,uint256) */
#define SEL_ETH_BALANCE     0x4d2301ccu /* getEthBalance(address) */
#define SEL_BLOCK_NUMBER    0x42cbb15cu /* getBlockNumber() */
#define SEL_AGGREGATE3      0x82ad56cbu /* aggregate3((address,bool,bytes)[]) */

void multicall_balance_of(multicall_call *c, const uint8_t owner[20])
{
    call_start(c, SEL_BALANCE_OF);
    call_address(c, owner);
}

void multicall_owner_of(multicall_call *c, const u256 *token)
{
    call_start(c, SEL_OWNER_OF);
    call_word(c, token);
}

void multicall_balance_of_1155(multicall_call *c, const uint8_t owner[20], const u256 *token)
{
    call_start(c, SEL_BALANCE_OF_1155);
    call_address(c, owner);
    call_word(c, token);
}

void multicall_eth_balance(multicall_call *c, const uint8_t multicall[20], const uint8_t who[20])
{
    memcpy(c->target, multicall, 20);
    call_start(c, SEL_ETH_BALANCE);
    call_address(c, who);
}

void multicall_block_number(multicall_call *c, const uint8_t multicall[20])
{
    memcpy(c->target, multicall, 20);
    call_start(c, SEL_BLOCK_NUMBER);
}

/* ---- aggregate3 ---- */

static int put_word_u64(buf *out, uint64_t v)
{
    uint8_t w[32] = {0};
    for (int k = 0; k < 8; k++)
        w[31 - k] = (uint8_t)(v >> (8 * k));
    char hex[65]; /* hex_encode ends it with a NUL */
    hex_encode(w, 32, hex);
    return buf_append(out, hex, 64);
}

static int put_bytes_padded(buf *out, const uint8_t *d, size_t len)
{
    char hex[2 * 32 + 1];
    for (size_t at = 0; at < len; at += 32) {
        uint8_t w[32] = {0};
        memcpy(w, d + at, len - at < 32 ? len - at : 32);
        hex_encode(w, 32, hex);
        if (buf_append(out, hex, 64) != 0)
            return -1;
    }
    return 0;
}

/* A Call3 tuple's size in bytes: target, allowFailure, the callData offset, its length, its
 * words. */
static size_t tuple_size(const multicall_call *c)
{
    return 4 * 32 + (c->len + 31) / 32 * 32;
}

int multicall_encode(const multicall_call *calls, size_t n, buf *out)
{
    int rc = buf_append_str(out, "0x82ad56cb");
    rc |= put_word_u64(out, 32); /* where the array begins */
    rc |= put_word_u64(out, n);
    /* each tuple's offset, from just after the length */
    size_t at = 32 * n;
    for (size_t i = 0; i < n; i++) {
        rc |= put_word_u64(out, at);
        at += tuple_size(&calls[i]);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        uint8_t target[32] = {0};
        memcpy(target + 12, calls[i].target, 20);
        rc |= put_bytes_padded(out, target, 32);
        rc |= put_word_u64(out, 1);  /* allowFailure */
        rc |= put_word_u64(out, 96); /* callData, after these three words */
        rc |= put_word_u64(out, calls[i].len);
        rc |= put_bytes_padded(out, calls[i].data, calls[i].len);
    }
    return rc ? -1 : 0;
}

/* A word at `at` read as an offset or length that fits the data; false otherwise. */
static bool read_size(const uint8_t *d, size_t len, size_t at, size_t *out)
{
    if (at > len || len - at < 32)
        return false;
    for (int k = 0; k < 24; k++)
        if (d[at + (size_t)k])
            return false;
    uint64_t v = 0;
    for (int k = 24; k < 32; k++)
        v = v << 8 | d[at + (size_t)k];
    if (v > len)
        return false;
    *out = (size_t)v;
    return true;
}

int multicall_decode(const uint8_t *ret, size_t len, multicall_result *out, size_t n)
{
    size_t arr, count;
    if (!read_size(ret, len, 0, &arr) || !read_size(ret, len, arr, &count) || count != n)
        return -1;
    size_t base = arr + 32; /* the tuples' offsets count from here */
    for (size_t i = 0; i < n; i++) {
        size_t off, data_off, data_len;
        if (!read_size(ret, len, base + 32 * i, &off) || off > len - base)
            return -1;
        size_t t = base + off;
        /* success: a bool word (0 or 1), then the returnData's offset from the tuple */
        if (t > len || len - t < 64)
            return -1;
        for (int k = 0; k < 31; k++)
            if (ret[t + (size_t)k])
                return -1;
        if (ret[t + 31] > 1 || !read_size(ret, len, t + 32, &data_off) || data_off > len - t ||
            !read_size(ret, len, t + data_off, &data_len) || data_len > len - (t + data_off + 32))
            return -1;
        out[i] = (multicall_result){ret[t + 31] == 1, ret + t + data_off + 32, data_len};
    }
    return 0;
}

bool multicall_word(const multicall_result *r, u256 *out)
{
    if (!r->ok || r->len < 32)
        return false;
    memcpy(out->b, r->data, 32);
    return true;
}

bool multicall_address(const multicall_result *r, uint8_t out[20])
{
    if (!r->ok || r->len < 32)
        return false;
    for (int k = 0; k < 12; k++)
        if (r->data[k])
            return false;
    memcpy(out, r->data + 12, 20);
    return true;
}
