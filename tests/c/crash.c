/* Crash recovery through the C ABI: this program re-executes itself as a child writer,
 * kills it with SIGKILL in the middle of a step, leaves a torn record behind, and
 * checks that reopening drops the torn tail and closes the turn as interrupted. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "check.h"

static const char TORN[] = "{\"type\":\"assistant/message\",\"seq\":9,\"ti";

/* The child: writes half a turn, reports, and waits to be killed. */
static int child(const char *root, int ready_fd) {
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    uint64_t turn = 0;
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "crashy", NULL, &s, &err));
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m1\"}", &err));
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m2\"}", &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    inboxlog_string_free(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"m1\"}]}", NULL, &json, &err));
    inboxlog_string_free(json);
    OK(inboxlog_session_append(s, "assistant/chunk", "{\"text\":\"half\"}", NULL, NULL, &err));
    /* Every call above returned in sync mode: acknowledged, so it must survive. */
    if (write(ready_fd, "r", 1) != 1) return 2;
    for (;;) pause();
}

int main(int argc, char **argv) {
    char root[] = "/tmp/inboxlog-c-crash-XXXXXX";
    char path[4200], fd_arg[16];
    int fds[2], status = 0, fd;
    char ready = 0;
    pid_t pid;
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    uint64_t turn = 0;
    int64_t last = 0;

    if (argc == 4 && strcmp(argv[1], "--child") == 0) return child(argv[2], atoi(argv[3]));
    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    if (pipe(fds) != 0) FAIL("pipe failed");
    snprintf(fd_arg, sizeof fd_arg, "%d", fds[1]);
    pid = fork();
    if (pid < 0) FAIL("fork failed");
    if (pid == 0) {
        char *child_argv[5];
        child_argv[0] = argv[0];
        child_argv[1] = "--child";
        child_argv[2] = root;
        child_argv[3] = fd_arg;
        child_argv[4] = NULL;
        close(fds[0]);
        execv(argv[0], child_argv);
        _exit(127);
    }
    close(fds[1]);
    if (read(fds[0], &ready, 1) != 1 || ready != 'r') FAIL("the child writer did not get ready");
    close(fds[0]);

    /* The live child holds the OS lock: a second writer is refused at once. */
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_LOCKED, "locked", inboxlog_session_open(store, "crashy", &s, &err));
    /* The error names the session as a key, not only in its message. */
    EXPECT_STATUS(INBOXLOG_STATUS_LOCKED, "\"session\":\"crashy\"",
                  inboxlog_session_open(store, "crashy", &s, &err));

    if (kill(pid, SIGKILL) != 0) FAIL("kill failed");
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    EXPECT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    /* A crash mid-write leaves a partial record: simulate it after the kill. */
    snprintf(path, sizeof path, "%s/crashy.jsonl", root);
    fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0) FAIL("cannot open %s", path);
    if (write(fd, TORN, strlen(TORN)) != (ssize_t)strlen(TORN)) FAIL("write failed");
    close(fd);

    /* Read-only inspection shows the log as stored: 7 complete events, no repair. */
    OK(inboxlog_store_inspect(store, "crashy", &json, &err));
    EXPECT(count_of(json, "{\"type\":") == 7);
    EXPECT(count_of(json, "turn/end") == 0);
    inboxlog_string_free(json);

    /* Verify (read-only, no lock) reports the repairs opening will make, as repairs. */
    OK(inboxlog_store_verify(store, "crashy", &json, &err));
    {
        char want[128];
        snprintf(want, sizeof want,
                 "\"events\":7,\"tornBytes\":%d,\"openTurn\":1,\"openStep\":1,\"parked\":false,\"needsRepair\":true",
                 (int)strlen(TORN));
        EXPECT_CONTAINS(json, want);
    }
    inboxlog_string_free(json);

    /* Opening for writing drops the torn tail and closes turn 1 as interrupted. */
    OK(inboxlog_session_open(store, "crashy", &s, &err));
    OK(inboxlog_session_open_report(s, &json, &err));
    {
        char want[128];
        snprintf(want, sizeof want, "{\"tornBytes\":%d,\"repairedTurn\":1,\"repairedCompaction\":null}", (int)strlen(TORN));
        EXPECT_STR(json, want);
    }
    inboxlog_string_free(json);
    OK(inboxlog_session_events(s, 7, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"step/end\",\"seq\":7,");
    EXPECT_CONTAINS(json, "\"data\":{\"turn\":1,\"step\":1}},{\"type\":\"turn/end\",\"seq\":8,");
    EXPECT_CONTAINS(json, "\"data\":{\"turn\":1,\"reason\":{\"kind\":\"interrupted\"}}}]");
    inboxlog_string_free(json);
    /* The claimed m1 stays consumed; m2 still waits. */
    OK(inboxlog_inbox_next_turn(s, &json, &err));
    EXPECT_STR(json, "[{\"id\":\"m2\"}]");
    inboxlog_string_free(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);

    /* Opening twice adds nothing the second time. */
    OK(inboxlog_session_open(store, "crashy", &s, &err));
    OK(inboxlog_session_open_report(s, &json, &err));
    EXPECT_STR(json, "{\"tornBytes\":0,\"repairedTurn\":null,\"repairedCompaction\":null}");
    inboxlog_string_free(json);
    OK(inboxlog_session_last_seq(s, &last, &err));
    EXPECT(last == 8);
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    EXPECT(turn == 2);
    inboxlog_session_free(s);

    /* A log that breaks the turn rules: verify and open refuse it alike, and the error
     * JSON carries the location as keys (line 2 at byte 57, seq 0). */
    snprintf(path, sizeof path, "%s/bad.jsonl", root);
    {
        FILE *f = fopen(path, "w");
        if (f == NULL) FAIL("cannot create %s", path);
        fputs("{\"format\":\"inboxlog\",\"version\":1,\"id\":\"bad\",\"createdAt\":0}\n"
              "{\"type\":\"step/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":7,\"step\":1}}\n",
              f);
        fclose(f);
    }
    EXPECT_STATUS(INBOXLOG_STATUS_CORRUPT, "\"line\":2,\"offset\":59,\"seq\":0}",
                  inboxlog_store_verify(store, "bad", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CORRUPT, "\"line\":2,\"offset\":59,\"seq\":0}",
                  inboxlog_session_open(store, "bad", &s, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CORRUPT, "\"session\":\"bad\",\"path\":",
                  inboxlog_store_verify(store, "bad", &json, &err));
    inboxlog_store_free(store);
    remove_dir(root);
    puts("crash: ok");
    return 0;
}
