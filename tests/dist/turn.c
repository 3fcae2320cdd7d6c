/* A C11 host built against the installed library (tests/dist/test_install.py): the
 * header's version macros and the loaded library agree, and one turn runs. */
#include <inboxlog.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                  \
    do {                                                             \
        char *error = NULL;                                          \
        if ((call) != INBOXLOG_STATUS_OK) {                          \
            fprintf(stderr, "%s failed: %s\n", #call, error ? error : "?"); \
            inboxlog_string_free(error);                             \
            return 1;                                                \
        }                                                            \
    } while (0)

#define STR2(x) #x
#define STR(x) STR2(x)

int main(void) {
    const char *macros = STR(INBOXLOG_VERSION_MAJOR) "." STR(INBOXLOG_VERSION_MINOR) "." STR(
        INBOXLOG_VERSION_PATCH);
    inboxlog_store *store = NULL;
    inboxlog_session *session = NULL;
    char *proposal = NULL, *decided = NULL, *events = NULL;
    uint64_t turn = 0;
    bool again = true;

    if (strcmp(macros, INBOXLOG_EXPECTED_VERSION) != 0 ||
        strcmp(INBOXLOG_VERSION_STRING, INBOXLOG_EXPECTED_VERSION) != 0 ||
        strcmp(inboxlog_version(), INBOXLOG_EXPECTED_VERSION) != 0) {
        fprintf(stderr, "version: macros %s, string %s, library %s, expected %s\n", macros,
                INBOXLOG_VERSION_STRING, inboxlog_version(), INBOXLOG_EXPECTED_VERSION);
        return 1;
    }
    CHECK(inboxlog_store_new_memory(&store, &error));
    CHECK(inboxlog_session_create(store, "installed", NULL, &session, &error));
    CHECK(inboxlog_inbox_append(session, "next-turn", "{\"id\":\"m1\",\"content\":\"hi\"}", &error));
    CHECK(inboxlog_session_open_turn(session, NULL, &turn, &error));
    CHECK(inboxlog_session_propose_step(session, &proposal, &error));
    CHECK(inboxlog_session_decide(session, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"m1\"}]}",
                                  NULL, &decided, &error));
    CHECK(inboxlog_session_end_step(session, "completed", NULL, &again, &error));
    if (again) {
        fprintf(stderr, "end_step asked for another step\n");
        return 1;
    }
    inboxlog_string_free(decided);
    CHECK(inboxlog_session_close_turn(session, NULL, &decided, &error));
    CHECK(inboxlog_session_events(session, 0, &events, &error));
    printf("inboxlog %s: turn %llu: %s\n", inboxlog_version(), (unsigned long long)turn, decided);
    printf("%s\n", events);
    inboxlog_string_free(proposal);
    inboxlog_string_free(decided);
    inboxlog_string_free(events);
    inboxlog_session_free(session);
    inboxlog_store_free(store);
    return 0;
}
