/* The PostgreSQL store from C: inboxlog_store_open_postgres with options, a second
 * open LOCKED, inboxlog_session_open_ex taking a session over, the old owner FENCED.
 * The server is INBOXLOG_TEST_PG (default postgresql://postgres@127.0.0.1:5432/test);
 * without one the program says so and passes, except under CI=true. Its tables live
 * in the schema INBOXLOG_TEST_PG_SCHEMA (default inboxlog_c_host; make test-c gives each
 * run its own and drops it afterwards); the program deletes its sessions first. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

static void note(inboxlog_session *s, int want) {
    char *err = NULL;
    char *event = NULL;
    int status = inboxlog_session_append(s, "host/note", "{\"n\":1}", NULL, &event, &err);
    if (status != want) FAIL("append returned %d, want %d: %s", status, want, err ? err : "");
    inboxlog_string_free(event);
    inboxlog_string_free(err);
}

int main(void) {
    const char *url = getenv("INBOXLOG_TEST_PG");
    const char *ci = getenv("CI");
    const char *schema = getenv("INBOXLOG_TEST_PG_SCHEMA");
    char options[160];
    inboxlog_store *store = NULL;
    inboxlog_session *first = NULL;
    inboxlog_session *second = NULL;
    inboxlog_store *refused = NULL;
    char *err = NULL;
    char *events = NULL;

    if (url == NULL || *url == '\0') url = "postgresql://postgres@127.0.0.1:5432/test";
    if (schema == NULL || *schema == '\0') schema = "inboxlog_c_host";
    if (snprintf(options, sizeof options, "{\"schema\":\"%s\",\"durability\":\"sync\"}", schema) >=
        (int)sizeof options)
        FAIL("INBOXLOG_TEST_PG_SCHEMA is too long: %s", schema);
    int status = inboxlog_store_open_postgres(url, options, &store, &err);
    if (status == INBOXLOG_STATUS_UNAVAILABLE && !(ci && strcmp(ci, "true") == 0)) {
        printf("postgres: SKIPPED, no server at INBOXLOG_TEST_PG: %s\n", err);
        inboxlog_string_free(err);
        return 0;
    }
    if (status != INBOXLOG_STATUS_OK) FAIL("open_postgres returned %d: %s", status, err);

    /* Bad options are refused with their status. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "not a plain SQL identifier",
                  inboxlog_store_open_postgres(url, "{\"schema\":\"No\"}", &refused, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_JSON, "options_json",
                  inboxlog_store_open_postgres(url, "{", &refused, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_UNAVAILABLE, "127.0.0.1:9",
                  inboxlog_store_open_postgres(
                      "postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2", NULL, &refused,
                      &err));
    EXPECT(refused == NULL);

    /* A leftover of an earlier run goes first. */
    status = inboxlog_store_delete(store, "c1", &err);
    if (status != INBOXLOG_STATUS_OK && status != INBOXLOG_STATUS_NOT_FOUND) {
        FAIL("delete returned %d: %s", status, err);
    }
    inboxlog_string_free(err);
    err = NULL;

    OK(inboxlog_session_create(store, "c1", NULL, &first, &err));
    note(first, INBOXLOG_STATUS_OK);
    EXPECT_STATUS(INBOXLOG_STATUS_LOCKED, "is locked by another writer",
                  inboxlog_session_open_ex(store, "c1", false, &second, &err));
    OK(inboxlog_session_open_ex(store, "c1", true, &second, &err));
    note(second, INBOXLOG_STATUS_OK);
    note(first, INBOXLOG_STATUS_FENCED);
    EXPECT_STR(inboxlog_status_name(INBOXLOG_STATUS_FENCED), "fenced");
    EXPECT_STR(inboxlog_status_name(INBOXLOG_STATUS_UNAVAILABLE), "unavailable");
    OK(inboxlog_session_events(second, 0, &events, &err));
    EXPECT(strstr(events, "\"seq\":1") != NULL && strstr(events, "\"seq\":2") == NULL);
    inboxlog_string_free(events);

    inboxlog_session_free(first);
    inboxlog_session_free(second);
    OK(inboxlog_store_delete(store, "c1", &err));
    inboxlog_store_free(store);
    printf("postgres: ok\n");
    return 0;
}
