/*
 * Every shared vector through the C API: the decisions (the JSON files of
 * tests/vectors: admit, batch, stream), the signed writes (tests/vectors/proofs)
 * and the arguments (tests/vectors/arguments: the kinds a C host takes:
 * name, text or bytes_hex; policy; number; proof). Format:
 * tests/vectors/README.md. JSON is read with json-c, which keeps a "\u0000"
 * inside a string and u64 values up to 2^64-1 exactly.
 *
 *   vectors <tests/vectors directory>
 *
 * Prints each failure, then "N passed, M failed"; exits 0 when all pass, 1
 * on a failure, 2 when a file cannot be read or is not in the format.
 */
#define _POSIX_C_SOURCE 200809L /* scandir, alphasort */
#include <dirent.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fencing_guard.h"

static int passed, failed;
static const char *current_case = "";

static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", current_case);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failed++;
}

static void invalid(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "vectors: invalid file (case %s): ", current_case);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static json_object *field(json_object *o, const char *key) {
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static json_object *need(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) invalid("missing field %s", key);
    return v;
}

/* A JSON integer in 0..2^64-1. */
static uint64_t as_u64(json_object *v, const char *what) {
    if (!json_object_is_type(v, json_type_int)) invalid("%s is not an integer", what);
    if (json_object_get_int64(v) < 0) invalid("%s is negative", what);
    return json_object_get_uint64(v);
}

static uint64_t u64_field(json_object *o, const char *key) { return as_u64(need(o, key), key); }

/* An optional u64 (missing or null: none). */
static int opt_u64(json_object *o, const char *key, uint64_t *out) {
    json_object *v = field(o, key);
    if (v == NULL || json_object_is_type(v, json_type_null)) {
        *out = 0;
        return 0;
    }
    *out = as_u64(v, key);
    return 1;
}

static const char *str_field(json_object *o, const char *key) {
    json_object *v = need(o, key);
    if (!json_object_is_type(v, json_type_string)) invalid("%s is not a string", key);
    return json_object_get_string(v);
}

