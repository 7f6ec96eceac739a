/*
 * The header's contract, from C: the layout of its structs, the GC-pause
 * story, bad input of every kind (NULL pointers, zero and absurd lengths and
 * counts, NUL bytes, bytes that are not UTF-8, unknown policies and
 * algorithms), errors written and cleared, keys replaced whole, a guard that
 * cannot decide (the misbehaving plugin: a trap, a loop past the deadline),
 * and threads sharing one guard while another thread rotates its keys and
 * others open and close guards of their own.
 *
 *   api [misbehaving.wasm]
 *
 * Prints each failure and "N passed, M failed"; exits 1 on a failure.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fencing_guard.h"

/* The header's layout, as the library pins it (host/c/src/types.rs). */
_Static_assert(sizeof(fencing_verdict) == 56, "fencing_verdict");
_Static_assert(offsetof(fencing_verdict, high_water) == 8, "fencing_verdict.high_water");
_Static_assert(offsetof(fencing_verdict, last_sequence) == 40, "fencing_verdict.last_sequence");
_Static_assert(offsetof(fencing_verdict, admitted) == 48, "fencing_verdict.admitted");
_Static_assert(sizeof(fencing_fence) == 40 && offsetof(fencing_fence, high_water) == 16, "fencing_fence");
_Static_assert(offsetof(fencing_fence, has_sequence) == 32, "fencing_fence.has_sequence");
_Static_assert(sizeof(fencing_sequencer) == 40 && offsetof(fencing_sequencer, token) == 16, "fencing_sequencer");
_Static_assert(sizeof(fencing_write) == 24 && offsetof(fencing_write, has_sequence) == 16, "fencing_write");
_Static_assert(sizeof(fencing_fence_state) == 24 && offsetof(fencing_fence_state, has_sequence) == 17, "state");
_Static_assert(sizeof(fencing_key) == 24 && offsetof(fencing_key, material) == 8, "fencing_key");
_Static_assert(sizeof(fencing_error) == 4 + FENCING_REASON_BYTES + FENCING_MESSAGE_BYTES, "fencing_error");

static int passed, failed;

