/* entityd-sign: signs the service's sign-in message (EIP-191 personal_sign) with wallet keys. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <secp256k1.h>

#include "crypto/address.h"
#include "crypto/hex.h"
#include "crypto/sig.h"

#define EXIT_USAGE        2
#define DEFAULT_KEY_ENV   "ENTITYD_SIGN_KEY"
#define MAX_MESSAGE_BYTES (16u << 20)
#define MAX_KEY_FILE      (64u << 20)
#define MAX_RESPONSE      (4u << 20)
#define MAX_RANDOM_KEYS   10000000L
#define NET_TIMEOUT_S     10

static const char usage_text[] =
    "Usage: entityd-sign [KEY SOURCE] [MESSAGE SOURCE] [OUTPUT OPTIONS]\n"
    "\n"
    "Signs a message the way wallets do for personal_sign (EIP-191) and prints, one line per\n"
    "key:  address=0x<lowercase address>&signature=0x<r||s||v, 130 hex digits>\n"
    "\n"
    "Key source (private keys are never taken from the command line):\n"
    "  --key-env NAME       read one key from environment variable NAME\n"
    "                       (default " DEFAULT_KEY_ENV ")\n"
    "  --key-file PATH      read keys from PATH, one per line (blank lines and lines\n"
    "                       starting with # are skipped); signs with each\n"
    "  --random N           sign with N freshly generated keys\n"
    "  --keys-out PATH      with --random: write the generated keys to PATH (mode 0600)\n"
    "  A key is 64 hex digits, optionally prefixed with 0x.\n"
    "\n"
    "Message source (exactly one, unless --address-only):\n"
    "  --message-file PATH  the bytes of PATH, exactly\n"
    "  --message -          the bytes of standard input, exactly\n"
    "  --message TEXT       TEXT itself\n"
    "  --url http[s]://HOST:PORT[/PREFIX]\n"
    "                       fetch GET PREFIX/api/auth/message and sign data.message\n"
    "  --siwe               with --url: sign each key's own Sign-In with Ethereum (EIP-4361)\n"
    "                       message, GET PREFIX/api/auth/message?address=<its address>\n"
    "  --strip-newline      drop one trailing newline (\\n or \\r\\n) from the message"
    "\n"
    "Output:\n"
    "  --compact            EIP-2098 compact signature (128 hex digits)\n"
    "  --v01                v as 00/01 instead of 1b/1c (27/28)\n"
    "  --address-only       print only each key's lowercase address\n"
    "  --help               this text\n"
    "\n"
    "Example: a bot or admin tool awards a contribution with its wallet (an owner or admin\n"
    "of the entity; keep its key in a file of mode 0600 or in the environment):\n"
    "  AUTH=$(entityd-sign --key-file bot.key --url http://127.0.0.1:8080)\n"
    "  curl -X POST \"http://127.0.0.1:8080/api/entities/$ENTITY/contributions?$AUTH\" \\\n"
    "    -H 'Content-Type: application/json' \\\n"
    "    -d '{\"member\":\"0x...\",\"xp\":10,\"title\":\"Merged PR 42\","
    "\"idempotencyKey\":\"pr-42\"}'\n"
    "A signature holds for its epoch and the next (AUTH_EPOCH_SECONDS, default one day): sign\n"
    "again once renewAfter of GET /api/auth/message has passed. Retry an award answered 503 or\n"
    "504 with the same idempotencyKey: it is applied once (a replay answers 200, replayed).\n"
    "\n"
    "Exit status: 0 on success, 1 on failure, 2 on a usage error.\n";

struct options {
    const char *key_env;
    const char *key_file;
    long random_n;
    const char *keys_out;
    const char *message_file;
    const char *message;
    const char *url;
    int strip_newline;
    int compact;
    int v01;
    int address_only;
    int siwe;
};

struct keyset {
    uint8_t (*keys)[32];
    size_t n, cap;
};

struct bytes {
    char *data;
    size_t len;
};

__attribute__((noreturn, format(printf, 1, 2))) static void die_usage(const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...);

static void die_usage(const char *fmt, ...)
{
    va_list ap;

    fputs("entityd-sign: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'entityd-sign --help'.\n", stderr);
    exit(EXIT_USAGE);
}

static void die(const char *fmt, ...)
{
    va_list ap;

    fputs("entityd-sign: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(EXIT_FAILURE);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);

    if (q == NULL) {
        die("out of memory");
    }
    return q;
}

/* ------------------------------------------------------------------ arguments */