static fencing_policy policy_of(json_object *c) {
    const char *p = str_field(c, "policy");
    if (strcmp(p, "non_decreasing") == 0) return FENCING_NON_DECREASING;
    if (strcmp(p, "strictly_increasing") == 0) return FENCING_STRICTLY_INCREASING;
    invalid("unknown policy %s", p);
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The vector file's own hex (key material, bytes_hex): decoded here, not by the library. */
static size_t unhex(const char *text, uint8_t *out, size_t cap) {
    size_t n = strlen(text);
    if (n % 2 != 0 || n / 2 > cap) invalid("bad hex %s", text);
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hexval(text[2 * i]), lo = hexval(text[2 * i + 1]);
        if (hi < 0 || lo < 0) invalid("bad hex %s", text);
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return n / 2;
}

static void read_fence(json_object *o, fencing_fence *f) {
    json_object *lock = need(o, "lock");
    memset(f, 0, sizeof *f);
    f->lock = json_object_get_string(lock);
    f->lock_len = (size_t)json_object_get_string_len(lock);
    f->high_water = u64_field(o, "high_water");
    f->has_sequence = (uint8_t)opt_u64(o, "sequence", &f->sequence);
}

static void read_sequencer(json_object *o, fencing_sequencer *s) {
    json_object *lock = need(o, "lock");
    memset(s, 0, sizeof *s);
    s->lock = json_object_get_string(lock);
    s->lock_len = (size_t)json_object_get_string_len(lock);
    s->token = u64_field(o, "token");
    s->has_sequence = (uint8_t)opt_u64(o, "sequence", &s->sequence);
}

/* Whether `v` is the verdict `expect` describes (tests/vectors/README.md, "Verdicts"). */
static int verdict_matches(const fencing_verdict *v, json_object *expect, int index) {
    const char *want = str_field(expect, "verdict");
    const char *got = fencing_reason(v->code);
    uint64_t n;
    if (got == NULL || strcmp(got, want) != 0) {
        fail("verdict %d: expected %s, got %s (code %u)", index, want, got ? got : "?", v->code);
        return 0;
    }
    int ok = 1;
#define CHECK(cond, ...)            \
    do {                            \
        if (!(cond)) {              \
            fail(__VA_ARGS__);      \
            ok = 0;                 \
        }                           \
    } while (0)
    int admitted = strcmp(want, "admitted") == 0;
    CHECK(v->admitted == admitted, "verdict %d: admitted flag %u", index, v->admitted);
    if (admitted) {
        int new_term = json_object_get_boolean(need(expect, "new_term"));
        CHECK(v->high_water == u64_field(expect, "high_water"), "verdict %d: high_water %" PRIu64, index, v->high_water);
        int has = opt_u64(expect, "sequence", &n);
        CHECK(v->has_sequence == has && (!has || v->sequence == n), "verdict %d: sequence", index);
        CHECK(v->new_term == new_term, "verdict %d: new_term %u", index, v->new_term);
        CHECK(v->code == (uint32_t)(new_term ? FENCING_ADMITTED_NEW_TERM : FENCING_ADMITTED), "verdict %d: code %u",
              index, v->code);
    } else if (strcmp(want, "stale_token") == 0 || strcmp(want, "token_reused") == 0) {
        CHECK(v->token == u64_field(expect, "presented"), "verdict %d: presented %" PRIu64, index, v->token);
        CHECK(v->high_water == u64_field(expect, "high_water"), "verdict %d: high_water %" PRIu64, index,
              v->high_water);
    } else if (strcmp(want, "sequence_regressed") == 0) {
        CHECK(v->token == u64_field(expect, "token"), "verdict %d: token", index);
        int has = opt_u64(expect, "presented", &n);
        CHECK(v->has_presented_sequence == has && (!has || v->presented_sequence == n), "verdict %d: presented",
              index);
        CHECK(v->last_sequence == u64_field(expect, "last"), "verdict %d: last", index);
    } else if (strcmp(want, "proof_unknown_key") == 0) {
        CHECK(v->key_id == u64_field(expect, "key_id"), "verdict %d: key_id %u", index, v->key_id);
    }
#undef CHECK
    return ok;
}

static int call_ok(fencing_status st, const fencing_error *err) {
    if (st != FENCING_OK) fail("status %d (%s): %s", st, err->reason, err->message);
    return st == FENCING_OK;
}

/* Decision vectors test the rules, which take any string as a lock and any
 * number of writes; the C API takes only names (guest/src/accept.rs) and
 * 1 or more writes. A case outside that must be refused by the argument
 * rule, with its code: `why` collects the codes it may be refused with. */
static int refused_cases;

static void refusal_of_name(json_object *name, char *why, size_t cap) {
    fencing_error err;
    if (fencing_check_name(json_object_get_string(name), (size_t)json_object_get_string_len(name), &err) != FENCING_OK) {
        size_t used = strlen(why);
        snprintf(why + used, cap - used, " %s ", err.reason);
    }
}

/* Whether the call refused the case as `why` says it must; counts it. */
static int refused_as_expected(fencing_status st, const fencing_error *err, const char *why) {
    char word[FENCING_REASON_BYTES + 2];
    snprintf(word, sizeof word, " %s ", err->reason);
    if (st != FENCING_ERR_ARGUMENT || strstr(why, word) == NULL) {
        fail("expected a refusal by the argument rules (%s), got status %d %s", why, st, err->reason);
        return 0;
    }
    refused_cases++;
    passed++;
    return 1;
}

static void admit_case(fencing_guard *g, json_object *c) {
    fencing_fence fence;
    fencing_sequencer seq;
    fencing_verdict v;
    fencing_error err;
    json_object *f = need(c, "fence");
    char why[128] = "";
    int fenced = !json_object_is_type(f, json_type_null);
    if (fenced) read_fence(f, &fence), refusal_of_name(need(f, "lock"), why, sizeof why);
    read_sequencer(need(c, "sequencer"), &seq);
    refusal_of_name(need(need(c, "sequencer"), "lock"), why, sizeof why);
    fencing_status st = fencing_admit(g, fenced ? &fence : NULL, &seq, policy_of(c), &v, &err);
    if (why[0] != '\0') refused_as_expected(st, &err, why);
    else if (call_ok(st, &err) && verdict_matches(&v, need(c, "expect"), 0)) passed++;
}

static void batch_case(fencing_guard *g, json_object *c) {
    fencing_fence fence;
    fencing_error err;
    fencing_fence_state after;
    json_object *f = need(c, "fence"), *lock = need(c, "lock"), *writes = need(c, "writes");
    json_object *expect = need(c, "expect"), *verdicts = need(expect, "verdicts"), *ef = need(expect, "fence");
    size_t n = json_object_array_length(writes);
    int fenced = !json_object_is_type(f, json_type_null), ok = 1;
    if (fenced) read_fence(f, &fence);
    fencing_write *ws = calloc(n ? n : 1, sizeof *ws);
    fencing_verdict *vs = calloc(n ? n : 1, sizeof *vs);
    for (size_t i = 0; i < n; i++) {
        json_object *w = json_object_array_get_idx(writes, i);
        ws[i].token = u64_field(w, "token");
        ws[i].has_sequence = (uint8_t)opt_u64(w, "sequence", &ws[i].sequence);
    }
    if (n != json_object_array_length(verdicts)) invalid("verdicts and writes differ in number");
    fencing_status st = fencing_admit_batch(g, fenced ? &fence : NULL, json_object_get_string(lock),
                                            (size_t)json_object_get_string_len(lock), ws, n, policy_of(c), vs, &after,
                                            &err);
    char why[128] = "";
    if (n == 0) strcat(why, " count_zero ");
    if (fenced) refusal_of_name(need(f, "lock"), why, sizeof why);
    refusal_of_name(lock, why, sizeof why);
    if (why[0] != '\0') {
        refused_as_expected(st, &err, why);
        free(ws);
        free(vs);
        return;
    }
    if (!call_ok(st, &err)) ok = 0;
    for (size_t i = 0; ok && i < n; i++) ok &= verdict_matches(&vs[i], json_object_array_get_idx(verdicts, i), (int)i);
    if (ok && json_object_is_type(ef, json_type_null)) {
        if (after.has_fence) fail("expected no fence after the batch"), ok = 0;
    } else if (ok) {
        uint64_t s;
        int has = opt_u64(ef, "sequence", &s);
        if (!after.has_fence || after.high_water != u64_field(ef, "high_water") || after.has_sequence != has ||
            (has && after.sequence != s))
            fail("fence after the batch: %u %" PRIu64 " %u %" PRIu64, after.has_fence, after.high_water,
                 after.has_sequence, after.sequence),
                ok = 0;
    }
    if (ok) passed++;
    free(ws);
    free(vs);
}

static void stream_case(fencing_guard *g, json_object *c) {
    fencing_error err;
    json_object *tokens = need(c, "tokens"), *expect = need(c, "expect"), *verdicts = need(expect, "verdicts");
    size_t n = json_object_array_length(tokens);
    uint64_t *ts = calloc(n ? n : 1, sizeof *ts), after = 0, mark = u64_field(c, "high_water");
    fencing_verdict *vs = calloc(n ? n : 1, sizeof *vs);
    int ok = 1;
    for (size_t i = 0; i < n; i++) ts[i] = as_u64(json_object_array_get_idx(tokens, i), "token");
    fencing_status st = fencing_admit_stream(g, mark, ts, n, policy_of(c), vs, &after, &err);
    if (n == 0) {
        refused_as_expected(st, &err, " count_zero ");
        free(ts);
        free(vs);
        return;
    }
    if (!call_ok(st, &err)) ok = 0;
    for (size_t i = 0; ok && i < n; i++) {
        const char *want = json_object_get_string(json_object_array_get_idx(verdicts, i));
        const char *got = fencing_reason(vs[i].code);
        if (got == NULL || strcmp(got, want) != 0) fail("token %zu: expected %s, got %s", i, want, got), ok = 0;
        /* The evidence: the mark before the token. */
        else if ((vs[i].code == FENCING_STALE_TOKEN || vs[i].code == FENCING_TOKEN_REUSED) &&
                 (vs[i].token != ts[i] || vs[i].high_water != mark))
            fail("token %zu: evidence %" PRIu64 " against %" PRIu64, i, vs[i].token, vs[i].high_water), ok = 0;
        if (ts[i] > mark) mark = ts[i];
    }
    if (ok && after != u64_field(expect, "high_water")) fail("high water after: %" PRIu64, after), ok = 0;
    if (ok) passed++;
    free(ts);
    free(vs);
}

static json_object *read_json(const char *path) {
    json_object *o = json_object_from_file(path);
    if (o == NULL) {
        fprintf(stderr, "vectors: cannot read %s: %s\n", path, json_util_get_last_err());
        exit(2);
    }
    return o;
}

/* Calls `each` for every JSON file of `dir`, sorted by name; returns how many. */
static int each_file(const char *dir, void (*each)(fencing_guard *, json_object *), fencing_guard *g) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort), files = 0;
    if (n < 0) {
        fprintf(stderr, "vectors: cannot list %s\n", dir);
        exit(2);
    }
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (len > 5 && strcmp(names[i]->d_name + len - 5, ".json") == 0) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
            json_object *file = read_json(path);
            each(g, file);
            json_object_put(file);
            files++;
        }
        free(names[i]);
    }
    free(names);
    return files;
}