#define EXPECT(cond, ...)                                               \
    do {                                                                \
        if (cond) {                                                     \
            passed++;                                                   \
        } else {                                                        \
            failed++;                                                   \
            fprintf(stderr, "FAIL %s:%d: %s: ", __func__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                               \
            fputc('\n', stderr);                                        \
        }                                                               \
    } while (0)

/* A status and reason, with the error's text on failure. */
#define EXPECT_STATUS(call, want_status, want_reason)                                               \
    do {                                                                                           \
        fencing_status st_ = (call);                                                               \
        EXPECT(st_ == (want_status) && err.status == st_ && strcmp(err.reason, (want_reason)) == 0, \
               "got %d %s (%s)", st_, err.reason, err.message);                                   \
    } while (0)

static fencing_sequencer seq_of(const char *lock, uint64_t token) {
    fencing_sequencer s = {lock, strlen(lock), token, 0, 0, {0}};
    return s;
}

static fencing_fence fence_of(const char *lock, uint64_t high_water) {
    fencing_fence f = {lock, strlen(lock), high_water, 0, 0, {0}};
    return f;
}

static void version(void) {
    EXPECT(fencing_guard_abi_version() == FENCING_GUARD_ABI_VERSION, "%" PRIu32, fencing_guard_abi_version());
    EXPECT(fencing_guard_abi_version() >> 16 == FENCING_GUARD_ABI_MAJOR, "major");
    const char *words[] = {"admitted",     "admitted",        "invalid_token",  "wrong_lock",
                           "stale_token",  "token_reused",    "sequence_regressed", "proof_no_keys",
                           "proof_missing", "proof_malformed", "proof_unknown_key",  "proof_bad"};
    for (uint32_t c = 0; c < 12; c++) EXPECT(strcmp(fencing_reason(c), words[c]) == 0, "code %u", c);
    EXPECT(strcmp(fencing_reason(FENCING_NOT_DECIDED), "not_decided") == 0, "255");
    EXPECT(fencing_reason(12) == NULL && fencing_reason(UINT32_MAX) == NULL, "unknown codes");
}

/* A fenced store of one value in memory: read the fence, decide, write both. */
struct store {
    char lock[64];
    uint64_t high_water;
    int fenced;
    char value[32];
};

static fencing_status fenced_put(fencing_guard *g, struct store *s, const char *lock, uint64_t token,
                                 const char *value, fencing_verdict *v, fencing_error *err) {
    fencing_fence f = fence_of(s->lock, s->high_water);
    fencing_sequencer q = seq_of(lock, token);
    fencing_status st = fencing_admit(g, s->fenced ? &f : NULL, &q, FENCING_NON_DECREASING, v, err);
    if (st == FENCING_OK && v->admitted) {
        snprintf(s->lock, sizeof s->lock, "%s", lock);
        s->high_water = v->high_water;
        s->fenced = 1;
        snprintf(s->value, sizeof s->value, "%s", value);
    }
    return st;
}

static void gc_pause_story(fencing_guard *g) {
    struct store s = {"", 0, 0, ""};
    fencing_verdict v;
    fencing_error err;
    EXPECT_STATUS(fenced_put(g, &s, "locks/orders", 33, "from 33", &v, &err), FENCING_OK, "");
    EXPECT(v.admitted && v.code == FENCING_ADMITTED_NEW_TERM && v.high_water == 33, "33 first");
    /* Holder 33 pauses; its lease expires; 34 is granted and writes. */
    EXPECT_STATUS(fenced_put(g, &s, "locks/orders", 34, "from 34", &v, &err), FENCING_OK, "");
    EXPECT(v.admitted && v.high_water == 34, "34 admitted");
    /* 33 wakes up and writes: refused, with its evidence; 34's data stays. */
    EXPECT_STATUS(fenced_put(g, &s, "locks/orders", 33, "late 33", &v, &err), FENCING_OK, "");
    EXPECT(!v.admitted && v.code == FENCING_STALE_TOKEN && v.token == 33 && v.high_water == 34, "33 refused");
    EXPECT(strcmp(s.value, "from 34") == 0 && s.high_water == 34, "34's data kept: %s", s.value);
}

static void bad_input(fencing_guard *g) {
    fencing_verdict v;
    fencing_error err;
    fencing_sequencer q = seq_of("orders", 5);
    fencing_fence f = fence_of("orders", 4);
    /* NULL pointers: an error, and a verdict that reads "not decided". */
    memset(&v, 0, sizeof v); /* code 0 would read "admitted" */
    EXPECT_STATUS(fencing_admit(NULL, NULL, &q, 0, &v, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT(v.code == FENCING_NOT_DECIDED && !v.admitted, "undecided %u", v.code);
    EXPECT(strcmp(err.message, "guard is NULL") == 0, "%s", err.message);
    EXPECT_STATUS(fencing_admit(g, NULL, NULL, 0, &v, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT_STATUS(fencing_admit(g, NULL, &q, 0, NULL, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT(fencing_admit(g, NULL, &q, 0, &v, NULL) == FENCING_OK && v.admitted, "err may be NULL");
    fencing_sequencer nul_ptr = {NULL, 5, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, NULL, &nul_ptr, 0, &v, &err), FENCING_ERR_NULL, "null_argument");
    fencing_sequencer empty = {NULL, 0, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, NULL, &empty, 0, &v, &err), FENCING_ERR_ARGUMENT, "name_empty");
    /* A success clears the error. */
    EXPECT_STATUS(fencing_admit(g, &f, &q, 0, &v, &err), FENCING_OK, "");
    EXPECT(err.message[0] == '\0', "message cleared: %s", err.message);

    /* NUL and non-UTF-8 are refused by the rule, never truncated: first a
     * good name, so the thread's last name is its prefix. */
    fencing_sequencer nul = {"orders\0evil", 11, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, &f, &nul, 0, &v, &err), FENCING_ERR_ARGUMENT, "name_control");
    EXPECT(strstr(err.message, "presented.lock") != NULL && strstr(err.message, "U+0000") != NULL, "%s",
           err.message);
    fencing_sequencer shorter = {"order", 5, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, &f, &shorter, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.code == FENCING_WRONG_LOCK, "a prefix is another lock: %s", fencing_reason(v.code));
    fencing_sequencer latin1 = {"caf\xe9", 4, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, NULL, &latin1, 0, &v, &err), FENCING_ERR_ARGUMENT, "name_not_utf8");
    fencing_fence bad_fence = {"orders\n", 7, 4, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, &bad_fence, &q, 0, &v, &err), FENCING_ERR_ARGUMENT, "name_control");
    EXPECT(strstr(err.message, "current.lock") != NULL, "%s", err.message);
    /* An absurd length is refused unread (the pointer is to 6 bytes). */
    fencing_sequencer huge = {"orders", SIZE_MAX, 5, 0, 0, {0}};
    EXPECT_STATUS(fencing_admit(g, NULL, &huge, 0, &v, &err), FENCING_ERR_ARGUMENT, "name_too_long");
    EXPECT_STATUS(fencing_admit(g, NULL, &q, 2, &v, &err), FENCING_ERR_ARGUMENT, "policy_unknown");
    EXPECT_STATUS(fencing_admit(g, NULL, &q, UINT32_MAX, &v, &err), FENCING_ERR_ARGUMENT, "policy_unknown");

    /* Batches and streams: counts and pointers. */
    fencing_write w[2] = {{5, 0, 0, {0}}, {4, 0, 0, {0}}};
    fencing_verdict vs[2];
    uint64_t tokens[2] = {5, 4}, after = 0;
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, w, 0, 0, vs, NULL, &err), FENCING_ERR_ARGUMENT,
                  "count_zero");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, w, SIZE_MAX, 0, vs, NULL, &err), FENCING_ERR_ARGUMENT,
                  "count_too_large");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, w, FENCING_MAX_BATCH + 1, 0, vs, NULL, &err),
                  FENCING_ERR_ARGUMENT, "count_too_large");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, NULL, 2, 0, vs, NULL, &err), FENCING_ERR_NULL,
                  "null_argument");
    EXPECT(vs[0].code == FENCING_NOT_DECIDED && vs[1].code == FENCING_NOT_DECIDED, "batch undecided");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, w, 2, 0, NULL, NULL, &err), FENCING_ERR_NULL,
                  "null_argument");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "", 0, w, 2, 0, vs, NULL, &err), FENCING_ERR_ARGUMENT, "name_empty");
    EXPECT_STATUS(fencing_admit_batch(g, NULL, "orders", 6, w, 2, 0, vs, NULL, &err), FENCING_OK, "");
    EXPECT(vs[0].code == FENCING_ADMITTED_NEW_TERM && vs[1].code == FENCING_STALE_TOKEN && vs[1].high_water == 5,
           "batch verdicts");
    EXPECT_STATUS(fencing_admit_stream(g, 0, tokens, 0, 0, vs, &after, &err), FENCING_ERR_ARGUMENT, "count_zero");
    EXPECT_STATUS(fencing_admit_stream(g, 0, tokens, SIZE_MAX, 0, vs, &after, &err), FENCING_ERR_ARGUMENT,
                  "count_too_large");
    EXPECT_STATUS(fencing_admit_stream(g, 0, NULL, 2, 0, vs, &after, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT_STATUS(fencing_admit_stream(g, 0, tokens, 2, 1, vs, &after, &err), FENCING_OK, "");
    EXPECT(vs[1].code == FENCING_STALE_TOKEN && after == 5, "stream");

    /* Proofs: an absurd length is an error; none at all is a verdict. */
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, (const uint8_t *)"x", 257, 0, &v, &err), FENCING_ERR_ARGUMENT,
                  "proof_too_long");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, NULL, 3, 0, &v, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, NULL, 0, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.code == FENCING_PROOF_NO_KEYS && !v.admitted, "no keys: %s", fencing_reason(v.code));

    /* The argument rules as entry points. */
    uint64_t n = 7;
    fencing_policy p = 9;
    size_t len = 9;
    EXPECT_STATUS(fencing_parse_number(NULL, 0, &n, &err), FENCING_ERR_ARGUMENT, "number_not_decimal");
    EXPECT_STATUS(fencing_parse_number("34", 2, NULL, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT_STATUS(fencing_parse_number("34x", 2, &n, &err), FENCING_OK, "");
    EXPECT(n == 34, "only len bytes are read: %" PRIu64, n);
    EXPECT_STATUS(fencing_parse_policy("strictly-increasing", 19, &p, &err), FENCING_OK, "");
    EXPECT(p == FENCING_STRICTLY_INCREASING, "policy %u", p);
    EXPECT_STATUS(fencing_parse_proof("00ff", 4, NULL, 0, &len, &err), FENCING_ERR_ARGUMENT, "count_too_large");
    EXPECT_STATUS(fencing_parse_proof("", 0, NULL, 0, &len, &err), FENCING_OK, "");
    EXPECT(len == 0, "empty proof");
    EXPECT_STATUS(fencing_check_name("a\0", 2, &err), FENCING_ERR_ARGUMENT, "name_control");
}

static const uint8_t ed_public[32] = {0xea, 0x4a, 0x6c, 0x63, 0xe2, 0x9c, 0x52, 0x0a, 0xbe, 0xf5, 0x50,
                                      0x7b, 0x13, 0x2e, 0xc5, 0xf9, 0x95, 0x47, 0x76, 0xae, 0xbe, 0xbe,
                                      0x7b, 0x92, 0x42, 0x1e, 0xea, 0x69, 0x14, 0x46, 0xd2, 0x2c};
static const char *proof_34 =
    "01000000070d2aa31d47037f6a7e8cde42b2fd53d14b3924ff0e124092c1d44c924bb6f3784689c862c2ffb267cc60130f87c60e6e4eed4"
    "637ee03bd7f1b2d2050fe8a160e";
static const char *signed_lock = "locks/tenant-42/orders";

static void keys(fencing_guard *g) {
    fencing_error err;
    fencing_verdict v;
    uint8_t proof[128], mac[32];
    size_t proof_len = 0;
    memset(mac, 9, sizeof mac);
    fencing_key ed = {7, FENCING_ED25519, ed_public, sizeof ed_public};
    fencing_key hmac = {9, FENCING_HMAC_SHA256, mac, sizeof mac};
    fencing_sequencer q = seq_of(signed_lock, 34);
    EXPECT_STATUS(fencing_parse_proof(proof_34, strlen(proof_34), proof, sizeof proof, &proof_len, &err), FENCING_OK,
                  "");
    EXPECT_STATUS(fencing_guard_set_keys(g, &ed, 1, &err), FENCING_OK, "");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, proof, proof_len, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.admitted && v.high_water == 34, "signed 34: %s", fencing_reason(v.code));
    /* Refused sets leave the keys in place. */
    fencing_key many[65];
    for (int i = 0; i < 65; i++) many[i] = ed, many[i].id = (uint32_t)i;
    fencing_key dup[2] = {ed, ed};
    fencing_key alg = {7, 9, ed_public, 32};
    fencing_key absurd = {7, FENCING_ED25519, ed_public, SIZE_MAX};
    fencing_key short_key = {7, FENCING_ED25519, ed_public, 31};
    fencing_key no_material = {7, FENCING_ED25519, NULL, 32};
    EXPECT_STATUS(fencing_guard_set_keys(g, &ed, 0, &err), FENCING_ERR_KEYS, "keys_empty");
    EXPECT_STATUS(fencing_guard_set_keys(g, many, 65, &err), FENCING_ERR_KEYS, "keys_too_many");
    EXPECT_STATUS(fencing_guard_set_keys(g, &ed, SIZE_MAX, &err), FENCING_ERR_KEYS, "keys_too_many");
    EXPECT_STATUS(fencing_guard_set_keys(g, NULL, 1, &err), FENCING_ERR_NULL, "null_argument");
    EXPECT_STATUS(fencing_guard_set_keys(g, dup, 2, &err), FENCING_ERR_KEYS, "key_duplicate_id");
    EXPECT_STATUS(fencing_guard_set_keys(g, &alg, 1, &err), FENCING_ERR_KEYS, "key_algorithm_unknown");
    EXPECT_STATUS(fencing_guard_set_keys(g, &absurd, 1, &err), FENCING_ERR_KEYS, "key_bad");
    EXPECT_STATUS(fencing_guard_set_keys(g, &short_key, 1, &err), FENCING_ERR_KEYS, "key_bad");
    EXPECT_STATUS(fencing_guard_set_keys(g, &no_material, 1, &err), FENCING_ERR_NULL, "null_argument");
    const char *bad_text = "# keys\n7 ed25519 ea4a\n8 rsa 00\n";
    EXPECT_STATUS(fencing_guard_set_keys_text(g, bad_text, strlen(bad_text), &err), FENCING_ERR_KEYS, "keys_text");
    EXPECT(strstr(err.message, "line 3") != NULL, "%s", err.message);
    EXPECT_STATUS(fencing_guard_set_keys_text(g, "", 0, &err), FENCING_ERR_KEYS, "keys_empty");
    EXPECT_STATUS(fencing_guard_set_keys_text(g, "x", (size_t)1 << 20, &err), FENCING_ERR_KEYS, "keys_text");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, proof, proof_len, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.admitted, "the old keys stayed: %s", fencing_reason(v.code));
    /* Rotated away: the proof names a key no longer held. */
    EXPECT_STATUS(fencing_guard_set_keys(g, &hmac, 1, &err), FENCING_OK, "");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &q, proof, proof_len, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.code == FENCING_PROOF_UNKNOWN_KEY && v.key_id == 7, "%s %u", fencing_reason(v.code), v.key_id);
    /* A forged token: the proof is 34's. */
    fencing_sequencer forged = seq_of(signed_lock, 35);
    EXPECT_STATUS(fencing_guard_set_keys(g, &ed, 1, &err), FENCING_OK, "");
    EXPECT_STATUS(fencing_admit_signed(g, NULL, &forged, proof, proof_len, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.code == FENCING_PROOF_BAD && !v.admitted, "%s", fencing_reason(v.code));
    EXPECT_STATUS(fencing_guard_clear_keys(g, &err), FENCING_OK, "");
    EXPECT_STATUS(fencing_guard_clear_keys(NULL, &err), FENCING_ERR_NULL, "null_argument");
}

