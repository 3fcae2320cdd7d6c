/* Every error a C host can cause at the boundary, against the static library:
 * NULL arguments, invalid UTF-8, malformed JSON, wrong JSON shapes, out-of-range and
 * absent numbers, use after close, double close, the panic status, and deleting a
 * session a writer holds. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

/* The version cargo builds, passed by the Makefile from `cargo metadata`. */
#ifndef INBOXLOG_EXPECTED_VERSION
#error "build with -DINBOXLOG_EXPECTED_VERSION='\"MAJOR.MINOR.PATCH\"' (make test-c does)"
#endif

/* Whether `v` is MAJOR.MINOR.PATCH: three dot-separated runs of digits. */
static bool semver_shaped(const char *v) {
    for (int part = 0; part < 3; part++) {
        if (*v < '0' || *v > '9') return false;
        while (*v >= '0' && *v <= '9') v++;
        if (part < 2 && *v++ != '.') return false;
    }
    return *v == '\0';
}

int main(void) {
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    inboxlog_session *untouched = (inboxlog_session *)&store; /* a sentinel, never used */
    char *json = NULL;
    char *sentinel = (char *)"unchanged";
    uint64_t turn = 0;
    bool flag = false;

    EXPECT_STR(inboxlog_version(), INBOXLOG_EXPECTED_VERSION);
    EXPECT(semver_shaped(inboxlog_version()));
    EXPECT(!semver_shaped("0.1") && !semver_shaped("0.1.x") && !semver_shaped("0.1.0.1"));
    EXPECT_STR(inboxlog_status_name(INBOXLOG_STATUS_INVALID_SPLICE), "invalid_splice");
    EXPECT_STR(inboxlog_status_name(INBOXLOG_STATUS_PANIC), "panic");
    EXPECT(inboxlog_status_name(77) == NULL);

    /* NULL arguments: refused with the argument's name; `error` itself may be NULL. */
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`out`", inboxlog_store_new_memory(NULL, &err));
    EXPECT(inboxlog_store_new_memory(NULL, NULL) == INBOXLOG_STATUS_NULL_ARGUMENT);
    OK(inboxlog_store_new_memory(&store, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`store`",
                  inboxlog_session_create(NULL, "s", NULL, &s, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`id`",
                  inboxlog_session_create(store, NULL, NULL, &s, &err));
    EXPECT(s == NULL);
    OK(inboxlog_session_create(store, "s", NULL, &s, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`message_json`",
                  inboxlog_inbox_append(s, "next-turn", NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`out_turn`",
                  inboxlog_session_open_turn(s, NULL, NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`session`",
                  inboxlog_inbox_has_pending(NULL, &flag, &err));

    /* Invalid UTF-8: refused with the argument's name and the offset. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_UTF8, "argument `id` is not valid UTF-8 (bad byte at offset 1)",
                  inboxlog_session_create(store, "a\xff", NULL, &untouched, &err));
    EXPECT(untouched == (inboxlog_session *)&store);
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_UTF8, "`message_json`",
                  inboxlog_inbox_append(s, "next-turn", "{\"id\":\"\xc3\x28\"}", &err));

    /* Malformed JSON vs well-formed JSON of the wrong shape. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_JSON, "not valid JSON",
                  inboxlog_inbox_append(s, "next-turn", "{\"id\":", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_JSON, "not valid JSON",
                  inboxlog_session_append(s, "host/x", "{\"a\":NaN}", NULL, NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "must be a JSON object",
                  inboxlog_inbox_append(s, "next-turn", "[\"m\"]", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "JSON array of messages",
                  inboxlog_inbox_splice(s, "next-turn", 0, 0, "{\"id\":\"m\"}", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "target must be",
                  inboxlog_inbox_append(s, "soon", "{\"id\":\"m\"}", &err));
    /* Absent numbers are INBOXLOG_ABSENT; out of range is refused, never clamped. */
    {
        int64_t number = 0;
        OK(inboxlog_session_last_seq(s, &number, &err));
        EXPECT(number == INBOXLOG_ABSENT);
        OK(inboxlog_session_current_turn(s, &number, &err));
        EXPECT(number == INBOXLOG_ABSENT);
        json = sentinel;
        EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "past the end of the log (0 events",
                      inboxlog_session_baseline(s, 0, &json, &err));
        EXPECT(json == sentinel);
        EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "must be INBOXLOG_ABSENT (-1)",
                      inboxlog_session_baseline(s, -2, &json, &err));
        OK(inboxlog_session_baseline(s, INBOXLOG_ABSENT, &json, &err));
        EXPECT_STR(json, "{\"seq\":null,\"next_turn\":[],\"next_step\":[]}");
        inboxlog_string_free(json);
    }
    {
        char deep[1400];
        memset(deep, '[', 600);
        memset(deep + 600, ']', 600);
        deep[1200] = '\0';
        EXPECT_STATUS(INBOXLOG_STATUS_TOO_LARGE, "deeper than 512",
                      inboxlog_session_append(s, "host/x", deep, NULL, NULL, &err));
    }

    /* Core errors keep their numbers. */
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_DUPLICATE_MESSAGE, "message \\\"m\\\" is already pending",
                  inboxlog_inbox_append(s, "next-step", "{\"id\":\"m\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "idle", inboxlog_session_close_turn(s, NULL, &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "nobody", inboxlog_session_open(store, "nobody", &s, &err));
    json = sentinel;
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "propose_step",
                  inboxlog_session_propose_step(s, &json, &err));
    EXPECT(json == sentinel);

    /* Panics never cross the boundary. */
    EXPECT_STATUS(INBOXLOG_STATUS_PANIC, "\"kind\":\"panic\"", inboxlog_test_panic(&err));
    EXPECT(inboxlog_test_panic(NULL) == INBOXLOG_STATUS_PANIC);

    /* Close twice is fine; close(NULL) is an error as every NULL but _free's; use after
     * close is CLOSED; free after close releases. */
    OK(inboxlog_session_close(s, &err));
    OK(inboxlog_session_close(s, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`session`", inboxlog_session_close(NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CLOSED, "closed", inboxlog_session_open_turn(s, NULL, &turn, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CLOSED, "closed",
                  inboxlog_inbox_append(s, "next-turn", "{\"id\":\"n\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CLOSED, "closed", inboxlog_session_poll(s, &json, &err));
    inboxlog_session_free(s);
    inboxlog_session_free(NULL);
    inboxlog_store_free(NULL);
    inboxlog_projection_free(NULL);
    inboxlog_string_free(NULL);

    /* The closed session's lock was released: it reopens with its inbox. */
    OK(inboxlog_session_open(store, "s", &s, &err));
    OK(inboxlog_inbox_has_pending(s, &flag, &err));
    EXPECT(flag);

    /* Delete: refused while a writer holds the session, then for good. */
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`store`", inboxlog_store_delete(NULL, "s", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "`id`", inboxlog_store_delete(store, NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_UTF8, "`id`", inboxlog_store_delete(store, "s\xff", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "id", inboxlog_store_delete(store, "../s", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_LOCKED, "cannot be deleted", inboxlog_store_delete(store, "s", &err));
    EXPECT(inboxlog_store_delete(store, "s", NULL) == INBOXLOG_STATUS_LOCKED);
    inboxlog_session_free(s);
    OK(inboxlog_store_delete(store, "s", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "no session", inboxlog_store_delete(store, "s", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "no session", inboxlog_session_open(store, "s", &s, &err));
    inboxlog_store_free(store);
    puts("errors: ok");
    return 0;
}
