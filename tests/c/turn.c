/* Whole turns on a JSONL store through the C ABI: a turn with steering, a reject, a
 * cancel, polled notifications, the consumed-work fold and a queue projection. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

static void free_str(char *s) { inboxlog_string_free(s); }

int main(void) {
    char root[] = "/tmp/inboxlog-c-turn-XXXXXX";
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    uint64_t turn = 0;
    bool again = false;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "c-host", "{\"cwd\":\"/work\"}", &s, &err));
    OK(inboxlog_session_watch(s, &err));

    /* A prompt waits for a turn of its own. */
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m1\",\"role\":\"user\",\"content\":\"hi\"}",
                             &err));
    /* Host extras ride on the event a protocol call writes; library keys are refused. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "is written by inboxlog",
                  inboxlog_session_open_turn(s, "{\"turn\":7}", &turn, &err));
    OK(inboxlog_session_open_turn(s, "{\"trigger\":{\"kind\":\"message\"}}", &turn, &err));
    EXPECT(turn == 1);
    OK(inboxlog_session_events(s, 1, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"turn/start\",\"seq\":1,");
    EXPECT_CONTAINS(json, "\"data\":{\"turn\":1,\"trigger\":{\"kind\":\"message\"}}}");
    free_str(json);
    OK(inboxlog_session_propose_step(s, &json, &err));
    EXPECT_STR(json, "{\"turn\":1,\"step\":1,\"messages\":[{\"id\":\"m1\",\"role\":\"user\","
                     "\"content\":\"hi\"}]}");
    free_str(json);
    /* The host's plugins may rewrite the batch: enter with a rewritten message. */
    OK(inboxlog_session_decide(
        s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"m1\",\"role\":\"user\",\"content\":\"hi!\"}]}",
        NULL, &json, &err));
    EXPECT_STR(json, "{\"kind\":\"step\",\"turn\":1,\"step\":1}");
    free_str(json);
    OK(inboxlog_session_append(s, "assistant/message",
                               "{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a1\",\"role\":\"assistant\","
                               "\"content\":[{\"type\":\"text\",\"text\":\"working\"}],"
                               "\"source\":{\"kind\":\"model\",\"provider\":\"c\",\"model\":\"host\"}}}",
                               "{\"surfaceOp\":\"append\"}", NULL, &err));

    /* Steering: a next-step message arrives mid-step and forces another step. */
    OK(inboxlog_inbox_append(s, "next-step", "{\"id\":\"steer\",\"content\":\"also this\"}", &err));
    OK(inboxlog_session_end_step(s, "completed", NULL, &again, &err));
    EXPECT(again);
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "steering", inboxlog_session_close_turn(s, NULL, &json, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    EXPECT_STR(json, "{\"turn\":1,\"step\":2,\"messages\":[{\"id\":\"steer\",\"content\":\"also "
                     "this\"}]}");
    free_str(json);
    OK(inboxlog_session_decide(
        s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"steer\",\"content\":\"also this\"}]}", NULL, &json,
        &err));
    free_str(json);
    OK(inboxlog_session_end_step(s, "completed", NULL, &again, &err));
    EXPECT(!again);
    OK(inboxlog_session_close_turn(s, NULL, &json, &err));
    EXPECT_STR(json, "{\"kind\":\"turn-end\",\"turn\":1,\"reason\":{\"kind\":\"completed\"}}");
    free_str(json);

    /* Notifications: events and inbox notices in commit order. */
    OK(inboxlog_session_poll(s, &json, &err));
    EXPECT_PREFIX(json, "[{\"event\":{\"type\":\"agent/inbox/spliced\",\"seq\":0,");
    EXPECT_CONTAINS(json, "{\"inbox\":{\"type\":\"agent/inbox/inserted\",\"message\":{\"id\":\"m1\"");
    EXPECT_CONTAINS(json, "{\"inbox\":{\"type\":\"agent/inbox/claimed\",\"message\":{\"id\":\"steer\","
                          "\"content\":\"also this\"},\"turn\":1}}");
    EXPECT(count_of(json, "{\"event\":") == 13);
    EXPECT(count_of(json, "{\"inbox\":") == 4);
    free_str(json);
    OK(inboxlog_session_poll(s, &json, &err));
    EXPECT_STR(json, "[]");
    free_str(json);

    /* Reject: the turn ends blocked; the claimed prompt stays consumed. */
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m2\"}", &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    EXPECT(turn == 2);
    OK(inboxlog_session_propose_step(s, &json, &err));
    free_str(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"reject\"}", NULL, &json, &err));
    EXPECT_STR(json, "{\"kind\":\"turn-end\",\"turn\":2,\"reason\":{\"kind\":\"blocked\"}}");
    free_str(json);

    /* Cancel mid-step: the inbox is cleared durably, the step and turn are closed. */
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m3\"}", &err));
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"m4\"}", &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    free_str(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"m3\"}]}", NULL, &json, &err));
    free_str(json);
    OK(inboxlog_session_cancel(s, "{\"kind\":\"hook\",\"reason\":\"stop\"}", false, NULL, &err));
    OK(inboxlog_inbox_next_turn(s, &json, &err));
    EXPECT_STR(json, "[]");
    free_str(json);
    OK(inboxlog_session_poll(s, &json, &err));
    EXPECT_CONTAINS(json, "{\"inbox\":{\"type\":\"agent/inbox/discarded\",\"message\":{\"id\":\"m4\"}}}");
    EXPECT_CONTAINS(json, "\"reason\":{\"kind\":\"aborted\",\"reason\":{\"kind\":\"hook\",\"reason\":\"stop\"}}");
    free_str(json);

    /* The fold: turn 3 (stepped, then aborted) accounts for the work; m4's
     * cancellation came before its turn/end, so nothing is dropped after it. */
    OK(inboxlog_session_events(s, 0, &json, &err));
    {
        char *fold = NULL;
        OK(inboxlog_fold_consumed_work(json, &fold, &err));
        EXPECT_PREFIX(fold, "{\"end\":{\"type\":\"turn/end\",");
        EXPECT_CONTAINS(fold, "\"data\":{\"turn\":3,\"reason\":{\"kind\":\"aborted\"");
        EXPECT_CONTAINS(fold, "\"droppedUnrun\":false}");
        free_str(fold);
    }
    free_str(json);

    /* Projection: a consumer's baseline at seq 2, then the events after it. */
    {
        inboxlog_projection *p = NULL;
        char *baseline = NULL, *live = NULL, *later = NULL;
        OK(inboxlog_inbox_append(s, "next-step", "{\"id\":\"late\"}", &err));
        OK(inboxlog_session_baseline(s, 2, &baseline, &err));
        OK(inboxlog_projection_new(baseline, &p, &err));
        OK(inboxlog_session_events(s, 3, &later, &err));
        OK(inboxlog_projection_apply_all(p, later, &err));
        free_str(baseline);
        OK(inboxlog_projection_baseline(p, &baseline, &err));
        OK(inboxlog_session_baseline(s, INBOXLOG_ABSENT, &live, &err));
        EXPECT_STR(baseline, live);
        EXPECT_CONTAINS(live, "\"next_turn\":[],\"next_step\":[{\"id\":\"late\"}]}");
        free_str(baseline);
        free_str(live);
        free_str(later);
        inboxlog_projection_free(p);
    }

    /* Close, reopen: the inbox replays from the file. */
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);
    OK(inboxlog_session_open(store, "c-host", &s, &err));
    OK(inboxlog_inbox_next_step(s, &json, &err));
    EXPECT_STR(json, "[{\"id\":\"late\"}]");
    free_str(json);
    /* The file is format version 2: every stored line ends with its checksum, which
     * no event handed out carries. */
    OK(inboxlog_session_events(s, 0, &json, &err));
    EXPECT(strstr(json, "crc32c") == NULL && strstr(json, "\"synced\"") == NULL);
    free_str(json);
    {
        char path[128];
        char line[4096];
        FILE *f = NULL;
        snprintf(path, sizeof path, "%s/c-host.jsonl", root);
        f = fopen(path, "r");
        EXPECT(f != NULL);
        EXPECT(fgets(line, sizeof line, f) != NULL);
        EXPECT_CONTAINS(line, "\"version\":2,");
        EXPECT(fgets(line, sizeof line, f) != NULL);
        EXPECT_CONTAINS(line, ",\"synced\":");
        EXPECT_CONTAINS(line, ",\"crc32c\":\"");
        fclose(f);
    }
    OK(inboxlog_store_list(store, &json, &err));
    EXPECT_CONTAINS(json, "\"id\":\"c-host\",");
    EXPECT_CONTAINS(json, "\"cwd\":\"/work\"");
    free_str(json);
    inboxlog_session_free(s);
    inboxlog_store_free(store);
    remove_dir(root);
    puts("turn: ok");
    return 0;
}
