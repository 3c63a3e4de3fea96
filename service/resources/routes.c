/* routes: the route table, the one place every method, path, handler and auth need is listed.
 * ROUTE_KEY_AWARD / ROUTE_KEY_ADMIN say which entity API keys may call a route (CONTRACT
 * section 13): award scope may award, revoke and read the entity, its skills, members,
 * progress and boards; admin scope what an admin may do besides; anything else refuses keys.
 * Every signed write is ROUTE_WRITE except revoking a signature or ending sessions, which must
 * work for a wallet whose budget a leaked credential has spent. */
#include <llhttp.h>

#include "resources/routes.h"

#include "resources/handlers.h"

const route router_routes[] = {
    {HTTP_GET, "/healthz", health_live, AUTH_NONE, 0},
    {HTTP_GET, "/readyz", health_ready, AUTH_NONE, 0},
    {HTTP_GET, "/metrics", metrics_get, AUTH_NONE, 0},
    {HTTP_GET, "/api/auth/message", auth_message_get, AUTH_NONE, 0},
    {HTTP_POST, "/api/auth/revoke", auth_revoke_post, AUTH_REQUIRED, ROUTE_SIGNATURE_ONLY},
    /* Sessions: made by a signature in the body, ended by their token or their address's
     * signature; none spends the write budget (CONTRACT section 13). */
    {HTTP_POST, "/api/auth/challenge", auth_challenge_post, AUTH_NONE, 0},
    {HTTP_POST, "/api/auth/session", auth_session_post, AUTH_NONE, 0},
    {HTTP_DELETE, "/api/auth/session", auth_session_delete, AUTH_NONE, 0},
    {HTTP_GET, "/api/auth/sessions", auth_sessions_get, AUTH_REQUIRED, 0},
    {HTTP_POST, "/api/auth/sessions/revoke-all", auth_sessions_revoke_all, AUTH_REQUIRED, 0},
    {HTTP_DELETE, "/api/auth/sessions/{id}", auth_sessions_id_delete, AUTH_REQUIRED, 0},
    {HTTP_GET, "/api/entities", entities_list_get, AUTH_OPTIONAL, ROUTE_READ_WITH_REVOCATION},
    {HTTP_POST, "/api/entities", entity_post, AUTH_REQUIRED, ROUTE_WRITE},
    /* before "/api/entities/{id}/…": an alias may read "users" or "admins" */
    {HTTP_GET, "/api/entities/by-alias/{alias}", entity_by_alias_get, AUTH_OPTIONAL,
     ROUTE_READ_WITH_REVOCATION},
    {HTTP_GET, "/api/entities/{id}", entity_get, AUTH_OPTIONAL,
     ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_GET, "/api/entities/{id}/users", entity_users_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_POST, "/api/entities/{id}/force-add", entity_force_add, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/entities/{id}/admins", admins_get, AUTH_REQUIRED, ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/admins", admins_post, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_DELETE, "/api/entities/{id}/admins/{address}", admins_delete, AUTH_REQUIRED, ROUTE_WRITE},
    /* Entity API keys: owners only, never by a key (CONTRACT section 13). */
    {HTTP_POST, "/api/entities/{id}/api-keys", apikeys_post, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_GET, "/api/entities/{id}/api-keys", apikeys_get, AUTH_REQUIRED, 0},
    /* An endpoint's delivery log (CONTRACT section 14) */
    {HTTP_GET, "/api/entities/{id}/webhooks/{wid}/deliveries", webhook_deliveries_get,
     AUTH_REQUIRED, 0},
    {HTTP_POST, "/api/entities/{id}/webhooks/{wid}/deliveries/{did}/retry", webhook_delivery_retry,
     AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/entities/{id}/webhooks/{wid}/test", webhook_test_post, AUTH_REQUIRED,
     ROUTE_WRITE},
    {HTTP_DELETE, "/api/entities/{id}/api-keys/{keyId}", apikeys_delete, AUTH_REQUIRED,
     ROUTE_WRITE},
    /* Webhook endpoints (CONTRACT section 14): an entity's for its owners and admins (and an
     * admin-scope key, which may do what an admin does); the platform's for platform admins. */
    {HTTP_POST, "/api/entities/{id}/webhooks", webhooks_post, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/entities/{id}/webhooks", webhooks_get, AUTH_REQUIRED, ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/entities/{id}/webhooks/{wid}", webhooks_get_one, AUTH_REQUIRED,
     ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/webhooks/{wid}/update", webhooks_update, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_DELETE, "/api/entities/{id}/webhooks/{wid}", webhooks_delete, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/webhooks/{wid}/rotate-secret", webhooks_rotate, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/webhooks", webhooks_platform_post, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_GET, "/api/webhooks", webhooks_platform_get, AUTH_REQUIRED, 0},
    {HTTP_GET, "/api/webhooks/{wid}", webhooks_platform_get_one, AUTH_REQUIRED, 0},
    {HTTP_POST, "/api/webhooks/{wid}/update", webhooks_platform_update, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_DELETE, "/api/webhooks/{wid}", webhooks_platform_delete, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/webhooks/{wid}/rotate-secret", webhooks_platform_rotate, AUTH_REQUIRED,
     ROUTE_WRITE},
    {HTTP_GET, "/api/webhooks/{wid}/deliveries", webhook_platform_deliveries_get, AUTH_REQUIRED, 0},
    {HTTP_POST, "/api/webhooks/{wid}/deliveries/{did}/retry", webhook_platform_delivery_retry,
     AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/webhooks/{wid}/test", webhook_platform_test_post, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/entities/{id}/levels/{lvID}/update", level_update, AUTH_RECOVER,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/entities/{id}/members/{address}/progress", progress_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_GET, "/api/entities/{id}/members/{address}/contributions", contributions_get,
     AUTH_REQUIRED, ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_GET, "/api/entities/{id}/leaderboard", leaderboard_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_GET, "/api/entities/{id}/events", events_get, AUTH_REQUIRED, ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/entities/{id}/events/stream", events_stream_get, AUTH_REQUIRED,
     ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/contributions", contributions_post, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_AWARD},
    {HTTP_POST, "/api/entities/{id}/contributions/{cid}/revoke", contribution_revoke, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_AWARD},
    {HTTP_GET, "/api/skills", skills_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION | ROUTE_KEY_AWARD},
    {HTTP_POST, "/api/skills", skills_post, AUTH_REQUIRED, ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/skills/multiple", skills_post_multiple, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/attestations/config", attestations_config_get, AUTH_NONE, 0},
    {HTTP_GET, "/api/entities/{id}/members/{address}/attestations", attestations_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION},
    {HTTP_DELETE, "/api/entities/{id}", entity_delete, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_DELETE, "/api/entities/{id}/members/{address}", members_delete, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/members/remove", members_remove_post, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_POST, "/api/entities/{id}/leave", entity_leave, AUTH_REQUIRED, ROUTE_WRITE},
    /* Join rules (CONTRACT section 16): set, read and deleted by owners and admins. */
    {HTTP_POST, "/api/entities/{id}/join-rules", joinrules_post, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_GET, "/api/entities/{id}/join-rules", joinrules_get, AUTH_REQUIRED, 0},
    {HTTP_DELETE, "/api/entities/{id}/join-rules", joinrules_delete, AUTH_REQUIRED, ROUTE_WRITE},
    /* A check spends the caller's write budget: each may cost the chains a read. */
    {HTTP_GET, "/api/entities/{id}/join-rules/check", joinrules_check, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/entities/{id}/join", joinrules_join, AUTH_REQUIRED, ROUTE_WRITE},
    {HTTP_POST, "/api/entities/{id}/skills/{skillId}/update", skill_update, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_DELETE, "/api/entities/{id}/skills/{skillId}", skill_delete, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_DELETE, "/api/entities/{id}/levels/{lvID}", level_delete, AUTH_REQUIRED,
     ROUTE_WRITE | ROUTE_KEY_ADMIN},
    {HTTP_GET, "/api/wallets/{address}/entities", wallet_entities_get, AUTH_REQUIRED,
     ROUTE_READ_WITH_REVOCATION},
};

const size_t router_routes_count = sizeof router_routes / sizeof router_routes[0];