static void decision_file(fencing_guard *g, json_object *file) {
    json_object *cases = need(file, "cases");
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        current_case = str_field(c, "name");
        const char *kind = str_field(c, "kind");
        if (strcmp(kind, "admit") == 0) admit_case(g, c);
        else if (strcmp(kind, "batch") == 0) batch_case(g, c);
        else if (strcmp(kind, "stream") == 0) stream_case(g, c);
        else invalid("unknown kind %s", kind);
    }
}


/* ---- Signed writes (proofs/) ------------------------------------------ */

/* Installs the keys `names` of `keys`: by structs, or as text on every other case. */
static int set_keys(fencing_guard *g, json_object *keys, json_object *names, int as_text) {
    fencing_key ks[16];
    uint8_t material[16][64];
    char text[4096] = "";
    size_t n = json_object_array_length(names);
    fencing_error err;
    if (n > 16) invalid("too many keys");
    for (size_t i = 0; i < n; i++) {
        json_object *k = need(keys, json_object_get_string(json_object_array_get_idx(names, i)));
        const char *alg = str_field(k, "algorithm"), *hex = str_field(k, "material");
        ks[i].id = (uint32_t)u64_field(k, "id");
        ks[i].algorithm = strcmp(alg, "ed25519") == 0 ? FENCING_ED25519 : FENCING_HMAC_SHA256;
        ks[i].material = material[i];
        ks[i].material_len = unhex(hex, material[i], sizeof material[i]);
        size_t used = strlen(text);
        snprintf(text + used, sizeof text - used, "%u %s %s\n", ks[i].id, alg, hex);
    }
    fencing_status st = as_text ? fencing_guard_set_keys_text(g, text, strlen(text), &err)
                                : fencing_guard_set_keys(g, ks, n, &err);
    return call_ok(st, &err);
}

