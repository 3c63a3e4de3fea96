/* skilltree: Skill and Level records as stored (JSON strings) and as the API returns them. */
#ifndef ENTITYD_SKILLTREE_H
#define ENTITYD_SKILLTREE_H

#include <hiredis/hiredis.h>
#include <jansson.h>

/* The API's Skill from a stored record; NULL when the record is malformed. */
json_t *skilltree_skill_json(const redisReply *record);
/* The API's Level from a stored record of the entity; NULL when malformed. */
json_t *skilltree_level_json(const redisReply *record, const char *entity_id);

#endif