static int looks_like_key(const char *s)
{
    size_t n = strlen(s);

    if (n == 66 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        n -= 2;
    }
    if (n != 64) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (hex_digit_value(s[i]) < 0) {
            return 0;
        }
    }
    return 1;
}

/* Matches "--name" (value in the next argument) or "--name=value"; returns the value or NULL
 * when argv[*i] is another option. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);

    if (strncmp(arg, name, n) != 0) {
        return NULL;
    }
    if (arg[n] == '=') {
        return arg + n + 1;
    }
    if (arg[n] != '\0') {
        return NULL;
    }
    if (*i + 1 >= argc) {
        die_usage("option %s needs a value", name);
    }
    return argv[++*i];
}

static void parse_args(int argc, char **argv, struct options *o)
{
    int key_env_given = 0;
    const char *random_arg = NULL;

    memset(o, 0, sizeof(*o));
    o->key_env = DEFAULT_KEY_ENV;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_text, stdout);
            exit(EXIT_SUCCESS);
        } else if ((v = option_value(argc, argv, &i, "--key-env")) != NULL) {
            o->key_env = v;
            key_env_given = 1;
        } else if ((v = option_value(argc, argv, &i, "--key-file")) != NULL) {
            o->key_file = v;
        } else if ((v = option_value(argc, argv, &i, "--random")) != NULL) {
            random_arg = v;
        } else if ((v = option_value(argc, argv, &i, "--keys-out")) != NULL) {
            o->keys_out = v;
        } else if ((v = option_value(argc, argv, &i, "--message-file")) != NULL) {
            o->message_file = v;
        } else if ((v = option_value(argc, argv, &i, "--message")) != NULL) {
            o->message = v;
        } else if ((v = option_value(argc, argv, &i, "--url")) != NULL) {
            o->url = v;
        } else if (strcmp(a, "--strip-newline") == 0) {
            o->strip_newline = 1;
        } else if (strcmp(a, "--compact") == 0) {
            o->compact = 1;
        } else if (strcmp(a, "--v01") == 0) {
            o->v01 = 1;
        } else if (strcmp(a, "--address-only") == 0) {
            o->address_only = 1;
        } else if (strcmp(a, "--siwe") == 0) {
            o->siwe = 1;
        } else if (looks_like_key(a)) {
            /* Not echoed: it may be a real key, already exposed in ps and shell history. */
            die_usage("refusing a private key on the command line (visible to other users and "
                      "kept in shell history); use %s or --key-file",
                      DEFAULT_KEY_ENV);
        } else {
            die_usage("unknown argument '%s'", a);
        }
    }

    if (random_arg != NULL) {
        char *end;

        errno = 0;
        o->random_n = strtol(random_arg, &end, 10);
        if (errno != 0 || end == random_arg || *end != '\0' || o->random_n < 1 ||
            o->random_n > MAX_RANDOM_KEYS) {
            die_usage("--random needs a whole number from 1 to %ld", MAX_RANDOM_KEYS);
        }
    }
    if ((o->key_file != NULL) + (random_arg != NULL) + key_env_given > 1) {
        die_usage("use only one key source: --key-env, --key-file or --random");
    }
    if (o->keys_out != NULL && random_arg == NULL) {
        die_usage("--keys-out only goes with --random");
    }
    int sources = (o->message_file != NULL) + (o->message != NULL) + (o->url != NULL);
    if (o->address_only) {
        if (sources > 0 || o->compact || o->v01 || o->strip_newline) {
            die_usage("--address-only takes no message and no signature options");
        }
    } else if (sources != 1) {
        die_usage("give exactly one message source: --message-file, --message or --url");
    }
    if (o->siwe && o->url == NULL) {
        die_usage("--siwe goes with --url (the message names the key's address)");
    }
    if (o->compact && o->v01) {
        die_usage("--compact and --v01 exclude each other (a compact signature has no v)");
    }
}

