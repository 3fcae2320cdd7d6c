/* Editing pending input from anywhere through the C ABI (SPEC §11.3): removals and
 * replacements posted to a closed session apply at its next open, in order with the
 * same handle's posts; an edit of a claimed message is recorded as rejected. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

int main(void) {
    char root[] = "/tmp/inboxlog-c-edits-XXXXXX";
    char spool[4200];
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    char *post = NULL;
    char *removed = NULL;
    char *replaced = NULL;
    uint64_t n = 0;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "web", NULL, &s, &err));
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);

    /* While nobody owns the session: a post, its removal, another post and its
     * replacement, each acknowledged with its post id. */
    OK(inboxlog_store_post(store, "web", "next-turn", "{\"id\":\"a\"}", &post, &err));
    inboxlog_string_free(post);
    OK(inboxlog_store_remove_pending(store, "web", "a", &removed, &err));
    OK(inboxlog_store_post(store, "web", "next-step", "{\"id\":\"b\"}", &post, &err));
    inboxlog_string_free(post);
    OK(inboxlog_store_replace_pending(store, "web", "b", "{\"id\":\"b2\",\"v\":2}", &replaced,
                                      &err));

    /* Refusals: no session, an empty id, a bad message, NULL arguments. */
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "no session",
                  inboxlog_store_remove_pending(store, "nope", "a", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "must not be empty",
                  inboxlog_store_remove_pending(store, "web", "", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "message_json",
                  inboxlog_store_replace_pending(store, "web", "b", "{\"x\":1}", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_JSON, "message_json",
                  inboxlog_store_replace_pending(store, "web", "b", "{", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "message_id",
                  inboxlog_store_remove_pending(store, "web", NULL, &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "out_post",
                  inboxlog_store_replace_pending(store, "web", "b", "{\"id\":\"c\"}", NULL, &err));

    /* Opening applies them in order: the removal and the replacement as canceling
     * splices carrying their post ids. */
    OK(inboxlog_session_open(store, "web", &s, &err));
    OK(inboxlog_inbox_next_turn(s, &json, &err));
    EXPECT_STR(json, "[]");
    inboxlog_string_free(json);
    OK(inboxlog_inbox_next_step(s, &json, &err));
    EXPECT_STR(json, "[{\"id\":\"b2\",\"v\":2}]");
    inboxlog_string_free(json);
    OK(inboxlog_session_events(s, 1, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"agent/inbox/spliced\",\"seq\":1,");
    EXPECT_CONTAINS(json, "{\"target\":\"next-turn\",\"start\":0,\"removedCount\":1,"
                          "\"inserted\":[],\"outcome\":\"canceled\",\"post\":\"");
    EXPECT_CONTAINS(json, removed);
    EXPECT_CONTAINS(json, "\"inserted\":[{\"id\":\"b2\",\"v\":2}],\"outcome\":\"canceled\"");
    EXPECT_CONTAINS(json, replaced);
    inboxlog_string_free(json);
    inboxlog_string_free(removed);
    inboxlog_string_free(replaced);

    /* A claim comes first: the removal of the claimed message is rejected. */
    OK(inboxlog_session_open_turn(s, NULL, &n, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    EXPECT_CONTAINS(json, "\"b2\"");
    inboxlog_string_free(json);
    OK(inboxlog_store_remove_pending(store, "web", "b2", &removed, &err));
    OK(inboxlog_inbox_receive(s, &n, &err));
    EXPECT(n == 1);
    OK(inboxlog_session_events(s, 4, &json, &err));
    EXPECT_CONTAINS(json, "{\"type\":\"agent/inbox/rejected\",");
    EXPECT_CONTAINS(json, "\"data\":{\"edit\":{\"op\":\"remove\",\"id\":\"b2\"},\"reason\":"
                          "{\"code\":5,\"kind\":\"not_found\"");
    EXPECT_CONTAINS(json, removed);
    inboxlog_string_free(json);
    inboxlog_string_free(removed);

    inboxlog_session_free(s);
    inboxlog_store_free(store);
    snprintf(spool, sizeof spool, "%s/web.posts", root);
    remove_dir(spool);
    remove_dir(root);
    puts("edits: ok");
    return 0;
}
