/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reading and checking the simulator's JSON configuration with json-c.  Every
 * key is checked for its type and range, and a bad value gives a message that
 * names the key; unknown keys are ignored.  The result is a plain
 * dfccl_sim_config_t that the world builder turns into a topology.
 */
#include "sim.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest GPU and group counts accepted; part ids must also fit in int32_t. */
#define DFCCL_SIM_MAX_GPUS        (1 << 24)
#define DFCCL_SIM_MAX_GROUPS      (1 << 24)
#define DFCCL_SIM_MAX_GROUP_SIZE  65535
#define DFCCL_SIM_MAX_COLL_CNT    ((int64_t)1 << 30)
#define DFCCL_SIM_MAX_ROUNDS      ((int64_t)1 << 40)

const char *dfccl_sim_model_name(dfccl_sim_model_t model)
{
    return (model == DFCCL_SIM_MODEL_SINGLE) ? "Single" : "StreamWithSync";
}

const char *dfccl_sim_grouping_name(dfccl_sim_grouping_t grouping)
{
    return (grouping == DFCCL_SIM_GROUPING_MEGATRON) ? "Megatron" : "Arbitrary";
}

/* A short rendering of a JSON value for messages. */
static const char *dfccl_sim_json_show(struct json_object *obj, char *buf, size_t len)
{
    const char *text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN);

    if (strlen(text) < len) {
        snprintf(buf, len, "%s", text);
    } else {
        snprintf(buf, len, "%.*s...", (int)len - 4, text);
    }
    return buf;
}

/* An integer value (an integral double such as 32000.0 is accepted too). */
static int dfccl_sim_json_int(struct json_object *obj, int64_t *value_p)
{
    double d;

    switch (json_object_get_type(obj)) {
    case json_type_int:
        *value_p = json_object_get_int64(obj);
        /* json-c saturates out-of-range numbers */
        return (*value_p != INT64_MAX) && (*value_p != INT64_MIN);
    case json_type_double:
        d = json_object_get_double(obj);
        if (!isfinite(d) || (d != floor(d)) || (fabs(d) > 9.0e15)) {
            return 0;
        }
        *value_p = (int64_t)d;
        return 1;
    default:
        return 0;
    }
}