/* ------------------------------------------------------------------ keys */

static void keyset_add(struct keyset *ks, const uint8_t key[32])
{
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? 2 * ks->cap : 8;
        uint8_t(*keys)[32] = calloc(cap, sizeof(*keys));

        if (keys == NULL) {
            die("out of memory");
        }
        /* Copy and wipe rather than realloc, which could leave key bytes in freed memory. */
        if (ks->n > 0) {
            memcpy(keys, ks->keys, ks->n * sizeof(*keys));
            explicit_bzero(ks->keys, ks->n * sizeof(*keys));
        }
        free(ks->keys);
        ks->keys = keys;
        ks->cap = cap;
    }
    memcpy(ks->keys[ks->n++], key, 32);
}

static void keyset_wipe(struct keyset *ks)
{
    if (ks->keys != NULL) {
        explicit_bzero(ks->keys, ks->cap * sizeof(*ks->keys));
    }
    free(ks->keys);
    memset(ks, 0, sizeof(*ks));
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Parses one key (surrounding whitespace and an optional 0x ignored). Returns 0 or -1. */
static int parse_key(const secp256k1_context *ctx, const char *s, size_t len, uint8_t out[32])
{
    uint8_t key[32];

    while (len > 0 && is_space(s[0])) {
        s++;
        len--;
    }
    while (len > 0 && is_space(s[len - 1])) {
        len--;
    }
    if (len >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        len -= 2;
    }
    if (hex_decode(s, len, key, 32) != 0 || !secp256k1_ec_seckey_verify(ctx, key)) {
        explicit_bzero(key, sizeof(key));
        return -1;
    }
    memcpy(out, key, 32);
    explicit_bzero(key, sizeof(key));
    return 0;
}

/* Reads all of fd (up to limit bytes) into a malloc'ed buffer with a spare NUL; dies on error or
 * when the input is larger. what names the source in messages. */
static struct bytes read_fd(int fd, size_t limit, const char *what)
{
    struct bytes b = {NULL, 0};
    size_t cap = 0;

    for (;;) {
        if (cap - b.len < 4096) {
            cap = cap ? 2 * cap : 65536;
            b.data = xrealloc(b.data, cap + 1);
        }
        ssize_t n = read(fd, b.data + b.len, cap - b.len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            die("cannot read %s: %s", what, strerror(errno));
        }
        if (n == 0) {
            break;
        }
        b.len += (size_t)n;
        if (b.len > limit) {
            die("%s is larger than %zu bytes", what, limit);
        }
    }
    b.data[b.len] = '\0';
    return b;
}

static struct bytes read_path(const char *path, size_t limit)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        die("cannot open %s: %s", path, strerror(errno));
    }
    struct bytes b = read_fd(fd, limit, path);
    close(fd);
    return b;
}

static void load_key_env(const secp256k1_context *ctx, const char *name, struct keyset *ks)
{
    const char *v = getenv(name);
    uint8_t key[32];

    if (v == NULL || v[0] == '\0') {
        die("no key: environment variable %s is not set (or use --key-file / --random)", name);
    }
    if (parse_key(ctx, v, strlen(v), key) != 0) {
        die("%s does not hold a valid private key (64 hex digits, optional 0x)", name);
    }
    keyset_add(ks, key);
    explicit_bzero(key, sizeof(key));
}

static void load_key_file(const secp256k1_context *ctx, const char *path, struct keyset *ks)
{
    struct bytes b = read_path(path, MAX_KEY_FILE);
    size_t line_no = 0;
    char *p = b.data, *end = b.data + b.len;

    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *line_end = nl != NULL ? nl : end;
        char *q = p;
        uint8_t key[32];

        line_no++;
        while (q < line_end && is_space(*q)) {
            q++;
        }
        if (q < line_end && *q != '#') {
            if (parse_key(ctx, q, (size_t)(line_end - q), key) != 0) {
                explicit_bzero(b.data, b.len);
                die("%s:%zu: not a valid private key (64 hex digits, optional 0x)", path, line_no);
            }
            keyset_add(ks, key);
            explicit_bzero(key, sizeof(key));
        }
        p = line_end + 1;
    }
    explicit_bzero(b.data, b.len);
    free(b.data);
    if (ks->n == 0) {
        die("%s holds no keys", path);
    }
}

