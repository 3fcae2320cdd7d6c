/* The C example of README.md: one prompt through one turn. */
#include <stdio.h>

#include "inboxlog.h"

#define CHECK(call)                                  \
    if ((call) != INBOXLOG_STATUS_OK) {              \
        fprintf(stderr, "inboxlog: %s\n", error);    \
        inboxlog_string_free(error);                 \
        return 1;                                    \
    }

int main(void) {
    inboxlog_store *store = NULL;
    inboxlog_session *session = NULL;
    char *error = NULL, *proposal = NULL, *decided = NULL, *log = NULL;
    uint64_t turn = 0;
    bool again = false;

    /* inboxlog_store_open_jsonl("sessions", "sync", &store, &error) for files on disk. */
    CHECK(inboxlog_store_new_memory(&store, &error));
    CHECK(inboxlog_session_create(store, "demo", NULL, &session, &error));
    CHECK(inboxlog_inbox_append(session, "next-turn", "{\"id\":\"m1\",\"content\":\"hi\"}", &error));

    CHECK(inboxlog_session_open_turn(session, NULL, &turn, &error));
    CHECK(inboxlog_session_propose_step(session, &proposal, &error));
    printf("proposal: %s\n", proposal); /* {"turn":1,"step":1,"messages":[...]} */
    CHECK(inboxlog_session_decide(session, "{\"kind\":\"enter\",\"messages\":"
                                           "[{\"id\":\"m1\",\"content\":\"hi\"}]}",
                                  NULL, &decided, &error));
    /* ... call the model, append its output with inboxlog_session_append ... */
    CHECK(inboxlog_session_end_step(session, "completed", NULL, &again, &error));
    if (!again) {
        inboxlog_string_free(decided);
        CHECK(inboxlog_session_close_turn(session, NULL, &decided, &error));
    }
    CHECK(inboxlog_session_events(session, 0, &log, &error));
    printf("log: %s\n", log);

    inboxlog_string_free(proposal);
    inboxlog_string_free(decided);
    inboxlog_string_free(log);
    inboxlog_session_free(session);
    inboxlog_store_free(store);
    return 0;
}