static void proof_file(fencing_guard *g, json_object *file) {
    json_object *keys = need(file, "keys"), *cases = need(file, "cases");
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i), *f = need(c, "fence");
        const char *hex = str_field(need(c, "proof"), "hex");
        fencing_fence fence;
        fencing_sequencer seq;
        fencing_verdict v;
        fencing_error err;
        uint8_t proof[256];
        size_t proof_len = 0;
        current_case = str_field(c, "name");
        int fenced = !json_object_is_type(f, json_type_null);
        if (fenced) read_fence(f, &fence);
        read_sequencer(need(c, "sequencer"), &seq);
        if (!set_keys(g, keys, need(c, "verifier"), (int)(i % 2))) continue;
        if (!call_ok(fencing_parse_proof(hex, strlen(hex), proof, sizeof proof, &proof_len, &err), &err)) continue;
        if (call_ok(fencing_admit_signed(g, fenced ? &fence : NULL, &seq, proof, proof_len, policy_of(c), &v, &err),
                    &err) &&
            verdict_matches(&v, need(c, "expect"), 0))
            passed++;
    }
    /* With no keys, every signed write is refused by the rules. */
    fencing_error err;
    fencing_verdict v;
    fencing_sequencer seq = {"locks/x", 7, 1, 0, 0, {0}};
    current_case = "signed-with-no-keys";
    if (call_ok(fencing_guard_clear_keys(g, &err), &err) &&
        call_ok(fencing_admit_signed(g, NULL, &seq, NULL, 0, FENCING_NON_DECREASING, &v, &err), &err)) {
        if (v.code == FENCING_PROOF_NO_KEYS && !v.admitted) passed++;
        else fail("expected proof_no_keys, got %s", fencing_reason(v.code));
    }
}

