/* metrics_shared: see metrics_shared.h. Each slot is a seqlock: the one writer (its worker, or
 * the supervisor once the worker is dead) makes the sequence odd, copies, makes it even again;
 * a reader copies and keeps the copy only when it saw the same even sequence before and after. */
#include "core/metrics_shared.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/metrics.h"

typedef struct shm_slot {
    _Atomic uint64_t seq;
    _Atomic uint32_t len;
    char text[METRICS_SHARED_SLOT_BYTES];
} shm_slot;

static shm_slot *shm_slots;
static size_t shm_count;
static size_t own_index = SIZE_MAX;

int metrics_shared_init(size_t workers)
{
    void *p = mmap(NULL, workers * sizeof(shm_slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    shm_slots = p;
    shm_count = workers;
    return 0;
}

void metrics_shared_join(size_t index)
{
    own_index = index < shm_count ? index : SIZE_MAX;
    if (metrics_shared_active())
        metrics_set_renderer(metrics_shared_render);
}

bool metrics_shared_active(void)
{
    return shm_slots && own_index != SIZE_MAX;
}

static void slot_write(shm_slot *s, const char *text, size_t len)
{
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(s->text, text, len);
    atomic_store_explicit(&s->len, (uint32_t)len, memory_order_relaxed);
    atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

/* Copies a slot's text into out; false when it is empty or kept changing. */
static bool slot_read(shm_slot *s, buf *out)
{
    for (int tries = 0; tries < 8; tries++) {
        uint64_t a = atomic_load_explicit(&s->seq, memory_order_acquire);
        if (a & 1)
            continue;
        uint32_t len = atomic_load_explicit(&s->len, memory_order_relaxed);
        if (len > METRICS_SHARED_SLOT_BYTES)
            continue;
        buf_reset(out, SIZE_MAX);
        buf_append(out, s->text, len);
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&s->seq, memory_order_relaxed) == a)
            return len > 0;
    }
    return false;
}

/* Cuts text to fit a slot, at the start of the family that would not fit. */
static size_t fit(const char *text, size_t len)
{
    if (len <= METRICS_SHARED_SLOT_BYTES)
        return len;
    size_t cut = METRICS_SHARED_SLOT_BYTES;
    while (cut > 0 && !(text[cut - 1] == '\n' && !strncmp(text + cut, "# HELP ", 7)))
        cut--;
    return cut;
}

static void publish_text(const buf *b)
{
    if (metrics_shared_active())
        slot_write(&shm_slots[own_index], b->data ? b->data : "", fit(b->data, b->len));
}

void metrics_shared_publish(void)
{
    if (!metrics_shared_active())
        return;
    buf b = BUF_INIT;
    metrics_render_process(&b);
    publish_text(&b);
    buf_free(&b);
}

void metrics_shared_clear(size_t index)
{
    if (shm_slots && index < shm_count)
        slot_write(&shm_slots[index], "", 0);
}

/* One family of one worker's text: its HELP and TYPE lines, then its samples. */
typedef struct family {
    const char *name;
    size_t name_len;
    const char *head, *body;
    size_t head_len, body_len;
} family;

typedef struct parsed {
    family *f;
    size_t n;
} parsed;

static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl ? nl + 1 : end;
}

static void parse(const char *text, size_t len, parsed *out)
{
    const char *p = text, *end = text + len;
    size_t cap = 0;
    out->f = NULL;
    out->n = 0;
    while (p < end) {
        const char *e = line_end(p, end);
        if ((size_t)(e - p) > 7 && !strncmp(p, "# HELP ", 7)) {
            if (out->n == cap) {
                cap = cap ? cap * 2 : 64;
                family *nf = realloc(out->f, cap * sizeof *nf);
                if (!nf)
                    return;
                out->f = nf;
            }
            family *f = &out->f[out->n++];
            f->name = p + 7;
            f->name_len = strcspn(f->name, " \n");
            f->head = p;
            while (e < end && *e == '#' && strncmp(e, "# HELP ", 7))
                e = line_end(e, end);
            f->head_len = (size_t)(e - p);
            f->body = e;
            while (e < end && *e != '#')
                e = line_end(e, end);
            f->body_len = (size_t)(e - f->body);
        }
        p = e;
    }
}

static const family *find(const parsed *t, const family *like)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->f[i].name_len == like->name_len && !memcmp(t->f[i].name, like->name, like->name_len))
            return &t->f[i];
    return NULL;
}

/* Each sample line gains worker="N" as its first label. */
static void labelled(buf *out, const family *f, size_t worker)
{
    const char *p = f->body, *end = f->body + f->body_len;
    char label[32];
    int ll = snprintf(label, sizeof label, "worker=\"%zu\"", worker);
    while (p < end) {
        const char *e = line_end(p, end);
        size_t name = strcspn(p, "{ \n");
        if (p + name >= e) {
            p = e;
            continue;
        }
        buf_append(out, p, name);
        buf_append(out, "{", 1);
        buf_append(out, label, (size_t)ll);
        if (p[name] == '{') {
            if (p[name + 1] != '}')
                buf_append(out, ",", 1);
            name++;
        } else {
            buf_append(out, "}", 1);
        }
        buf_append(out, p + name, (size_t)(e - (p + name)));
        p = e;
    }
}

void metrics_shared_render(buf *out)
{
    buf *texts = calloc(shm_count, sizeof *texts);
    parsed *ps = calloc(shm_count, sizeof *ps);
    if (!texts || !ps) {
        free(texts);
        free(ps);
        metrics_render_process(out);
        return;
    }
    metrics_render_process(&texts[own_index]);
    publish_text(&texts[own_index]);
    for (size_t w = 0; w < shm_count; w++) {
        if (w != own_index && !slot_read(&shm_slots[w], &texts[w]))
            buf_reset(&texts[w], 0);
        parse(texts[w].data ? texts[w].data : "", texts[w].len, &ps[w]);
    }
    /* Families in this worker's order; one another worker alone has (an older release) after. */
    for (size_t w0 = 0; w0 < shm_count; w0++) {
        size_t src = w0 == 0 ? own_index : w0 <= own_index ? w0 - 1 : w0;
        for (size_t i = 0; i < ps[src].n; i++) {
            const family *f = &ps[src].f[i];
            bool seen = false;
            for (size_t e = 0; e < w0 && !seen; e++) {
                size_t prev = e == 0 ? own_index : e <= own_index ? e - 1 : e;
                seen = find(&ps[prev], f) != NULL;
            }
            if (seen)
                continue;
            buf_append(out, f->head, f->head_len);
            for (size_t w = 0; w < shm_count; w++) {
                const family *g = find(&ps[w], f);
                if (g)
                    labelled(out, g, w);
            }
        }
    }
    for (size_t w = 0; w < shm_count; w++) {
        free(ps[w].f);
        buf_free(&texts[w]);
    }
    free(ps);
    free(texts);
}
