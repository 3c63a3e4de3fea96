/* handlers: every route's handler, one file of them per resource; the route table (routes.c)
 * names them through this header only. */
#ifndef ENTITYD_HANDLERS_H
#define ENTITYD_HANDLERS_H

#include "http/request.h"
#include "push/streams.h"

/* health.c: probes and the metrics page */
void health_live(request *req);
void health_ready(request *req);
void metrics_get(request *req);

/* signin.c: the sign-in message, signature revocation */
void auth_message_get(request *req);
void auth_revoke_post(request *req);
/* sessions.c: challenges, sessions made, ended and listed (CONTRACT section 13) */
void auth_challenge_post(request *req);
void auth_session_post(request *req);
void auth_session_delete(request *req);
void auth_sessions_id_delete(request *req);
void auth_sessions_revoke_all(request *req);
void auth_sessions_get(request *req);

/* entities.c: an entity read (by id, by alias: CONTRACT §9), created or updated */
void entity_get(request *req);
void entity_by_alias_get(request *req);
void entity_post(request *req);
/* entity_delete.c */
void entity_delete(request *req);

/* members.c: pages, force-add, removal, leaving */
void entity_users_get(request *req);
void entity_force_add(request *req);
void members_delete(request *req);
void members_remove_post(request *req);
void entity_leave(request *req);
void joinrules_post(request *req);
void joinrules_get(request *req);
void joinrules_delete(request *req);
void joinrules_check(request *req);
void joinrules_join(request *req);

/* apikeys.c: entity API keys made, listed and ended (CONTRACT section 13) */
void apikeys_post(request *req);
void apikeys_get(request *req);
void apikeys_delete(request *req);
/* webhooks.c: webhook endpoints, an entity's and the platform's (CONTRACT section 14) */
void webhooks_post(request *req);
void webhooks_get(request *req);
void webhooks_get_one(request *req);
void webhooks_update(request *req);
void webhooks_delete(request *req);
void webhooks_rotate(request *req);
void webhooks_platform_post(request *req);
void webhooks_platform_get(request *req);
void webhooks_platform_get_one(request *req);
void webhooks_platform_update(request *req);
void webhooks_platform_delete(request *req);
void webhooks_platform_rotate(request *req);
/* webhook_deliveries.c: an endpoint's delivery log, retry and test send (CONTRACT section 14) */
void webhook_deliveries_get(request *req);
void webhook_delivery_retry(request *req);
void webhook_test_post(request *req);
/* webhook_platform.c: the same for a platform endpoint, platform admins only */
void webhook_platform_deliveries_get(request *req);
void webhook_platform_delivery_retry(request *req);
void webhook_platform_test_post(request *req);

/* admins.c */
void admins_get(request *req);
void admins_post(request *req);
void admins_delete(request *req);

/* skills.c: the skill tree read, skills added, updated, deleted */
void skills_get(request *req);
void skills_post(request *req);
void skills_post_multiple(request *req);
void skill_update(request *req);
void skill_delete(request *req);
/* levels.c */
void level_update(request *req);
void level_delete(request *req);

/* contributions.c: awards and their revocation */
void contributions_post(request *req);
void contribution_revoke(request *req);
/* progress.c: a member's progression, the read side (progress, contributions) */
void progress_get(request *req);
void contributions_get(request *req);
/* leaderboard.c */
void leaderboard_get(request *req);
/* events.c */
void events_get(request *req);
void events_stream_get(request *req);
/* The hub's re-check of an open stream's caller (push/streams.h); ctx is the app. */
void events_stream_check(void *ctx, const char *cred, size_t len, streams_verdict done,
                         void *token);
/* attestations.c: levels reached as EAS off-chain attestations */
void attestations_config_get(request *req);
void attestations_get(request *req);

/* find.c: a wallet's entities, the directory */
void wallet_entities_get(request *req);
void entities_list_get(request *req);

#endif
