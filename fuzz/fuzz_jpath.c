/* fuzz_jpath.c - JSON paths and the tree-less scanner, checked against jansson.
 *
 * Input: the first line is a path, the rest a document (no newline: the whole input is both).
 * The document sits in an exact-size heap block, so ASan sees any read past it. Checks:
 *  - a path that does not compile says where (err starts with "offset " or "path longer");
 *  - a found value lies inside the document and starts like its type; its text decodes;
 *  - when jansson parses the whole document (no duplicate keys, not too deep) and the path is
 *    a plain one (.name with [A-Za-z0-9_-] and [N]), the scanner finds what jansson finds:
 *    the same type, the same decoded string, the same number, an equal container;
 *  - sq_json_val_text on the raw bytes as a string agrees with jansson's string decoding.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plan/eval.h"

#define MAX_DEPTH 250 /* below the scanner's 256, so jansson's documents are all walkable */

static int json_depth(const json_t *j)
{
    int d = 0;
    if (json_is_object(j)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)j, k, v)
        {
            int x = json_depth(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *v;
        json_array_foreach(j, i, v)
        {
            int x = json_depth(v);
            d = x > d ? x : d;
        }
        return d + 1;
    }
    return 0;
}

/* Follows a plain path in jansson's tree. false: the path is not plain (no cross-check);
 * *found: the value (NULL: absent). */
static bool jansson_follow(const char *path, size_t len, json_t *root, json_t **found)
{
    json_t *cur = root;
    size_t i = 1;
    if (len == 0 || path[0] != '$')
        return false;
    while (i < len) {
        if (path[i] == '.') {
            char name[256];
            size_t n = 0;
            i++;
            while (i < len && n < sizeof(name) - 1 &&
                   ((path[i] >= 'a' && path[i] <= 'z') || (path[i] >= 'A' && path[i] <= 'Z') ||
                    (path[i] >= '0' && path[i] <= '9') || path[i] == '_' || path[i] == '-'))
                name[n++] = path[i++];
            if (n == 0 || (i < len && path[i] != '.' && path[i] != '['))
                return false;
            name[n] = '\0';
            cur = cur && json_is_object(cur) ? json_object_get(cur, name) : NULL;
        } else if (path[i] == '[') {
            size_t v = 0, n = 0;
            i++;
            while (i < len && path[i] >= '0' && path[i] <= '9' && n < 9) {
                v = v * 10 + (size_t)(path[i++] - '0');
                n++;
            }
            if (n == 0 || i >= len || path[i] != ']')
                return false;
            i++;
            cur = cur && json_is_array(cur) ? json_array_get(cur, v) : NULL;
        } else {
            return false;
        }
    }
    *found = cur;
    return true;
}

static enum sq_json_type type_of(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return SQ_JSON_OBJECT;
    case JSON_ARRAY:
        return SQ_JSON_ARRAY;
    case JSON_STRING:
        return SQ_JSON_STRING;
    case JSON_INTEGER:
    case JSON_REAL:
        return SQ_JSON_NUMBER;
    case JSON_TRUE:
        return SQ_JSON_TRUE;
    case JSON_FALSE:
        return SQ_JSON_FALSE;
    case JSON_NULL:
        return SQ_JSON_NULL;
    }
    return SQ_JSON_NONE;
}

static void check_found(const struct sq_json_val *v, const char *doc, size_t len,
                        struct sq_buf *text)
{
    if (v->raw < doc || v->raw_len == 0 || v->raw + v->raw_len > doc + len)
        abort();
    static const char first[] = {0, '"', 0, 't', 'f', 'n', '{', '['};
    char c = v->raw[0];
    if (v->type == SQ_JSON_NUMBER ? !(c == '-' || (c >= '0' && c <= '9')) : c != first[v->type])
        abort();
    sq_buf_reset(text);
    int rc = sq_json_val_text(v, text);
    if (rc == -ENOMEM || (rc < 0 && v->type != SQ_JSON_STRING))
        abort();
    if (rc == 0 && text->len > v->raw_len)
        abort();
}

