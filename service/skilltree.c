/* skilltree: Skill and Level records as stored and as the API returns them. Stored times are
 * Unix ms and stored numbers decimal strings; the API wants ISO times and JSON numbers. */
#include "skilltree.h"

#include <stdlib.h>
#include <string.h>

#include "isotime.h"

static json_t *load(const redisReply *record)
{
    if (!record || record->type != REDIS_REPLY_STRING)
        return NULL;
    json_t *o = json_loadb(record->str, record->len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *iso(json_t *ms)
{
    if (!json_is_string(ms) || !*json_string_value(ms))
        return json_null();
    char out[ISOTIME_STRING_SIZE];
    isotime_format(strtoll(json_string_value(ms), NULL, 10), out);
    return json_string(out);
}

static json_t *str(json_t *v)
{
    return json_is_string(v) ? json_incref(v) : json_string("");
}

static json_t *number(json_t *v)
{
    return json_integer(json_is_string(v) ? strtoll(json_string_value(v), NULL, 10) : 0);
}

json_t *skilltree_skill_json(const redisReply *record)
{
    json_t *s = load(record);
    if (!s)
        return NULL;
    json_t *out = json_object();
    json_object_set_new(out, "id", str(json_object_get(s, "id")));
    json_object_set_new(out, "entityID", str(json_object_get(s, "entityID")));
    json_object_set_new(out, "name", str(json_object_get(s, "name")));
    json_object_set_new(out, "description", str(json_object_get(s, "description")));
    json_object_set_new(out, "createdAt", iso(json_object_get(s, "createdAt")));
    json_object_set_new(out, "createdBy", str(json_object_get(s, "createdBy")));
    json_decref(s);
    return out;
}

json_t *skilltree_level_json(const redisReply *record, const char *entity_id)
{
    json_t *l = load(record);
    if (!l)
        return NULL;
    json_t *out = json_object();
    json_object_set_new(out, "id", str(json_object_get(l, "id")));
    json_object_set_new(out, "entityID", json_string(entity_id));
    json_object_set_new(out, "name", str(json_object_get(l, "name")));
    json_object_set_new(out, "description", str(json_object_get(l, "description")));
    /* Lua's cjson writes an empty list as {}: both mean no items. */
    json_t *ids = json_array(), *scores = json_array();
    json_t *sids = json_object_get(l, "skillIds"), *sscores = json_object_get(l, "scores");
    for (size_t i = 0; json_is_array(sids) && i < json_array_size(sids); i++)
        json_array_append_new(ids, str(json_array_get(sids, i)));
    for (size_t i = 0; json_is_array(sscores) && i < json_array_size(sscores); i++)
        json_array_append_new(scores, number(json_array_get(sscores, i)));
    json_object_set_new(out, "skillIds", ids);
    json_object_set_new(out, "scores", scores);
    json_object_set_new(out, "endsAt", iso(json_object_get(l, "endsAt")));
    json_object_set_new(out, "XP", number(json_object_get(l, "XP")));
    json_object_set_new(out, "createdAt", iso(json_object_get(l, "createdAt")));
    json_object_set_new(out, "modifiedAt", iso(json_object_get(l, "modifiedAt")));
    json_decref(l);
    return out;
}