static dfccl_sim_status_t dfccl_sim_config_get_int(struct json_object *root, const char *key,
                                                   int required, int64_t min, int64_t max,
                                                   dfccl_sim_msg_t *msg, int64_t *value_p)
{
    struct json_object *obj;
    char shown[64];
    int64_t value;

    if (!json_object_object_get_ex(root, key, &obj)) {
        if (required) {
            dfccl_sim_msg_set(msg, "missing key '%s'", key);
            return DFCCL_SIM_ERR_INVALID_PARAM;
        }
        return DFCCL_SIM_OK;  /* keep the default */
    }
    if (!dfccl_sim_json_int(obj, &value)) {
        dfccl_sim_msg_set(msg, "key '%s': expected an integer, got %s", key,
                          dfccl_sim_json_show(obj, shown, sizeof(shown)));
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    if ((value < min) || (value > max)) {
        dfccl_sim_msg_set(msg, "key '%s': %lld is out of range [%lld, %lld]", key,
                          (long long)value, (long long)min, (long long)max);
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    *value_p = value;
    return DFCCL_SIM_OK;
}

static dfccl_sim_status_t dfccl_sim_config_get_prob(struct json_object *root, const char *key,
                                                    int below_one, dfccl_sim_msg_t *msg,
                                                    double *value_p)
{
    struct json_object *obj;
    char shown[64];
    double value;
    json_type type;

    if (!json_object_object_get_ex(root, key, &obj)) {
        return DFCCL_SIM_OK;  /* default 0 */
    }
    type = json_object_get_type(obj);
    if ((type != json_type_double) && (type != json_type_int)) {
        dfccl_sim_msg_set(msg, "key '%s': expected a probability (a number), got %s", key,
                          dfccl_sim_json_show(obj, shown, sizeof(shown)));
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    value = json_object_get_double(obj);
    if (!isfinite(value) || (value < 0.0) || (value > 1.0) || (below_one && (value >= 1.0))) {
        dfccl_sim_msg_set(msg, "key '%s': %s is not a probability in [0, 1%s", key,
                          dfccl_sim_json_show(obj, shown, sizeof(shown)),
                          below_one ? ") (at 1 a GPU would never invoke)" : "]");
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    *value_p = value;
    return DFCCL_SIM_OK;
}

static dfccl_sim_status_t dfccl_sim_config_get_name(struct json_object *root, const char *key,
                                                    const char *name0, const char *name1,
                                                    dfccl_sim_msg_t *msg, int *which_p)
{
    struct json_object *obj;
    char shown[64];
    const char *value;

    if (!json_object_object_get_ex(root, key, &obj)) {
        dfccl_sim_msg_set(msg, "missing key '%s' (\"%s\" or \"%s\")", key, name0, name1);
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    if (json_object_get_type(obj) == json_type_string) {
        value = json_object_get_string(obj);
        if (strcmp(value, name0) == 0) {
            *which_p = 0;
            return DFCCL_SIM_OK;
        }
        if (strcmp(value, name1) == 0) {
            *which_p = 1;
            return DFCCL_SIM_OK;
        }
    }
    dfccl_sim_msg_set(msg, "key '%s': expected \"%s\" or \"%s\", got %s", key, name0, name1,
                      dfccl_sim_json_show(obj, shown, sizeof(shown)));
    return DFCCL_SIM_ERR_INVALID_PARAM;
}

static dfccl_sim_status_t dfccl_sim_config_get_array(struct json_object *root, const char *key,
                                                     int64_t length, dfccl_sim_msg_t *msg,
                                                     struct json_object **array_p)
{
    struct json_object *obj;
    char shown[64];

    if (!json_object_object_get_ex(root, key, &obj)) {
        dfccl_sim_msg_set(msg, "missing key '%s'", key);
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    if (json_object_get_type(obj) != json_type_array) {
        dfccl_sim_msg_set(msg, "key '%s': expected a list, got %s", key,
                          dfccl_sim_json_show(obj, shown, sizeof(shown)));
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    if ((int64_t)json_object_array_length(obj) != length) {
        dfccl_sim_msg_set(msg, "key '%s': has %zu entries, but group_num is %lld", key,
                          json_object_array_length(obj), (long long)length);
        return DFCCL_SIM_ERR_INVALID_PARAM;
    }
    *array_p = obj;
    return DFCCL_SIM_OK;
}

static dfccl_sim_status_t dfccl_sim_config_parse_megatron(struct json_object *root,
                                                          dfccl_sim_msg_t *msg,
                                                          dfccl_sim_config_t *config)
{
    dfccl_sim_status_t status;
    int64_t tp = 0, dp = 0, pp = 0;

    status = dfccl_sim_config_get_int(root, "tp_group_size", 1, 1, DFCCL_SIM_MAX_GROUP_SIZE,
                                      msg, &tp);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    status = dfccl_sim_config_get_int(root, "dp_group_size", 1, 1, DFCCL_SIM_MAX_GROUP_SIZE,
                                      msg, &dp);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    status = dfccl_sim_config_get_int(root, "pp_group_size", 1, 1, DFCCL_SIM_MAX_GPUS, msg,
                                      &pp);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    if (tp * dp * pp > DFCCL_SIM_MAX_GPUS) {
        dfccl_sim_msg_set(msg, "keys 'tp_group_size' x 'dp_group_size' x 'pp_group_size' = "
                          "%lld GPUs, more than the %d supported",
                          (long long)(tp * dp * pp), DFCCL_SIM_MAX_GPUS);
        return DFCCL_SIM_ERR_TOO_LARGE;
    }
    config->tp_group_size = (int32_t)tp;
    config->dp_group_size = (int32_t)dp;
    config->pp_group_size = (int32_t)pp;
    status = dfccl_sim_config_get_int(root, "coll_cnt_per_tp_group", 1, 0,
                                      DFCCL_SIM_MAX_COLL_CNT, msg,
                                      &config->coll_cnt_per_tp_group);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    return dfccl_sim_config_get_int(root, "coll_cnt_per_dp_group", 1, 0, DFCCL_SIM_MAX_COLL_CNT,
                                    msg, &config->coll_cnt_per_dp_group);
}

static dfccl_sim_status_t dfccl_sim_config_parse_arbitrary(struct json_object *root,
                                                           dfccl_sim_msg_t *msg,
                                                           dfccl_sim_config_t *config)
{
    struct json_object *groups, *counts, *members, *entry;
    dfccl_sim_status_t status;
    int64_t gpu_num = 0, group_num = 0, total = 0, gpu, cnt;
    char shown[64];
    uint8_t *seen = NULL;
    size_t i, j, size;

    status = dfccl_sim_config_get_int(root, "gpu_num", 1, 1, DFCCL_SIM_MAX_GPUS, msg, &gpu_num);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    status = dfccl_sim_config_get_int(root, "group_num", 1, 1, DFCCL_SIM_MAX_GROUPS, msg,
                                      &group_num);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    status = dfccl_sim_config_get_array(root, "gpu_per_group", group_num, msg, &groups);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    status = dfccl_sim_config_get_array(root, "coll_cnt_per_group", group_num, msg, &counts);
    if (status != DFCCL_SIM_OK) {
        return status;
    }

    config->gpu_num   = (int32_t)gpu_num;
    config->group_num = (int32_t)group_num;
    for (i = 0; i < (size_t)group_num; i++) {
        members = json_object_array_get_idx(groups, i);
        if (json_object_get_type(members) != json_type_array) {
            dfccl_sim_msg_set(msg, "key 'gpu_per_group': group %zu: expected a list of GPU "
                              "ids, got %s", i, dfccl_sim_json_show(members, shown,
                                                                    sizeof(shown)));
            return DFCCL_SIM_ERR_INVALID_PARAM;
        }
        size = json_object_array_length(members);
        if ((size == 0) || (size > DFCCL_SIM_MAX_GROUP_SIZE)) {
            dfccl_sim_msg_set(msg, "key 'gpu_per_group': group %zu has %zu GPUs, expected 1 "
                              "to %d", i, size, DFCCL_SIM_MAX_GROUP_SIZE);
            return DFCCL_SIM_ERR_INVALID_PARAM;
        }
        total += (int64_t)size;
    }
    if (total > INT32_MAX / 2) {
        dfccl_sim_msg_set(msg, "key 'gpu_per_group': %lld memberships in all, too many",
                          (long long)total);
        return DFCCL_SIM_ERR_TOO_LARGE;
    }

    config->group_gpu_off = dfccl_sim_calloc((size_t)group_num + 1, sizeof(int32_t),
                                             "group offsets");
    config->group_gpus = dfccl_sim_calloc((size_t)total, sizeof(int32_t), "group members");
    config->coll_cnt_per_group = dfccl_sim_calloc((size_t)group_num, sizeof(int64_t),
                                                  "collective counts");
    seen = dfccl_sim_calloc((size_t)gpu_num, 1, "GPU marks");
    if ((config->group_gpu_off == NULL) || (config->group_gpus == NULL) ||
        (config->coll_cnt_per_group == NULL) || (seen == NULL)) {
        dfccl_sim_msg_set(msg, "out of memory reading 'gpu_per_group'");
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_free_seen;
    }

    total = 0;
    for (i = 0; i < (size_t)group_num; i++) {
        members = json_object_array_get_idx(groups, i);
        size    = json_object_array_length(members);
        config->group_gpu_off[i] = (int32_t)total;
        for (j = 0; j < size; j++) {
            entry = json_object_array_get_idx(members, j);
            if (!dfccl_sim_json_int(entry, &gpu) || (gpu < 0) || (gpu >= gpu_num)) {
                dfccl_sim_msg_set(msg, "key 'gpu_per_group': group %zu lists %s, expected a "
                                  "GPU id in [0, %lld] (gpu_num is %lld)", i,
                                  dfccl_sim_json_show(entry, shown, sizeof(shown)),
                                  (long long)gpu_num - 1, (long long)gpu_num);
                status = DFCCL_SIM_ERR_INVALID_PARAM;
                goto out_free_seen;
            }
            if (seen[gpu]) {
                dfccl_sim_msg_set(msg, "key 'gpu_per_group': group %zu lists GPU %lld twice",
                                  i, (long long)gpu);
                status = DFCCL_SIM_ERR_INVALID_PARAM;
                goto out_free_seen;
            }
            seen[gpu] = 1;
            config->group_gpus[total++] = (int32_t)gpu;
        }
        for (j = 0; j < size; j++) {
            seen[config->group_gpus[total - size + j]] = 0;
        }

        entry = json_object_array_get_idx(counts, i);
        if (!dfccl_sim_json_int(entry, &cnt) || (cnt < 0) || (cnt > DFCCL_SIM_MAX_COLL_CNT)) {
            dfccl_sim_msg_set(msg, "key 'coll_cnt_per_group': entry %zu is %s, expected an "
                              "integer in [0, %lld]", i,
                              dfccl_sim_json_show(entry, shown, sizeof(shown)),
                              (long long)DFCCL_SIM_MAX_COLL_CNT);
            status = DFCCL_SIM_ERR_INVALID_PARAM;
            goto out_free_seen;
        }
        config->coll_cnt_per_group[i] = cnt;
    }
    config->group_gpu_off[group_num] = (int32_t)total;
    status = DFCCL_SIM_OK;

out_free_seen:
    free(seen);
    return status;
}

void dfccl_sim_config_destroy(dfccl_sim_config_t *config)
{
    if (config == NULL) {
        return;
    }
    free(config->group_gpu_off);
    free(config->group_gpus);
    free(config->coll_cnt_per_group);
    free(config);
}

/* Where offset lies in text, as 1-based line and column. */
static void dfccl_sim_text_where(const char *text, size_t offset, size_t *line_p,
                                 size_t *column_p)
{
    size_t line = 1, start = 0, i;

    for (i = 0; i < offset; i++) {
        if (text[i] == '\n') {
            line++;
            start = i + 1;
        }
    }
    *line_p   = line;
    *column_p = offset - start + 1;
}

static size_t dfccl_sim_tokener_end(struct json_tokener *tok)
{
#if defined(JSON_C_VERSION_NUM) && (JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8)))
    return json_tokener_get_parse_end(tok);
#else
    return (size_t)tok->char_offset;
#endif
}

/* Whether text[0, len) holds a complete JSON object (and at most white space). */
static int dfccl_sim_json_object_before(const char *text, size_t len)
{
    struct json_tokener *tok = json_tokener_new();
    struct json_object *obj;
    int complete;

    if (tok == NULL) {
        return 0;
    }
    obj      = json_tokener_parse_ex(tok, text, (int)len);
    complete = (json_tokener_get_error(tok) == json_tokener_success) &&
               (json_object_get_type(obj) == json_type_object);
    json_object_put(obj);
    json_tokener_free(tok);
    return complete;
}

/*
 * Parse text as one JSON value (NULL for a JSON null).  The strict mode
 * refuses comments and anything but white space after the value; a second
 * object or a stray brace at the end of a file is named as such, with its
 * line and column.
 */
static dfccl_sim_status_t dfccl_sim_json_parse(const char *text, dfccl_sim_msg_t *msg,
                                               struct json_object **root_p)
{
    size_t len = strlen(text), end, line, column, shown;
    enum json_tokener_error jerr;
    struct json_tokener *tok;
    struct json_object *root;

    if (len >= INT32_MAX) {
        dfccl_sim_msg_set(msg, "too large to be a configuration (%zu bytes)", len);
        return DFCCL_SIM_ERR_TOO_LARGE;
    }
    tok = json_tokener_new();
    if (tok == NULL) {
        dfccl_sim_msg_set(msg, "out of memory");
        return DFCCL_SIM_ERR_NO_MEMORY;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* the length counts the final NUL: the input ends there */
    root = json_tokener_parse_ex(tok, text, (int)len + 1);
    jerr = json_tokener_get_error(tok);
    end  = dfccl_sim_tokener_end(tok);
    json_tokener_free(tok);
    if (end > len) {
        end = len;
    }
    if ((jerr == json_tokener_success) && (end < len)) {
        jerr = json_tokener_error_parse_unexpected;  /* not consumed: trailing text */
    }
    if (jerr == json_tokener_success) {
        *root_p = root;
        return DFCCL_SIM_OK;
    }

    json_object_put(root);
    dfccl_sim_text_where(text, end, &line, &column);
    if ((end < len) && dfccl_sim_json_object_before(text, end)) {
        for (shown = 0; (shown < 24) && (end + shown < len) &&
                        ((unsigned char)text[end + shown] >= ' ');
             shown++) {
        }
        dfccl_sim_msg_set(msg, "line %zu, column %zu: text after the closing brace of the "
                          "configuration (\"%.*s%s\"); the file must hold one JSON object "
                          "and nothing after it", line, column, (int)shown, text + end,
                          ((shown == 24) && (end + shown < len)) ? "..." : "");
    } else {
        dfccl_sim_msg_set(msg, "not valid JSON: line %zu, column %zu: %s", line, column,
                          json_tokener_error_desc(jerr));
    }
    return DFCCL_SIM_ERR_PARSE;
}

dfccl_sim_status_t dfccl_sim_config_parse(const char *text, dfccl_sim_msg_t *msg,
                                          dfccl_sim_config_t **config_p)
{
    struct json_object *root;
    dfccl_sim_config_t *config;
    dfccl_sim_status_t status;
    int which;

    status = dfccl_sim_json_parse(text, msg, &root);
    if (status != DFCCL_SIM_OK) {
        return status;
    }
    if (json_object_get_type(root) != json_type_object) {
        dfccl_sim_msg_set(msg, "expected a JSON object {...} at the top level");
        status = DFCCL_SIM_ERR_PARSE;
        goto out_put_root;
    }

    config = dfccl_sim_calloc(1, sizeof(*config), "configuration");
    if (config == NULL) {
        dfccl_sim_msg_set(msg, "out of memory");
        status = DFCCL_SIM_ERR_NO_MEMORY;
        goto out_put_root;
    }
    config->total_rounds   = 32000;
    config->resource_limit = -1;

    status = dfccl_sim_config_get_int(root, "total_rounds", 0, 1, DFCCL_SIM_MAX_ROUNDS, msg,
                                      &config->total_rounds);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    status = dfccl_sim_config_get_int(root, "fix_seed", 0, INT64_MIN + 1, INT64_MAX - 1, msg,
                                      &config->fix_seed);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    status = dfccl_sim_config_get_prob(root, "disorder_prob", 0, msg, &config->disorder_prob);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    status = dfccl_sim_config_get_prob(root, "sync_prob", 1, msg, &config->sync_prob);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    status = dfccl_sim_config_get_int(root, "resource_limit", 0, INT32_MIN, INT32_MAX, msg,
                                      &config->resource_limit);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    if (config->resource_limit == 0) {
        dfccl_sim_msg_set(msg, "key 'resource_limit': 0 lets no collective execute; give at "
                          "least 1, or a negative number for unlimited resources");
        status = DFCCL_SIM_ERR_INVALID_PARAM;
        goto out_destroy_config;
    }
    status = dfccl_sim_config_get_name(root, "model", "Single", "StreamWithSync", msg, &which);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    config->model = which ? DFCCL_SIM_MODEL_SYNC : DFCCL_SIM_MODEL_SINGLE;
    status = dfccl_sim_config_get_name(root, "grouping_policy", "Megatron", "Arbitrary", msg,
                                       &which);
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }
    config->grouping = which ? DFCCL_SIM_GROUPING_ARBITRARY : DFCCL_SIM_GROUPING_MEGATRON;
    if (config->grouping == DFCCL_SIM_GROUPING_MEGATRON) {
        status = dfccl_sim_config_parse_megatron(root, msg, config);
    } else {
        status = dfccl_sim_config_parse_arbitrary(root, msg, config);
    }
    if (status != DFCCL_SIM_OK) {
        goto out_destroy_config;
    }

    json_object_put(root);
    *config_p = config;
    return DFCCL_SIM_OK;

out_destroy_config:
    dfccl_sim_config_destroy(config);
out_put_root:
    json_object_put(root);
    return status;
}

dfccl_sim_status_t dfccl_sim_config_load(const char *path, dfccl_sim_msg_t *msg,
                                         dfccl_sim_config_t **config_p)
{
    dfccl_sim_status_t status;
    char *text = NULL, *grown;
    size_t len = 0, cap = 0, got;
    FILE *file;

    file = fopen(path, "r");
    if (file == NULL) {
        dfccl_sim_msg_set(msg, "cannot open: %s", strerror(errno));
        return DFCCL_SIM_ERR_IO;
    }
    do {
        if (cap - len < 4096) {
            cap   = (cap == 0) ? 65536 : cap * 2;
            grown = realloc(text, cap);
            if (grown == NULL) {
                dfccl_sim_msg_set(msg, "out of memory reading the file");
                status = DFCCL_SIM_ERR_NO_MEMORY;
                goto out_close;
            }
            text = grown;
        }
        got  = fread(text + len, 1, cap - len - 1, file);
        len += got;
    } while (got > 0);
    if (ferror(file)) {
        dfccl_sim_msg_set(msg, "cannot read: %s", strerror(errno));
        status = DFCCL_SIM_ERR_IO;
        goto out_close;
    }
    text[len] = '\0';
    if (strlen(text) != len) {
        dfccl_sim_msg_set(msg, "not valid JSON: the file holds a NUL byte");
        status = DFCCL_SIM_ERR_PARSE;
        goto out_close;
    }
    status = dfccl_sim_config_parse(text, msg, config_p);

out_close:
    fclose(file);
    free(text);
    return status;
}
