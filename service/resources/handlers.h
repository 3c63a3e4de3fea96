/* handlers: every route's handler, one file per resource. */
#ifndef ENTITYD_HANDLERS_H
#define ENTITYD_HANDLERS_H

#include "http/request.h"

/* handlers_health.c */
void health_live(request *req);
void health_ready(request *req);
void metrics_get(request *req);

/* handlers_auth.c */
void auth_message_get(request *req);
void auth_revoke_post(request *req);

/* handlers_entities.c */
void entity_get(request *req);
void entity_post(request *req);
void entity_users_get(request *req);
void entity_force_add(request *req);

/* handlers_admins.c */
void admins_get(request *req);
void admins_post(request *req);
void admins_delete(request *req);

/* handlers_skills.c */
void skills_get(request *req);
void skills_post(request *req);
void skills_post_multiple(request *req);

/* handlers_levels.c */
void level_update(request *req);

/* progress.c: a member's progression, the read side (progress, contributions) */
void progress_get(request *req);
void contributions_get(request *req);
/* leaderboard.c */
void leaderboard_get(request *req);
/* events.c */
void events_get(request *req);
/* contributions.c */
void contributions_post(request *req);
void contribution_revoke(request *req);
/* attestations.c: levels reached as EAS off-chain attestations */
void attestations_config_get(request *req);
void attestations_get(request *req);
/* entity_delete.c */
void entity_delete(request *req);

/* members.c: removing members, leaving; skills.c and levels.c: updating and deleting */
void members_delete(request *req);
void members_remove_post(request *req);
void entity_leave(request *req);
void skill_update(request *req);
void skill_delete(request *req);
void level_delete(request *req);
/* entities.c: CONTRACT §9's lookup by alias; find.c: a wallet's entities, the directory */
void entity_by_alias_get(request *req);
void wallet_entities_get(request *req);
void entities_list_get(request *req);

#endif
