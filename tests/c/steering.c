/* Steering posted during a turn's last step through the C ABI (SPEC §4, §11.1, §12):
 * while the model makes what would be its last call (the step entered, not yet ended),
 * another process posts a message to next-step of the session's JSONL store (this
 * program run again as `steering post ROOT`); inboxlog_session_end_step then answers
 * that another step is due, and the next proposal claims the message exactly once. The
 * memory store, which no other process reaches, gets the post from the same process. */
#define _POSIX_C_SOURCE 200809L

#include <sys/types.h>
#include <sys/wait.h>

#include "check.h"

static const char STEER[] = "{\"id\":\"steer\",\"role\":\"user\",\"content\":\"stop\"}";

/* The poster process: posts STEER to session "s" of the JSONL store at root. */
static int post_from_here(const char *root) {
    inboxlog_store *store = NULL;
    char *post = NULL;
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_store_post(store, "s", "next-step", STEER, &post, &err));
    inboxlog_string_free(post);
    inboxlog_store_free(store);
    return 0;
}

/* Runs this program as the poster of root and waits for it to succeed. */
static void post_from_another_process(const char *self, const char *root) {
    int status = 0;
    pid_t pid = fork();
    if (pid < 0) FAIL("fork failed");
    if (pid == 0) {
        execl(self, self, "post", root, (char *)NULL);
        _exit(127);
    }
    if (waitpid(pid, &status, 0) != pid) FAIL("waitpid failed");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("the poster failed: %d", status);
}

/* How many times `needle` occurs in `haystack`. */
static int count(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *at = strstr(haystack, needle); at != NULL; at = strstr(at + 1, needle)) n++;
    return n;
}

/* One turn on session "s" of store: its first step entered, then steering posted
 * before the step ends, by another process when root is given (the JSONL store's
 * directory), else through store itself. */
static void last_step(inboxlog_store *store, const char *self, const char *root) {
    inboxlog_session *s = NULL;
    char *json = NULL;
    uint64_t turn = 0;
    uint64_t n = 0;
    bool again = true;

    OK(inboxlog_session_create(store, "s", NULL, &s, &err));
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"q\",\"role\":\"user\",\"content\":\"go\"}",
                             &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    EXPECT_CONTAINS(json, "\"id\":\"q\"");
    inboxlog_string_free(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"q\"}]}", NULL, &json,
                               &err));
    inboxlog_string_free(json);

    /* The model's last call: it answers without tools while steering is posted. */
    if (root != NULL) {
        post_from_another_process(self, root);
    } else {
        OK(inboxlog_store_post(store, "s", "next-step", STEER, &json, &err));
        inboxlog_string_free(json);
    }
    OK(inboxlog_session_end_step(s, "completed", NULL, &again, &err));
    EXPECT(again);
    OK(inboxlog_session_propose_step(s, &json, &err));
    EXPECT_STR(json, "{\"turn\":1,\"step\":2,\"messages\":[{\"id\":\"steer\",\"role\":\"user\","
                     "\"content\":\"stop\"}]}");
    inboxlog_string_free(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"steer\"}]}", NULL,
                               &json, &err));
    inboxlog_string_free(json);
    OK(inboxlog_session_end_step(s, "completed", NULL, &again, &err));
    EXPECT(!again);
    OK(inboxlog_session_close_turn(s, NULL, &json, &err));
    EXPECT_CONTAINS(json, "\"kind\":\"completed\"");
    inboxlog_string_free(json);

    /* Taken in once, entered once, and nothing left to take in. */
    OK(inboxlog_session_events(s, 0, &json, &err));
    EXPECT(count(json, "\"post\":\"") == 1);
    EXPECT(count(json, "\"type\":\"user/message\"") == 2);
    inboxlog_string_free(json);
    OK(inboxlog_inbox_receive(s, &n, &err));
    EXPECT(n == 0);
    inboxlog_session_free(s);
}

int main(int argc, char **argv) {
    char root[] = "/tmp/inboxlog-c-steering-XXXXXX";
    char spool[4200];
    inboxlog_store *store = NULL;

    if (argc == 3 && strcmp(argv[1], "post") == 0) return post_from_here(argv[2]);

    OK(inboxlog_store_open("memory:", NULL, &store, &err));
    last_step(store, argv[0], NULL);
    inboxlog_store_free(store);

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    last_step(store, argv[0], root);
    inboxlog_store_free(store);
    snprintf(spool, sizeof spool, "%s/s.posts", root);
    remove_dir(spool);
    remove_dir(root);
    puts("steering: ok");
    return 0;
}