static void open_errors(void) {
    fencing_error err;
    fencing_guard *g = (fencing_guard *)&err; /* set to NULL on failure */
    EXPECT_STATUS(fencing_guard_open("/nonexistent/guard.wasm", NULL, &g, &err), FENCING_ERR_LOAD, "guard_load");
    EXPECT(g == NULL, "out set to NULL");
    EXPECT(strstr(err.message, "/nonexistent/guard.wasm") != NULL, "%s", err.message);
    EXPECT_STATUS(fencing_guard_open(NULL, NULL, NULL, &err), FENCING_ERR_NULL, "null_argument");
    fencing_guard_close(NULL);
}

/* A plugin that traps, loops and lies by lock name: every failure refuses. */
static void misbehaving(const char *path) {
    fencing_guard *g = NULL;
    fencing_error err;
    fencing_verdict v;
    EXPECT_STATUS(fencing_guard_open(path, NULL, &g, &err), FENCING_OK, "");
    if (g == NULL) return;
    fencing_sequencer trap = seq_of("trap", 5), loop = seq_of("loop", 5), lie = seq_of("lie", 5), fine = seq_of("ok", 5);
    fencing_fence lie_fence = fence_of("lie", 4);
    EXPECT_STATUS(fencing_admit(g, NULL, &trap, 0, &v, &err), FENCING_ERR_GUARD, "guard_trap");
    EXPECT(v.code == FENCING_NOT_DECIDED && !v.admitted, "trap undecided");
    EXPECT_STATUS(fencing_admit(g, NULL, &fine, 0, &v, &err), FENCING_OK, "");
    EXPECT(v.admitted, "the next call runs on a fresh instance");
    EXPECT_STATUS(fencing_admit(g, NULL, &loop, 0, &v, &err), FENCING_ERR_GUARD, "guard_timeout");
    EXPECT_STATUS(fencing_admit(g, &lie_fence, &lie, 0, &v, &err), FENCING_ERR_GUARD, "guard_trap");
    EXPECT(strstr(err.message, "refuse the write") != NULL, "%s", err.message);
    EXPECT_STATUS(fencing_admit(g, NULL, &fine, 0, &v, &err), FENCING_OK, "");
    fencing_guard_close(g);
}