static void cross_check(const struct sq_jpath *p, const char *path, size_t plen, json_t *root,
                        const char *doc, size_t len, struct sq_buf *text)
{
    json_t *want;
    if (!root || !jansson_follow(path, plen, root, &want))
        return;
    struct sq_json_val v;
    int rc = sq_jpath_eval(p, doc, len, &v);
    if (rc != (want != NULL))
        abort();
    if (!want)
        return;
    if (v.type != type_of(want))
        abort();
    sq_buf_reset(text);
    if (v.type == SQ_JSON_STRING) {
        if (sq_json_val_text(&v, text) != 0 || text->len != json_string_length(want) ||
            (text->len && memcmp(text->p, json_string_value(want), text->len) != 0))
            abort();
    } else if (v.type == SQ_JSON_NUMBER) {
        char buf[512];
        if (v.raw_len < sizeof(buf)) {
            memcpy(buf, v.raw, v.raw_len);
            buf[v.raw_len] = '\0';
            if (strtod(buf, NULL) != json_number_value(want))
                abort();
        }
    } else if (v.type == SQ_JSON_OBJECT || v.type == SQ_JSON_ARRAY) {
        json_t *again = json_loadb(v.raw, v.raw_len, JSON_ALLOW_NUL, NULL);
        if (!again || !json_equal(again, want))
            abort();
        json_decref(again);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    size_t plen = nl ? (size_t)(nl - (const char *)data) : size;
    size_t len = nl ? size - plen - 1 : size;
    char *path = malloc(plen + 1);
    char *doc = malloc(len ? len : 1);
    if (!path || !doc)
        abort();
    memcpy(path, data, plen);
    path[plen] = '\0';
    memcpy(doc, nl ? nl + 1 : (const char *)data, len);

    /* jansson stops at a raw NUL byte as if the input ended there; valid JSON has none */
    json_error_t jerr;
    json_t *root =
        memchr(doc, 0, len)
            ? NULL
            : json_loadb(doc, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL,
                         &jerr);
    if (root && json_depth(root) > MAX_DEPTH) {
        json_decref(root);
        root = NULL;
    }

    struct sq_buf text = {0};
    struct sq_json_val v;
    struct sq_jpath *p;
    char err[128] = "";
    int rc = sq_jpath_compile(path, plen, &p, err, sizeof(err));
    if (rc == 0) {
        if (sq_jpath_eval(p, doc, len, &v) == 1)
            check_found(&v, doc, len, &text);
        cross_check(p, path, plen, root, doc, len, &text);
        sq_jpath_free(p);
    } else if (rc != -SQ_EPARSE || p || (strncmp(err, "offset ", 7) && strncmp(err, "path ", 5))) {
        abort();
    }

    static const char *const fixed[] = {"$", "$.a", "$[0]", "$[1]", "$.a[1].b", "$[0][0]", "$.b"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        if (sq_jpath_compile(fixed[i], strlen(fixed[i]), &p, NULL, 0) != 0)
            abort();
        if (sq_jpath_eval(p, doc, len, &v) == 1)
            check_found(&v, doc, len, &text);
        cross_check(p, fixed[i], strlen(fixed[i]), root, doc, len, &text);
        sq_jpath_free(p);
    }

    /* the raw bytes as a string value */
    struct sq_json_val s = {SQ_JSON_STRING, doc, len};
    sq_buf_reset(&text);
    rc = sq_json_val_text(&s, &text);
    if (rc != 0 && rc != -SQ_EPARSE)
        abort();
    if (root && json_is_string(root) && len >= 2 && doc[0] == '"' && doc[len - 1] == '"') {
        if (rc != 0 || text.len != json_string_length(root) ||
            (text.len && memcmp(text.p, json_string_value(root), text.len) != 0))
            abort();
    }

    json_decref(root);
    sq_buf_dispose(&text);
    free(path);
    free(doc);
    return 0;
}