static void random_bytes(uint8_t *out, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = getrandom(out + got, len - got, 0);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            die("getrandom failed: %s", strerror(errno));
        }
        got += (size_t)n;
    }
}

static void generate_keys(const secp256k1_context *ctx, long n, const char *keys_out,
                          struct keyset *ks)
{
    FILE *out = NULL;

    if (keys_out != NULL) {
        int fd = open(keys_out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        /* O_CREAT's mode does not apply to an existing file; tighten it explicitly. */
        if (fd < 0 || fchmod(fd, 0600) != 0 || (out = fdopen(fd, "w")) == NULL) {
            die("cannot write %s: %s", keys_out, strerror(errno));
        }
    }
    for (long i = 0; i < n; i++) {
        uint8_t key[32];
        char hex[65];

        /* A uniform 256-bit value is invalid with probability ~2^-128; retry to be exact. */
        do {
            random_bytes(key, sizeof(key));
        } while (!secp256k1_ec_seckey_verify(ctx, key));
        keyset_add(ks, key);
        if (out != NULL) {
            hex_encode(key, 32, hex);
            fprintf(out, "0x%s\n", hex);
            explicit_bzero(hex, sizeof(hex));
        }
        explicit_bzero(key, sizeof(key));
    }
    if (out != NULL && (fflush(out) != 0 || ferror(out) || fclose(out) != 0)) {
        die("cannot write %s: %s", keys_out, strerror(errno));
    }
}

/* ------------------------------------------------------------------ fetching the message */

/* Collects the answer's body, up to MAX_RESPONSE. */
static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userp)
{
    struct bytes *b = userp;
    size_t n = size * nmemb;

    if (b->len + n + 1 > MAX_RESPONSE) {
        return 0; /* aborts the transfer */
    }
    b->data = xrealloc(b->data, b->len + n + 1);
    memcpy(b->data + b->len, ptr, n);
    b->len += n;
    b->data[b->len] = '\0';
    return n;
}

/* The message URL: the base (its trailing slashes dropped), /api/auth/message, and with an
 * address its query. */
static char *message_url(const char *base, const char *address)
{
    size_t blen = strlen(base);

    if (strncasecmp(base, "http://", 7) != 0 && strncasecmp(base, "https://", 8) != 0) {
        die_usage("--url must start with http:// or https://");
    }
    if (strpbrk(base, "?#") != NULL) {
        die_usage("--url takes no query or fragment");
    }
    for (const char *c = base; *c; c++) {
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            die_usage("--url contains spaces or control characters");
        }
    }
    while (blen > 0 && base[blen - 1] == '/') {
        blen--;
    }
    char *url = xrealloc(NULL, blen + sizeof("/api/auth/message?address=") + 42);
    snprintf(url, blen + sizeof("/api/auth/message?address=") + 42, "%.*s/api/auth/message%s%s",
             (int)blen, base, address ? "?address=" : "", address ? address : "");
    return url;
}

/* GETs PREFIX/api/auth/message (for address, when given: its SIWE message) and returns
 * data.message. URL parsing, TLS and the HTTP framing are libcurl's. */
static struct bytes fetch_message(const char *base, const char *address)
{
    char *url = message_url(base, address);
    char errbuf[CURL_ERROR_SIZE] = "";
    struct bytes resp = {NULL, 0}, msg;
    long status = 0;
    CURL *e = curl_easy_init();

    if (e == NULL) {
        die("cannot create an HTTP client");
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_TIMEOUT, (long)NET_TIMEOUT_S);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "entityd-sign");
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(e);
    if (rc != CURLE_OK) {
        die("cannot fetch the sign-in message: %s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    }
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);

    json_error_t jerr;
    json_t *root = resp.data ? json_loadb(resp.data, resp.len, 0, &jerr) : NULL;
    json_t *m = json_object_get(json_object_get(root, "data"), "message");
    if (status != 200) {
        const char *why =
            json_string_value(json_object_get(json_object_get(root, "error"), "message"));
        die("/api/auth/message answered HTTP %ld%s%s", status, why ? ": " : "", why ? why : "");
    }
    if (root == NULL) {
        die("the response of /api/auth/message is not JSON");
    }
    if (!json_is_string(m)) {
        die("the response of /api/auth/message has no string data.message");
    }
    msg.len = json_string_length(m);
    msg.data = xrealloc(NULL, msg.len + 1);
    memcpy(msg.data, json_string_value(m), msg.len + 1);
    json_decref(root);
    free(resp.data);
    free(url);
    return msg;
}