/* ---- Threads ---------------------------------------------------------- */

enum { THREADS = 6, ROUNDS = 2000 };

struct worker {
    fencing_guard *g;
    int index;
    int wrong;     /* decisions that differ from the rules' */
    int timed_out; /* calls refused because the machine did not run them within the deadline */
    const uint8_t *proof;
    size_t proof_len;
};

/* Each thread keeps its own resource's fence, under its own lock name, and
 * checks every verdict against what the rules must answer. */
static void *decide_thread(void *arg) {
    struct worker *w = arg;
    char lock[32];
    snprintf(lock, sizeof lock, "locks/thread-%d", w->index);
    uint64_t hw = 0;
    for (int i = 1; i <= ROUNDS; i++) {
        fencing_fence f = fence_of(lock, hw);
        uint64_t token = (uint64_t)i % 7 == 0 ? hw - 1 : hw + (uint64_t)(i % 3);
        fencing_sequencer q = seq_of(lock, token);
        fencing_verdict v;
        fencing_error err;
        fencing_status st = fencing_admit(w->g, hw ? &f : NULL, &q, FENCING_NON_DECREASING, &v, &err);
        if (st != FENCING_OK) {
            /* A loaded machine may not run the call within its 100 ms: refused, fail closed. */
            if (strcmp(err.reason, "guard_timeout") == 0 && !v.admitted) w->timed_out++;
            else w->wrong++, fprintf(stderr, "thread %d: %s: %s\n", w->index, err.reason, err.message);
            continue;
        }
        int should = token != 0 && token >= hw;
        if (v.admitted != should || (should && v.high_water != token)) w->wrong++;
        if (v.admitted) hw = v.high_water;
        /* Signed writes while another thread rotates keys: every set holds key 7. */
        fencing_sequencer s = seq_of(signed_lock, 34);
        st = fencing_admit_signed(w->g, NULL, &s, w->proof, w->proof_len, 0, &v, &err);
        if (st != FENCING_OK && strcmp(err.reason, "guard_timeout") == 0 && !v.admitted) w->timed_out++;
        else if (st != FENCING_OK || !v.admitted)
            w->wrong++, fprintf(stderr, "thread %d: signed: %s %s\n", w->index, err.reason, fencing_reason(v.code));
    }
    return NULL;
}

