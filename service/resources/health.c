/* health: liveness and readiness probes, and the metrics page. */
#include "core/app.h"
#include "resources/handlers.h"
#include "core/metrics.h"
#include "net/server.h"
#include "redis/store.h"

void health_live(request *req)
{
    request_reply(req, 200, json_pack("{s:b, s:s}", "success", 1, "status", "ok"));
}

void health_ready(request *req)
{
    if (req->app->server->draining) {
        request_fail(req, 503, "unavailable", "The service is shutting down.", NULL);
        return;
    }
    if (!store_ready(req->app->store)) {
        request_fail(req, 503, "unavailable",
                     "The data store is not connected or its scripts are not loaded.", NULL);
        return;
    }
    request_reply(req, 200, json_pack("{s:b, s:s}", "success", 1, "status", "ready"));
}

void metrics_get(request *req)
{
    buf out = BUF_INIT;
    metrics_render(&out);
    request_reply_raw(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf_cstr(&out),
                      out.len);
    buf_free(&out);
}
