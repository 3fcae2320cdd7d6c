/* Many sessions on one PostgreSQL store handle from C (issue #21): N sessions created
 * through inboxlog_store_open with {"maxConnections":4} and held open at once, one
 * event appended to each, every one closed; a sample then opens again (nothing holds
 * it any more) with that one event, the store lists all N, and all N are deleted.
 * N is INBOXLOG_C_SESSIONS (default 100, about 20 s under valgrind; make test-c runs
 * the native build with 10000). The server is INBOXLOG_TEST_PG (default
 * postgresql://postgres@127.0.0.1:5432/test); without one the program says so and
 * passes, except under CI=true. Its tables live in the schema INBOXLOG_TEST_PG_SCHEMA
 * (default inboxlog_c_host; make test-c gives each run its own and drops it
 * afterwards); the program deletes the sessions it made, and any an earlier run left
 * first. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

#define PREFIX "many-"

static void session_id(char *out, size_t size, long i) {
    if (snprintf(out, size, PREFIX "%06ld", i) >= (int)size) FAIL("id %ld too long", i);
}

/* The ids of the listed headers that start with PREFIX, counted; deleted when `del`. */
static long listed(inboxlog_store *store, int del) {
    char *list = NULL;
    long count = 0;
    OK(inboxlog_store_list(store, &list, &err));
    for (const char *at = strstr(list, "\"id\":\"" PREFIX); at != NULL;
         at = strstr(at, "\"id\":\"" PREFIX)) {
        char id[64];
        const char *start = at + strlen("\"id\":\"");
        const char *end = strchr(start, '"');
        if (end == NULL || (size_t)(end - start) >= sizeof id) FAIL("odd list: %s", at);
        memcpy(id, start, (size_t)(end - start));
        id[end - start] = '\0';
        if (del) OK(inboxlog_store_delete(store, id, &err));
        count++;
        at = end;
    }
    inboxlog_string_free(list);
    return count;
}

int main(void) {
    const char *url = getenv("INBOXLOG_TEST_PG");
    const char *ci = getenv("CI");
    const char *schema = getenv("INBOXLOG_TEST_PG_SCHEMA");
    const char *wanted = getenv("INBOXLOG_C_SESSIONS");
    char options[200];
    char id[32];
    inboxlog_store *store = NULL;
    char *err = NULL;
    long n = 100;

    if (url == NULL || *url == '\0') url = "postgresql://postgres@127.0.0.1:5432/test";
    if (schema == NULL || *schema == '\0') schema = "inboxlog_c_host";
    if (wanted != NULL && *wanted != '\0') {
        char *end = NULL;
        n = strtol(wanted, &end, 10);
        if (*end != '\0' || n < 1 || n > 999999) {
            FAIL("INBOXLOG_C_SESSIONS=%s: want a count from 1 to 999999", wanted);
        }
    }
    if (snprintf(options, sizeof options, "{\"schema\":\"%s\",\"maxConnections\":4}", schema) >=
        (int)sizeof options)
        FAIL("INBOXLOG_TEST_PG_SCHEMA is too long: %s", schema);
    int status = inboxlog_store_open(url, options, &store, &err);
    if (status == INBOXLOG_STATUS_UNAVAILABLE && !(ci && strcmp(ci, "true") == 0)) {
        printf("many_sessions: SKIPPED, no server at INBOXLOG_TEST_PG: %s\n", err);
        inboxlog_string_free(err);
        return 0;
    }
    if (status != INBOXLOG_STATUS_OK) FAIL("store_open returned %d: %s", status, err);
    listed(store, 1);

    /* N sessions open at once on the one handle, one event each. */
    inboxlog_session **held = calloc((size_t)n, sizeof *held);
    if (held == NULL) FAIL("out of memory for %ld sessions", n);
    for (long i = 0; i < n; i++) {
        session_id(id, sizeof id, i);
        OK(inboxlog_session_create(store, id, NULL, &held[i], &err));
    }
    for (long i = 0; i < n; i++) {
        char data[32];
        char *event = NULL;
        snprintf(data, sizeof data, "{\"i\":%ld}", i);
        OK(inboxlog_session_append(held[i], "host/note", data, NULL, &event, &err));
        EXPECT_CONTAINS(event, "\"seq\":0");
        inboxlog_string_free(event);
    }
    for (long i = 0; i < n; i++) {
        OK(inboxlog_session_close(held[i], &err));
        inboxlog_session_free(held[i]);
    }
    free(held);

    /* Closed means free to open, with the event in place. */
    long step = n / 50 > 0 ? n / 50 : 1;
    for (long i = 0; i < n; i += step) {
        inboxlog_session *again = NULL;
        int64_t last = INBOXLOG_ABSENT;
        session_id(id, sizeof id, i);
        OK(inboxlog_session_open_ex(store, id, false, &again, &err));
        OK(inboxlog_session_last_seq(again, &last, &err));
        if (last != 0) FAIL("%s: last seq %lld, want 0", id, (long long)last);
        OK(inboxlog_session_close(again, &err));
        inboxlog_session_free(again);
    }
    /* Listed, then deleted: the next run (under valgrind, in the same schema) starts
     * from none instead of deleting this run's N at valgrind's pace. */
    long count = listed(store, 1);
    if (count != n) FAIL("the store lists %ld of the %ld sessions", count, n);
    if (listed(store, 0) != 0) FAIL("sessions are left after deleting all %ld", n);
    inboxlog_store_free(store);
    printf("many_sessions: ok, %ld sessions open at once on one store (maxConnections 4)\n", n);
    return 0;
}