/* ---- Arguments (arguments/) ------------------------------------------- */

static int skipped;

/* Whether a call refused or accepted as `expect` says ("ok" or a code),
 * the code both the reason and the message's text. */
static int as_expected(fencing_status st, const fencing_error *err, const char *expect, const char *entry) {
    if (strcmp(expect, "ok") == 0) {
        if (st == FENCING_OK) return 1;
        fail("%s: expected ok, got %s (%s)", entry, err->reason, err->message);
        return 0;
    }
    if (st != FENCING_ERR_ARGUMENT || strcmp(err->reason, expect) != 0 || strstr(err->message, expect) == NULL) {
        fail("%s: expected %s, got status %d %s (%s)", entry, expect, st, err->reason, err->message);
        return 0;
    }
    return 1;
}

/* The case's text (repeated `repeat` times) or bytes_hex, as bytes. */
static char *case_bytes(json_object *c, size_t *len) {
    json_object *hex = field(c, "bytes_hex"), *text = field(c, "text"), *repeat = field(c, "repeat");
    if (hex != NULL) {
        const char *h = json_object_get_string(hex);
        char *out = malloc(strlen(h) / 2 + 1);
        *len = unhex(h, (uint8_t *)out, strlen(h) / 2 + 1);
        return out;
    }
    if (text == NULL) invalid("neither text nor bytes_hex");
    size_t one = (size_t)json_object_get_string_len(text), times = repeat ? (size_t)u64_field(c, "repeat") : 1;
    char *out = malloc(one * times + 1);
    for (size_t i = 0; i < times; i++) memcpy(out + i * one, json_object_get_string(text), one);
    *len = one * times;
    return out;
}

static void name_case(fencing_guard *g, json_object *c, const char *expect, const char *bytes, size_t len) {
    fencing_error err;
    fencing_verdict v;
    int ok = as_expected(fencing_check_name(bytes, len, &err), &err, expect, "fencing_check_name");
    /* The same name as a decision's presented lock, and as a stored fence's lock. */
    fencing_sequencer seq = {bytes, len, 5, 0, 0, {0}};
    fencing_fence fence = {bytes, len, 4, 0, 0, {0}};
    ok &= as_expected(fencing_admit(g, NULL, &seq, FENCING_NON_DECREASING, &v, &err), &err, expect, "presented.lock");
    if (ok && strcmp(expect, "ok") == 0 && v.code != FENCING_ADMITTED_NEW_TERM) fail("a good name not admitted"), ok = 0;
    if (ok && strcmp(expect, "ok") != 0 && (v.code != FENCING_NOT_DECIDED || v.admitted))
        fail("a refused name left a verdict"), ok = 0;
    seq.lock = "orders", seq.lock_len = 6;
    ok &= as_expected(fencing_admit(g, &fence, &seq, FENCING_NON_DECREASING, &v, &err), &err, expect, "current.lock");
    ok &= as_expected(fencing_admit_batch(g, NULL, bytes, len, &(fencing_write){5, 0, 0, {0}}, 1,
                                          FENCING_NON_DECREASING, &v, NULL, &err),
                      &err, expect, "batch lock");
    (void)c;
    if (ok) passed++;
}

