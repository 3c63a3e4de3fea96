/* addrguard: public unicast peers only (addrguard.h). The ranges follow the IANA special-purpose
 * address registries for IPv4 and IPv6; a range the registries mark globally reachable but
 * which embeds or reaches an IPv4 address is refused too. */
#include "net/addrguard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

typedef struct range4 {
    uint32_t net;
    int bits;
    const char *why;
} range4;

static const range4 v4[] = {
    {0x00000000u, 8, "an unspecified address"},   /* 0/8, "this network" */
    {0x0A000000u, 8, "a private address"},        /* 10/8 */
    {0x64400000u, 10, "a shared address"},        /* 100.64/10, carrier-grade NAT */
    {0x7F000000u, 8, "a loopback address"},       /* 127/8 */
    {0xA9FE0000u, 16, "a link-local address"},    /* 169.254/16 */
    {0xAC100000u, 12, "a private address"},       /* 172.16/12 */
    {0xC0000000u, 24, "a reserved address"},      /* 192.0.0/24, protocol assignments */
    {0xC0000200u, 24, "a documentation address"}, /* 192.0.2/24 */
    {0xC0586300u, 24, "a reserved address"},      /* 192.88.99/24, 6to4 relays */
    {0xC0A80000u, 16, "a private address"},       /* 192.168/16 */
    {0xC6120000u, 15, "a benchmark address"},     /* 198.18/15 */
    {0xC6336400u, 24, "a documentation address"}, /* 198.51.100/24 */
    {0xCB007100u, 24, "a documentation address"}, /* 203.0.113/24 */
    {0xE0000000u, 4, "a multicast address"},      /* 224/4 */
    {0xF0000000u, 4, "a reserved address"},       /* 240/4, and the broadcast address */
};

typedef struct range6 {
    uint8_t net[16];
    int bits;
    const char *why;
} range6;

static const range6 v6[] = {
    {{0}, 128, "an unspecified address"},                                          /* ::/128 */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, 128, "a loopback address"}, /* ::1 */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 96, "an IPv4-mapped address"}, /* ::ffff:0:0/96 */
    {{0}, 96, "an IPv4-compatible address"},                                    /* ::/96 */
    {{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0},
     96,
     "an IPv4-translated address"},                       /* ::ffff:0:0:0/96 */
    {{0, 0x64, 0xff, 0x9b}, 96, "a NAT64 address"},       /* 64:ff9b::/96 */
    {{0, 0x64, 0xff, 0x9b, 0, 1}, 48, "a NAT64 address"}, /* 64:ff9b:1::/48 */
    {{0x01, 0x00}, 64, "a discard address"},              /* 100::/64 */
    {{0x20, 0x01, 0x00, 0x00}, 23, "a reserved address"}, /* 2001::/23: Teredo, benchmark, … */
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "a documentation address"}, /* 2001:db8::/32 */
    {{0x20, 0x02}, 16, "a 6to4 address"},                      /* 2002::/16 */
    {{0x3f, 0xff, 0x00}, 20, "a documentation address"},       /* 3fff::/20 */
    {{0x5f, 0x00}, 16, "a reserved address"},                  /* 5f00::/16 */
    {{0xfc}, 7, "a private address"},                          /* fc00::/7 */
    {{0xfe, 0x80}, 10, "a link-local address"},                /* fe80::/10 */
    {{0xfe, 0xc0}, 10, "a site-local address"},                /* fec0::/10 */
    {{0xff}, 8, "a multicast address"},                        /* ff00::/8 */
};

static const char *check4(uint32_t a)
{
    for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++) {
        uint32_t mask = v4[i].bits ? ~0u << (32 - v4[i].bits) : 0;
        if ((a & mask) == v4[i].net)
            return v4[i].why;
    }
    return NULL;
}

static bool prefix_match(const uint8_t *a, const uint8_t *net, int bits)
{
    int whole = bits / 8, rest = bits % 8;
    if (memcmp(a, net, (size_t)whole))
        return false;
    if (!rest)
        return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a[whole] & mask) == (net[whole] & mask);
}

static const char *check6(const uint8_t a[16])
{
    for (size_t i = 0; i < sizeof v6 / sizeof v6[0]; i++)
        if (prefix_match(a, v6[i].net, v6[i].bits))
            return v6[i].why;
    /* Only 2000::/3 is global unicast today; everything else is unassigned or special. */
    if ((a[0] & 0xe0) != 0x20)
        return "a reserved address";
    return NULL;
}

const char *addrguard_sockaddr(const struct sockaddr *sa)
{
    if (!sa)
        return "no address";
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in in;
        memcpy(&in, sa, sizeof in);
        return check4(ntohl(in.sin_addr.s_addr));
    }
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 in6;
        memcpy(&in6, sa, sizeof in6);
        return check6(in6.sin6_addr.s6_addr);
    }
    return "not an internet address";
}

bool addrguard_numeric_host(const char *host, const char **reason)
{
    char h[64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof h) {
        *reason = NULL;
        return false;
    }
    memcpy(h, host, n);
    h[n] = '\0';
    /* A trailing dot ends a fully qualified name; "127.0.0.1." is still that address. */
    if (n > 1 && h[n - 1] == '.')
        h[--n] = '\0';
    struct in6_addr a6;
    if (inet_pton(AF_INET6, h, &a6) == 1) {
        *reason = check6(a6.s6_addr);
        return true;
    }
    /* inet_aton takes every legacy spelling ("127.1", "0x7f.1", "017700000001", "2130706433"):
     * the ones a resolver or a browser turns into that same address. */
    struct in_addr a4;
    if (inet_aton(h, &a4)) {
        *reason = check4(ntohl(a4.s_addr));
        return true;
    }
    *reason = NULL;
    return false;
}
