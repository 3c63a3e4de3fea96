/* addrguard: which peer addresses a webhook may reach (CONTRACT section 14). Everything but a
 * public unicast address is refused: loopback, private, link-local, shared (100.64/10),
 * benchmark (198.18/15), documentation, multicast, reserved, unspecified, and every IPv6 form
 * that carries an IPv4 address inside it (IPv4-mapped, -compatible, NAT64, 6to4, Teredo), since
 * the network may route it to the address inside.
 *
 * Checked twice: on the URL's host when an endpoint is made (a numeric spelling here, or every
 * address its name resolves to), and on the address a delivery actually connects to, so that
 * a name resolving elsewhere since cannot reach a refused address. */
#ifndef ENTITYD_ADDRGUARD_H
#define ENTITYD_ADDRGUARD_H

#include <stdbool.h>
#include <sys/socket.h>

/* Why the peer sa (AF_INET or AF_INET6) may not be reached, as a short phrase ("a loopback
 * address"), or NULL when it may. Any other family is refused. */
const char *addrguard_sockaddr(const struct sockaddr *sa);

/* The host of a URL (brackets of an IPv6 literal allowed) when it is a numeric address in any
 * spelling the C library accepts for one (dotted, shortened "127.1", hexadecimal, octal, one
 * decimal number, IPv6 with or without an embedded IPv4 part): true with *reason the phrase
 * above, or NULL when the address may be reached. False when host is a name (to resolve and
 * check each address with addrguard_sockaddr). */
bool addrguard_numeric_host(const char *host, const char **reason);

#endif
