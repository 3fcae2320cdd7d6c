/* Fleet features through the C ABI: a post to a closed session is taken in when it
 * opens, a follower polls the events as they commit and resumes from next_seq. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

int main(void) {
    char root[] = "/tmp/inboxlog-c-fleet-XXXXXX";
    char spool[4200];
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    inboxlog_follower *f = NULL;
    char *json = NULL;
    char *post = NULL;
    uint64_t n = 0;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "web", NULL, &s, &err));
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);

    /* Posted while nobody owns the session; durable when the call returns. */
    OK(inboxlog_store_post(store, "web", "next-turn", "{\"id\":\"p1\",\"content\":\"hi\"}",
                           &post, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "no session",
                  inboxlog_store_post(store, "nope", "next-turn", "{\"id\":\"x\"}", &json, &err));
    OK(inboxlog_follower_open(store, "web", 0, &f, &err));
    OK(inboxlog_follower_poll(f, 0, &json, &err));
    EXPECT_STR(json, "[]");
    inboxlog_string_free(json);

    /* Opening takes the post in: one splice carrying the post id. */
    OK(inboxlog_session_open(store, "web", &s, &err));
    OK(inboxlog_follower_poll(f, 5000, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"agent/inbox/spliced\",\"seq\":0,");
    EXPECT_CONTAINS(json, "\"inserted\":[{\"id\":\"p1\",\"content\":\"hi\"}],\"post\":\"");
    EXPECT_CONTAINS(json, post);
    inboxlog_string_free(json);
    inboxlog_string_free(post);

    /* A post whose id is pending becomes one rejection; receive counts it. */
    OK(inboxlog_store_post(store, "web", "next-step", "{\"id\":\"p1\"}", &post, &err));
    inboxlog_string_free(post);
    OK(inboxlog_inbox_receive(s, &n, &err));
    EXPECT(n == 1);
    OK(inboxlog_follower_next_seq(f, &n, &err));
    EXPECT(n == 1);
    inboxlog_follower_free(f);

    /* A new follower resumes where the last one stood. */
    OK(inboxlog_follower_open(store, "web", n, &f, &err));
    OK(inboxlog_follower_poll(f, 5000, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"agent/inbox/rejected\",\"seq\":1,");
    EXPECT_CONTAINS(json, "\"kind\":\"duplicate_message\"");
    EXPECT_CONTAINS(json, "\"ignorable\":true}]");
    inboxlog_string_free(json);
    inboxlog_follower_free(f);
    inboxlog_follower_free(NULL);

    inboxlog_session_free(s);
    inboxlog_store_free(store);
    snprintf(spool, sizeof spool, "%s/web.posts", root);
    remove_dir(spool);
    remove_dir(root);
    puts("fleet: ok");
    return 0;
}