static volatile int stop_rotating;

static void *rotate_thread(void *arg) {
    fencing_guard *g = arg;
    uint8_t mac[32];
    memset(mac, 9, sizeof mac);
    fencing_key both[2] = {{7, FENCING_ED25519, ed_public, 32}, {9, FENCING_HMAC_SHA256, mac, 32}};
    for (size_t i = 0; !stop_rotating; i++) fencing_guard_set_keys(g, both, 1 + i % 2, NULL);
    return NULL;
}

static void *open_close_thread(void *arg) {
    int *bad = arg;
    for (int i = 0; i < 3; i++) {
        fencing_guard *g = NULL;
        fencing_verdict v;
        fencing_sequencer q = seq_of("own", 1);
        if (fencing_guard_open(NULL, NULL, &g, NULL) != FENCING_OK ||
            fencing_admit(g, NULL, &q, 0, &v, NULL) != FENCING_OK || !v.admitted)
            (*bad)++;
        fencing_guard_close(g);
    }
    return NULL;
}

static void threads(fencing_guard *g) {
    uint8_t proof[128];
    size_t proof_len = 0;
    fencing_key ed = {7, FENCING_ED25519, ed_public, 32};
    fencing_guard_set_keys(g, &ed, 1, NULL);
    fencing_parse_proof(proof_34, strlen(proof_34), proof, sizeof proof, &proof_len, NULL);
    pthread_t ts[THREADS], rotator, opener;
    struct worker ws[THREADS];
    int open_bad = 0;
    pthread_create(&rotator, NULL, rotate_thread, g);
    pthread_create(&opener, NULL, open_close_thread, &open_bad);
    for (int i = 0; i < THREADS; i++) {
        ws[i] = (struct worker){g, i, 0, 0, proof, proof_len};
        pthread_create(&ts[i], NULL, decide_thread, &ws[i]);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(ts[i], NULL);
        EXPECT(ws[i].wrong == 0, "thread %d: %d wrong decisions", i, ws[i].wrong);
        EXPECT(ws[i].timed_out < ROUNDS / 10, "thread %d: %d calls timed out", i, ws[i].timed_out);
    }
    stop_rotating = 1;
    pthread_join(rotator, NULL);
    pthread_join(opener, NULL);
    EXPECT(open_bad == 0, "guards opened and closed beside: %d bad", open_bad);
}

int main(int argc, char **argv) {
    fencing_guard *g = NULL;
    fencing_error err;
    version();
    open_errors();
    if (fencing_guard_open(NULL, NULL, &g, &err) != FENCING_OK) {
        fprintf(stderr, "api: cannot open the guard: %s (%s)\n", err.message, err.reason);
        return 2;
    }
    gc_pause_story(g);
    bad_input(g);
    keys(g);
    threads(g);
    fencing_guard_close(g);
    if (argc > 1) misbehaving(argv[1]);
    printf("api (C API): %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