static void argument_file(fencing_guard *g, json_object *file) {
    json_object *cases = need(file, "cases");
    for (size_t i = 0; i < json_object_array_length(cases); i++) {
        json_object *c = json_object_array_get_idx(cases, i);
        const char *kind = str_field(c, "kind"), *expect = str_field(c, "expect");
        fencing_error err;
        size_t len;
        current_case = str_field(c, "name");
        if (strcmp(kind, "from_signed") == 0 || strcmp(kind, "to_signed") == 0) {
            skipped++;
            continue;
        }
        char *bytes = case_bytes(c, &len);
        if (strcmp(kind, "name") == 0) {
            name_case(g, c, expect, bytes, len);
        } else if (strcmp(kind, "policy") == 0) {
            fencing_policy p = 99;
            if (as_expected(fencing_parse_policy(bytes, len, &p, &err), &err, expect, "fencing_parse_policy")) {
                const char *name = p == FENCING_NON_DECREASING ? "non-decreasing" : "strictly-increasing";
                if (strcmp(expect, "ok") == 0 && strcmp(name, str_field(c, "value")) != 0) fail("policy %u", p);
                else passed++;
            }
        } else if (strcmp(kind, "number") == 0) {
            uint64_t n = 0;
            if (as_expected(fencing_parse_number(bytes, len, &n, &err), &err, expect, "fencing_parse_number")) {
                if (strcmp(expect, "ok") == 0 && n != u64_field(c, "value")) fail("number %" PRIu64, n);
                else passed++;
            }
        } else if (strcmp(kind, "proof") == 0) {
            uint8_t out[256];
            size_t n = 0;
            if (as_expected(fencing_parse_proof(bytes, len, out, sizeof out, &n, &err), &err, expect,
                            "fencing_parse_proof")) {
                char hex[513] = "";
                for (size_t k = 0; k < n; k++) snprintf(hex + 2 * k, 3, "%02x", out[k]);
                json_object *value = field(c, "value");
                if (strcmp(expect, "ok") == 0 && value != NULL && strcmp(hex, json_object_get_string(value)) != 0)
                    fail("proof bytes %s", hex);
                else passed++;
            }
        } else {
            invalid("unknown kind %s", kind);
        }
        free(bytes);
    }
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: vectors <tests/vectors directory>\n");
        return 2;
    }
    fencing_guard *g = NULL;
    fencing_error err;
    if (fencing_guard_open(NULL, NULL, &g, &err) != FENCING_OK) {
        fprintf(stderr, "vectors: cannot open the guard: %s (%s)\n", err.message, err.reason);
        return 2;
    }
    char dir[4096];
    int files = each_file(argv[1], decision_file, g);
    snprintf(dir, sizeof dir, "%s/proofs", argv[1]);
    files += each_file(dir, proof_file, g);
    snprintf(dir, sizeof dir, "%s/arguments", argv[1]);
    files += each_file(dir, argument_file, g);
    fencing_guard_close(g);
    printf("vectors (C API): %d files; %d decision cases refused by the argument rules as they must be (names\n"
           "outside the name rule, empty batches and streams); %d argument cases of the signed 64-bit kinds skipped\n"
           "(C takes uint64_t)\n",
           files, refused_cases, skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