static struct bytes load_message(const struct options *o)
{
    struct bytes b;

    if (o->url != NULL) {
        b = fetch_message(o->url, NULL);
    } else if (o->message_file != NULL) {
        b = read_path(o->message_file, MAX_MESSAGE_BYTES);
    } else if (strcmp(o->message, "-") == 0) {
        b = read_fd(STDIN_FILENO, MAX_MESSAGE_BYTES, "standard input");
    } else {
        b.len = strlen(o->message);
        b.data = xrealloc(NULL, b.len + 1);
        memcpy(b.data, o->message, b.len + 1);
    }
    if (o->strip_newline && b.len > 0 && b.data[b.len - 1] == '\n') {
        b.len--;
        if (b.len > 0 && b.data[b.len - 1] == '\r') {
            b.len--;
        }
    }
    return b;
}

/* ------------------------------------------------------------------ main */

static void key_address(const secp256k1_context *ctx, const uint8_t key[32], char out[43])
{
    secp256k1_pubkey pk;
    uint8_t pub[65], addr[20];
    size_t len = sizeof(pub);

    if (!secp256k1_ec_pubkey_create(ctx, &pk, key) ||
        !secp256k1_ec_pubkey_serialize(ctx, pub, &len, &pk, SECP256K1_EC_UNCOMPRESSED)) {
        die("cannot derive a public key");
    }
    address_from_pubkey(pub, addr);
    address_format_lower(addr, out);
}

int main(int argc, char **argv)
{
    struct options o;
    struct keyset ks = {NULL, 0, 0};
    struct bytes msg = {NULL, 0};
    uint8_t hash[32], seed[32];
    secp256k1_context *ctx;

    parse_args(argc, argv, &o);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        die("cannot initialise libcurl");
    }
    ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
    if (ctx == NULL) {
        die("cannot create a secp256k1 context");
    }
    /* Blinding against timing and power side channels while real keys are in use. */
    random_bytes(seed, sizeof(seed));
    if (!secp256k1_context_randomize(ctx, seed)) {
        die("cannot randomize the secp256k1 context");
    }

    if (o.random_n > 0) {
        generate_keys(ctx, o.random_n, o.keys_out, &ks);
    } else if (o.key_file != NULL) {
        load_key_file(ctx, o.key_file, &ks);
    } else {
        load_key_env(ctx, o.key_env, &ks);
    }
    if (!o.address_only && !o.siwe) {
        msg = load_message(&o);
        sig_personal_hash(msg.data, msg.len, hash);
    }

    for (size_t i = 0; i < ks.n; i++) {
        char addr[ADDRESS_STRING_SIZE], sig_text[SIG_STRING_SIZE];
        eth_sig sig;

        key_address(ctx, ks.keys[i], addr);
        if (o.address_only) {
            printf("%s\n", addr);
            continue;
        }
        if (o.siwe) {
            /* Each key signs the message that names its own address. */
            free(msg.data);
            msg = fetch_message(o.url, addr);
            sig_personal_hash(msg.data, msg.len, hash);
        }
        if (sig_sign(ctx, ks.keys[i], hash, &sig) != 0) {
            die("signing failed");
        }
        if (o.compact) {
            sig_format_compact(&sig, sig_text);
        } else {
            sig_format(&sig, sig_text);
            if (o.v01) {
                sig_text[130] = '0';
                sig_text[131] = (char)('0' + sig.recid);
            }
        }
        printf("address=%s&signature=%s\n", addr, sig_text);
    }

    keyset_wipe(&ks);
    free(msg.data);
    secp256k1_context_destroy(ctx);
    curl_global_cleanup();
    if (fflush(stdout) != 0 || ferror(stdout)) {
        die("cannot write the output: %s", strerror(errno));
    }
    return EXIT_SUCCESS;
}
