/* auth stats: the sign-in checks' counters, and their metrics. */
#include "auth/auth_int.h"
#include "core/metrics.h"

void auth_stats_render(buf *out, void *ctx)
{
    const auth_stats *au = &((const auth *)ctx)->stats;
    const metrics_labelled outcomes[] = {{"ok", au->ok},
                                         {"missing", au->missing},
                                         {"malformed", au->malformed},
                                         {"mismatch", au->mismatch},
                                         {"expired", au->expired},
                                         {"revoked", au->revoked},
                                         {"unavailable", au->unavailable}};
    metrics_counter_by(out, "entityd_auth_signature_checks_total", "Sign-in checks by outcome.",
                       "outcome", outcomes, sizeof outcomes / sizeof outcomes[0]);
    metrics_counter(out, "entityd_auth_cache_hits_total", "Signatures answered from the cache.",
                    au->cache_hits);
    metrics_counter(out, "entityd_auth_siwe_signins_total",
                    "Signatures verified over a SIWE (EIP-4361) message.", au->siwe);
    metrics_counter(out, "entityd_auth_contract_signins_total",
                    "Signatures accepted by a contract wallet (EIP-1271).", au->contract);
    metrics_counter(out, "entityd_auth_recoveries_total",
                    "Signature recoveries queued on the threadpool.", au->queued);
    metrics_gauge(out, "entityd_auth_threadpool_queue_depth",
                  "Signature recoveries waiting or running on the threadpool.",
                  (double)au->queue_depth);
}

const auth_stats *auth_get_stats(const auth *au)
{
    return &au->stats;
}
